//===- ScheduleKindsTest.cpp - 1F1B, user compute orders, their programs --===//
//
// The compute orders are checked against the schedules' definitions written
// out by hand, the programs built from them against the independent
// verifier (verifySchedule, which simulates rendezvous sends), and the
// in-flight micro-batches (the memory 1F1B exists to save) are counted from
// the programs.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/Analysis/ScheduleText.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace gpipe::schedule;

namespace {

PipelineSpec makeSpec(unsigned numStages, unsigned numMicrobatches,
                      int64_t batchSize, unsigned channels = 1) {
  PipelineSpec spec;
  spec.numStages = numStages;
  spec.numMicrobatches = numMicrobatches;
  spec.batchSize = batchSize;
  spec.boundaries.resize(numStages - 1);
  for (auto &boundary : spec.boundaries)
    for (unsigned c = 0; c < channels; ++c)
      boundary.push_back({{batchSize, 8}, "f32"});
  spec.stageInputs.resize(numStages);
  spec.stageInputs[0].push_back("x");
  spec.stageInputs[numStages - 1].push_back("labels");
  return spec;
}

std::string dump(const std::vector<Violation> &violations) {
  std::string text;
  for (const Violation &v : violations)
    text += "[" + std::to_string(v.device) + "#" +
            std::to_string(v.instrIndex) + "] " + v.message + "\n";
  return text;
}

/// The device's program as one line of short names: "x0 F0 >a0 <g0 B0 step"
/// (load, compute, send, recv; a = activation, g = gradient; channel 0
/// only).
std::string shorthand(const DeviceProgram &device) {
  std::string text;
  for (const Instr &instr : device.instrs) {
    if (!text.empty())
      text += ' ';
    std::string m = std::to_string(instr.microbatch);
    const char *tensor = instr.direction == Direction::Activation ? "a" : "g";
    switch (instr.kind) {
    case InstrKind::LoadInput:
      text += instr.inputName + m;
      break;
    case InstrKind::Forward:
      text += "F" + m;
      break;
    case InstrKind::Backward:
      text += "B" + m;
      break;
    case InstrKind::BackwardWeights:
      text += "W" + m;
      break;
    case InstrKind::Send:
      text += ">" + std::string(tensor) + m;
      break;
    case InstrKind::Recv:
      text += "<" + std::string(tensor) + m;
      break;
    case InstrKind::WaitSend:
      text += "w" + std::string(tensor) + m;
      break;
    case InstrKind::OptimizerStep:
      text += "step";
      break;
    }
  }
  return text;
}

/// The most micro-batches whose forward has run and whose backward has not
/// (whose weight-gradient backward has not, when the device splits them), at
/// any point of the device's program: what it holds for them.
unsigned maxInFlight(const DeviceProgram &device) {
  bool splits = false;
  for (const Instr &instr : device.instrs)
    splits |= instr.kind == InstrKind::BackwardWeights;
  const InstrKind last =
      splits ? InstrKind::BackwardWeights : InstrKind::Backward;
  unsigned live = 0, most = 0;
  for (const Instr &instr : device.instrs) {
    if (instr.kind == InstrKind::Forward)
      most = std::max(most, ++live);
    else if (instr.kind == last)
      --live;
  }
  return most;
}

ComputeOrder parse(const char *text) {
  ComputeOrder order;
  std::string error = parseComputeOrder(text, order);
  EXPECT_EQ(error, "");
  return order;
}

} // namespace

TEST(ScheduleKindNames, RoundTrip) {
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZeroBubbleH1,
        ScheduleKind::Interleaved})
    EXPECT_EQ(parseScheduleKind(scheduleKindName(kind)), kind);
  EXPECT_EQ(std::string(scheduleKindName(ScheduleKind::OneFOneB)), "1f1b");
  EXPECT_FALSE(parseScheduleKind("pipedream"));
  EXPECT_FALSE(parseScheduleKind(""));
}

TEST(ScheduleKindOrders, OneFOneBWarmsUpThenAlternates) {
  // K = 4, M = 6: device s runs K-s-1 forwards first.
  ComputeOrder order = computeOrderOf(ScheduleKind::OneFOneB, 4, 6);
  EXPECT_EQ(printComputeOrder(order),
            "device 0: F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5\n"
            "device 1: F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5\n"
            "device 2: F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5\n"
            "device 3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5\n");
}

TEST(ScheduleKindOrders, OneFOneBWithFewerMicrobatchesThanStages) {
  // M < K: the warm-up min(K-s-1, M) is capped at M, so devices 0 and 1
  // run every forward first, as GPipe does (but drain in order).
  EXPECT_EQ(printComputeOrder(computeOrderOf(ScheduleKind::OneFOneB, 4, 2)),
            "device 0: F0 F1 B0 B1\n"
            "device 1: F0 F1 B0 B1\n"
            "device 2: F0 F1 B0 B1\n"
            "device 3: F0 B0 F1 B1\n");
}

TEST(ScheduleKindOrders, ZeroBubbleH1DefersEachDevicesWeightsByItsIndex) {
  // 1F1B's F and B (compare OneFOneBWarmsUpThenAlternates); device s runs
  // W(m) right after B(m + s) and its last s W's at the end.
  EXPECT_EQ(
      printComputeOrder(computeOrderOf(ScheduleKind::ZeroBubbleH1, 4, 6)),
      "device 0: F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5\n"
      "device 1: F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 B4 W3 B5 W4 W5\n"
      "device 2: F0 F1 B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 B5 W3 W4 W5\n"
      "device 3: F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5\n");
  // M < K: device 3 defers more W's than there are micro-batches.
  EXPECT_EQ(printComputeOrder(computeOrderOf(ScheduleKind::ZeroBubbleH1, 4, 2)),
            "device 0: F0 F1 B0 W0 B1 W1\n"
            "device 1: F0 F1 B0 B1 W0 W1\n"
            "device 2: F0 F1 B0 B1 W0 W1\n"
            "device 3: F0 B0 F1 B1 W0 W1\n");
}

TEST(ScheduleKindOrders, GPipeIsFillThenReversedDrain) {
  EXPECT_EQ(printComputeOrder(computeOrderOf(ScheduleKind::GPipe, 2, 3)),
            "device 0: F0 F1 F2 B2 B1 B0\n"
            "device 1: F0 F1 F2 B2 B1 B0\n");
}

TEST(ScheduleKindPrograms, OneFOneBTwoStagesThreeMicrobatches) {
  // Written out from the simulation (forward 1, backward 2): device 1
  // receives the next activation before it sends the previous gradient,
  // which is what keeps blocking sends from deadlocking.
  Program program = buildSchedule(makeSpec(2, 3, 7), ScheduleKind::OneFOneB);
  ASSERT_EQ(program.devices.size(), 2u);
  EXPECT_EQ(shorthand(program.devices[0]),
            "x0 F0 >a0 x1 F1 >a1 <g0 B0 x2 F2 <g1 >a2 B1 <g2 B2 step");
  EXPECT_EQ(shorthand(program.devices[1]),
            "<a0 labels0 F0 B0 <a1 >g0 labels1 F1 B1 >g1 <a2 labels2 F2 B2 "
            ">g2 step");
  EXPECT_EQ(dump(verifySchedule(program)), "");
  // Rows and shapes follow the uneven split 3, 2, 2.
  for (const Instr &instr : program.devices[0].instrs) {
    if (instr.kind == InstrKind::Send) {
      EXPECT_EQ(instr.shape,
                (std::vector<int64_t>{instr.microbatch ? 2 : 3, 8}));
    }
  }
}

TEST(ScheduleKindPrograms, EveryKindVerifiesCleanAndBoundsWhatIsInFlight) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::ZeroBubbleH1}) {
    for (unsigned k : {1u, 2u, 3u, 4u, 5u, 8u}) {
      for (unsigned m : {1u, 2u, 3u, 4u, 7u, 8u, 16u}) {
        for (unsigned c : {1u, 3u}) {
          SCOPED_TRACE(std::string(scheduleKindName(kind)) +
                       " K=" + std::to_string(k) + " M=" + std::to_string(m) +
                       " channels=" + std::to_string(c));
          Program program = buildSchedule(makeSpec(k, m, 2 * m + 1, c), kind);
          ASSERT_EQ(program.devices.size(), k);
          EXPECT_EQ(dump(verifySchedule(program)), "");
          for (unsigned s = 0; s < k; ++s) {
            // ZB-H1: 1F1B's K - s until B, and s deferred W's on top, but
            // never more than the M there are: 1F1B's first device's peak.
            unsigned expected = kind == ScheduleKind::GPipe ? m
                                : kind == ScheduleKind::OneFOneB
                                    ? std::min(k - s, m)
                                    : std::min(k, m);
            EXPECT_EQ(maxInFlight(program.devices[s]), expected)
                << "device " << s;
          }
        }
      }
    }
  }
}

TEST(ScheduleKindPrograms, GPipeOrderThroughTheGenericBuilderVerifies) {
  for (unsigned k : {1u, 2u, 4u})
    for (unsigned m : {1u, 3u, 8u}) {
      ScheduleBuild build = buildFromComputeOrder(
          makeSpec(k, m, m), computeOrderOf(ScheduleKind::GPipe, k, m));
      EXPECT_EQ(build.error, "");
      EXPECT_EQ(dump(verifySchedule(build.program)), "");
    }
}

TEST(ScheduleKindPrograms, UserOrderThatIsNeitherGPipeNor1F1B) {
  // Device 0 runs two forwards ahead, then drains in order.
  ScheduleBuild build = buildFromComputeOrder(
      makeSpec(2, 3, 3), parse("device 0: F0 F1 F2 B0 B1 B2\n"
                               "device 1: F0 B0 F1 B1 F2 B2\n"));
  EXPECT_EQ(build.error, "");
  EXPECT_EQ(dump(verifySchedule(build.program)), "");
}

TEST(ScheduleKindPrograms, InconsistentOrdersAreRefusedWithTheirCause) {
  struct Case {
    unsigned stages, microbatches;
    const char *order;
    const char *error;
  };
  const Case cases[] = {
      {2, 2,
       "device 0: F0 B0 F1 B1\n"
       "device 1: F0 F1 B0 B1\n",
       "the schedule deadlocks: device 0 action #1 (backward of micro-batch "
       "0) waits for device 1's backward of micro-batch 0 (its action #2); "
       "device 1 action #1 (forward of micro-batch 1) waits for device 0's "
       "forward of micro-batch 1 (its action #2)"},
      {3, 1, "device 0: F0 B0\ndevice 1: B0 F0\ndevice 2: F0 B0\n",
       "device 1 action #0 (backward of micro-batch 0) runs before its "
       "forward (action #1)"},
      {2, 2, "device 0: F0 F1 B0 B1\ndevice 1: F0 B0 F0 B1\n",
       "device 1 action #2 (forward of micro-batch 0) repeats action #0: each "
       "runs once per micro-batch"},
      {2, 2, "device 0: F0 F1 B0 B1\ndevice 1: F0 B0 B1\n",
       "device 1 never runs the forward of micro-batch 1"},
      {2, 2, "device 0: F0 F1 B0 B1\ndevice 1: F0 B0 F2 B1\n",
       "device 1 action #2 (forward of micro-batch 2) names a micro-batch out "
       "of range: the schedule has 2 micro-batch(es)"},
      {3, 1, "device 0: F0 B0\ndevice 1: F0 B0\n",
       "the schedule has 2 device(s), expected 3 (one per stage)"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.order);
    ScheduleBuild build = buildFromComputeOrder(
        makeSpec(c.stages, c.microbatches, 4), parse(c.order));
    EXPECT_EQ(build.error, c.error);
    EXPECT_TRUE(build.program.devices.empty());
  }
}

TEST(ScheduleKindPrograms, SplitBackwardsNeedOneWeightsStepAfterEachB) {
  const InstrKind f = InstrKind::Forward, b = InstrKind::Backward,
                  w = InstrKind::BackwardWeights;
  struct Case {
    std::vector<ComputeStep> device1;
    const char *error;
  };
  const Case cases[] = {
      {{{f, 0}, {b, 0}, {w, 0}, {f, 1}, {b, 1}}, // W1 missing
       "device 1 never runs the weight-gradient backward of micro-batch 1 (it "
       "splits its backwards, so each needs one)"},
      {{{f, 0}, {w, 0}, {b, 0}, {f, 1}, {b, 1}, {w, 1}},
       "device 1 action #1 (weight-gradient backward of micro-batch 0) runs "
       "before its backward (action #2)"},
      {{{f, 0}, {b, 0}, {w, 0}, {f, 1}, {b, 1}, {w, 1}, {w, 0}},
       "device 1 action #6 (weight-gradient backward of micro-batch 0) repeats "
       "action #2: each runs once per micro-batch"},
  };
  for (const Case &c : cases) {
    ComputeOrder order = {{{f, 0}, {f, 1}, {b, 0}, {b, 1}}, c.device1};
    ScheduleBuild build = buildFromComputeOrder(makeSpec(2, 2, 2), order);
    EXPECT_EQ(build.error, c.error);
  }
  // Device 1 splits, device 0 does not: each device decides for itself.
  ComputeOrder order = {{{f, 0}, {f, 1}, {b, 0}, {b, 1}},
                        {{f, 0}, {b, 0}, {f, 1}, {b, 1}, {w, 0}, {w, 1}}};
  ScheduleBuild build = buildFromComputeOrder(makeSpec(2, 2, 2), order);
  EXPECT_EQ(build.error, "");
  EXPECT_EQ(shorthand(build.program.devices[1]),
            "<a0 labels0 F0 B0 <a1 >g0 labels1 F1 B1 >g1 W0 W1 step");
  EXPECT_EQ(dump(verifySchedule(build.program)), "");
}

TEST(ScheduleKindPrograms, VerifierChecksEachWeightsStepOfAProgram) {
  // ZB-H1, K = 2, M = 2; device 1: <a0 labels0 F0 B0 ... W0 ... W1 step.
  const Program built =
      buildSchedule(makeSpec(2, 2, 2), ScheduleKind::ZeroBubbleH1);
  ASSERT_EQ(dump(verifySchedule(built)), "");
  auto indexOf = [](const DeviceProgram &device, InstrKind kind, unsigned m) {
    for (std::size_t i = 0; i < device.instrs.size(); ++i)
      if (device.instrs[i].kind == kind && device.instrs[i].microbatch == m)
        return i;
    ADD_FAILURE() << "no such instruction";
    return std::size_t(0);
  };
  {
    Program program = built;
    std::vector<Instr> &instrs = program.devices[1].instrs;
    instrs.erase(instrs.begin() +
                 indexOf(program.devices[1], InstrKind::BackwardWeights, 1));
    EXPECT_NE(dump(verifySchedule(program))
                  .find("device 1: stage 1 has no weight-gradient backward "
                        "for micro-batch 1 (the device splits its backwards, "
                        "so each needs one)"),
              std::string::npos)
        << dump(verifySchedule(program));
  }
  {
    Program program = built;
    DeviceProgram &device = program.devices[1];
    std::size_t w = indexOf(device, InstrKind::BackwardWeights, 0);
    std::size_t b = indexOf(device, InstrKind::Backward, 0);
    Instr moved = device.instrs[w];
    device.instrs.erase(device.instrs.begin() + w);
    device.instrs.insert(device.instrs.begin() + b, moved);
    EXPECT_NE(dump(verifySchedule(program))
                  .find("device 1: weight-gradient backward of stage 1, "
                        "micro-batch 0 (op #" +
                        std::to_string(b) + ") runs before its backward (op #" +
                        std::to_string(b + 1) + ")"),
              std::string::npos)
        << dump(verifySchedule(program));
  }
  {
    Program program = built;
    DeviceProgram &device = program.devices[0];
    std::size_t w = indexOf(device, InstrKind::BackwardWeights, 0);
    device.instrs.insert(device.instrs.end() - 1, device.instrs[w]);
    std::size_t copy = device.instrs.size() - 2;
    EXPECT_NE(dump(verifySchedule(program))
                  .find("device 0: weight-gradient backward of stage 0, "
                        "micro-batch 0 (op #" +
                        std::to_string(copy) + ") duplicates op #" +
                        std::to_string(w)),
              std::string::npos)
        << dump(verifySchedule(program));
  }
  {
    // The optimizer step must follow the W's too.
    Program program = built;
    std::vector<Instr> &instrs = program.devices[0].instrs;
    std::rotate(instrs.end() - 2, instrs.end() - 1, instrs.end());
    EXPECT_NE(dump(verifySchedule(program))
                  .find("optimizer step (op #" +
                        std::to_string(instrs.size() - 2) +
                        ") runs before weight-gradient backward of stage 0, "
                        "micro-batch 1"),
              std::string::npos)
        << dump(verifySchedule(program));
  }
}

TEST(ScheduleKindPrograms, DeadlockCycleSkipsDevicesOutsideIt) {
  // Devices 1 and 2 wait on each other; device 0 only waits on device 1.
  ScheduleBuild build = buildFromComputeOrder(makeSpec(3, 2, 2),
                                              parse("device 0: F0 F1 B0 B1\n"
                                                    "device 1: F0 B0 F1 B1\n"
                                                    "device 2: F0 F1 B0 B1\n"));
  EXPECT_EQ(build.error,
            "the schedule deadlocks: device 1 action #1 (backward of "
            "micro-batch 0) waits for device 2's backward of micro-batch 0 "
            "(its action #2); device 2 action #1 (forward of micro-batch 1) "
            "waits for device 1's forward of micro-batch 1 (its action #2)");
}

TEST(ScheduleText, ParsesCommentsBlankLinesAndSpacing) {
  ComputeOrder order;
  EXPECT_EQ(parseComputeOrder("# two devices\n\n device 0 :F0  B0 # done\n"
                              "device 1: F0 B0",
                              order),
            "");
  EXPECT_EQ(printComputeOrder(order), "device 0: F0 B0\ndevice 1: F0 B0\n");
}

TEST(ScheduleText, ErrorsSayWhatWasExpected) {
  struct Case {
    const char *text;
    const char *error;
  };
  const Case cases[] = {
      {"", "expected at least one line 'device N: ...', got none"},
      {"# nothing\n", "expected at least one line 'device N: ...', got none"},
      {"device 0 F0 B0\n",
       "line 1: expected 'device N: F0 B0 ...', got 'device 0 F0 B0'"},
      {"stage 0: F0\n",
       "line 1: expected 'device N: F0 B0 ...', got 'stage 0: F0'"},
      {"device 0: F0 B0\ndevice 2: F0 B0\n",
       "line 2: expected device 1 (devices are listed in order), got device "
       "2"},
      {"device 0: F0 X0\n",
       "line 1: expected an action such as F0 (forward of micro-batch 0), "
       "B3 (backward of micro-batch 3), W3 (its weight-gradient backward, "
       "when B and W are split) or F0@2 (forward of micro-batch 0 in stage 2, "
       "when devices run several), got 'X0'"},
      {"device 0: F0@x B0\n",
       "line 1: expected an action such as F0 (forward of micro-batch 0), "
       "B3 (backward of micro-batch 3), W3 (its weight-gradient backward, "
       "when B and W are split) or F0@2 (forward of micro-batch 0 in stage 2, "
       "when devices run several), got 'F0@x'"},
      {"device 0: F B0\n",
       "line 1: expected an action such as F0 (forward of micro-batch 0), "
       "B3 (backward of micro-batch 3), W3 (its weight-gradient backward, "
       "when B and W are split) or F0@2 (forward of micro-batch 0 in stage 2, "
       "when devices run several), got 'F'"},
      {"device 0: F99999999999\n",
       "line 1: expected an action such as F0 (forward of micro-batch 0), "
       "B3 (backward of micro-batch 3), W3 (its weight-gradient backward, "
       "when B and W are split) or F0@2 (forward of micro-batch 0 in stage 2, "
       "when devices run several), got 'F99999999999'"},
  };
  for (const Case &c : cases) {
    ComputeOrder order;
    EXPECT_EQ(parseComputeOrder(c.text, order), c.error) << c.text;
  }
}

//===----------------------------------------------------------------------===//
// Interleaved 1F1B: K devices, V stages each (stage s on device s mod K)
//===----------------------------------------------------------------------===//

namespace {
PipelineSpec interleavedSpec(unsigned numDevices, unsigned numVirtualStages,
                             unsigned numMicrobatches, int64_t batchSize,
                             unsigned channels = 1) {
  PipelineSpec spec = makeSpec(numDevices * numVirtualStages, numMicrobatches,
                               batchSize, channels);
  spec.numVirtualStages = numVirtualStages;
  return spec;
}
} // namespace

TEST(ScheduleKindOrders, InterleavedRunsGroupsOfKThroughEachDevicesStages) {
  // K = 2, V = 2, M = 4 (Megatron-LM's order): micro-batches {0, 1} go
  // through the device's first stage, then its second, then {2, 3}; device
  // d warms up with 2(K-d-1) + (V-1)K forwards, then alternates.
  EXPECT_EQ(
      printComputeOrder(computeOrderOf(ScheduleKind::Interleaved, 2, 4, 2)),
      "device 0: F0@0 F1@0 F0@2 F1@2 F2@0 B0@2 F3@0 B1@2 F2@2 B0@0 "
      "F3@2 B1@0 B2@2 B3@2 B2@0 B3@0\n"
      "device 1: F0@1 F1@1 F0@3 B0@3 F1@3 B1@3 F2@1 B0@1 F3@1 B1@1 "
      "F2@3 B2@3 F3@3 B3@3 B2@1 B3@1\n");
  // V = 1 is 1F1B.
  EXPECT_EQ(
      printComputeOrder(computeOrderOf(ScheduleKind::Interleaved, 4, 6, 1)),
      printComputeOrder(computeOrderOf(ScheduleKind::OneFOneB, 4, 6)));
}

TEST(ScheduleKindPrograms, InterleavedVerifiesCleanForEveryKVAndM) {
  // M not a multiple of K and M < K included: the last group is short.
  for (unsigned k : {2u, 3u, 4u})
    for (unsigned v : {2u, 3u, 4u})
      for (unsigned m : {1u, 2u, 3u, 4u, 5u, 7u, 8u, 9u, 16u}) {
        SCOPED_TRACE("K=" + std::to_string(k) + " V=" + std::to_string(v) +
                     " M=" + std::to_string(m));
        PipelineSpec spec = interleavedSpec(k, v, m, 2 * m + 1, 2);
        ScheduleBuild build = buildFromComputeOrder(
            spec, computeOrderOf(ScheduleKind::Interleaved, k, m, v));
        ASSERT_EQ(build.error, "");
        const Program &program = build.program;
        ASSERT_EQ(program.devices.size(), k);
        EXPECT_EQ(program.numVirtualStages, v);
        EXPECT_EQ(dump(verifySchedule(program)), "");
        for (unsigned d = 0; d < k; ++d) {
          // Every compute, load and transfer serves one of the device's
          // stages, and the peak is the warm-up plus the one forward that
          // precedes each backward.
          for (const Instr &instr : program.devices[d].instrs)
            if (instr.kind != InstrKind::OptimizerStep)
              EXPECT_EQ(instr.stage % k, d) << describe(instr);
          // (With M not a multiple of K, left-out micro-batches take
          // warm-up slots: at most that.)
          unsigned warmup = 2 * (k - d - 1) + (v - 1) * k;
          unsigned peak = std::min(warmup + 1, m * v);
          if (m % k == 0)
            EXPECT_EQ(maxInFlight(program.devices[d]), peak) << "device " << d;
          else
            EXPECT_LE(maxInFlight(program.devices[d]), peak) << "device " << d;
        }
      }
}

TEST(ScheduleKindPrograms, InterleavedTransfersNameTheirStage) {
  // K = 2, V = 2: device 0 sends stage 0's activations and stage 2's, both
  // to device 1; the stage tells them apart, and the loss stage (3) is on
  // device 1, which sends nothing forward.
  Program program =
      buildSchedule(interleavedSpec(2, 2, 2, 4), ScheduleKind::Interleaved);
  unsigned sends[4] = {0, 0, 0, 0};
  for (const DeviceProgram &device : program.devices)
    for (const Instr &instr : device.instrs)
      if (instr.kind == InstrKind::Send &&
          instr.direction == Direction::Activation) {
        ++sends[instr.stage];
        EXPECT_EQ(instr.peer, (instr.stage + 1) % 2);
      }
  EXPECT_EQ(sends[0], 2u);
  EXPECT_EQ(sends[1], 2u);
  EXPECT_EQ(sends[2], 2u);
  EXPECT_EQ(sends[3], 0u);
  // The labels are loaded by the last stage, on device 1.
  for (const Instr &instr : program.devices[1].instrs)
    if (instr.kind == InstrKind::LoadInput)
      EXPECT_EQ(instr.stage, 3u);
}

TEST(ScheduleKindPrograms, VerifierRefusesATransferOfTheWrongStage) {
  Program program =
      buildSchedule(interleavedSpec(2, 2, 2, 4), ScheduleKind::Interleaved);
  // Device 0's first send carries stage 0's activation to stage 1; relabel
  // it as stage 2's, whose receive device 1 does not post.
  std::vector<Instr> &instrs = program.devices[0].instrs;
  auto send = std::find_if(instrs.begin(), instrs.end(), [](const Instr &i) {
    return i.kind == InstrKind::Send;
  });
  ASSERT_NE(send, instrs.end());
  send->stage = 2;
  std::string violations = dump(verifySchedule(program));
  EXPECT_NE(violations.find("is sent twice"), std::string::npos) << violations;
  EXPECT_NE(violations.find("has no matching send on device 0"),
            std::string::npos)
      << violations;
  // A stage that the device does not run.
  send->stage = 1;
  violations = dump(verifySchedule(program));
  EXPECT_NE(
      violations.find("belongs to stage 1, but device 0 runs stages 0, 2"),
      std::string::npos)
      << violations;
}

TEST(ScheduleKindPrograms, InterleavedOrdersAreRefusedWithTheirStage) {
  struct Case {
    const char *order;
    const char *error;
  };
  const Case cases[] = {
      // Device 0 waits for stage 1's gradient of micro-batch 0 before it
      // has forwarded stage 2, which device 1 needs first.
      {"device 0: F0@0 B0@0 F0@2 B0@2\n"
       "device 1: F0@1 F0@3 B0@3 B0@1\n",
       "the schedule deadlocks: device 0 action #1 (backward of micro-batch 0 "
       "in stage 0) waits for device 1's backward of micro-batch 0 in stage "
       "1 (its action #3); device 1 action #1 (forward of micro-batch 0 in "
       "stage 3) waits for device 0's forward of micro-batch 0 in stage 2 "
       "(its action #2)"},
      {"device 0: F0@0 F0@2 B0@2 B0@0\n"
       "device 1: F0@1 F0@3 B0@3\n",
       "device 1 never runs the backward of micro-batch 0 in stage 1"},
      {"device 0: F0@0 F0@2 B0@2 B0@0\n"
       "device 1: F0@1 F0@3 B0@3 B0@1 F0@5\n",
       "device 1 action #4 (forward of micro-batch 0 in stage 5) names "
       "virtual stage 2, but each device runs 2"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.order);
    ScheduleBuild build =
        buildFromComputeOrder(interleavedSpec(2, 2, 1, 4), parse(c.order));
    EXPECT_EQ(build.error, c.error);
  }
  ComputeOrder order;
  EXPECT_EQ(parseComputeOrder("device 0: F0@1\ndevice 1: F0@1\n", order),
            "line 1: device 0 does not run stage 1: 2 devices run the stages "
            "round-robin, device 0 runs stages 0, 2, ...");
}

TEST(ScheduleKindPrograms, OnlyInterleavingRunsSeveralStagesPerDevice) {
  EXPECT_EQ(checkVirtualStages(ScheduleKind::Interleaved, 8, 2), "");
  EXPECT_EQ(checkVirtualStages(ScheduleKind::OneFOneB, 4, 1), "");
  EXPECT_EQ(checkVirtualStages(ScheduleKind::OneFOneB, 4, 2),
            "the 1f1b schedule runs one stage per device, got 2 virtual "
            "stages (only the interleaved schedule runs more)");
  EXPECT_EQ(checkVirtualStages(ScheduleKind::Interleaved, 6, 4),
            "6 stages cannot be split into 4 virtual stages per device: 4 "
            "must divide the stages");
  EXPECT_EQ(checkVirtualStages(ScheduleKind::Interleaved, 3, 3),
            "interleaving needs at least 2 devices, got 1 for 3 stages in 3 "
            "virtual stages");
  EXPECT_EQ(checkVirtualStages(ScheduleKind::Interleaved, 3, 0),
            "the number of virtual stages must be at least 1");
}
