//===- ScheduleSimulatorTest.cpp - The simulated step against closed forms
//-===//
//
// With K balanced stages, a forward of f and a backward of b per micro-batch
// and free transfers, GPipe and 1F1B both take (M + K - 1)(f + b) and idle
// (K - 1)/(M + K - 1) of the time: the simulator must give exactly that.
// Transfers, recomputation, the optimizer step and the host overhead are
// checked on programs small enough to time by hand; shared processors
// against the serial sum of the work.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/ScheduleSimulator.h"
#include "gpipe/Analysis/ScheduleKinds.h"

#include "OneRowSpec.h"

#include <gtest/gtest.h>

#include <limits>

#include <string>
#include <vector>

using namespace gpipe;
using namespace gpipe::schedule;

namespace {

PipelineSpec makeSpec(unsigned numStages, unsigned numMicrobatches) {
  return oneRowSpec(numStages, numMicrobatches);
}

SimulationCosts balanced(unsigned numStages, double forward, double backward) {
  SimulationCosts costs;
  StageCosts device;
  device.forwardPerRow = forward;
  device.backwardPerRow = backward;
  costs.stages.assign(numStages, device);
  return costs;
}

Simulation simulate(const Program &program, const SimulationCosts &costs) {
  SimulationResult result = simulateSchedule(program, costs);
  EXPECT_EQ(result.error, "");
  return result.simulation;
}

} // namespace

TEST(ScheduleSimulator, BalancedStagesMatchTheClosedForm) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (unsigned k : {1u, 2u, 3u, 4u, 8u})
      for (unsigned m : {1u, 2u, 3u, 8u, 16u}) {
        SCOPED_TRACE(std::string(scheduleKindName(kind)) +
                     " K=" + std::to_string(k) + " M=" + std::to_string(m));
        Simulation simulation =
            simulate(buildSchedule(makeSpec(k, m), kind), balanced(k, 1, 2));
        EXPECT_DOUBLE_EQ(simulation.makespanUs, (m + k - 1) * 3.0);
        EXPECT_NEAR(simulation.bubbleFraction, idealBubbleFraction(k, m),
                    1e-12);
        EXPECT_DOUBLE_EQ(simulation.stepUs, simulation.makespanUs);
      }
}

TEST(ScheduleSimulator, ZeroBubbleH1MatchesThePapersBubble) {
  // Qi et al. (2023), ZB-H1: with M >= K the step is M (F + B + W) plus a
  // bubble of (K - 1)(F + B - W), against 1F1B's (K - 1)(F + B + W). Here
  // F = B = W = 1 (backward 2, half of it W): 3M + K - 1, and 3(M + K - 1)
  // for 1F1B, so the bubble is (K - 1)/(3M + K - 1), a third of 1F1B's as
  // M grows.
  for (unsigned k : {1u, 2u, 3u, 4u, 8u})
    for (unsigned m : {1u, 2u, 3u, 4u, 8u, 16u, 32u}) {
      if (m < k)
        continue;
      SCOPED_TRACE("K=" + std::to_string(k) + " M=" + std::to_string(m));
      Simulation simulation =
          simulate(buildSchedule(makeSpec(k, m), ScheduleKind::ZeroBubbleH1),
                   balanced(k, 1, 2));
      EXPECT_DOUBLE_EQ(simulation.makespanUs, 3.0 * m + k - 1);
      EXPECT_NEAR(simulation.bubbleFraction,
                  double(k - 1) / double(3 * m + k - 1), 1e-12);
    }
  // A third of 1F1B's bubble, approached from above: at K = 4, M = 8,
  // 3/27 against 9/33, 11/27 of it.
  Simulation zb =
      simulate(buildSchedule(makeSpec(4, 8), ScheduleKind::ZeroBubbleH1),
               balanced(4, 1, 2));
  EXPECT_NEAR(zb.bubbleFraction / idealBubbleFraction(4, 8), 11.0 / 27.0,
              1e-12);
}

TEST(ScheduleSimulator, InterleavedCutsTheBubbleByTheVirtualStages) {
  // Narayanan et al. (2021): K devices, each running V stages of f/V and
  // b/V, idle (K - 1)(f + b)/V of a step of M (f + b) plus that, so the
  // bubble is (K - 1)/(V M + K - 1) when K divides M.
  for (unsigned k : {2u, 3u, 4u})
    for (unsigned v : {1u, 2u, 3u, 4u})
      for (unsigned m : {k, 2 * k, 4 * k}) {
        SCOPED_TRACE("K=" + std::to_string(k) + " V=" + std::to_string(v) +
                     " M=" + std::to_string(m));
        PipelineSpec spec = makeSpec(k * v, m);
        spec.numVirtualStages = v;
        Simulation simulation =
            simulate(buildSchedule(spec, ScheduleKind::Interleaved),
                     balanced(k * v, 1.0 / v, 2.0 / v));
        double bubble = (k - 1) * 3.0 / v;
        EXPECT_NEAR(simulation.makespanUs, m * 3.0 + bubble, 1e-9);
        EXPECT_NEAR(simulation.bubbleFraction, idealBubbleFraction(k, m, v),
                    1e-12);
      }
}

// A wait for a send stalls its device only until the peer has received the
// message: a wider window never makes the step longer, one that holds every
// send to a peer gives the step of sends that never wait, and under GPipe,
// whose receivers take each message as soon as it is produced, no window
// costs anything.
TEST(ScheduleSimulator, SendWindowsStallOnlyWhereTheReceiverIsBehind) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::ZeroBubbleH1})
    for (unsigned k : {2u, 4u}) {
      SCOPED_TRACE(std::string(scheduleKindName(kind)) +
                   " K=" + std::to_string(k));
      const unsigned m = 8;
      const SimulationCosts costs = balanced(k, 1, 2);
      const double unbounded =
          simulate(buildSchedule(makeSpec(k, m), kind), costs).makespanUs;
      double previous = std::numeric_limits<double>::infinity();
      for (unsigned window : {1u, 2u, 4u, 8u}) {
        Program program = buildSchedule(makeSpec(k, m), kind);
        placeSendWaits(program, window);
        double step = simulate(program, costs).makespanUs;
        EXPECT_GE(step, unbounded - 1e-9) << "window " << window;
        EXPECT_LE(step, previous + 1e-9) << "window " << window;
        if (kind == ScheduleKind::GPipe || window == m)
          EXPECT_DOUBLE_EQ(step, unbounded) << "window " << window;
        previous = step;
      }
    }
}

/// The compute events of a lane, in order: name and duration.
static std::vector<std::pair<std::string, double>>
computeEvents(const std::vector<SimulatedEvent> &lane) {
  std::vector<std::pair<std::string, double>> computed;
  for (const SimulatedEvent &event : lane)
    if (event.compute)
      computed.push_back({event.name, event.durationUs});
  return computed;
}

TEST(ScheduleSimulator, SplitBackwardsShareTheBackwardsCost) {
  // One device, two micro-batches of ZB-H1 (F0 B0 W0 F1 B1 W1, K = 1): B and
  // W share a backward of 10 by weightShare. Under full remat each B
  // follows its own F, whose values it keeps: nothing is recomputed.
  Program program = buildSchedule(makeSpec(1, 2), ScheduleKind::ZeroBubbleH1);
  SimulationCosts costs = balanced(1, 4, 10);
  costs.stages[0].weightShare = 0.3;
  costs.stages[0].recomputePerRow = 2;
  costs.keep = KeepPolicy::None;
  auto computed = computeEvents(simulate(program, costs).lanes[0]);
  ASSERT_EQ(computed.size(), 7u);
  for (unsigned m = 0; m < 2; ++m) {
    EXPECT_EQ(computed[3 * m], (std::pair<std::string, double>{"forward", 4}));
    EXPECT_EQ(computed[3 * m + 1].first, "backward");
    EXPECT_DOUBLE_EQ(computed[3 * m + 1].second, 0.7 * 10);
    EXPECT_EQ(computed[3 * m + 2].first, "backward weights");
    EXPECT_DOUBLE_EQ(computed[3 * m + 2].second, 0.3 * 10);
  }
  EXPECT_EQ(computed[6].first, "optimizer step");

  // GPipe's order (F0 F1 B1 B0): B0 recomputes, an event of its own before
  // the backward, as in the runtime's timeline.
  costs.stages[0].weightShare = 0;
  computed = computeEvents(
      simulate(buildSchedule(makeSpec(1, 2), ScheduleKind::GPipe), costs)
          .lanes[0]);
  std::vector<std::pair<std::string, double>> expected = {
      {"forward", 4},   {"forward", 4},   {"backward", 10},
      {"recompute", 2}, {"backward", 10}, {"optimizer step", 0}};
  EXPECT_EQ(computed, expected);
}

TEST(ScheduleSimulator, TransfersRecomputationOptimizerAndHost) {
  // K = 2, M = 2 under GPipe, rows 1; forward 10, backward 20, recompute
  // 5, send 1 + 32 bytes x 0.25, latency 2, optimizer 7, host 100.
  SimulationCosts costs = balanced(2, 10, 20);
  for (StageCosts &device : costs.stages) {
    device.recomputePerRow = 5;
    device.sendFixed = 1;
    device.sendPerByte = 0.25;
    device.optimizerStep = 7;
  }
  costs.latency = 2;
  costs.stepOverhead = 100;
  costs.keep = KeepPolicy::None; // full remat
  Program program = buildSchedule(makeSpec(2, 2), ScheduleKind::GPipe);
  Simulation simulation = simulate(program, costs);
  // A send of 1 x 8 floats takes 1 + 32 x 0.25 = 9 and arrives 2 later:
  //  device 0: F0 [0,10] F1 [10,20]; sends [10,19] [20,29], arrive 21, 31.
  //  device 1: F0 [21,31] F1 [31,41] B1 [41,61] (kept: it follows F1)
  //            B0 recomputes [61,66], then [66,86]; gradient sends [61,70]
  //            and [86,95].
  //  device 0: B1 waits for 72, [72,92] (kept); B0 recomputes [92,97]
  //            while its gradient travels, which arrives at 97; B0
  //            [97,117]; optimizer [117,124].
  //  device 1: optimizer [86,93].
  EXPECT_DOUBLE_EQ(simulation.makespanUs, 124);
  EXPECT_DOUBLE_EQ(simulation.stepUs, 224);
  std::vector<std::string> device0;
  for (const SimulatedEvent &event : simulation.lanes[0])
    if (event.startUs >= 92)
      device0.push_back(event.name + " " + std::to_string(event.startUs));
  EXPECT_EQ(device0, (std::vector<std::string>{
                         "recompute 92.000000", "recv gradient 97.000000",
                         "backward 97.000000", "optimizer step 117.000000"}));
  // Except-last keeps the same micro-batches in GPipe's order.
  costs.keep = KeepPolicy::Last;
  EXPECT_DOUBLE_EQ(simulate(program, costs).makespanUs, 124);
  const std::vector<SimulatedEvent> &device1 = simulation.lanes[1];
  ASSERT_FALSE(device1.empty());
  EXPECT_EQ(device1.front().name, "recv activation");
  EXPECT_DOUBLE_EQ(device1.front().durationUs, 21); // the wait for F0
  double busy = 0;
  for (const std::vector<SimulatedEvent> &lane : simulation.lanes)
    for (const SimulatedEvent &event : lane)
      if (event.compute)
        busy += event.durationUs;
  // Each device: 10 + 10 + 20 + 25 + 7.
  EXPECT_DOUBLE_EQ(busy, 72 + 72);
  EXPECT_DOUBLE_EQ(simulation.bubbleFraction, 1.0 - 144.0 / (2 * 124.0));
}

TEST(ScheduleSimulator, ASlowStageBoundsBothSchedules) {
  // The middle of three stages takes 3 per forward and 6 per backward, the
  // others 1 and 2, so it sets the pace: it starts when the first
  // activation arrives (1) and device 0's last backward (2) follows its
  // own. Under GPipe it also waits while device 2 turns the last forward
  // into a gradient (1 + 2): 9M + 6. Under 1F1B it runs its next forward
  // meanwhile: 9M + 3.
  for (unsigned m : {2u, 4u, 8u}) {
    SimulationCosts costs = balanced(3, 1, 2);
    costs.stages[1].forwardPerRow = 3; // a slow middle stage
    costs.stages[1].backwardPerRow = 6;
    double gpipe =
        simulate(buildSchedule(makeSpec(3, m), ScheduleKind::GPipe), costs)
            .makespanUs;
    double oneFOneB =
        simulate(buildSchedule(makeSpec(3, m), ScheduleKind::OneFOneB), costs)
            .makespanUs;
    EXPECT_DOUBLE_EQ(gpipe, m * 9.0 + 6.0) << "M=" << m;
    EXPECT_DOUBLE_EQ(oneFOneB, m * 9.0 + 3.0) << "M=" << m;
  }
}

TEST(ScheduleSimulator, DevicesSharingProcessors) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (unsigned k : {2u, 3u, 4u})
      for (unsigned m : {1u, 3u, 8u}) {
        SCOPED_TRACE(std::string(scheduleKindName(kind)) +
                     " K=" + std::to_string(k) + " M=" + std::to_string(m));
        Program program = buildSchedule(makeSpec(k, m), kind);
        SimulationCosts costs = balanced(k, 1, 2);
        double alone = simulate(program, costs).makespanUs;
        // One processor runs all K x M x (1 + 2) of work, one thing at a
        // time, and some device always has work ready (the producer of
        // whatever the others wait for): exactly the sum.
        costs.processors = 1;
        Simulation shared = simulate(program, costs);
        EXPECT_DOUBLE_EQ(shared.makespanUs, k * m * 3.0);
        EXPECT_NEAR(shared.bubbleFraction, 1.0 - 1.0 / k, 1e-12);
        // As many processors as devices: nobody waits for one.
        costs.processors = k;
        EXPECT_DOUBLE_EQ(simulate(program, costs).makespanUs, alone);
      }
}

TEST(ScheduleSimulator, Errors) {
  Program program = buildSchedule(makeSpec(2, 2), ScheduleKind::GPipe);
  EXPECT_EQ(simulateSchedule(program, balanced(3, 1, 1)).error,
            "expected the costs of 2 stage(s), got 3");
  // An instruction of a stage the program does not have.
  Program named = buildSchedule(makeSpec(2, 2), ScheduleKind::GPipe);
  named.devices[1].instrs[1].stage = 7;
  EXPECT_EQ(simulateSchedule(named, balanced(2, 1, 1)).error,
            "device 1's " + describe(named.devices[1].instrs[1]) +
                " names stage 7 of 2");
  // Device 1 waits for an activation device 0 never sends; device 0 waits
  // for a gradient device 1 cannot send.
  program.devices[0].instrs.erase(program.devices[0].instrs.begin() + 2);
  EXPECT_EQ(simulateSchedule(program, balanced(2, 1, 1)).error,
            "the program cannot finish: device 0 waits at op #5 (recv "
            "gradient from device 1, micro-batch 1, channel 0); device 1 "
            "waits at op #0 (recv activation from device 0, micro-batch 0, "
            "channel 0)");
}

TEST(ScheduleSimulator, TransferBytesFollowTheElementType) {
  Instr instr;
  instr.shape = {3, 5};
  instr.elementType = "f32";
  EXPECT_EQ(transferBytes(instr), 60);
  instr.elementType = "bf16";
  EXPECT_EQ(transferBytes(instr), 30);
  instr.elementType = "i64";
  EXPECT_EQ(transferBytes(instr), 120);
}
