//===- CompilePipelineBenchmark.cpp - gpipe-compile on large models -------===//
//
// Times the whole gpipe-compile pipeline (cost estimation, exact partition,
// stage formation, channels, unrolling, verification) on generated models of
// L layers, as a user of gpipe-opt experiences it.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <benchmark/benchmark.h>

#include <sstream>

using namespace mlir;

/// A chain of `numLayers` element-wise layers whose costs vary (relu, tanh,
/// gelu cost 1, 4 and 8 FLOPs per element), ending in an MSE loss.
static std::string makeModel(int64_t numLayers, int64_t batch) {
  std::ostringstream os;
  std::string type = "tensor<" + std::to_string(batch) + "x16xf32>";
  const char *ops[] = {"relu", "tanh", "gelu"};
  os << "gpipe.model @chain batch " << batch << " {\n"
     << "  %x = gpipe.input \"x\" : " << type << "\n";
  std::string prev = "%x";
  for (int64_t i = 0; i + 1 < numLayers; ++i) {
    std::string name = "%l" + std::to_string(i);
    os << "  " << name << " = gpipe.layer \"l" << i << "\" -> " << type
       << " {\n    %0 = gpipe." << ops[i % 3] << " " << prev << " : " << type
       << "\n    gpipe.yield %0 : " << type << "\n  }\n";
    prev = name;
  }
  os << "  %loss = gpipe.layer \"loss\" -> tensor<f32> {\n"
     << "    %0 = gpipe.mse_loss " << prev << ", %x : (" << type << ", "
     << type << ") -> tensor<f32>\n    gpipe.yield %0 : tensor<f32>\n  }\n"
     << "  gpipe.return %loss : tensor<f32>\n}\n";
  return os.str();
}

static void BM_CompilePipeline(benchmark::State &state) {
  int64_t numLayers = state.range(0);
  unsigned numStages = state.range(1);
  unsigned numMicrobatches = state.range(2);
  DialectRegistry registry;
  registry.insert<gpipe::GPipeDialect>();
  MLIRContext context(registry);
  context.disableMultithreading();
  OwningOpRef<ModuleOp> source = parseSourceString<ModuleOp>(
      makeModel(numLayers, numMicrobatches), &context);
  if (!source) {
    state.SkipWithError("generated model does not parse");
    return;
  }
  gpipe::CompilePipelineOptions options;
  options.numStages = numStages;
  options.numMicrobatches = numMicrobatches;
  for (auto _ : state) {
    state.PauseTiming();
    OwningOpRef<ModuleOp> module = source->clone();
    PassManager pm(&context);
    gpipe::buildCompilePipeline(pm, options);
    state.ResumeTiming();
    if (failed(pm.run(*module))) {
      state.SkipWithError("gpipe-compile failed");
      return;
    }
    state.PauseTiming();
    module = nullptr; // destruction is not compilation
    state.ResumeTiming();
  }
  state.counters["layers"] = numLayers;
  state.counters["stages"] = numStages;
  state.counters["microbatches"] = numMicrobatches;
  state.SetItemsProcessed(state.iterations() * numLayers);
}

BENCHMARK(BM_CompilePipeline)
    ->ArgNames({"L", "K", "M"})
    ->Args({100, 4, 8})
    ->Args({1000, 4, 8})
    ->Args({10000, 4, 8})
    ->Args({100000, 4, 8})
    ->Args({10000, 32, 8})
    ->Args({10000, 128, 8})
    ->Args({10000, 8, 64})
    ->Args({10000, 8, 512})
    ->Args({10000, 128, 512})
    ->Args({10000, 64, 256})
    ->Unit(benchmark::kMillisecond);
