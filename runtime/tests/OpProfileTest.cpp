//===- OpProfileTest.cpp - A step's time per op kind and device -----------===//
//
// With profileOps, each device's Timeline::opTotals counts every op of its
// programs exactly (each forward op M times, again in the recompute) under
// its section and kind, fused pairs as one, and the ops' time fits inside
// the device's compute instructions. Without it nothing is counted.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/Executor.h"
#include "gpipe/runtime/SyntheticBatch.h"

#include "TestBundles.h"
#include "TestModels.h"

#include <gtest/gtest.h>

#include <map>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

/// Each forward op kind of `ops` as the profile names it, with its count.
std::map<std::string, int64_t> forwardKinds(const std::vector<Op> &ops) {
  std::map<std::string, int64_t> kinds;
  for (size_t k = 0; k < ops.size(); ++k) {
    std::string name = opKindName(ops[k].kind);
    if (ops[k].fusion != FusionKind::None)
      name += std::string("+") + opKindName(ops[++k].kind);
    ++kinds[name];
  }
  return kinds;
}

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

  const Timeline &timeline = executor->timeline();
  for (unsigned d = 0; d < bundle.numDevices(); ++d) {
    SCOPED_TRACE("device " + std::to_string(d));
    std::map<std::string, OpTotal> got;
    double opsUs = 0;
    for (const OpTotal &op : timeline.opTotals(d)) {
      EXPECT_TRUE(got.emplace(op.name, op).second) << op.name << " twice";
      EXPECT_GE(op.us, 0.0) << op.name;
      opsUs += op.us;
    }
    for (const auto &[kind, count] : forwardKinds(bundle.stages[d].forward)) {
      for (const char *section : {"forward", "recompute"}) {
        std::string name = std::string(section) + " " + kind;
        ASSERT_TRUE(got.count(name)) << "no " << name;
        EXPECT_EQ(got[name].calls, count * m) << name;
      }
    }
    EXPECT_TRUE(got.count("backward dense_grad"));
    double computeUs = 0;
    for (const TimelineEvent &event : timeline.lane(d))
      if (event.compute)
        computeUs += event.durationUs;
    EXPECT_LE(opsUs, computeUs + 1.0) << "ops outside the instructions";
    for (size_t i = 1; i < timeline.opTotals(d).size(); ++i)
      EXPECT_GE(timeline.opTotals(d)[i - 1].us, timeline.opTotals(d)[i].us)
          << "not largest first";
  }
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
