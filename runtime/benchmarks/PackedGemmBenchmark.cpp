//===- PackedGemmBenchmark.cpp - Weights packed once per step, measured ---===//
//
// Why the CPU backend packs parameters (PackedGemm.h): a step multiplies
// every weight by each of its M micro-batches, and a BLAS packs and streams
// the weight anew for each product. This times the products of a 9-layer,
// 512-wide MLP at batch 512 (M micro-batches of 512 / M rows, each through
// the 9 weights in turn), as the forward (x W) or the input gradient
// (dy W^T) makes them:
//   BM_OpenBlas/T:M   cblas_sgemm per product (--pack-weights=false);
//   BM_Packed/T:M     the runtime's packedGemm, the 9 weights packed once
//                     per iteration (as once per step) inside the timing;
//   BM_PackPanels/T   the packing of one weight alone.
// One thread. Skipped where the CPU has neither AVX-512 nor AVX2 with FMA.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/PackedGemm.h"

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cmath>
#include <random>
#include <vector>

using namespace gpipe::runtime::device;

namespace {

constexpr int kLayers = 9, kWidth = 512, kBatch = 512;

struct Model {
  std::vector<std::vector<float>> weights;
  std::vector<PackedMatrix> packed;
  std::vector<float> x, y;
  Model() : packed(kLayers), x(size_t(kBatch) * kWidth), y(x.size()) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
    for (float &v : x)
      v = dist(rng);
    for (int l = 0; l < kLayers; ++l) {
      std::vector<float> w(size_t(kWidth) * kWidth);
      for (float &v : w)
        v = dist(rng);
      weights.push_back(std::move(w));
    }
  }
  void pack(bool transposed) {
    for (int l = 0; l < kLayers; ++l) {
      packed[l].resize(kWidth, kWidth);
      packed[l].packPanels(weights[l].data(), kWidth, transposed, 0,
                           packed[l].panels());
    }
  }
};

void setCounters(benchmark::State &state) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      double(state.iterations()) * 2.0 * kBatch * kWidth * kWidth * kLayers,
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_OpenBlas(benchmark::State &state) {
  openblas_set_num_threads(1);
  Model model;
  const bool transposed = state.range(0);
  const int microbatches = int(state.range(1)), rows = kBatch / microbatches;
  for (auto _ : state)
    for (int m = 0; m < microbatches; ++m)
      for (int l = 0; l < kLayers; ++l)
        cblas_sgemm(CblasRowMajor, CblasNoTrans,
                    transposed ? CblasTrans : CblasNoTrans, rows, kWidth,
                    kWidth, 1.0f, &model.x[size_t(m) * rows * kWidth], kWidth,
                    model.weights[l].data(), kWidth, 0.0f,
                    &model.y[size_t(m) * rows * kWidth], kWidth);
  setCounters(state);
}

void BM_Packed(benchmark::State &state) {
  if (!packedGemmSupported()) {
    state.SkipWithError("neither AVX-512 nor AVX2 with FMA on this CPU");
    return;
  }
  Model model;
  const bool transposed = state.range(0);
  const int microbatches = int(state.range(1)), rows = kBatch / microbatches;
  for (auto _ : state) {
    model.pack(transposed);
    for (int m = 0; m < microbatches; ++m)
      for (int l = 0; l < kLayers; ++l)
        packedGemm(&model.x[size_t(m) * rows * kWidth], kWidth, model.packed[l],
                   1.0f, 0.0f, &model.y[size_t(m) * rows * kWidth], kWidth, 0,
                   rows, 0, model.packed[l].panels());
  }
  setCounters(state);
}

/// One 512 x 512 weight packed, as for the forward (T:0) or, transposed,
/// for the input gradient (T:1).
void BM_PackPanels(benchmark::State &state) {
  Model model;
  const bool transposed = state.range(0);
  PackedMatrix &matrix = model.packed[0];
  matrix.resize(kWidth, kWidth);
  for (auto _ : state) {
    matrix.packPanels(model.weights[0].data(), kWidth, transposed, 0,
                      matrix.panels());
    benchmark::DoNotOptimize(matrix.panel(0));
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kWidth * kWidth * 4);
}
BENCHMARK(BM_PackPanels)
    ->ArgName("T")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond);

void cases(benchmark::internal::Benchmark *b) {
  b->ArgNames({"T", "M"});
  for (int transposed : {0, 1})
    for (int microbatches : {1, 8, 64})
      b->Args({transposed, microbatches});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

} // namespace

BENCHMARK(BM_OpenBlas)->Apply(cases);
BENCHMARK(BM_Packed)->Apply(cases);
