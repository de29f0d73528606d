//===- SideWorkTest.cpp - Work of a step that is no instruction -----------===//
//
// The executor zeroes a device's gradients once per step, just before the
// device first waits or accumulates into them (so that the first stage's
// first forward no longer waits for it), and the CPU backend packs weights
// ahead only inside a device's waits; both are side work on the timeline,
// counted as compute in the bubble.
//
//===----------------------------------------------------------------------===//

#include "TestBundles.h"
#include "TestModels.h"

#include "gpipe/runtime/ProgramAnalysis.h"
#include "gpipe/runtime/device/CpuBackend.h"
#include "gpipe/runtime/device/DeviceExecutor.h"
#include "gpipe/runtime/device/HostBackend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;

namespace {

constexpr int64_t kRows = 12;

/// Two steps of the MLP, K = 2, M = 4, on CpuBackend's threads or (with a
/// schedule seed) the host emulation; the last step's timeline.
Timeline lastTimeline(std::unique_ptr<DeviceBackend> backend) {
  DeviceExecutorConfig config;
  config.seed = 5;
  std::string error;
  auto executor = DeviceExecutor::create(
      buildBundle(mlpGraph(kRows, 64), mlpSplit(2), 4, RematPolicy::None),
      std::move(backend), config, error);
  EXPECT_TRUE(executor) << error;
  if (!executor)
    return Timeline(0);
  for (uint64_t seed : {1u, 2u}) {
    StepResult step = executor->trainStep(mlpBatch(kRows, seed));
    EXPECT_TRUE(step.ok()) << step.error;
  }
  return executor->timeline();
}

TEST(SideWork, ZeroingPrecedesTheFirstWaitAndPackingLiesInWaits) {
  for (bool threads : {true, false}) {
    SCOPED_TRACE(threads ? "CpuBackend" : "HostBackend");
    Timeline timeline = lastTimeline(
        threads
            ? std::unique_ptr<DeviceBackend>(std::make_unique<CpuBackend>(2))
            : std::make_unique<HostBackend>(2, 3));
    ASSERT_EQ(timeline.numDevices(), 2u);
    double sideUs = 0;
    for (unsigned d = 0; d < 2; ++d) {
      SCOPED_TRACE("device " + std::to_string(d));
      const std::vector<TimelineEvent> &lane = timeline.lane(d);
      int zeroings = 0;
      for (const TimelineEvent &work : timeline.sideWork(d)) {
        EXPECT_TRUE(work.compute);
        sideUs += work.durationUs;
        const double end = work.startUs + work.durationUs;
        if (work.name == "zero gradients") {
          ++zeroings;
          auto first = std::find_if(lane.begin(), lane.end(), [](auto &e) {
            return e.name.rfind("recv", 0) == 0 || e.name == "backward";
          });
          ASSERT_NE(first, lane.end());
          EXPECT_LE(end, first->startUs) << "before " << first->name;
          // The first stage's forwards do not wait for it.
          auto forward = std::find_if(lane.begin(), lane.end(), [](auto &e) {
            return e.name == "forward";
          });
          if (d == 0) {
            ASSERT_NE(forward, lane.end());
            EXPECT_GE(work.startUs, forward->startUs + forward->durationUs);
          }
          continue;
        }
        EXPECT_EQ(work.name, "pack weights ahead");
        EXPECT_TRUE(threads) << "only the CPU backend packs";
        EXPECT_TRUE(std::any_of(lane.begin(), lane.end(),
                                [&](auto &wait) {
                                  return !wait.compute &&
                                         wait.startUs <= work.startUs &&
                                         end <= wait.startUs + wait.durationUs;
                                }))
            << "packing at " << work.startUs << " is in no wait";
      }
      EXPECT_EQ(zeroings, 1);
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

} // namespace
