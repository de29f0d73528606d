//===- SideWorkTest.cpp - Work of a step that is no instruction -----------===//
//
// A gradient's first write of a step overwrites the last step's, so the
// executor zeroes only the gradients no backward writes (just before the
// optimizer steps), and the CPU backend packs weights ahead only inside a
// device's waits; both are side work on the timeline, counted as compute in
// the bubble.
//
//===----------------------------------------------------------------------===//

#include "TestBundles.h"
#include "TestModels.h"

#include "gpipe/runtime/verify/ProgramAnalysis.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/runtime/backends/host/HostBackend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;

namespace {

constexpr int64_t kRows = 12;

/// Two steps of `graph` (split as the MLP), K = 2, M = 4, on CpuBackend's
/// threads or (with a schedule seed) the host emulation; the executor after
/// them.
std::unique_ptr<DeviceExecutor>
twoSteps(const ModelGraph &graph, std::unique_ptr<DeviceBackend> backend) {
  DeviceExecutorConfig config;
  config.seed = 5;
  std::string error;
  auto executor = DeviceExecutor::create(
      buildBundle(graph, mlpSplit(2), 4, RematPolicy::None), std::move(backend),
      config, error);
  EXPECT_TRUE(executor) << error;
  if (!executor)
    return nullptr;
  for (uint64_t seed : {1u, 2u}) {
    StepResult step = executor->trainStep(mlpBatch(kRows, seed));
    EXPECT_TRUE(step.ok()) << step.error;
  }
  return executor;
}

std::unique_ptr<DeviceBackend> backendOf(bool threads) {
  if (threads)
    return std::make_unique<CpuBackend>(2);
  return std::make_unique<HostBackend>(2, 3);
}

/// The side work of `device` named `name`.
std::vector<TimelineEvent> sideWorkNamed(const Timeline &timeline,
                                         unsigned device,
                                         const std::string &name) {
  std::vector<TimelineEvent> named;
  for (const TimelineEvent &work : timeline.sideWork(device))
    if (work.name == name)
      named.push_back(work);
  return named;
}

TEST(SideWork, GradientsAreOverwrittenAndPackingLiesInWaits) {
  for (bool threads : {true, false}) {
    SCOPED_TRACE(threads ? "CpuBackend" : "HostBackend");
    auto executor = twoSteps(mlpGraph(kRows, 64), backendOf(threads));
    ASSERT_TRUE(executor);
    const Timeline &timeline = executor->timeline();
    ASSERT_EQ(timeline.numDevices(), 2u);
    double sideUs = 0;
    for (unsigned d = 0; d < 2; ++d) {
      SCOPED_TRACE("device " + std::to_string(d));
      const std::vector<TimelineEvent> &lane = timeline.lane(d);
      for (const TimelineEvent &work : timeline.sideWork(d)) {
        EXPECT_TRUE(work.compute);
        sideUs += work.durationUs;
        // Every gradient is written by its backward: nothing is zeroed.
        EXPECT_EQ(work.name, "pack weights ahead");
        EXPECT_TRUE(threads) << "only the CPU backend packs";
        const double end = work.startUs + work.durationUs;
        EXPECT_TRUE(std::any_of(lane.begin(), lane.end(),
                                [&](auto &wait) {
                                  return !wait.compute &&
                                         wait.startUs <= work.startUs &&
                                         end <= wait.startUs + wait.durationUs;
                                }))
            << "packing at " << work.startUs << " is in no wait";
      }
    }
    // The bubble counts side work as compute.
    double instructionsUs = 0;
    for (unsigned d = 0; d < 2; ++d)
      for (const TimelineEvent &event : timeline.lane(d))
        if (event.compute)
          instructionsUs += event.durationUs;
    EXPECT_NEAR(timeline.bubbleFraction(),
                1.0 - (instructionsUs + sideUs) / (2 * timeline.spanUs()),
                1e-9);
  }
}

TEST(SideWork, AGradientNoBackwardWritesIsZeroedBeforeTheOptimizerSteps) {
  // A parameter of the last stage that the forward never reads: no backward
  // writes its gradient, which the optimizer reads all the same.
  ModelGraph graph = mlpGraph(kRows, 64);
  graph.param("spare.w", {3, 4}, InitKind::GlorotUniform);
  for (bool threads : {true, false}) {
    SCOPED_TRACE(threads ? "CpuBackend" : "HostBackend");
    auto executor = twoSteps(graph, backendOf(threads));
    ASSERT_TRUE(executor);
    const Timeline &timeline = executor->timeline();
    ASSERT_EQ(timeline.numDevices(), 2u);
    EXPECT_TRUE(sideWorkNamed(timeline, 0, "zero gradients").empty());
    std::vector<TimelineEvent> zeroings =
        sideWorkNamed(timeline, 1, "zero gradients");
    ASSERT_EQ(zeroings.size(), 1u);
    const std::vector<TimelineEvent> &lane = timeline.lane(1);
    auto step = std::find_if(lane.begin(), lane.end(), [](auto &e) {
      return e.name == "optimizer step";
    });
    ASSERT_NE(step, lane.end());
    EXPECT_LE(zeroings[0].startUs + zeroings[0].durationUs, step->startUs);
    for (const TimelineEvent &event : lane)
      if (event.name == "backward") {
        EXPECT_LE(event.startUs + event.durationUs, zeroings[0].startUs);
      }
    std::vector<float> gradient;
    ASSERT_EQ(executor->gradient("spare.w", gradient), "");
    ASSERT_EQ(gradient.size(), 12u);
    for (float g : gradient)
      EXPECT_EQ(g, 0.0f);
  }
}

} // namespace
