//===- StageWeightsTest.cpp - The partitioner's weights per stage ---------===//
//
// Each expectation is counted by hand from the schedule's compute order: a
// backward recomputes unless it runs right after its own forward (or its
// values are kept by the policy); the steps are timed by hand.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/StageWeights.h"

#include <gtest/gtest.h>

#include <vector>

using namespace gpipe;
using namespace gpipe::schedule;

namespace {

using Counts = std::vector<unsigned>;

PipelineShape shapeOf(ScheduleKind kind, unsigned numDevices,
                      unsigned numMicrobatches, KeepPolicy keep,
                      unsigned numVirtualStages = 1) {
  return {kind, numDevices, numMicrobatches, numVirtualStages, keep};
}

// GPipe's order, F0..F7 then B7..B0: only B7 follows its own forward, on
// every device, so the weights are equal and change no partition.
TEST(StageWeights, GPipeOrderRecomputesAlikeEverywhere) {
  EXPECT_EQ(
      recomputesPerStage(shapeOf(ScheduleKind::GPipe, 2, 8, KeepPolicy::None)),
      (Counts{7, 7}));
  EXPECT_EQ(
      recomputesPerStage(shapeOf(ScheduleKind::GPipe, 3, 1, KeepPolicy::None)),
      (Counts{0, 0, 0}));
}

// 1F1B at K = 2: device 0 runs F0 F1 B0 F2 B1 ... F7 B6 B7, no backward
// right after its forward; device 1 runs F0 B0 F1 B1 ..., every one.
TEST(StageWeights, OneFOneBLastDeviceNeverRecomputes) {
  EXPECT_EQ(recomputesPerStage(
                shapeOf(ScheduleKind::OneFOneB, 2, 8, KeepPolicy::None)),
            (Counts{8, 0}));
  // K = 3, M = 4: device 0 F0 F1 F2 B0 F3 B1 B2 B3, device 1 F0 F1 B0 F2 B1
  // F3 B2 B3 (B3 follows B2, not F3).
  EXPECT_EQ(recomputesPerStage(
                shapeOf(ScheduleKind::OneFOneB, 3, 4, KeepPolicy::None)),
            (Counts{4, 4, 0}));
  // Except-last keeps each stage's last forward (F7 on device 0).
  EXPECT_EQ(recomputesPerStage(
                shapeOf(ScheduleKind::OneFOneB, 2, 8, KeepPolicy::Last)),
            (Counts{7, 0}));
  EXPECT_EQ(recomputesPerStage(
                shapeOf(ScheduleKind::OneFOneB, 2, 8, KeepPolicy::All)),
            (Counts{0, 0}));
}

// ZB-H1 orders F and B as 1F1B does and puts each W(m) after B(m + s) on
// device s: the last device (s = 2) runs F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 ...,
// so B(m) still follows F(m) there, and nowhere else.
TEST(StageWeights, ZeroBubbleLikeOneFOneB) {
  EXPECT_EQ(recomputesPerStage(
                shapeOf(ScheduleKind::ZeroBubbleH1, 3, 4, KeepPolicy::None)),
            (Counts{4, 4, 0}));
}

// Interleaved, K = 2, V = 2, M = 4: device 1 runs F0.0 F1.0 F0.1 B0.1 F1.1
// B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0 (m.v): its second
// stage, the pipeline's last, never recomputes; its first always does.
TEST(StageWeights, InterleavedLastStageNeverRecomputes) {
  EXPECT_EQ(recomputesPerStage(
                shapeOf(ScheduleKind::Interleaved, 2, 4, KeepPolicy::None, 2)),
            (Counts{4, 4, 4, 0}));
}

// In half forwards: 6 per micro-batch, plus the price of each recompute.
TEST(StageWeights, WeightsPriceEachRecompute) {
  PipelineShape shape = shapeOf(ScheduleKind::OneFOneB, 2, 8, KeepPolicy::None);
  EXPECT_EQ(stageWorkWeights(shape, 2), (std::vector<uint64_t>{64, 48}));
  EXPECT_EQ(stageWorkWeights(shape, 1), (std::vector<uint64_t>{56, 48}));
  EXPECT_EQ(stageWorkWeights(shape, 0), (std::vector<uint64_t>{48, 48}));
}

// K = 2, M = 2, forwards of 1, backwards of 2, transfers free.
// 1F1B: device 1 F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] (no recomputes);
// device 0 F0 [0,1] F1 [1,2], recomputes before each wait: R0 [2,3]
// B0 [4,6] R1 [6,7] B1 [7,9]. GPipe: device 1 F0 [1,2] F1 [2,3] B1 [3,5]
// R0 [5,6] B0 [6,8]; device 0 B1 [5,7] (after F1, kept) R0 [7,8] B0 [8,10].
TEST(StageWeights, SimulatedStepTimedByHand) {
  EXPECT_DOUBLE_EQ(
      simulatedStepOfCells(
          shapeOf(ScheduleKind::OneFOneB, 2, 2, KeepPolicy::None), {1, 1}),
      9);
  EXPECT_DOUBLE_EQ(
      simulatedStepOfCells(shapeOf(ScheduleKind::GPipe, 2, 2, KeepPolicy::None),
                           {1, 1}),
      10);
  // Device 1 twice as slow under 1F1B: F0 [1,3] B0 [3,7] F1 [7,9]
  // B1 [9,13]; device 0 R0 [2,3] B0 [7,9] R1 [9,10] B1 [13,15].
  EXPECT_DOUBLE_EQ(
      simulatedStepOfCells(
          shapeOf(ScheduleKind::OneFOneB, 2, 2, KeepPolicy::None), {1, 2}),
      15);
}

} // namespace
