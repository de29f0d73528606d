//===- WeightGradientBenchmark.cpp - dW per micro-batch or once per pass --===//
//
// Why micro-batching costs the weight gradient: each of M micro-batches adds
// x_m^T dy_m into every layer's dW, so every dW (1 MB for a 512-wide layer,
// beyond L2 for the 9 of them) is read and written M times. This times the
// weight gradients of a 9-layer, 512-wide MLP at batch 512, in the order the
// backward makes them (micro-batch by micro-batch, each through the 9
// layers):
//   BM_WeightGradPerMicrobatch/M  dW += x_m^T dy_m per micro-batch (today);
//   BM_WeightGradStaged/M         x_m and dy_m copied into one buffer per
//                                 layer, then dW += X^T dY once per pass.
// One thread.
//
//===----------------------------------------------------------------------===//

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr int kLayers = 9, kWidth = 512, kBatch = 512;

struct Gradients {
  // Per layer: the forward's input x and the output gradient dy, each
  // [batch, width] (micro-batch m's rows at m * rows), and dW [width, width].
  std::vector<std::vector<float>> x, dy, dw, stagedX, stagedDy;
  Gradients() {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
    auto random = [&](size_t n) {
      std::vector<float> v(n);
      for (float &e : v)
        e = dist(rng);
      return v;
    };
    for (int l = 0; l < kLayers; ++l) {
      x.push_back(random(size_t(kBatch) * kWidth));
      dy.push_back(random(size_t(kBatch) * kWidth));
      dw.emplace_back(size_t(kWidth) * kWidth, 0.0f);
      stagedX.emplace_back(size_t(kBatch) * kWidth);
      stagedDy.emplace_back(size_t(kBatch) * kWidth);
    }
  }
};

void setCounters(benchmark::State &state) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      double(state.iterations()) * 2.0 * kBatch * kWidth * kWidth * kLayers,
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void accumulate(const float *x, const float *dy, float *dw, int rows) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kWidth, kWidth, rows,
              1.0f, x, kWidth, dy, kWidth, 1.0f, dw, kWidth);
}

void BM_WeightGradPerMicrobatch(benchmark::State &state) {
  openblas_set_num_threads(1);
  Gradients g;
  const int microbatches = int(state.range(0)), rows = kBatch / microbatches;
  for (auto _ : state)
    for (int m = 0; m < microbatches; ++m)
      for (int l = kLayers - 1; l >= 0; --l) {
        const size_t at = size_t(m) * rows * kWidth;
        accumulate(&g.x[l][at], &g.dy[l][at], g.dw[l].data(), rows);
      }
  setCounters(state);
}

void BM_WeightGradStaged(benchmark::State &state) {
  openblas_set_num_threads(1);
  Gradients g;
  const int microbatches = int(state.range(0)), rows = kBatch / microbatches;
  const size_t bytes = size_t(rows) * kWidth * sizeof(float);
  for (auto _ : state) {
    for (int m = 0; m < microbatches; ++m)
      for (int l = kLayers - 1; l >= 0; --l) {
        const size_t at = size_t(m) * rows * kWidth;
        std::memcpy(&g.stagedX[l][at], &g.x[l][at], bytes);
        std::memcpy(&g.stagedDy[l][at], &g.dy[l][at], bytes);
      }
    for (int l = kLayers - 1; l >= 0; --l)
      accumulate(g.stagedX[l].data(), g.stagedDy[l].data(), g.dw[l].data(),
                 kBatch);
  }
  setCounters(state);
}

void cases(benchmark::internal::Benchmark *b) {
  b->ArgNames({"M"});
  for (int microbatches : {1, 8, 32})
    b->Args({microbatches});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

} // namespace

BENCHMARK(BM_WeightGradPerMicrobatch)->Apply(cases);
BENCHMARK(BM_WeightGradStaged)->Apply(cases);
