//===- CpuThreadsTest.cpp - Intra-op threads of the CPU devices -----------===//
//
// IntraOpPool covers every index once, in grain-sized chunks, and pins its
// helpers where asked; CpuBackend's kernels split over 3 threads give the
// bits of one thread (each index is computed by one thread with the same
// arithmetic), and its GEMM splits match a double-precision product.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/backends/cpu/IntraOpPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include <sched.h>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

namespace {

TEST(IntraOpPool, CoversEveryIndexOnceInGrainSizedChunks) {
  for (unsigned threads : {1u, 2u, 3u, 5u}) {
    IntraOpPool pool(threads, {});
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t grain : {1, 7, 64})
      for (int64_t n : {int64_t(0), int64_t(1), 2 * grain - 1, 2 * grain,
                        int64_t(1000), int64_t(100003)}) {
        SCOPED_TRACE("threads " + std::to_string(threads) + ", grain " +
                     std::to_string(grain) + ", n " + std::to_string(n));
        std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
        std::mutex mutex;
        std::vector<std::pair<int64_t, int64_t>> chunks;
        pool.parallelFor(n, grain, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i)
            seen[size_t(i)].fetch_add(1);
          std::lock_guard<std::mutex> lock(mutex);
          chunks.emplace_back(begin, end);
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(seen[size_t(i)].load(), 1) << "index " << i;
        EXPECT_LE(chunks.size(), size_t(threads));
        if (n < 2 * grain) {
          EXPECT_LE(chunks.size(), size_t(1)) << "a small range is split";
        }
        for (auto [begin, end] : chunks) {
          if (end != n) {
            EXPECT_EQ((end - begin) % grain, 0)
                << "chunk [" << begin << ", " << end << ")";
          }
        }
      }
  }
}

TEST(IntraOpPool, ManyShortJobsInARow) {
  IntraOpPool pool(3, {});
  std::atomic<int64_t> total{0};
  for (int job = 0; job < 20000; ++job)
    pool.parallelFor(6, 1, [&](int64_t begin, int64_t end) {
      total.fetch_add(end - begin);
    });
  EXPECT_EQ(total.load(), 6 * 20000);
}

TEST(IntraOpPool, PinsEachHelperToItsCore) {
  std::vector<int> cores = allowedCores();
  ASSERT_FALSE(cores.empty());
  const unsigned threads = 3;
  std::vector<int> mine;
  for (unsigned t = 0; t < threads; ++t)
    mine.push_back(cores[t % cores.size()]);
  IntraOpPool pool(threads, mine);
  std::vector<std::set<int>> affinity(threads);
  pool.parallelFor(threads, 1, [&](int64_t begin, int64_t) {
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set))
        affinity[size_t(begin)].insert(c);
  });
  for (unsigned t = 1; t < threads; ++t) // chunk 0 runs on the caller
    EXPECT_EQ(affinity[t], std::set<int>{mine[t]}) << "helper " << t;
}

TEST(CpuThreading, DefaultDividesTheCoresAmongTheDevices) {
  unsigned cores = allowedCores().size();
  EXPECT_EQ(defaultThreadsPerDevice(1), cores);
  EXPECT_EQ(defaultThreadsPerDevice(cores), 1u);
  EXPECT_EQ(defaultThreadsPerDevice(cores + 3), 1u);
  EXPECT_EQ(CpuBackend(2, {3, false}).threadsPerDevice(), 3u);
}

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Buffers of one kernel run: inputs are shared, outputs per backend.
struct Outputs {
  std::vector<std::vector<float>> buffers;
  std::vector<float> &add(size_t n) {
    buffers.emplace_back(n, 0.0f);
    return buffers.back();
  }
};

/// Runs `kernels` on a one-device backend with `threads` threads.
template <class Kernels> Outputs runOn(unsigned threads, Kernels kernels) {
  CpuBackend backend(1, {threads, false});
  Outputs out;
  out.buffers.reserve(64);
  kernels(backend, backend.computeStream(0), out);
  EXPECT_EQ(backend.synchronize(std::chrono::seconds(60)), "");
  return out;
}

TEST(CpuBackendThreads, KernelsGiveTheBitsOfOneThread) {
  // Sizes past two grains, so that every kernel is split.
  const int64_t rows = 300, cols = 257, n = rows * cols;
  const std::vector<float> x = randomFloats(n, 1), y = randomFloats(n, 2),
                           dy = randomFloats(n, 3),
                           gamma = randomFloats(cols, 4),
                           beta = randomFloats(cols, 5);
  const int64_t vocab = 37;
  const std::vector<float> table = randomFloats(vocab * cols, 6);
  std::vector<int32_t> ids(rows);
  for (int64_t r = 0; r < rows; ++r)
    ids[r] = int32_t((r * 11 + 5) % vocab);
  OptimizerConfig adam;
  adam.kind = OptimizerKind::Adam;
  const StepScalars firstStep = stepScalarsOf(adam, 1); // read at run time
  auto kernels = [&](CpuBackend &b, StreamId s, Outputs &out) {
    b.embedding(s, ids.data(), table.data(), out.add(n).data(), rows, cols);
    b.relu(s, x.data(), out.add(n).data(), n);
    b.reluGrad(s, x.data(), dy.data(), out.add(n).data(), n);
    b.gelu(s, x.data(), out.add(n).data(), n);
    b.geluGrad(s, x.data(), dy.data(), out.add(n).data(), n);
    b.geluErf(s, x.data(), out.add(n).data(), n);
    b.geluErfGrad(s, x.data(), dy.data(), out.add(n).data(), n);
    b.tanh(s, x.data(), out.add(n).data(), n);
    b.tanhGrad(s, y.data(), dy.data(), out.add(n).data(), n);
    b.add(s, x.data(), y.data(), out.add(n).data(), n);
    std::vector<float> &acc = out.add(n);
    acc = y;
    b.accumulate(s, x.data(), acc.data(), n);
    std::vector<float> &biased = out.add(n);
    biased = x;
    b.addRowVector(s, gamma.data(), biased.data(), rows, cols);
    std::vector<float> &sums = out.add(cols);
    b.columnSums(s, x.data(), sums.data(), rows, cols);
    std::vector<float> &probs = out.add(n);
    b.softmax(s, x.data(), probs.data(), rows, cols, 0);
    b.softmaxGrad(s, probs.data(), dy.data(), out.add(n).data(), rows, cols);
    b.softmax(s, x.data(), out.add(n).data(), rows, cols,
              10); // causal: functor
    std::vector<float> &mean = out.add(rows), &rstd = out.add(rows);
    b.layerNorm(s, x.data(), gamma.data(), beta.data(), out.add(n).data(),
                mean.data(), rstd.data(), rows, cols, 1e-5f);
    b.layerNormGradInput(s, dy.data(), x.data(), gamma.data(), mean.data(),
                         rstd.data(), out.add(n).data(), rows, cols);
    std::vector<float> &dgamma = out.add(cols), &dbeta = out.add(cols);
    b.layerNormGradParams(s, dy.data(), x.data(), mean.data(), rstd.data(),
                          dgamma.data(), dbeta.data(), rows, cols); // columns
    std::vector<float> &h = out.add(n);
    h = x;
    b.biasActivation(s, gamma.data(), h.data(), out.add(n).data(), rows, cols,
                     Activation::Gelu);
    std::vector<float> &hErf = out.add(n);
    hErf = x;
    b.biasActivation(s, gamma.data(), hErf.data(), out.add(n).data(), rows,
                     cols, Activation::GeluErf);
    std::vector<float> &sum = out.add(n), &mean2 = out.add(rows),
                       &rstd2 = out.add(rows);
    b.addLayerNorm(s, x.data(), y.data(), sum.data(), gamma.data(), beta.data(),
                   out.add(n).data(), mean2.data(), rstd2.data(), rows, cols,
                   1e-5f);
    std::vector<float> &masked = out.add(n);
    std::vector<float> &maskBytes = out.add(n / 4 + 1);
    auto *mask = reinterpret_cast<uint8_t *>(maskBytes.data());
    b.dropout(s, x.data(), masked.data(), mask, rows, cols, 0.25f, 7, 3, 11);
    b.dropoutGrad(s, mask, dy.data(), out.add(n).data(), n, 0.25f);
    std::vector<float> &params = out.add(n), &m = out.add(n), &v = out.add(n);
    params = x;
    float *slots[2] = {m.data(), v.data()};
    b.optimizerStep(s, adam, params.data(), dy.data(), slots, n, &firstStep);
  };
  Outputs one = runOn(1, kernels), three = runOn(3, kernels);
  ASSERT_EQ(one.buffers.size(), three.buffers.size());
  // The embedding (the first output) is row ids[r] of the table.
  for (const Outputs *run : {&one, &three})
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_EQ(std::memcmp(run->buffers[0].data() + r * cols,
                            table.data() + int64_t(ids[r]) * cols,
                            cols * sizeof(float)),
                0)
          << "embedding row " << r;
  for (size_t i = 0; i < one.buffers.size(); ++i)
    for (size_t j = 0; j < one.buffers[i].size(); ++j)
      ASSERT_EQ(std::memcmp(&one.buffers[i][j], &three.buffers[i][j], 4), 0)
          << "output " << i << ", element " << j << ": " << one.buffers[i][j]
          << " on one thread, " << three.buffers[i][j] << " on three";
}

TEST(CpuBackendThreads, AttentionGivesTheBitsOfOneThread) {
  // Past a tile of queries (64) and of keys (256): CpuAttention.cpp's tiles
  // split over the threads.
  const int64_t batch = 2, seq = 300, width = 32, heads = 2;
  const int64_t tokens = batch * seq;
  const std::vector<float> x = randomFloats(tokens * width, 11),
                           wqkv = randomFloats(width * 3 * width, 12),
                           wo = randomFloats(width * width, 13),
                           dy = randomFloats(tokens * width, 14),
                           bqkv = randomFloats(3 * width, 15),
                           bo = randomFloats(width, 16);
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    // Not causal: with the projections' biases and their gradients.
    const bool biased = !causal;
    auto kernels = [&](CpuBackend &b, StreamId s, Outputs &out) {
      AttentionCall f;
      f.x = x.data(), f.wqkv = wqkv.data(), f.wo = wo.data();
      if (biased)
        f.qkvBias = bqkv.data(), f.outBias = bo.data();
      f.y = out.add(tokens * width).data();
      f.qkv = out.add(tokens * 3 * width).data();
      f.lse = out.add(batch * heads * seq).data();
      f.context = out.add(tokens * width).data();
      f.batch = batch, f.seq = seq, f.width = width, f.heads = heads;
      f.causal = causal;
      b.attention(s, f);
      AttentionGradCall g;
      g.dy = dy.data(), g.x = x.data(), g.wqkv = wqkv.data(), g.wo = wo.data();
      g.qkv = f.qkv, g.lse = f.lse, g.context = f.context;
      g.dx = out.add(tokens * width).data();
      g.dwqkv = out.add(width * 3 * width).data();
      g.dwo = out.add(width * width).data();
      if (biased) {
        g.dqkvBias = out.add(3 * width).data();
        g.doutBias = out.add(width).data();
      }
      g.scratch =
          out.add(b.attentionGradScratch(batch, seq, width, heads)).data();
      g.batch = batch, g.seq = seq, g.width = width, g.heads = heads;
      g.causal = causal;
      b.attentionGrad(s, g);
    };
    Outputs one = runOn(1, kernels), three = runOn(3, kernels);
    for (size_t i = 0; i < one.buffers.size(); ++i)
      for (size_t j = 0; j < one.buffers[i].size(); ++j)
        ASSERT_EQ(std::memcmp(&one.buffers[i][j], &three.buffers[i][j], 4), 0)
            << "output " << i << ", element " << j;
  }
}

/// C = alpha op(A) op(B) + beta C in double, for row-major operands.
std::vector<double> referenceGemm(const GemmBatch &g, int64_t entry,
                                  const std::vector<float> &c0) {
  std::vector<double> c(size_t(g.m * g.n));
  const float *a = g.a + entry * g.strideA, *b = g.b + entry * g.strideB;
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double dot = 0;
      for (int64_t p = 0; p < g.k; ++p)
        dot += double(g.transA ? a[p * g.lda + i] : a[i * g.lda + p]) *
               double(g.transB ? b[j * g.ldb + p] : b[p * g.ldb + j]);
      c[size_t(i * g.n + j)] =
          g.alpha * dot +
          g.beta * c0[size_t(entry * g.strideC + i * g.ldc + j)];
    }
  return c;
}

TEST(CpuBackendThreads, GemmSplitsByRowsColumnsAndBatch) {
  struct Shape {
    int64_t m, n, k, count;
  };
  // Rows (split in whole kBlasRowGrain parts), a short wide product (too few
  // rows to split: a column split changed bits), a batch of more entries
  // than threads, and a wide product of enough rows to split by rows only,
  // whose parts are short (they once were split by columns too, which
  // changed bits on OpenBLAS's Haswell/Zen kernels).
  for (Shape shape : {Shape{203, 64, 96, 1}, Shape{12, 517, 80, 1},
                      Shape{40, 48, 72, 5}, Shape{100, 200, 64, 1},
                      Shape{128, 144, 16, 1}})
    for (bool transA : {false, true})
      for (bool transB : {false, true}) {
        SCOPED_TRACE("m " + std::to_string(shape.m) + " n " +
                     std::to_string(shape.n) + " count " +
                     std::to_string(shape.count) + (transA ? " A^T" : "") +
                     (transB ? " B^T" : ""));
        GemmBatch g;
        g.transA = transA, g.transB = transB;
        g.m = shape.m, g.n = shape.n, g.k = shape.k, g.count = shape.count;
        g.alpha = 0.5f, g.beta = 0.25f;
        g.lda = (transA ? g.m : g.k) + 3; // padded rows: strides honoured
        g.ldb = (transB ? g.k : g.n) + 1;
        g.ldc = g.n + 2;
        g.strideA = (transA ? g.k : g.m) * g.lda;
        g.strideB = (transB ? g.n : g.k) * g.ldb;
        g.strideC = g.m * g.ldc;
        std::vector<float> a = randomFloats(size_t(g.strideA * g.count), 8),
                           b = randomFloats(size_t(g.strideB * g.count), 9),
                           c0 = randomFloats(size_t(g.strideC * g.count), 10);
        g.a = a.data(), g.b = b.data();
        auto kernels = [&](CpuBackend &backend, StreamId s, Outputs &out) {
          std::vector<float> &c = out.add(c0.size());
          c = c0;
          GemmBatch call = g;
          call.c = c.data();
          backend.gemm(s, call);
        };
        Outputs one = runOn(1, kernels), three = runOn(3, kernels);
        const std::vector<float> &c = three.buffers[0];
        for (int64_t e = 0; e < g.count; ++e) {
          std::vector<double> want = referenceGemm(g, e, c0);
          for (int64_t i = 0; i < g.m; ++i)
            for (int64_t j = 0; j < g.n; ++j) {
              size_t at = size_t(e * g.strideC + i * g.ldc + j);
              ASSERT_NEAR(c[at], want[size_t(i * g.n + j)], 1e-4)
                  << "entry " << e << ", C[" << i << ", " << j << "]";
            }
        }
        // The padding between rows is left alone, and one thread gives the
        // same bits.
        for (size_t i = 0; i < c.size(); ++i) {
          if (int64_t(i) % g.ldc >= g.n) {
            ASSERT_EQ(c[i], c0[i]) << "padding " << i << " was written";
          }
          ASSERT_EQ(std::memcmp(&c[i], &one.buffers[0][i], 4), 0)
              << "element " << i;
        }
      }
}

} // namespace
