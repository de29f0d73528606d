//===- CellMemoryPlannerTest.cpp - Joined one-layer stages plan like cells -===//

#include "gpipe/Analysis/CellMemoryPlanner.h"

#include <gtest/gtest.h>

using namespace gpipe;

namespace {

// The chain x -> a = f(x) -> b = f(a) -> loss(b, t) of MemoryPlannerTest,
// written once as one stage and once as two stages cut after a. Every value
// is 10 bytes per row; the loss 4 bytes; g has 5 bytes per row of scratch.
// Buffers take whole 16-byte granules (kBufferGranule).

/// ids: 0 x, 1 t, 2 a, 3 b, 4 loss, 5 d_b, 6 d_a, 7 d_x
PlannedStage wholeChain() {
  PlannedStage s;
  s.values = {{0, 10}, {0, 10}, {0, 10}, {0, 10},
              {4, 0},  {0, 10}, {0, 10}, {0, 10}};
  s.inputs = {0, 1};
  s.inputChannels = {~0u, ~0u};
  s.inputNames = {"x", "t"};
  s.loss = 4;
  s.forward = {
      {{0}, {2}, {}, "f"}, {{2}, {3}, {}, "f"}, {{3, 1}, {4}, {}, "loss"}};
  s.recompute = s.forward;
  s.backward = {{{3, 1}, {5}, {}, "loss_grad"},
                {{5, 2}, {6}, {0, 5}, "g"},
                {{6, 0}, {7}, {}, "g"}};
  s.residentBytes = 1000;
  return s;
}

/// Stage 0, ids: 0 x, 1 a, 2 d_a (received), 3 d_x. Sends a on channel 0.
PlannedStage firstHalf() {
  PlannedStage s;
  s.values = {{0, 10}, {0, 10}, {0, 10}, {0, 10}};
  s.inputs = {0};
  s.inputChannels = {~0u};
  s.inputNames = {"x"};
  s.outputs = {1};
  s.forward = {{{0}, {1}, {}, "f"}};
  s.recompute = s.forward;
  s.backward = {{{2, 0}, {3}, {}, "g"}};
  s.outputGrads = {2};
  s.residentBytes = 600;
  return s;
}

/// Stage 1, ids: 0 a (received on channel 0), 1 t, 2 b, 3 loss, 4 d_b,
/// 5 d_a (sent back on channel 0).
PlannedStage secondHalf() {
  PlannedStage s;
  s.values = {{0, 10}, {0, 10}, {0, 10}, {4, 0}, {0, 10}, {0, 10}};
  s.inputs = {0, 1};
  s.inputChannels = {0, ~0u};
  s.inputNames = {"", "t"};
  s.loss = 3;
  s.forward = {{{0}, {2}, {}, "f"}, {{2, 1}, {3}, {}, "loss"}};
  s.recompute = s.forward;
  s.backward = {{{2, 1}, {4}, {}, "loss_grad"}, {{4, 0}, {5}, {0, 5}, "g"}};
  s.inputGrads = {5};
  s.residentBytes = 400;
  return s;
}

DeviceMemoryPlan planAlone(const PlannedStage &stage, KeepPolicy keep,
                           unsigned microbatches) {
  std::vector<std::vector<PlannedInstr>> programs =
      pipelineInstructions({stage}, 4, microbatches);
  EXPECT_EQ(programs.size(), 1u);
  DeviceProgram program{{stage}, programs.at(0), {}, keep};
  program.microbatchRows.assign(microbatches, 4 / microbatches);
  DeviceMemoryPlan plan;
  EXPECT_EQ(planDeviceMemory(program, plan), "");
  return plan;
}

TEST(JoinStages, TwoHalvesPlanLikeTheWholeChain) {
  std::vector<PlannedStage> halves = {firstHalf(), secondHalf()};
  PlannedStage joined = joinStages(halves, 0, 2);
  EXPECT_EQ(joined.residentBytes, 1000);
  EXPECT_EQ(joined.inputs.size(), 2u);
  EXPECT_TRUE(joined.outputs.empty());
  EXPECT_TRUE(joined.inputGrads.empty());
  EXPECT_EQ(joined.forward.size(), 3u);
  EXPECT_EQ(joined.backward.size(), 3u);
  for (KeepPolicy keep : {KeepPolicy::All, KeepPolicy::None, KeepPolicy::Last})
    for (unsigned m : {1u, 2u, 4u}) {
      DeviceMemoryPlan whole = planAlone(wholeChain(), keep, m);
      DeviceMemoryPlan fromHalves = planAlone(joined, keep, m);
      EXPECT_EQ(fromHalves.peakBytes, whole.peakBytes) << "M=" << m;
      EXPECT_EQ(fromHalves.arenaBytes, whole.arenaBytes) << "M=" << m;
    }
  // Hand-counted in MemoryPlannerTest (2 rows per micro-batch, M = 2).
  EXPECT_EQ(planAlone(joined, KeepPolicy::All, 2).peakBytes, 1000 + 288);
  EXPECT_EQ(planAlone(joined, KeepPolicy::None, 2).peakBytes, 1000 + 224);
}

// Each stage recomputes only what its own backward reads: the first half's
// g reads x, so it recomputes nothing; the second's loss_grad reads b, not
// the loss. Joined, the second half's g reads a, which the first half's
// forward defines: the cell recomputes a and b, as the whole chain does.
TEST(JoinStages, ACellRecomputesWhatItsLaterStagesRead) {
  std::vector<PlannedStage> halves = {firstHalf(), secondHalf()};
  halves[0].recompute.clear();
  halves[1].recompute = {halves[1].forward[0]};
  PlannedStage joined = joinStages(halves, 0, 2);
  ASSERT_EQ(joined.recompute.size(), 2u);
  EXPECT_EQ(joined.recompute[0].results, joined.forward[0].results);
  EXPECT_EQ(joined.recompute[1].results, joined.forward[1].results);
  EXPECT_EQ(joined.recompute[1].operands, joined.forward[0].results);

  PlannedStage whole = wholeChain();
  whole.recompute.pop_back(); // the loss
  for (KeepPolicy keep : {KeepPolicy::None, KeepPolicy::Last})
    for (unsigned m : {1u, 2u, 4u}) {
      DeviceMemoryPlan expected = planAlone(whole, keep, m);
      DeviceMemoryPlan fromHalves = planAlone(joined, keep, m);
      EXPECT_EQ(fromHalves.peakBytes, expected.peakBytes) << "M=" << m;
      EXPECT_EQ(fromHalves.arenaBytes, expected.arenaBytes) << "M=" << m;
    }

  // A second half whose gradients read only its input a (the gradient of
  // an activation that reads the activation's input) recomputes nothing;
  // joined, its backward still needs a.
  halves[1].recompute.clear();
  halves[1].backward[0].operands = {0, 1};
  PlannedStage readsInput = joinStages(halves, 0, 2);
  ASSERT_EQ(readsInput.recompute.size(), 1u);
  EXPECT_EQ(readsInput.recompute[0].results, readsInput.forward[0].results);
  for (unsigned m : {1u, 2u, 4u}) // planAlone expects no error
    EXPECT_GT(planAlone(readsInput, KeepPolicy::None, m).peakBytes, 0);
}

TEST(JoinStages, ASingleStageIsItself) {
  std::vector<PlannedStage> halves = {firstHalf(), secondHalf()};
  PlannedStage second = joinStages(halves, 1, 2);
  EXPECT_EQ(second.inputChannels, halves[1].inputChannels);
  EXPECT_EQ(second.inputGrads.size(), 1u);
  EXPECT_EQ(second.values.size(), halves[1].values.size());
}

// A cell in the middle of the pipeline receives and sends: the planner puts
// stand-ins around it, so its program has the receives and sends.
TEST(CellMemoryPlanner, CellsPlanAsTheirDevices) {
  CellMemoryPlanner planner({firstHalf(), secondHalf()}, 4, 2,
                            KeepPolicy::None);
  uint64_t whole = planner.arenaBytes(0, 2);
  EXPECT_EQ(whole, uint64_t(planAlone(wholeChain(), KeepPolicy::None, 2)
                                .arenaBytes));
  EXPECT_GE(planner.arenaBytes(0, 1), planner.peakBytes(0, 1));
  EXPECT_GT(planner.peakBytes(0, 1), 600u);
  EXPECT_GT(planner.peakBytes(1, 2), 400u);
  EXPECT_LE(planner.peakBytes(1, 2), planner.peakBytes(0, 2));
  EXPECT_EQ(planner.error(), "");

  // Stage 1 alone (20 B per value of a 2-row micro-batch, a 32 B buffer; the
  // loss and the scratch 16 B): each forward stashes a and t (64 B; b and the
  // loss die in it), peaking at 64 + 64 + b 32 + loss 16 = 176 in the
  // second. The first backward recomputes b (160; the loss comes and goes:
  // 176), adds d_b (192), frees b and t (128), adds d_a and the scratch
  // (176). Peak 400 + 192.
  DeviceMemoryPlan second;
  ASSERT_EQ(planner.plan(1, 2, second), "");
  EXPECT_EQ(second.peakBytes, 400 + 192);
}

TEST(CellMemoryPlanner, UnsplittableBatchIsAnError) {
  CellMemoryPlanner planner({firstHalf(), secondHalf()}, 4, 8,
                            KeepPolicy::None);
  EXPECT_EQ(planner.arenaBytes(0, 2), ~uint64_t(0));
  EXPECT_NE(planner.error().find("cannot be split into 8 micro-batches"),
            std::string::npos)
      << planner.error();
}

} // namespace
