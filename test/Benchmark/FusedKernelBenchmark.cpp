//===- FusedKernelBenchmark.cpp - Fused pairs against their two kernels ---===//
//
// The CPU backend's fused kernels (KernelApi: biasActivation, addLayerNorm)
// against the two kernels each replaces, issued and synchronized the same
// way, on a matrix that fits in the cache (256 x 256) and one that does not
// (2048 x 1024). Counter: GB/s of the fused pair's minimum traffic.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/backends/cpu/CpuBackend.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace dev = gpipe::runtime::device;

namespace {

/// One CPU device with `floats` floats of each of `count` buffers, filled.
struct Buffers {
  dev::CpuBackend backend{1};
  std::vector<float *> at;
  Buffers(int count, int64_t floats) {
    for (int i = 0; i < count; ++i) {
      void *p = nullptr;
      backend.allocate(0, floats * 4, &p);
      float *f = static_cast<float *>(p);
      for (int64_t j = 0; j < floats; ++j)
        f[j] = float(j % 97) * 0.01f - 0.4f;
      at.push_back(f);
    }
  }
  void sync() { backend.synchronize(std::chrono::milliseconds(60000)); }
};

/// Args: rows, cols, fused (1) or bias then GELU (0).
void BM_BiasGelu(benchmark::State &state) {
  int64_t rows = state.range(0), cols = state.range(1);
  Buffers b(3, rows * cols);
  dev::StreamId s = b.backend.computeStream(0);
  const float *bias = b.at[2];
  for (auto _ : state) {
    if (state.range(2)) {
      b.backend.biasActivation(s, bias, b.at[0], b.at[1], rows, cols,
                               dev::Activation::Gelu);
    } else {
      b.backend.addRowVector(s, bias, b.at[0], rows, cols);
      b.backend.gelu(s, b.at[0], b.at[1], rows * cols);
    }
    b.sync();
  }
  // h read and written, y written.
  state.counters["GB/s"] =
      benchmark::Counter(double(state.iterations()) * 3 * rows * cols * 4 / 1e9,
                         benchmark::Counter::kIsRate);
}

/// Args: rows, cols, fused (1) or add then layer norm (0).
void BM_AddLayerNorm(benchmark::State &state) {
  int64_t rows = state.range(0), cols = state.range(1);
  Buffers b(7, rows * cols);
  dev::StreamId s = b.backend.computeStream(0);
  float *mean = b.at[5], *rstd = b.at[6];
  for (auto _ : state) {
    if (state.range(2)) {
      b.backend.addLayerNorm(s, b.at[0], b.at[1], b.at[2], b.at[3], b.at[4],
                             b.at[4], mean, rstd, rows, cols, 1e-5f);
    } else {
      b.backend.add(s, b.at[0], b.at[1], b.at[2], rows * cols);
      b.backend.layerNorm(s, b.at[2], b.at[3], b.at[4], b.at[4], mean, rstd,
                          rows, cols, 1e-5f);
    }
    b.sync();
  }
  // a and b read, the sum and y written.
  state.counters["GB/s"] =
      benchmark::Counter(double(state.iterations()) * 4 * rows * cols * 4 / 1e9,
                         benchmark::Counter::kIsRate);
}

} // namespace

BENCHMARK(BM_BiasGelu)
    ->ArgNames({"rows", "cols", "fused"})
    ->ArgsProduct({{256, 2048}, {256, 1024}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AddLayerNorm)
    ->ArgNames({"rows", "cols", "fused"})
    ->ArgsProduct({{256, 2048}, {256, 1024}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
