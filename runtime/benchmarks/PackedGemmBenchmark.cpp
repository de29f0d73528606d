//===- PackedGemmBenchmark.cpp - Weights packed once per step, measured ---===//
//
// Why micro-batching costs the MLP (docs/Benchmarks.md): each 64-row product
// of a micro-batch makes OpenBLAS pack and stream the whole weight again.
// This times the forward products of a 9-layer, 512-wide MLP at batch 512
// (M micro-batches of 512 / M rows, each through the 9 weights in turn):
//   BM_OpenBlas   cblas_sgemm per product (what the runtime does today);
//   BM_PackedOnce the weights packed once into 32-column panels, then a
//                 plain AVX-512 8x32 kernel per product (a prototype of a
//                 pack-once GEMM; skipped where the CPU lacks AVX-512).
// Both on one thread. The packing itself is outside the timed loop: once per
// training step, it is amortised over the step's micro-batches.
//
//===----------------------------------------------------------------------===//

#include <benchmark/benchmark.h>
#include <cblas.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr int kLayers = 9, kWidth = 512, kBatch = 512, kPanel = 32;

struct Model {
  std::vector<std::vector<float>> weights, packed;
  std::vector<float> x, y;
  Model() : x(size_t(kBatch) * kWidth), y(size_t(kBatch) * kWidth) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
    for (float &v : x)
      v = dist(rng);
    for (int l = 0; l < kLayers; ++l) {
      std::vector<float> w(size_t(kWidth) * kWidth);
      for (float &v : w)
        v = dist(rng);
      // Panel p holds columns [32p, 32p + 32) of every row, row after row.
      std::vector<float> p(w.size());
      for (int panel = 0; panel < kWidth / kPanel; ++panel)
        for (int k = 0; k < kWidth; ++k)
          std::memcpy(&p[(size_t(panel) * kWidth + k) * kPanel],
                      &w[size_t(k) * kWidth + panel * kPanel],
                      kPanel * sizeof(float));
      weights.push_back(std::move(w));
      packed.push_back(std::move(p));
    }
  }
};

#if defined(__x86_64__)
/// C[rows x 512] = X[rows x 512] W, W packed; rows a multiple of 8.
__attribute__((target("avx512f"))) void
packedProduct(const float *x, int rows, const float *packed, float *c) {
  for (int panel = 0; panel < kWidth / kPanel; ++panel) {
    const float *wp = packed + size_t(panel) * kWidth * kPanel;
    for (int r0 = 0; r0 < rows; r0 += 8) {
      __m512 lo[8], hi[8];
      for (int r = 0; r < 8; ++r)
        lo[r] = hi[r] = _mm512_setzero_ps();
      const float *xr = x + size_t(r0) * kWidth;
      for (int k = 0; k < kWidth; ++k) {
        __m512 w0 = _mm512_loadu_ps(wp + k * kPanel);
        __m512 w1 = _mm512_loadu_ps(wp + k * kPanel + 16);
        for (int r = 0; r < 8; ++r) {
          __m512 a = _mm512_set1_ps(xr[size_t(r) * kWidth + k]);
          lo[r] = _mm512_fmadd_ps(a, w0, lo[r]);
          hi[r] = _mm512_fmadd_ps(a, w1, hi[r]);
        }
      }
      for (int r = 0; r < 8; ++r) {
        float *cr = c + size_t(r0 + r) * kWidth + panel * kPanel;
        _mm512_storeu_ps(cr, lo[r]);
        _mm512_storeu_ps(cr + 16, hi[r]);
      }
    }
  }
}

#endif

void setCounters(benchmark::State &state) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      double(state.iterations()) * 2.0 * kBatch * kWidth * kWidth * kLayers,
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_OpenBlas(benchmark::State &state) {
  openblas_set_num_threads(1);
  Model model;
  const int microbatches = int(state.range(0)), rows = kBatch / microbatches;
  for (auto _ : state)
    for (int m = 0; m < microbatches; ++m)
      for (int l = 0; l < kLayers; ++l)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, kWidth,
                    kWidth, 1.0f, &model.x[size_t(m) * rows * kWidth], kWidth,
                    model.weights[l].data(), kWidth, 0.0f,
                    &model.y[size_t(m) * rows * kWidth], kWidth);
  setCounters(state);
}

#if defined(__x86_64__)
void BM_PackedOnce(benchmark::State &state) {
  if (!__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("no AVX-512 on this CPU");
    return;
  }
  Model model;
  const int microbatches = int(state.range(0)), rows = kBatch / microbatches;
  // The kernel against cblas once, so that the timing is of a right answer.
  packedProduct(model.x.data(), 8, model.packed[0].data(), model.y.data());
  std::vector<float> want(size_t(8) * kWidth);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 8, kWidth, kWidth,
              1.0f, model.x.data(), kWidth, model.weights[0].data(), kWidth,
              0.0f, want.data(), kWidth);
  for (size_t i = 0; i < want.size(); ++i)
    if (std::fabs(want[i] - model.y[i]) > 1e-4f * (1 + std::fabs(want[i]))) {
      state.SkipWithError("the packed kernel disagrees with cblas_sgemm");
      return;
    }
  for (auto _ : state)
    for (int m = 0; m < microbatches; ++m)
      for (int l = 0; l < kLayers; ++l)
        packedProduct(&model.x[size_t(m) * rows * kWidth], rows,
                      model.packed[l].data(),
                      &model.y[size_t(m) * rows * kWidth]);
  setCounters(state);
}
#endif

} // namespace

BENCHMARK(BM_OpenBlas)
    ->ArgName("M")
    ->Arg(1)
    ->Arg(8)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PackedOnce)
    ->ArgName("M")
    ->Arg(1)
    ->Arg(8)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
