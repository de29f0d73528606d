//===- OpProfileTest.cpp - A step's time per op kind and device -----------===//
//
// With profileOps, each device's Timeline::opTotals counts every op of its
// programs exactly (each forward op M times, again in the recompute) under
// its section and kind, fused pairs as one, and the ops' time fits inside
// the device's compute instructions. Without it nothing is counted.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/data/SyntheticBatch.h"

#include "OpProfileSupport.h"
#include "TestBundles.h"
#include "TestModels.h"

#include <gtest/gtest.h>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

TEST(OpProfile, CountsEveryForwardOpOfEachDevice) {
  const unsigned m = 3;
  Bundle bundle = buildBundle(mlpGraph(12), mlpSplit(2), m, RematPolicy::Full);
  ExecutorConfig config;
  config.seed = 1;
  config.profileOps = true;
  std::string error;
  auto executor = PipelineExecutor::create(bundle, config, error);
  ASSERT_TRUE(executor) << error;
  Batch batch = syntheticBatch(bundle, 3);
  for (int step = 0; step < 2; ++step) // the second step starts afresh
    ASSERT_TRUE(executor->trainStep(batch).ok());

  expectEveryForwardOpCounted(bundle, executor->timeline(), m);
}

TEST(OpProfile, OffByDefault) {
  Bundle bundle = buildBundle(mlpGraph(12), mlpSplit(2), 2, RematPolicy::None);
  std::string error;
  auto executor = PipelineExecutor::create(bundle, ExecutorConfig(), error);
  ASSERT_TRUE(executor) << error;
  ASSERT_TRUE(executor->trainStep(syntheticBatch(bundle, 3)).ok());
  for (unsigned d = 0; d < bundle.numDevices(); ++d)
    EXPECT_TRUE(executor->timeline().opTotals(d).empty()) << "device " << d;
  EXPECT_FALSE(executor->timeline().lane(0).empty());
}

} // namespace
