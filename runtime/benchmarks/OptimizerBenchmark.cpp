//===- OptimizerBenchmark.cpp - Adam's step on decayed state --------------===//
//
// Adam's step over 1M parameters whose gradients are 0 (a weight the batch
// did not touch): state of ordinary size against state decayed below 1e-38
// (beta1^800 of an ordinary first moment), each with the devices' default of
// flushing denormals to zero and without. The ratio decayed/ordinary without
// flushing is what a CPU run paid late in an epoch before the devices'
// threads flushed (CpuThreading::flushDenormals).
//
//   build/runtime/benchmarks/gpipe-runtime-bench --benchmark_filter=Adam
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/Optimizers.h"
#include "gpipe/runtime/kernels/OptimizerKernels.h"
#include "gpipe/runtime/backends/cpu/IntraOpPool.h"

#include <benchmark/benchmark.h>

#include <vector>

using namespace gpipe::runtime;

static void BM_AdamStep(benchmark::State &state) {
  const bool decayed = state.range(0) != 0, flush = state.range(1) != 0;
  const int64_t n = 1 << 20;
  // A first moment of 1e-39 is denormal; 1e-3 is ordinary. The second
  // moment decays 1000x slower and stays ordinary.
  std::vector<float> params(n, 0.5f), grads(n, 0.0f),
      first(n, decayed ? 1e-39f : 1e-3f), second(n, 1e-6f);
  float *slots[2] = {first.data(), second.data()};
  OptimizerConfig config;
  config.kind = OptimizerKind::Adam;
  config.learningRate = 1e-3f;
  device::flushDenormalsOnThisThread(flush);
  int64_t step = 900;
  for (auto _ : state) {
    applyOptimizer(config, params.data(), grads.data(), slots, n, step);
    // Keep the moment where it started: each step would decay it further.
    state.PauseTiming();
    std::fill(first.begin(), first.end(), decayed ? 1e-39f : 1e-3f);
    state.ResumeTiming();
    benchmark::DoNotOptimize(params.data());
  }
  device::flushDenormalsOnThisThread(false);
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_AdamStep)
    ->ArgNames({"decayed", "flush"})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Unit(benchmark::kMillisecond);

// The gradient norm's partial sums (kernels::SquaresPartial, what clipping
// and the non-finite guard run over every gradient, and the guard again over
// every parameter): the MLP's 784 x 512 weight in 256 parts.
static void BM_SumOfSquares(benchmark::State &state) {
  const int64_t n = 784 * 512, parts = 256;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[i] = float(i % 97) * 1e-3f;
  std::vector<double> partials(parts);
  const device::kernels::SquaresPartial kernel{
      x.data(), n, (n + parts - 1) / parts, partials.data()};
  for (auto _ : state) {
    for (int64_t r = 0; r < parts; ++r)
      kernel(r);
    benchmark::DoNotOptimize(partials.data());
  }
  state.SetBytesProcessed(state.iterations() * n * int64_t(sizeof(float)));
}
BENCHMARK(BM_SumOfSquares)->Unit(benchmark::kMicrosecond);
