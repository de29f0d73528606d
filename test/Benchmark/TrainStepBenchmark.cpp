//===- TrainStepBenchmark.cpp - One GPipe training step on CPU devices ----===//
//
// Compiles python-free-examples/mlp/mlp.mlir in process (gpipe-compile with
// K stages, M micro-batches and a remat policy, then gpipe-to-bundle), loads
// the bundle into the pipeline executor and times training steps (forward,
// backward and one Adam update over the batch of 64) on fixed random data:
// no dataset is read. Counters:
//   samples/s        examples trained per second of wall time
//   ideal_eff        M / (M + K - 1), GPipe's pipeline efficiency (K > 1)
//   measured_eff     1 - the measured bubble fraction (K > 1)
//   bubble           the executor timeline's bubble fraction: the share of
//                    device time idle or waiting, averaged over the steps
//
//===----------------------------------------------------------------------===//

#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/BundleReader.h"
#include "gpipe/runtime/Executor.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#ifndef GPIPE_EXAMPLES_DIR
#error "GPIPE_EXAMPLES_DIR must name the python-free-examples directory"
#endif

namespace rt = gpipe::runtime;

namespace {

/// The bundle of mlp.mlir compiled with (K, M, remat), or an error.
struct Compiled {
  rt::Bundle bundle;
  std::string error;
};

/// python-free-examples/<example>/<example>.mlir compiled with (K, M, remat);
/// `batch` > 0 rewrites the example's batch (the leading dimension of every
/// batched type) first.
Compiled compileExample(const std::string &example, unsigned k, unsigned m,
                        gpipe::RematPolicy remat, int64_t batch = 0) {
  Compiled out;
  std::string path =
      std::string(GPIPE_EXAMPLES_DIR) + "/" + example + "/" + example + ".mlir";
  std::string openError;
  std::unique_ptr<llvm::MemoryBuffer> file =
      mlir::openInputFile(path, &openError);
  if (!file) {
    out.error = openError;
    return out;
  }
  std::string source = file->getBuffer().str();
  if (batch > 0) {
    size_t model = source.find("gpipe.model @");
    size_t at = source.find(" batch ", model);
    size_t end = source.find(' ', at + 7);
    if (model == std::string::npos || at == std::string::npos ||
        end == std::string::npos) {
      out.error = path + " declares no batch";
      return out;
    }
    std::string old = source.substr(at + 7, end - at - 7);
    auto replaceAll = [&](const std::string &from, const std::string &to) {
      for (size_t pos = 0; (pos = source.find(from, pos)) != std::string::npos;
           pos += to.size())
        source.replace(pos, from.size(), to);
    };
    replaceAll(" batch " + old + " ", " batch " + std::to_string(batch) + " ");
    replaceAll("tensor<" + old + "x", "tensor<" + std::to_string(batch) + "x");
  }
  gpipe::CompilePipelineOptions options;
  options.numStages = k;
  options.numMicrobatches = m;
  options.remat = remat;
  std::string json, diagnostics;
  if (mlir::failed(
          gpipe::compileSourceToBundle(source, options, json, diagnostics))) {
    out.error = "cannot compile " + path + ": " + diagnostics;
    return out;
  }
  rt::StatusOr<rt::Bundle> load = rt::parseBundle(json, path);
  if (!load.ok()) {
    out.error = load.status().message();
    return out;
  }
  out.bundle = std::move((*load));
  return out;
}

/// A fixed pseudo-random batch for the bundle's f32 and i32 inputs (i32
/// values in [0, 10): the MLP's labels).
rt::Batch randomBatch(const rt::Bundle &bundle, uint64_t seed) {
  uint64_t state = seed * 2862933555777941757ull + 3;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 33);
  };
  rt::Batch batch;
  for (const rt::ModelInputSpec &input : bundle.inputs) {
    int64_t n = 1;
    for (int64_t d : input.shape)
      n *= d;
    if (input.type == rt::ElementType::F32) {
      std::vector<float> values(n);
      for (float &v : values)
        v = float(next() % 1000001) / 1000000.0f;
      batch[input.name] = rt::HostTensor::floats(input.shape, values);
    } else {
      std::vector<int32_t> values(n);
      for (int32_t &v : values)
        v = int32_t(next() % 10);
      batch[input.name] = rt::HostTensor::ints(input.shape, values);
    }
  }
  return batch;
}


/// Args: K, M, remat (0 none, 1 full, 2 except-last).
void BM_TrainStep(benchmark::State &state) {
  unsigned k = state.range(0), m = state.range(1);
  auto remat = static_cast<gpipe::RematPolicy>(state.range(2));
  Compiled compiled = compileExample("mlp", k, m, remat);
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
    state.counters["ideal_eff"] = double(m) / double(m + k - 1);
  }
  state.SetLabel("K=" + std::to_string(k) + " M=" + std::to_string(m) +
                 " remat=" + gpipe::stringifyRematPolicy(remat).str() + " batch=" +
                 std::to_string(rows));
}

/// Args: example (0: mlp, 1: transformer), batch (0: the example's), K, M,
/// fused (1: the compiler's fused pairs; 0: their marks removed, each op its
/// own kernel, on the same placement). Remat full, Adam, on the one executor
/// (the device executor on CPU threads, through PipelineExecutor). Before the
/// CPU interpreter was removed, this benchmark timed both side by side
/// (docs/Benchmarks.md).
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
    ->UseRealTime()
    ->MinTime(1.0);

constexpr int64_t kNone = int64_t(gpipe::RematPolicy::None);
constexpr int64_t kFull = int64_t(gpipe::RematPolicy::Full);

BENCHMARK(BM_TrainStep)
    ->ArgNames({"K", "M", "remat"})
    ->Args({1, 1, kNone})
    ->Args({1, 1, kFull})
    // The same 8 micro-batches on one device: what micro-batching alone
    // costs, to set against the pipeline's parallelism.
    ->Args({1, 8, kFull})
    ->Args({2, 8, kFull})
    ->Args({2, 8, kNone})
    ->Args({4, 8, kFull})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

} // namespace
