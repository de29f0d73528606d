//===- TrainStepBenchmark.cpp - One GPipe training step on CPU devices ----===//
//
// Compiles python-free-examples/mlp/mlp.mlir in process (gpipe-compile with
// K stages, M micro-batches and a remat policy, then gpipe-to-bundle), loads
// the bundle into the pipeline executor and times training steps (forward,
// backward and one Adam update over a batch of 64, the example's, or 512) on
// fixed random data: no dataset is read. The standard flags apply
// (--benchmark_min_time, --benchmark_filter, ...): no case fixes its own
// minimum time. Counters:
//   samples/s        examples trained per second of wall time
//   ideal_eff        M / (M + K - 1), GPipe's pipeline efficiency (K > 1)
//   measured_eff     1 - the measured bubble fraction (K > 1)
//   bubble           the executor timeline's bubble fraction: the share of
//                    device time idle or waiting, averaged over the steps
//
//===----------------------------------------------------------------------===//

#include "ExampleBundles.h"

#include "gpipe/runtime/exec/Executor.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rt = gpipe::runtime;
using gpipe::benchmarks::Compiled;
using gpipe::benchmarks::compileExample;
using gpipe::benchmarks::randomBatch;

namespace {

/// Args: K, M, remat (0 none, 1 full, 2 except-last), schedule (0 gpipe,
/// 1 1f1b, 2 zb-h1, 3 interleaved with V = 2), batch (0: the example's 64).
void BM_TrainStep(benchmark::State &state) {
  unsigned k = state.range(0), m = state.range(1);
  auto remat = static_cast<gpipe::RematPolicy>(state.range(2));
  const gpipe::schedule::ScheduleKind kinds[] = {
      gpipe::schedule::ScheduleKind::GPipe,
      gpipe::schedule::ScheduleKind::OneFOneB,
      gpipe::schedule::ScheduleKind::ZeroBubbleH1,
      gpipe::schedule::ScheduleKind::Interleaved};
  gpipe::schedule::ScheduleKind kind = kinds[state.range(3)];
  const unsigned v = kind == gpipe::schedule::ScheduleKind::Interleaved ? 2 : 1;
  Compiled compiled =
      compileExample("mlp", k, m, remat, state.range(4), kind, v);
  if (!compiled.error.empty()) {
    state.SkipWithError(compiled.error.c_str());
    return;
  }
  rt::Batch batch = randomBatch(compiled.bundle, 1);
  rt::ExecutorConfig config;
  config.optimizer.kind = rt::OptimizerKind::Adam;
  config.optimizer.learningRate = 1e-3f;
  config.seed = 1;
  std::string error;
  std::unique_ptr<rt::PipelineExecutor> executor =
      rt::PipelineExecutor::create(std::move(compiled.bundle), config, error);
  if (!executor) {
    state.SkipWithError(error.c_str());
    return;
  }
  int64_t rows = executor->bundle().batch;
  // One untimed step: first-touch allocation of every buffer.
  rt::StepResult warmup = executor->trainStep(batch);
  if (!warmup.ok()) {
    state.SkipWithError(warmup.error.c_str());
    return;
  }

  double bubbleSum = 0;
  int64_t steps = 0;
  for (auto _ : state) {
    rt::StepResult step = executor->trainStep(batch);
    if (!step.ok()) {
      state.SkipWithError(step.error.c_str());
      return;
    }
    benchmark::DoNotOptimize(step.loss);
    bubbleSum += executor->timeline().bubbleFraction();
    ++steps;
  }
  state.counters["samples/s"] = benchmark::Counter(
      double(state.iterations() * rows), benchmark::Counter::kIsRate);
  if (k > 1 && steps > 0) {
    double bubble = bubbleSum / double(steps);
    state.counters["bubble"] = bubble;
    state.counters["measured_eff"] = 1.0 - bubble;
    state.counters["ideal_eff"] = double(v * m) / double(v * m + k - 1);
  }
  state.SetLabel("K=" + std::to_string(k) + " M=" + std::to_string(m) + " " +
                 gpipe::schedule::scheduleKindName(kind) +
                 (v > 1 ? " V=" + std::to_string(v) : std::string()) +
                 " remat=" + gpipe::stringifyRematPolicy(remat).str() +
                 " batch=" + std::to_string(rows));
}

/// Args: example (0: mlp, 1: transformer), batch (0: the example's), K, M,
/// fused (1: the compiler's fused pairs; 0: their marks removed, each op its
/// own kernel, on the same placement). Remat full, Adam, on the one executor
/// (the device executor on CPU threads, through PipelineExecutor); its figures
/// are in docs/Benchmarks.md.
void BM_Executor(benchmark::State &state) {
  const char *example = state.range(0) == 0 ? "mlp" : "transformer";
  int64_t batchRows = state.range(1);
  unsigned k = state.range(2), m = state.range(3);
  bool fused = state.range(4) != 0;
  Compiled compiled =
      compileExample(example, k, m, gpipe::RematPolicy::Full, batchRows);
  if (!compiled.error.empty()) {
    state.SkipWithError(compiled.error.c_str());
    return;
  }
  int pairs = 0;
  for (rt::StageProgram &stage : compiled.bundle.stages)
    for (std::vector<rt::Op> *ops : {&stage.forward, &stage.recompute})
      for (rt::Op &op : *ops) {
        pairs += op.fusion != rt::FusionKind::None;
        if (!fused)
          op.fusion = rt::FusionKind::None;
      }
  rt::Batch batch = randomBatch(compiled.bundle, 1);
  int64_t rows = compiled.bundle.batch;
  rt::ExecutorConfig config;
  config.optimizer.kind = rt::OptimizerKind::Adam;
  config.optimizer.learningRate = 1e-3f;
  config.seed = 1;
  config.recordTimeline = false;
  std::string error;
  auto executor =
      rt::PipelineExecutor::create(std::move(compiled.bundle), config, error);
  if (!executor) {
    state.SkipWithError(error.c_str());
    return;
  }
  rt::StepResult warmup = executor->trainStep(batch);
  if (!warmup.ok()) {
    state.SkipWithError(warmup.error.c_str());
    return;
  }
  for (auto _ : state) {
    rt::StepResult result = executor->trainStep(batch);
    if (!result.ok()) {
      state.SkipWithError(result.error.c_str());
      return;
    }
    benchmark::DoNotOptimize(result.loss);
  }
  state.counters["samples/s"] = benchmark::Counter(
      double(state.iterations() * rows), benchmark::Counter::kIsRate);
  state.counters["fused_pairs"] = fused ? pairs : 0;
  state.SetLabel(std::string(example) + " batch=" + std::to_string(rows) +
                 " K=" + std::to_string(k) + " M=" + std::to_string(m) +
                 (fused ? " fused" : " unfused"));
}

BENCHMARK(BM_Executor)
    ->ArgNames({"model", "batch", "K", "M", "fused"})
    ->Args({0, 64, 1, 8, 1})
    ->Args({0, 64, 2, 8, 1})
    ->Args({0, 512, 1, 8, 0})
    ->Args({0, 512, 1, 8, 1})
    ->Args({0, 512, 2, 8, 1})
    ->Args({1, 0, 1, 4, 0})
    ->Args({1, 0, 1, 4, 1})
    ->Args({1, 0, 2, 4, 0})
    ->Args({1, 0, 2, 4, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

constexpr int64_t kNone = int64_t(gpipe::RematPolicy::None);
constexpr int64_t kFull = int64_t(gpipe::RematPolicy::Full);

BENCHMARK(BM_TrainStep)
    ->ArgNames({"K", "M", "remat", "schedule", "batch"})
    ->Args({1, 1, kNone, 0, 0})
    ->Args({1, 1, kFull, 0, 0})
    // The same 8 micro-batches on one device: what micro-batching alone
    // costs, to set against the pipeline's parallelism.
    ->Args({1, 8, kFull, 0, 0})
    ->Args({2, 8, kFull, 0, 0})
    ->Args({2, 8, kNone, 0, 0})
    ->Args({4, 8, kFull, 0, 0})
    // Batch 512: the cases of the CPU step's comparison with PyTorch.
    ->Args({1, 1, kNone, 0, 512})
    ->Args({1, 8, kNone, 0, 512})
    ->Args({2, 8, kNone, 0, 512})
    ->Args({2, 8, kFull, 0, 512})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

/// The plans gpipe-tune accepts for the MLP at batch 512 on 2 devices under
/// a 24 MiB cap (docs/Schedules.md, "Auto-tuner"): K = 2 (one device cannot
/// hold the model) and, for M = 4, 8 and 16, every schedule and remat policy
/// that fits (GPipe without remat does not, nor interleaving without remat
/// at M = 4).
void planGrid(benchmark::internal::Benchmark *bench) {
  constexpr int64_t kExceptLast = int64_t(gpipe::RematPolicy::ExceptLast);
  for (int64_t m : {4, 8, 16}) {
    bench->Args({2, m, kNone, 1, 512});
    bench->Args({2, m, kNone, 2, 512});
    if (m > 4)
      bench->Args({2, m, kNone, 3, 512});
    for (int64_t schedule : {0, 1, 2, 3}) {
      bench->Args({2, m, kExceptLast, schedule, 512});
      bench->Args({2, m, kFull, schedule, 512});
    }
  }
}

BENCHMARK(BM_TrainStep)
    ->Name("BM_PlanGrid")
    ->ArgNames({"K", "M", "remat", "schedule", "batch"})
    ->Apply(planGrid)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

} // namespace
