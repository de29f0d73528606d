//===- MatmulKernelTest.cpp - The matmul kernel on the host backends ------===//
//
// KernelApi's matmul (numpy.matmul with broadcasting batch dimensions) on
// the CPU backend, over one and three threads, and on the host emulation
// (KernelApi's composed default, the GEMM batches the CUDA backend gets):
// against a double-precision triple loop (ReferenceMatmul.h) for broadcast
// shapes, each transpose and plain matrices; every matrix of y with the
// same bits on every backend and thread count, and whether the batch runs
// whole or split into micro-batches. And MatmulGeometry's runs of uniform
// strides, which the composed default issues as one GEMM batch each.
//
//===----------------------------------------------------------------------===//

#include "AllClose.h"
#include "RandomData.h"
#include "ReferenceMatmul.h"

#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/backends/host/HostBackend.h"
#include "gpipe/runtime/bundle/MatmulGeometry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;
using gpipe::testing::allClose;

namespace {

struct Case {
  const char *name;
  std::vector<int64_t> a, b;
  bool transposeA, transposeB;
  std::vector<int64_t> y; ///< numpy's result shape, by hand
};

const Case kCases[] = {
    {"batch times matrix", {2, 3, 4, 5}, {5, 6}, false, false, {2, 3, 4, 6}},
    {"both broadcast", {3, 1, 4, 5}, {2, 5, 6}, false, false, {3, 2, 4, 6}},
    {"transpose_a", {2, 3, 5, 4}, {5, 6}, true, false, {2, 3, 4, 6}},
    {"transpose_b", {2, 3, 4, 5}, {6, 5}, false, true, {2, 3, 4, 6}},
    {"both transposed, broadcast",
     {3, 1, 5, 4},
     {2, 6, 5},
     true,
     true,
     {3, 2, 4, 6}},
    {"matrix times matrix", {4, 5}, {5, 6}, false, false, {4, 6}},
    {"matrix^T times matrix", {5, 4}, {5, 6}, true, false, {4, 6}},
    {"matrix times batch", {4, 5}, {2, 3, 5, 6}, false, false, {2, 3, 4, 6}},
    {"same batches", {2, 3, 4, 5}, {2, 3, 5, 6}, false, false, {2, 3, 4, 6}},
    // Large enough to split over threads: more matrices than threads, then
    // fewer (each split by rows, then by column blocks).
    {"matrices over threads", {8, 40, 64}, {64, 48}, false, false, {8, 40, 48}},
    {"rows over threads",
     {2, 100, 64},
     {1, 64, 200},
     false,
     false,
     {2, 100, 200}},
    {"column blocks over threads",
     {2, 40, 64},
     {300, 64},
     false,
     true,
     {2, 40, 300}},
};

int64_t elementsOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t size : shape)
    n *= size;
  return n;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text;
  for (int64_t size : shape)
    text += (text.empty() ? "[" : ", ") + std::to_string(size);
  return text + "]";
}

/// y of `call` on `backend` (y starts as NaN: every element must be
/// written).
std::vector<float> run(DeviceBackend &backend, MatmulCall call,
                       int64_t yElements) {
  std::vector<float> y(size_t(yElements),
                       std::numeric_limits<float>::quiet_NaN());
  call.y = y.data();
  backend.matmul(backend.computeStream(0), call);
  EXPECT_EQ(backend.synchronize(std::chrono::seconds(60)), "");
  return y;
}

::testing::AssertionResult sameBits(const std::vector<float> &a,
                                    const std::vector<float> &b) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure()
           << "sizes " << a.size() << ", " << b.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0)
      return ::testing::AssertionFailure()
             << "element " << i << ": " << a[i] << " against " << b[i];
  return ::testing::AssertionSuccess();
}

// Each case against the double reference on the CPU backend (1 and 3
// threads) and the host emulation, all three with the same bits.
TEST(MatmulKernel, MatchesTheReferenceOnEveryHostBackend) {
  std::mt19937_64 rng(2024);
  for (const Case &c : kCases) {
    SCOPED_TRACE(std::string(c.name) + ": " + shapeText(c.a) + " x " +
                 shapeText(c.b) + (c.transposeA ? " transpose_a" : "") +
                 (c.transposeB ? " transpose_b" : ""));
    const std::vector<float> a = gpipe::testing::randomFloats(
                                 rng, size_t(elementsOf(c.a))),
                             b = gpipe::testing::randomFloats(
                                 rng, size_t(elementsOf(c.b)));
    RefTensor want =
        refMatmul({c.a, {a.begin(), a.end()}}, {c.b, {b.begin(), b.end()}},
                  c.transposeA, c.transposeB);
    ASSERT_EQ(want.shape, c.y);
    MatmulCall call;
    call.a = a.data(), call.b = b.data();
    call.aShape = c.a, call.bShape = c.b;
    call.transposeA = c.transposeA, call.transposeB = c.transposeB;
    const int64_t n = elementsOf(c.y);
    CpuBackend one(1, {1, false}), three(1, {3, false});
    HostBackend host(1, 7);
    std::vector<float> onOne = run(one, call, n), onThree = run(three, call, n),
                       onHost = run(host, call, n);
    EXPECT_TRUE(allClose(onThree, want.data, 1e-5, 1e-4)) << "3 threads";
    EXPECT_TRUE(allClose(onHost, want.data, 1e-5, 1e-4)) << "host";
    EXPECT_TRUE(sameBits(onThree, onOne)) << "3 threads against 1";
    EXPECT_TRUE(sameBits(onHost, onOne)) << "host against CPU";
  }
}

// y of a batch is y of its micro-batches, to the bit: a [6, 4, 5] against
// a broadcast b [5, 3] and a batched b [6, 5, 3], whole and in rows of
// 3 + 3 and 2 + 4.
TEST(MatmulKernel, MicroBatchesGiveTheBitsOfTheWholeBatch) {
  std::mt19937_64 rng(77);
  const int64_t batch = 6, m = 4, k = 5, n = 3;
  const std::vector<float> a =
      gpipe::testing::randomFloats(rng, size_t(batch * m * k));
  for (bool batchedB : {false, true}) {
    SCOPED_TRACE(batchedB ? "b batched" : "b broadcast");
    const std::vector<float> b = gpipe::testing::randomFloats(
        rng, size_t((batchedB ? batch : 1) * k * n));
    auto callFor = [&](int64_t first, int64_t rows) {
      MatmulCall call;
      call.a = a.data() + first * m * k;
      call.aShape = {rows, m, k};
      call.b = b.data() + (batchedB ? first * k * n : 0);
      call.bShape = batchedB ? std::vector<int64_t>{rows, k, n}
                             : std::vector<int64_t>{k, n};
      return call;
    };
    CpuBackend cpu(1, {3, false});
    HostBackend host(1, 3);
    for (DeviceBackend *backend : std::vector<DeviceBackend *>{&cpu, &host}) {
      SCOPED_TRACE(backend->describe());
      const std::vector<float> whole =
          run(*backend, callFor(0, batch), batch * m * n);
      for (std::vector<int64_t> rows :
           {std::vector<int64_t>{3, 3}, std::vector<int64_t>{2, 4}}) {
        std::vector<float> pieces;
        int64_t first = 0;
        for (int64_t r : rows) {
          std::vector<float> y = run(*backend, callFor(first, r), r * m * n);
          pieces.insert(pieces.end(), y.begin(), y.end());
          first += r;
        }
        EXPECT_TRUE(sameBits(pieces, whole))
            << "micro-batches of " << rows[0] << " and " << rows[1] << " rows";
      }
    }
  }
}

// The composed default issues one GEMM batch per run of uniform strides:
// one for a batch against a broadcast matrix or a batch of its own, one
// per row of the outer dimension where the broadcast alternates.
TEST(MatmulKernel, ComposedDefaultIssuesOneGemmBatchPerRun) {
  struct Expect {
    std::vector<int64_t> a, b;
    int64_t gemms;
  };
  for (const Expect &e :
       {Expect{{2, 3, 4, 5}, {5, 6}, 1}, Expect{{2, 3, 4, 5}, {2, 3, 5, 6}, 1},
        Expect{{3, 1, 4, 5}, {2, 5, 6}, 3}, Expect{{4, 5}, {5, 6}, 1}}) {
    SCOPED_TRACE(shapeText(e.a) + " x " + shapeText(e.b));
    std::vector<float> a(size_t(elementsOf(e.a)), 1.0f),
        b(size_t(elementsOf(e.b)), 1.0f);
    MatmulCall call;
    call.a = a.data(), call.b = b.data();
    call.aShape = e.a, call.bShape = e.b;
    MatmulGeometry g;
    ASSERT_TRUE(matmulGeometryOf(e.a, e.b, false, false, g));
    HostBackend host(1, 1);
    std::vector<float> y = run(host, call, elementsOf(g.resultShape()));
    EXPECT_EQ(host.tasksRun(), e.gemms);
    for (float value : y)
      ASSERT_EQ(value, 5.0f); // K ones
  }
}

TEST(MatmulGeometry, ResultShapesRunsAndRefusals) {
  MatmulGeometry g;
  ASSERT_TRUE(matmulGeometryOf({2, 3, 4, 5}, {5, 6}, false, false, g));
  EXPECT_EQ(g.resultShape(), (std::vector<int64_t>{2, 3, 4, 6}));
  EXPECT_EQ(g.count(), 6);
  EXPECT_EQ(g.innerRun().count, 6);
  EXPECT_EQ(g.innerRun().aStep, 1);
  EXPECT_EQ(g.innerRun().bStep, 0);

  // y [3, 2]: a's matrix follows dimension 0, b's dimension 1.
  ASSERT_TRUE(matmulGeometryOf({3, 1, 4, 5}, {2, 5, 6}, false, false, g));
  EXPECT_EQ(g.resultShape(), (std::vector<int64_t>{3, 2, 4, 6}));
  EXPECT_EQ(g.innerRun().count, 2);
  EXPECT_EQ(g.innerRun().aStep, 0);
  EXPECT_EQ(g.innerRun().bStep, 1);
  const int64_t aOf[] = {0, 0, 1, 1, 2, 2}, bOf[] = {0, 1, 0, 1, 0, 1};
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(g.aMatrix(i), aOf[i]) << i;
    EXPECT_EQ(g.bMatrix(i), bOf[i]) << i;
  }

  // Transposes: op(a) [.., 4, 5] from a [.., 5, 4], op(b) [5, 6] from
  // b [6, 5].
  ASSERT_TRUE(matmulGeometryOf({2, 5, 4}, {6, 5}, true, true, g));
  EXPECT_EQ(g.resultShape(), (std::vector<int64_t>{2, 4, 6}));
  EXPECT_EQ(g.k, 5);
  ASSERT_TRUE(matmulGeometryOf({4, 5}, {5, 6}, false, false, g));
  EXPECT_EQ(g.resultShape(), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(g.count(), 1);

  EXPECT_FALSE(matmulGeometryOf({5}, {5, 6}, false, false, g)) << "rank 1";
  EXPECT_FALSE(matmulGeometryOf({4, 5}, {4, 6}, false, false, g)) << "K";
  EXPECT_FALSE(matmulGeometryOf({3, 4, 5}, {2, 5, 6}, false, false, g))
      << "3 against 2";
}

} // namespace
