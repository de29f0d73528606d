//===- KeptForwardValuesTest.cpp - Which backwards recompute --------------===//
//
// The rule of KeptForwardValues.h on the built-in schedules, against what
// each schedule's compute order says by hand: a backward right after its own
// forward keeps the values; a gradient receive before a recomputing
// backward waits after the recompute.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/verify/KeptForwardValues.h"

#include "OneRowSpec.h"
#include "gpipe/Analysis/ScheduleKinds.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace gpipe;
using namespace gpipe::schedule;
using runtime::ComputeRole;
using runtime::KeptBeyondAdjacent;

namespace {

Program scheduleOf(ScheduleKind kind, unsigned numStages,
                   unsigned numMicrobatches) {
  return buildSchedule(oneRowSpec(numStages, numMicrobatches), kind);
}

ComputeRole roleOf(const Instr &instr) {
  ComputeRole role;
  role.stage = instr.stage;
  role.microbatch = instr.microbatch;
  if (instr.kind == InstrKind::Forward)
    role.kind = ComputeRole::Forward;
  else if (instr.kind == InstrKind::Backward)
    role.kind = ComputeRole::Backward;
  else if (instr.kind == InstrKind::BackwardWeights ||
           instr.kind == InstrKind::OptimizerStep)
    role.kind = ComputeRole::OtherCompute;
  return role;
}

/// Device d's kept flags for its stage d, as "0110...".
std::string keptOf(const Program &program, unsigned d,
                   KeptBeyondAdjacent beyond) {
  unsigned numStages = unsigned(program.devices.size());
  auto kept =
      runtime::keptForwardValues(program.devices[d].instrs, numStages,
                                 program.numMicrobatches, beyond, roleOf);
  std::string flags;
  for (char k : kept[d])
    flags += k ? '1' : '0';
  return flags;
}

/// The micro-batches whose gradient device d receives after recomputing.
std::vector<unsigned> recomputedWhileReceiving(const Program &program,
                                               unsigned d) {
  unsigned numStages = unsigned(program.devices.size());
  const std::vector<Instr> &instrs = program.devices[d].instrs;
  auto kept =
      runtime::keptForwardValues(instrs, numStages, program.numMicrobatches,
                                 KeptBeyondAdjacent::Nothing, roleOf);
  auto defers = runtime::recomputesWhileReceiving(
      instrs, kept, roleOf, [](const Instr &instr) {
        return instr.kind == InstrKind::Recv &&
               instr.direction == Direction::Gradient;
      });
  std::vector<unsigned> microbatches;
  for (size_t i = 0; i < instrs.size(); ++i)
    if (defers[i])
      microbatches.push_back(instrs[i].microbatch);
  return microbatches;
}

} // namespace

TEST(KeptForwardValues, GPipeKeepsTheLastMicrobatchOfEveryDevice) {
  // F0..F3 then B3..B0 on every device: B3 follows F3.
  Program program = scheduleOf(ScheduleKind::GPipe, 3, 4);
  for (unsigned d = 0; d < 3; ++d) {
    SCOPED_TRACE("device " + std::to_string(d));
    EXPECT_EQ(keptOf(program, d, KeptBeyondAdjacent::Nothing), "0001");
    EXPECT_EQ(keptOf(program, d, KeptBeyondAdjacent::LastForward), "0001");
    EXPECT_EQ(keptOf(program, d, KeptBeyondAdjacent::Everything), "1111");
  }
  // Devices 0 and 1 receive the gradients of 2, 1, 0 after recomputing;
  // the last device receives none.
  EXPECT_EQ(recomputedWhileReceiving(program, 0),
            (std::vector<unsigned>{2, 1, 0}));
  EXPECT_EQ(recomputedWhileReceiving(program, 1),
            (std::vector<unsigned>{2, 1, 0}));
  EXPECT_TRUE(recomputedWhileReceiving(program, 2).empty());
}

TEST(KeptForwardValues, OneFOneBKeepsEveryMicrobatchOfTheLastDevice) {
  // The last device alternates F m, B m. The others run other forwards or
  // backwards between a micro-batch's forward and its backward: device 0
  // runs F0 F1 F2 B0 F3 B1 B2 B3, device 1 F0 F1 B0 F2 B1 F3 B2 B3.
  Program program = scheduleOf(ScheduleKind::OneFOneB, 3, 4);
  EXPECT_EQ(keptOf(program, 2, KeptBeyondAdjacent::Nothing), "1111");
  EXPECT_EQ(keptOf(program, 1, KeptBeyondAdjacent::Nothing), "0000");
  EXPECT_EQ(keptOf(program, 0, KeptBeyondAdjacent::Nothing), "0000");
  // Except-last also keeps the last forward's micro-batch (a memory cost
  // under 1F1B: its values wait across other backwards).
  EXPECT_EQ(keptOf(program, 0, KeptBeyondAdjacent::LastForward), "0001");
  // Device 0 receives micro-batch 1's gradient, sends micro-batch 3's
  // activation, then runs B1: that receive waits in place, for a receive
  // moved past a send could deadlock two devices whose sends rendezvous.
  EXPECT_EQ(recomputedWhileReceiving(program, 0),
            (std::vector<unsigned>{0, 2, 3}));
  EXPECT_TRUE(recomputedWhileReceiving(program, 2).empty());
}

TEST(KeptForwardValues, AWeightGradientBetweenBreaksAdjacency) {
  // Two devices of ZB-H1: the last runs F m, B m, W m; device 0 defers
  // its W's, so some W or F comes between its forwards and backwards.
  Program program = scheduleOf(ScheduleKind::ZeroBubbleH1, 2, 3);
  EXPECT_EQ(keptOf(program, 1, KeptBeyondAdjacent::Nothing), "111");
  EXPECT_EQ(keptOf(program, 0, KeptBeyondAdjacent::Nothing), "000");
}

TEST(KeptForwardValues, OutOfRangeInstructionsAreIgnored) {
  std::vector<Instr> instrs(2);
  instrs[0].kind = InstrKind::Forward;
  instrs[0].microbatch = 5; // beyond the 2 micro-batches
  instrs[1].kind = InstrKind::Backward;
  instrs[1].microbatch = 5;
  auto kept = runtime::keptForwardValues(
      instrs, 1, 2, KeptBeyondAdjacent::LastForward, roleOf);
  EXPECT_EQ(kept, (std::vector<std::vector<char>>{{0, 0}}));
}
