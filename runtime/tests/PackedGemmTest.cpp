//===- PackedGemmTest.cpp - The pack-once GEMM of the CPU backend ---------===//
//
// packedGemm against a double-precision product on every tail (rows not a
// multiple of 12, a last panel narrower than 32 columns, B transposed,
// alpha and beta, padded leading dimensions); its bits do not depend on how
// rows or panels are split, nor on how many rows a call has (micro-batch
// size); and the CPU backend repacks a parameter after a synchronize, so an
// optimizer step or setParameter is never multiplied stale; the executor
// asks for packing only in passes of several micro-batches; the transposed
// packing puts every element in place. Runs the AVX-512 kernel or, without
// it, the AVX2 one; skipped on CPUs with neither, where the backend does
// not pack (but for the packing test, which runs the scalar copy there).
// A device waiting for its peer packs the parameters of its coming GEMMs
// ahead, in pieces that give the copy of one packing, but none issued after
// an optimizer step.
//
//===----------------------------------------------------------------------===//

#include "RandomData.h"
#include "TestBundles.h"
#include "TestModels.h"

#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/runtime/kernels/PackedGemm.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;
using gpipe::testing::randomFloats;

namespace {

/// B stored k x n (ld ldb), or n x k when transposed.
struct Operands {
  int64_t m, n, k, lda, ldb, ldc;
  bool transposed;
  std::vector<float> a, b, c0;
  Operands(int64_t m, int64_t n, int64_t k, bool transposed, unsigned seed)
      : m(m), n(n), k(k), lda(k + 3), ldb((transposed ? k : n) + 1), ldc(n + 2),
        transposed(transposed) {
    std::mt19937_64 rng(seed);
    a = randomFloats(rng, size_t(m * lda));
    b = randomFloats(rng, size_t((transposed ? n : k) * ldb));
    c0 = randomFloats(rng, size_t(m * ldc));
  }
  float bAt(int64_t row, int64_t col) const {
    return transposed ? b[size_t(col * ldb + row)] : b[size_t(row * ldb + col)];
  }
  double want(int64_t i, int64_t j, float alpha, float beta) const {
    double dot = 0;
    for (int64_t p = 0; p < k; ++p)
      dot += double(a[size_t(i * lda + p)]) * double(bAt(p, j));
    return alpha * dot + beta * double(c0[size_t(i * ldc + j)]);
  }
  PackedMatrix packed() const {
    PackedMatrix matrix;
    matrix.resize(k, n);
    matrix.packPanels(b.data(), ldb, transposed, 0, matrix.panels());
    return matrix;
  }
};

std::string describe(const Operands &o) {
  return "m " + std::to_string(o.m) + " n " + std::to_string(o.n) + " k " +
         std::to_string(o.k) + (o.transposed ? " B^T" : "");
}

#define SKIP_WITHOUT_PACKING()                                                 \
  if (!packedGemmSupported())                                                  \
  GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2 with FMA: the "       \
                  "backend does not pack"

TEST(PackedGemm, MatchesADoubleProductOnEveryTail) {
  SKIP_WITHOUT_PACKING();
  for (int64_t m : {1, 5, 11, 12, 13, 25, 64})
    for (int64_t n : {1, 10, 16, 17, 32, 33, 100})
      for (int64_t k : {1, 7, 64})
        for (bool transposed : {false, true})
          for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, {0.5f, 0.25f}}) {
            Operands o(m, n, k, transposed, unsigned(m * 1000 + n * 10 + k));
            SCOPED_TRACE(describe(o) + " alpha " + std::to_string(alpha) +
                         " beta " + std::to_string(beta));
            PackedMatrix b = o.packed();
            ASSERT_EQ(b.panels(), (n + 31) / 32);
            std::vector<float> c = o.c0;
            packedGemm(o.a.data(), o.lda, b, alpha, beta, c.data(), o.ldc, 0, m,
                       0, b.panels());
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < o.ldc; ++j) {
                float got = c[size_t(i * o.ldc + j)];
                if (j >= n) {
                  ASSERT_EQ(got, o.c0[size_t(i * o.ldc + j)])
                      << "padding C[" << i << ", " << j << "] was written";
                  continue;
                }
                ASSERT_NEAR(got, o.want(i, j, alpha, beta), 1e-4)
                    << "C[" << i << ", " << j << "]";
              }
          }
}

// The transposed packing copies 16 x 16 blocks (AVX-512) or 8 x 8 blocks
// (AVX2) through registers and the tails element by element: every element
// where the layout puts it, the padding zero.
TEST(PackedGemm, PacksEveryElementOfATransposedB) {
  for (int64_t k : {1, 15, 16, 17, 48, 100})
    for (int64_t n : {1, 15, 16, 17, 31, 32, 33, 70}) {
      Operands o(1, n, k, /*transposed=*/true, unsigned(n * 100 + k));
      SCOPED_TRACE(describe(o));
      PackedMatrix b = o.packed();
      for (int64_t p = 0; p < b.panels(); ++p)
        for (int64_t r = 0; r < k; ++r)
          for (int64_t j = 0; j < PackedMatrix::kPanel; ++j) {
            const int64_t col = p * PackedMatrix::kPanel + j;
            const float got = b.panel(p)[r * PackedMatrix::kPanel + j];
            ASSERT_EQ(got, col < n ? o.bAt(r, col) : 0.0f)
                << "panel " << p << " row " << r << " column " << j;
          }
    }
}

TEST(PackedGemm, BitsDoNotDependOnSplitsOrRowsPerCall) {
  SKIP_WITHOUT_PACKING();
  for (bool transposed : {false, true}) {
    Operands o(64, 100, 72, transposed, 7);
    SCOPED_TRACE(describe(o));
    PackedMatrix b = o.packed();
    std::vector<float> whole(o.c0.size(), 0.0f), pieces = whole,
                                                 rowsAtATime = whole;
    packedGemm(o.a.data(), o.lda, b, 1.0f, 0.0f, whole.data(), o.ldc, 0, o.m, 0,
               b.panels());
    // Rows [0, 24) x all panels, then rows [24, 64) panel by panel.
    packedGemm(o.a.data(), o.lda, b, 1.0f, 0.0f, pieces.data(), o.ldc, 0, 24, 0,
               b.panels());
    for (int64_t p = 0; p < b.panels(); ++p)
      packedGemm(o.a.data(), o.lda, b, 1.0f, 0.0f, pieces.data(), o.ldc, 24,
                 o.m, p, p + 1);
    // Micro-batches of 3 rows, each its own call from its first row.
    for (int64_t r = 0; r < o.m; r += 3) {
      int64_t rows = std::min<int64_t>(3, o.m - r);
      packedGemm(o.a.data() + r * o.lda, o.lda, b, 1.0f, 0.0f,
                 rowsAtATime.data() + r * o.ldc, o.ldc, 0, rows, 0, b.panels());
    }
    ASSERT_EQ(std::memcmp(whole.data(), pieces.data(), whole.size() * 4), 0);
    ASSERT_EQ(std::memcmp(whole.data(), rowsAtATime.data(), whole.size() * 4),
              0);
  }
}

/// C = A B, into `c`, with B flagged as a parameter.
GemmBatch parameterProduct(const Operands &o, std::vector<float> &c) {
  GemmBatch g;
  g.transB = o.transposed;
  g.m = o.m, g.n = o.n, g.k = o.k;
  g.a = o.a.data(), g.lda = o.lda;
  g.b = o.b.data(), g.ldb = o.ldb;
  g.bIsParameter = true;
  g.c = c.data(), g.ldc = o.ldc;
  return g;
}

/// C = A B through `backend` with B flagged as a parameter, synchronized.
std::vector<float> backendProduct(CpuBackend &backend, const Operands &o) {
  std::vector<float> c = o.c0;
  backend.gemm(backend.computeStream(0), parameterProduct(o, c));
  EXPECT_EQ(backend.synchronize(std::chrono::seconds(60)), "");
  return c;
}

void expectProduct(const std::vector<float> &c, const Operands &o) {
  for (int64_t i = 0; i < o.m; ++i)
    for (int64_t j = 0; j < o.n; ++j)
      ASSERT_NEAR(c[size_t(i * o.ldc + j)], o.want(i, j, 1.0f, 0.0f), 1e-4)
          << "C[" << i << ", " << j << "]";
}

TEST(PackedGemm, BackendRepacksAParameterAfterEverySynchronize) {
  SKIP_WITHOUT_PACKING();
  for (unsigned threads : {1u, 3u})
    for (bool transposed : {false, true}) {
      Operands o(40, 200, 96, transposed, 11);
      SCOPED_TRACE(describe(o) + ", " + std::to_string(threads) + " threads");
      CpuThreading threading;
      threading.threadsPerDevice = threads;
      CpuBackend backend(1, threading);
      std::vector<float> first = backendProduct(backend, o);
      expectProduct(first, o);
      const int64_t packedBytes = 7 * 32 * 96 * 4; // 7 panels of 96 rows
      EXPECT_EQ(backend.workspaceBytes(0), packedBytes);
      // The parameter changes between passes, as an optimizer step does.
      for (float &v : o.b)
        v = -2.0f * v;
      std::vector<float> second = backendProduct(backend, o);
      expectProduct(second, o);
      EXPECT_EQ(backend.workspaceBytes(0), packedBytes) << "storage reused";
      // The bits of the packed product, on any thread count.
      std::vector<float> direct = o.c0;
      PackedMatrix b = o.packed();
      packedGemm(o.a.data(), o.lda, b, 1.0f, 0.0f, direct.data(), o.ldc, 0, o.m,
                 0, b.panels());
      EXPECT_EQ(std::memcmp(second.data(), direct.data(), direct.size() * 4),
                0);
    }
}

TEST(PackedGemm, BackendWithoutPackingHoldsNoCopies) {
  Operands o(16, 64, 32, false, 3);
  CpuThreading threading;
  threading.packWeights = false;
  CpuBackend backend(1, threading);
  expectProduct(backendProduct(backend, o), o);
  EXPECT_EQ(backend.workspaceBytes(0), 0);
}

/// The packed bytes of each device after one training step of the test MLP.
std::vector<int64_t> packedAfterAStep(unsigned k, unsigned microbatches) {
  const int64_t batch = 24;
  Bundle bundle = buildBundle(mlpGraph(batch, 40), mlpSplit(k), microbatches,
                              RematPolicy::None);
  DeviceExecutorConfig config;
  config.seed = 3;
  std::string error;
  auto executor = DeviceExecutor::create(
      std::move(bundle), std::make_unique<CpuBackend>(k), config, error);
  EXPECT_TRUE(executor) << error;
  if (!executor)
    return {};
  StepResult step = executor->trainStep(mlpBatch(batch, 1));
  EXPECT_TRUE(step.ok()) << step.error;
  std::vector<int64_t> bytes;
  for (const DeviceMemoryLayout &device : executor->memory())
    bytes.push_back(device.workspaceBytes);
  return bytes;
}

TEST(PackedGemm, ExecutorPacksOnlyWeightsThatSeveralMicrobatchesReuse) {
  SKIP_WITHOUT_PACKING();
  // One micro-batch multiplies each weight once: the BLAS, no copies.
  for (int64_t bytes : packedAfterAStep(2, 1))
    EXPECT_EQ(bytes, 0);
  // Four: every device holds its dense weights packed, forward and
  // transposed (the first layer's input gradient is not computed).
  std::vector<int64_t> packed = packedAfterAStep(2, 4);
  ASSERT_EQ(packed.size(), 2u);
  for (int64_t bytes : packed)
    EXPECT_GT(bytes, 0);
}

/// Whether `a` and `b` hold the same panels, bit for bit.
bool samePanels(const PackedMatrix &a, const PackedMatrix &b) {
  if (a.k() != b.k() || a.n() != b.n())
    return false;
  for (int64_t p = 0; p < a.panels(); ++p)
    if (std::memcmp(a.panel(p), b.panel(p),
                    size_t(a.k() * PackedMatrix::kPanel) * 4) != 0)
      return false;
  return true;
}

const auto onOneThread = [](int64_t n, auto body) { body(int64_t(0), n); };

TEST(PackedGemm, PackingAheadInPiecesGivesTheCopyOfOnePacking) {
  for (bool transposed : {false, true}) {
    Operands o(8, 200, 96, transposed, 5); // 7 panels, the last 8 wide
    Operands p(8, 64, 40, !transposed, 6); // 2 panels
    SCOPED_TRACE(describe(o));
    PackedWeightCache cache;
    // Issue order: o, p, o again (listed once).
    cache.expect(o.b.data(), o.ldb, o.transposed, o.k, o.n);
    cache.expect(p.b.data(), p.ldb, p.transposed, p.k, p.n);
    cache.expect(o.b.data(), o.ldb, o.transposed, o.k, o.n);
    std::vector<int64_t> pieces;
    int64_t before = 0;
    while (cache.packAhead(3, onOneThread)) {
      pieces.push_back(cache.panelsPackedAhead() - before);
      before = cache.panelsPackedAhead();
    }
    EXPECT_EQ(pieces, (std::vector<int64_t>{3, 3, 1, 2}));
    EXPECT_TRUE(samePanels(
        cache.get(o.b.data(), o.ldb, o.transposed, o.k, o.n, onOneThread),
        o.packed()));
    EXPECT_TRUE(samePanels(
        cache.get(p.b.data(), p.ldb, p.transposed, p.k, p.n, onOneThread),
        p.packed()));
    EXPECT_EQ(cache.panelsPackedAhead(), 9) << "get packed nothing again";

    // A new run with new values: packed part ahead, the rest on use.
    cache.invalidate();
    for (float &v : o.b)
      v = 0.5f - v;
    cache.expect(o.b.data(), o.ldb, o.transposed, o.k, o.n);
    ASSERT_TRUE(cache.packAhead(4, onOneThread));
    EXPECT_TRUE(samePanels(
        cache.get(o.b.data(), o.ldb, o.transposed, o.k, o.n, onOneThread),
        o.packed()));
    EXPECT_FALSE(cache.packAhead(4, onOneThread)) << "all of o is packed";

    // After an optimizer step is issued, nothing more is expected.
    cache.invalidate();
    cache.stopExpecting();
    cache.expect(o.b.data(), o.ldb, o.transposed, o.k, o.n);
    EXPECT_FALSE(cache.packAhead(4, onOneThread));
    cache.invalidate();
    cache.expect(o.b.data(), o.ldb, o.transposed, o.k, o.n);
    EXPECT_TRUE(cache.packAhead(4, onOneThread)) << "a new run expects again";
  }
}

/// Device 1 waits for device 0, which records its event only once device 1
/// has packed `panels` panels ahead (or after `patience`); then device 1
/// multiplies by o's B as a parameter, after an optimizer step on device 1
/// where `stepFirst`. Returns device 1's C.
std::vector<float> productAfterAWait(CpuBackend &backend, const Operands &o,
                                     int64_t panels,
                                     std::chrono::milliseconds patience,
                                     bool stepFirst) {
  const StreamId s0 = backend.computeStream(0), s1 = backend.computeStream(1);
  std::vector<float> param(16, 1.0f), grad(16, 1.0f);
  const StepScalars step = stepScalarsOf(OptimizerConfig{}, 1);
  if (stepFirst)
    backend.optimizerStep(s1, OptimizerConfig{}, param.data(), grad.data(),
                          nullptr, 16, &step);
  backend.runInStreamOrder(s0, [&backend, panels, patience] {
    auto until = std::chrono::steady_clock::now() + patience;
    while (backend.panelsPackedAhead(1) < panels &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
  });
  backend.waitEvent(s1, backend.recordEvent(s0));
  std::vector<float> c = o.c0;
  backend.gemm(s1, parameterProduct(o, c));
  EXPECT_EQ(backend.synchronize(std::chrono::seconds(60)), "");
  return c;
}

TEST(PackedGemm, BackendPacksAheadWhileADeviceWaitsForItsPeer) {
  SKIP_WITHOUT_PACKING();
  for (unsigned threads : {1u, 2u})
    for (bool transposed : {false, true}) {
      Operands o(30, 200, 96, transposed, 17);
      SCOPED_TRACE(describe(o) + ", " + std::to_string(threads) + " threads");
      CpuThreading threading;
      threading.threadsPerDevice = threads;
      CpuBackend backend(2, threading);
      std::vector<float> c = productAfterAWait(
          backend, o, 7, std::chrono::seconds(10), /*stepFirst=*/false);
      EXPECT_EQ(backend.panelsPackedAhead(1), 7) << "all of B, in the wait";
      EXPECT_EQ(backend.panelsPackedAhead(0), 0) << "device 0 never waited";
      // One stretch of packing, in the one wait; taken once.
      std::vector<std::pair<double, double>> spans = backend.takeWorkInWaits(1);
      ASSERT_EQ(spans.size(), 1u);
      EXPECT_LT(spans[0].first, spans[0].second);
      EXPECT_TRUE(backend.takeWorkInWaits(1).empty());
      EXPECT_TRUE(backend.takeWorkInWaits(0).empty());
      expectProduct(c, o);
      std::vector<float> direct = o.c0;
      PackedMatrix b = o.packed();
      packedGemm(o.a.data(), o.lda, b, 1.0f, 0.0f, direct.data(), o.ldc, 0, o.m,
                 0, b.panels());
      EXPECT_EQ(std::memcmp(c.data(), direct.data(), direct.size() * 4), 0);

      // The next run's B is packed anew, as the parameter's new values.
      for (float &v : o.b)
        v = 2.0f * v;
      c = productAfterAWait(backend, o, 14, std::chrono::seconds(10), false);
      EXPECT_EQ(backend.panelsPackedAhead(1), 14);
      expectProduct(c, o);
    }
}

TEST(PackedGemm, BackendPacksNothingAheadOfAnOptimizerStep) {
  SKIP_WITHOUT_PACKING();
  Operands o(30, 200, 96, false, 19);
  CpuBackend backend(2);
  // Device 0 gives device 1 a moment to (wrongly) pack during its wait.
  std::vector<float> c = productAfterAWait(
      backend, o, 1, std::chrono::milliseconds(100), /*stepFirst=*/true);
  EXPECT_EQ(backend.panelsPackedAhead(1), 0);
  expectProduct(c, o);
}

} // namespace
