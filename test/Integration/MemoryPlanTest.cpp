//===- MemoryPlanTest.cpp - Predicted against measured peak memory --------===//
//
// The compiler's memory plan (gpipe-plan-memory, written into the bundle)
// against what the runtime's executor measures while it trains: each
// device's high-water mark of allocated bytes must never exceed the
// prediction, and the prediction must be within 10% of it. The planner and
// the executor are separate implementations of the allocation rules (IR
// replay in the compiler, real buffers in the runtime).
//
//===----------------------------------------------------------------------===//

#include "CompiledSupport.h"

#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/Executor.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <tuple>

namespace rt = gpipe::runtime;

namespace {

using gpipe::testing::randomBatch;
using gpipe::testing::readExample;

struct Case {
  const char *model; ///< under python-free-examples
  unsigned stages, microbatches;
  gpipe::RematPolicy remat;
  rt::OptimizerKind optimizer;
};

unsigned slotsOf(rt::OptimizerKind kind) {
  switch (kind) {
  case rt::OptimizerKind::Sgd:
    return 0;
  case rt::OptimizerKind::Momentum:
  case rt::OptimizerKind::RmsProp:
    return 1;
  case rt::OptimizerKind::Adam:
  case rt::OptimizerKind::AdamW:
    return 2;
  }
  return 2;
}

std::string caseName(const testing::TestParamInfo<Case> &info) {
  const Case &c = info.param;
  std::string model = c.model;
  model = model.substr(0, model.find('/'));
  std::string remat = gpipe::stringifyRematPolicy(c.remat).str();
  std::replace(remat.begin(), remat.end(), '-', '_');
  return model + "_K" + std::to_string(c.stages) + "_M" +
         std::to_string(c.microbatches) + "_" +
         remat + "_slots" +
         std::to_string(slotsOf(c.optimizer));
}

class MemoryPlanTest : public testing::TestWithParam<Case> {};

TEST_P(MemoryPlanTest, MeasuredPeakStaysWithinThePlan) {
  const Case &c = GetParam();
  gpipe::CompilePipelineOptions options;
  options.numStages = c.stages;
  options.numMicrobatches = c.microbatches;
  options.remat = c.remat;
  options.optimizerSlots = slotsOf(c.optimizer);
  std::string json, diagnostics;
  ASSERT_TRUE(mlir::succeeded(gpipe::compileSourceToBundle(
      readExample(c.model), options, json, diagnostics)))
      << diagnostics;
  rt::StatusOr<rt::Bundle> load = rt::parseBundle(json, "compiled");
  ASSERT_TRUE(load.ok()) << load.status().message();
  const rt::MemoryPlan plan = (*load).memoryPlan;
  ASSERT_EQ(plan.devices.size(), c.stages);
  EXPECT_EQ(plan.optimizerSlots, slotsOf(c.optimizer));

  rt::ExecutorConfig config;
  config.optimizer.kind = c.optimizer;
  config.seed = 7;
  rt::Batch batch = randomBatch((*load), 3);
  std::string error;
  auto executor =
      rt::PipelineExecutor::create(std::move((*load)), config, error);
  ASSERT_TRUE(executor) << error;
  for (unsigned step = 0; step < 2; ++step) {
    rt::StepResult result = executor->trainStep(batch);
    ASSERT_TRUE(result.ok()) << result.error;
    const std::vector<int64_t> &measured = executor->peakMemoryBytes();
    std::vector<int64_t> resident = executor->residentMemoryBytes();
    for (unsigned d = 0; d < c.stages; ++d) {
      SCOPED_TRACE("device " + std::to_string(d) + ", step " +
                   std::to_string(step));
      const rt::PlannedDeviceMemory &predicted = plan.devices[d];
      EXPECT_EQ(predicted.residentBytes, resident[d]);
      // The executor uses the plan's arena and nothing more, but for the
      // 256-byte alignment of each resident tensor (and the loss slots).
      int64_t tensors = 1;
      for (const rt::ParamSpec &param : executor->bundle().params)
        tensors += param.stage == d ? 2 + slotsOf(c.optimizer) : 0;
      EXPECT_GE(measured[d], predicted.arenaBytes);
      EXPECT_LE(measured[d], predicted.arenaBytes + 256 * tensors);
      // The static arena holds every buffer, with little fragmentation.
      EXPECT_LE(double(predicted.arenaBytes),
                1.10 * double(predicted.peakBytes));
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  using R = gpipe::RematPolicy;
  for (const char *model : {"mlp/mlp.mlir", "transformer/transformer.mlir"})
    for (unsigned k : {1u, 2u, 4u})
      for (unsigned m : {1u, 3u, 8u})
        for (R remat : {R::None, R::Full, R::ExceptLast})
          out.push_back({model, k, m, remat, rt::OptimizerKind::Adam});
  // The optimizer's state is resident: other slot counts.
  out.push_back({"mlp/mlp.mlir", 2, 4, R::Full, rt::OptimizerKind::Sgd});
  out.push_back({"transformer/transformer.mlir", 4, 4, R::None,
                 rt::OptimizerKind::Momentum});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Examples, MemoryPlanTest, testing::ValuesIn(cases()),
                         caseName);

} // namespace
