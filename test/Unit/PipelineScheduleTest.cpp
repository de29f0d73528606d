//===- PipelineScheduleTest.cpp - GPipe schedule builder and verifier -----===//
//
// The generated schedules must verify clean; every violation kind is checked
// by mutating a generated program and comparing the exact report.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace gpipe::schedule;

namespace {

/// A spec with `channels` tensors on every boundary: channel c has shape
/// batch x 16*(c+1); channel 1 is f16 so element types are exercised too.
/// Stage 0 reads "x"; the last stage reads "labels" when `inputsOnLast`.
PipelineSpec makeSpec(unsigned numStages, unsigned numMicrobatches,
                      int64_t batchSize, unsigned channels = 1,
                      bool inputsOnLast = true) {
  PipelineSpec spec;
  spec.numStages = numStages;
  spec.numMicrobatches = numMicrobatches;
  spec.batchSize = batchSize;
  spec.boundaries.resize(numStages - 1);
  for (auto &boundary : spec.boundaries)
    for (unsigned c = 0; c < channels; ++c)
      boundary.push_back({{batchSize, 16 * (static_cast<int64_t>(c) + 1)},
                          c == 1 ? "f16" : "f32"});
  spec.stageInputs.resize(numStages);
  spec.stageInputs[0].push_back("x");
  if (inputsOnLast)
    spec.stageInputs[numStages - 1].push_back("labels");
  return spec;
}

/// The generated program with two rows per micro-batch.
Program generated(unsigned numStages, unsigned numMicrobatches,
                  unsigned channels = 1) {
  return buildGPipeSchedule(
      makeSpec(numStages, numMicrobatches, 2 * numMicrobatches, channels));
}

/// One line per violation, "[device#index] message", so that a failure
/// shows the whole report.
std::string dump(const std::vector<Violation> &violations) {
  std::string text;
  for (const Violation &v : violations)
    text += "[" + std::to_string(v.device) + "#" +
            std::to_string(v.instrIndex) + "] " + v.message + "\n";
  return text;
}

void expectViolations(const Program &program,
                      const std::vector<Violation> &expected) {
  EXPECT_EQ(dump(verifySchedule(program)), dump(expected));
}

std::vector<Instr> &instrsOf(Program &program, unsigned device) {
  return program.devices[device].instrs;
}

/// Moves instruction `from` of a device so that it ends up at index `to`.
void moveInstr(Program &program, unsigned device, std::size_t from,
               std::size_t to) {
  std::vector<Instr> &instrs = instrsOf(program, device);
  Instr instr = instrs[from];
  instrs.erase(instrs.begin() + from);
  instrs.insert(instrs.begin() + to, instr);
}

//===----------------------------------------------------------------------===//
// Instructions written out by hand
//===----------------------------------------------------------------------===//

Instr load(const char *name, unsigned microbatch, int64_t rows) {
  Instr instr;
  instr.kind = InstrKind::LoadInput;
  instr.inputName = name;
  instr.microbatch = microbatch;
  instr.rows = rows;
  return instr;
}

Instr compute(InstrKind kind, unsigned stage, unsigned microbatch,
              int64_t rows) {
  Instr instr;
  instr.kind = kind;
  instr.stage = stage;
  instr.microbatch = microbatch;
  instr.rows = rows;
  return instr;
}

Instr transfer(InstrKind kind, Direction direction, unsigned peer,
               unsigned microbatch, unsigned channel,
               std::vector<int64_t> shape, const char *elementType) {
  Instr instr;
  instr.kind = kind;
  instr.direction = direction;
  instr.peer = peer;
  instr.microbatch = microbatch;
  instr.channel = channel;
  instr.rows = shape[0];
  instr.shape = std::move(shape);
  instr.elementType = elementType;
  return instr;
}

Instr optimizerStep() {
  Instr instr;
  instr.kind = InstrKind::OptimizerStep;
  return instr;
}

void expectInstrs(const DeviceProgram &device,
                  const std::vector<Instr> &expected) {
  ASSERT_EQ(device.instrs.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const Instr &a = device.instrs[i], &e = expected[i];
    SCOPED_TRACE("device " + std::to_string(device.device) + " op #" +
                 std::to_string(i) + ": expected " + describe(e) + ", got " +
                 describe(a));
    EXPECT_EQ(a.kind, e.kind);
    // Written out by hand for one stage per device: a load or transfer
    // serves the device's stage.
    bool servesTheDevice =
        !isCompute(e.kind) && e.kind != InstrKind::OptimizerStep;
    EXPECT_EQ(a.stage, servesTheDevice ? device.device : e.stage);
    EXPECT_EQ(a.microbatch, e.microbatch);
    EXPECT_EQ(a.peer, e.peer);
    EXPECT_EQ(a.channel, e.channel);
    EXPECT_EQ(a.direction, e.direction);
    EXPECT_EQ(a.shape, e.shape);
    EXPECT_EQ(a.elementType, e.elementType);
    EXPECT_EQ(a.inputName, e.inputName);
    EXPECT_EQ(a.rows, e.rows);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// describe and splitMicrobatches
//===----------------------------------------------------------------------===//

TEST(PipelineScheduleDescribe, EveryKind) {
  EXPECT_EQ(describe(compute(InstrKind::Forward, 1, 2, 4)),
            "forward of stage 1, micro-batch 2");
  EXPECT_EQ(describe(compute(InstrKind::Backward, 1, 2, 4)),
            "backward of stage 1, micro-batch 2");
  EXPECT_EQ(describe(transfer(InstrKind::Send, Direction::Activation, 2, 0, 1,
                              {4, 8}, "f32")),
            "send activation to device 2, micro-batch 0, channel 1");
  EXPECT_EQ(describe(transfer(InstrKind::Recv, Direction::Gradient, 2, 3, 0,
                              {4, 8}, "f32")),
            "recv gradient from device 2, micro-batch 3, channel 0");
  EXPECT_EQ(describe(load("x", 0, 4)), "load input 'x', micro-batch 0");
  EXPECT_EQ(describe(optimizerStep()), "optimizer step");
}

TEST(PipelineScheduleSplit, Divisible) {
  MicrobatchSplit split = splitMicrobatches(8, 4);
  EXPECT_EQ(split.error, "");
  EXPECT_EQ(split.rows, (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(splitMicrobatches(5, 5).rows,
            (std::vector<int64_t>{1, 1, 1, 1, 1}));
  EXPECT_EQ(splitMicrobatches(1, 1).rows, (std::vector<int64_t>{1}));
  EXPECT_EQ(splitMicrobatches(7, 1).rows, (std::vector<int64_t>{7}));
}

TEST(PipelineScheduleSplit, NonDivisibleGivesTheRemainderToTheFirst) {
  EXPECT_EQ(splitMicrobatches(10, 4).rows, (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(splitMicrobatches(7, 3).rows, (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(splitMicrobatches(9, 8).rows,
            (std::vector<int64_t>{2, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(splitMicrobatches(10, 4).error, "");
}

TEST(PipelineScheduleSplit, Errors) {
  struct Case {
    int64_t batch;
    unsigned microbatches;
    const char *error;
  };
  const Case cases[] = {
      {4, 0, "expected at least 1 micro-batch, got 0"},
      {4, 8,
       "cannot split a batch of 4 rows into 8 micro-batches: expected at most "
       "4 micro-batches"},
      {1, 2,
       "cannot split a batch of 1 row into 2 micro-batches: expected at most 1 "
       "micro-batch"},
      {0, 1, "expected a positive batch size, got 0"},
      {-3, 2, "expected a positive batch size, got -3"},
  };
  for (const Case &c : cases) {
    MicrobatchSplit split = splitMicrobatches(c.batch, c.microbatches);
    EXPECT_EQ(split.error, c.error);
    EXPECT_TRUE(split.rows.empty());
  }
}

//===----------------------------------------------------------------------===//
// buildGPipeSchedule
//===----------------------------------------------------------------------===//

TEST(PipelineScheduleBuild, ExactTwoStagesThreeMicrobatches) {
  // 7 rows into 3 micro-batches: 3, 2, 2; the boundary is 7x4xf32.
  PipelineSpec spec;
  spec.numStages = 2;
  spec.numMicrobatches = 3;
  spec.batchSize = 7;
  spec.boundaries = {{{{7, 4}, "f32"}}};
  spec.stageInputs = {{"x"}, {"labels"}};
  Program program = buildGPipeSchedule(spec);
  EXPECT_EQ(program.numMicrobatches, 3u);
  ASSERT_EQ(program.devices.size(), 2u);
  EXPECT_EQ(program.devices[0].device, 0u);
  EXPECT_EQ(program.devices[1].device, 1u);

  const InstrKind fwd = InstrKind::Forward, bwd = InstrKind::Backward,
                  send = InstrKind::Send, recv = InstrKind::Recv;
  const Direction act = Direction::Activation, grad = Direction::Gradient;
  expectInstrs(program.devices[0],
               {
                   load("x", 0, 3),
                   compute(fwd, 0, 0, 3),
                   transfer(send, act, 1, 0, 0, {3, 4}, "f32"),
                   load("x", 1, 2),
                   compute(fwd, 0, 1, 2),
                   transfer(send, act, 1, 1, 0, {2, 4}, "f32"),
                   load("x", 2, 2),
                   compute(fwd, 0, 2, 2),
                   transfer(send, act, 1, 2, 0, {2, 4}, "f32"),
                   transfer(recv, grad, 1, 2, 0, {2, 4}, "f32"),
                   compute(bwd, 0, 2, 2),
                   transfer(recv, grad, 1, 1, 0, {2, 4}, "f32"),
                   compute(bwd, 0, 1, 2),
                   transfer(recv, grad, 1, 0, 0, {3, 4}, "f32"),
                   compute(bwd, 0, 0, 3),
                   optimizerStep(),
               });
  expectInstrs(program.devices[1],
               {
                   transfer(recv, act, 0, 0, 0, {3, 4}, "f32"),
                   load("labels", 0, 3),
                   compute(fwd, 1, 0, 3),
                   transfer(recv, act, 0, 1, 0, {2, 4}, "f32"),
                   load("labels", 1, 2),
                   compute(fwd, 1, 1, 2),
                   transfer(recv, act, 0, 2, 0, {2, 4}, "f32"),
                   load("labels", 2, 2),
                   compute(fwd, 1, 2, 2),
                   compute(bwd, 1, 2, 2),
                   transfer(send, grad, 0, 2, 0, {2, 4}, "f32"),
                   compute(bwd, 1, 1, 2),
                   transfer(send, grad, 0, 1, 0, {2, 4}, "f32"),
                   compute(bwd, 1, 0, 3),
                   transfer(send, grad, 0, 0, 0, {3, 4}, "f32"),
                   optimizerStep(),
               });
  EXPECT_EQ(dump(verifySchedule(program)), "");
}

TEST(PipelineScheduleBuild, GradientUsesTheBoundaryOfThePreviousStage) {
  // Different boundaries, two channels on the second: the gradient that
  // stage 2 sends back has the shapes of boundary 1, in channel order.
  PipelineSpec spec;
  spec.numStages = 3;
  spec.numMicrobatches = 2;
  spec.batchSize = 6;
  spec.boundaries = {{{{6, 8}, "f32"}}, {{{6, 5}, "f32"}, {{6, 2, 3}, "bf16"}}};
  spec.stageInputs = {{}, {}, {}};
  Program program = buildGPipeSchedule(spec);
  const InstrKind send = InstrKind::Send, recv = InstrKind::Recv;
  const Direction grad = Direction::Gradient;
  expectInstrs(
      program.devices[2],
      {
          transfer(recv, Direction::Activation, 1, 0, 0, {3, 5}, "f32"),
          transfer(recv, Direction::Activation, 1, 0, 1, {3, 2, 3}, "bf16"),
          compute(InstrKind::Forward, 2, 0, 3),
          transfer(recv, Direction::Activation, 1, 1, 0, {3, 5}, "f32"),
          transfer(recv, Direction::Activation, 1, 1, 1, {3, 2, 3}, "bf16"),
          compute(InstrKind::Forward, 2, 1, 3),
          compute(InstrKind::Backward, 2, 1, 3),
          transfer(send, grad, 1, 1, 0, {3, 5}, "f32"),
          transfer(send, grad, 1, 1, 1, {3, 2, 3}, "bf16"),
          compute(InstrKind::Backward, 2, 0, 3),
          transfer(send, grad, 1, 0, 0, {3, 5}, "f32"),
          transfer(send, grad, 1, 0, 1, {3, 2, 3}, "bf16"),
          optimizerStep(),
      });
  EXPECT_EQ(dump(verifySchedule(program)), "");
}

TEST(PipelineScheduleBuild, InstructionCounts) {
  // Device s runs, per micro-batch: a forward and a backward, one recv and
  // one send per channel of each adjacent boundary, and its input loads;
  // then one optimizer step.
  for (unsigned k : {1u, 2u, 3u, 5u}) {
    for (unsigned m : {1u, 4u, 7u}) {
      for (unsigned c : {1u, 2u, 3u}) {
        PipelineSpec spec = makeSpec(k, m, 3 * m, c);
        spec.stageInputs[0].push_back("mask");
        Program program = buildGPipeSchedule(spec);
        ASSERT_EQ(program.devices.size(), k);
        for (unsigned s = 0; s < k; ++s) {
          SCOPED_TRACE("K=" + std::to_string(k) + " M=" + std::to_string(m) +
                       " channels=" + std::to_string(c) +
                       " device=" + std::to_string(s));
          std::size_t neighbours = (s > 0) + (s + 1 < k);
          std::size_t inputs = spec.stageInputs[s].size();
          const std::vector<Instr> &instrs = program.devices[s].instrs;
          EXPECT_EQ(instrs.size(), m * (2 + 2 * c * neighbours + inputs) + 1);
          auto count = [&](InstrKind kind) {
            return static_cast<std::size_t>(
                std::count_if(instrs.begin(), instrs.end(),
                              [&](const Instr &i) { return i.kind == kind; }));
          };
          EXPECT_EQ(count(InstrKind::Forward), m);
          EXPECT_EQ(count(InstrKind::Backward), m);
          EXPECT_EQ(count(InstrKind::LoadInput), m * inputs);
          EXPECT_EQ(count(InstrKind::Send), m * c * neighbours);
          EXPECT_EQ(count(InstrKind::Recv), m * c * neighbours);
          EXPECT_EQ(count(InstrKind::OptimizerStep), 1u);
        }
      }
    }
  }
}

TEST(PipelineScheduleBuild, GeneratedSchedulesVerifyClean) {
  for (unsigned k : {1u, 2u, 3u, 4u, 8u}) {
    for (unsigned m : {1u, 2u, 3u, 5u, 8u}) {
      for (unsigned c : {1u, 2u, 3u}) {
        for (bool inputsOnLast : {false, true}) {
          SCOPED_TRACE("K=" + std::to_string(k) + " M=" + std::to_string(m) +
                       " channels=" + std::to_string(c) +
                       " inputsOnLast=" + std::to_string(inputsOnLast));
          // 2M + 1 rows: the first micro-batch gets one row more.
          PipelineSpec spec = makeSpec(k, m, 2 * m + 1, c, inputsOnLast);
          MicrobatchSplit split = splitMicrobatches(spec.batchSize, m);
          Program program = buildGPipeSchedule(spec);
          EXPECT_EQ(dump(verifySchedule(program)), "");
          ASSERT_EQ(program.devices.size(), k);
          for (const DeviceProgram &device : program.devices) {
            for (const Instr &instr : device.instrs) {
              if (instr.kind == InstrKind::OptimizerStep)
                continue;
              ASSERT_LT(instr.microbatch, m);
              EXPECT_EQ(instr.rows, split.rows[instr.microbatch]);
              if (instr.kind == InstrKind::Send ||
                  instr.kind == InstrKind::Recv) {
                EXPECT_EQ(instr.shape[0], instr.rows);
              }
            }
          }
        }
      }
    }
  }
}

TEST(PipelineScheduleBuild, LargeScheduleVerifiesClean) {
  Program program = generated(32, 64, 2);
  EXPECT_EQ(dump(verifySchedule(program)), "");
}

//===----------------------------------------------------------------------===//
// Violations: send/recv matching
//===----------------------------------------------------------------------===//
//
// Layouts used below (1 channel, 2 rows per micro-batch):
//   K=2, M=2, device 0: L0 F0 S0 L1 F1 S1 RG1 B1 RG0 B0 Opt
//             device 1: R0 L0 F0 R1 L1 F1 B1 SG1 B0 SG0 Opt
//   K=3, M=4, device 0: (L F S) per micro-batch at 3m, then (RG B) for
//             m = 3..0 from op 12, Opt 20;
//             device 1: (R F S) at 3m, then (RG B SG) for m = 3..0 from
//             op 12, Opt 24;
//             device 2: (R L F) at 3m, then (B SG) for m = 3..0 from op 12,
//             Opt 20.

TEST(PipelineScheduleVerify, MissingRecv) {
  Program program = generated(3, 4);
  std::vector<Instr> &instrs = instrsOf(program, 1);
  ASSERT_EQ(describe(instrs[6]),
            "recv activation from device 0, micro-batch 2, channel 0");
  instrs.erase(instrs.begin() + 6);
  expectViolations(program, {{0, 8,
                              "device 0: send activation to device 1, "
                              "micro-batch 2, channel 0 (op #8) has no "
                              "matching recv on device 1"}});
}

TEST(PipelineScheduleVerify, MissingSend) {
  Program program = generated(3, 4);
  std::vector<Instr> &instrs = instrsOf(program, 0);
  ASSERT_EQ(describe(instrs[8]),
            "send activation to device 1, micro-batch 2, channel 0");
  instrs.erase(instrs.begin() + 8);
  expectViolations(program, {{1, 6,
                              "device 1: recv activation from device 0, "
                              "micro-batch 2, channel 0 (op #6) has no "
                              "matching send on device 0"}});
}

TEST(PipelineScheduleVerify, ShapeMismatch) {
  Program program = generated(3, 4);
  instrsOf(program, 1)[6].shape = {2, 32};
  expectViolations(
      program, {{1, 6,
                 "device 1: recv activation from device 0, micro-batch 2, "
                 "channel 0 (op #6) expects tensor<2x32xf32> but the "
                 "matching send on device 0 (op #8) sends tensor<2x16xf32>"}});
}

TEST(PipelineScheduleVerify, ElementTypeMismatch) {
  Program program = generated(3, 4);
  Instr &recv = instrsOf(program, 0)[14];
  ASSERT_EQ(describe(recv),
            "recv gradient from device 1, micro-batch 2, channel 0");
  recv.elementType = "bf16";
  expectViolations(
      program, {{0, 14,
                 "device 0: recv gradient from device 1, micro-batch 2, "
                 "channel 0 (op #14) expects tensor<2x16xbf16> but the "
                 "matching send on device 1 (op #17) sends tensor<2x16xf32>"}});
}

TEST(PipelineScheduleVerify, DuplicateSend) {
  Program program = generated(2, 2);
  std::vector<Instr> &instrs = instrsOf(program, 0);
  instrs.insert(instrs.begin() + 3, instrs[2]);
  expectViolations(program, {{0, 3,
                              "device 0: send activation to device 1, "
                              "micro-batch 0, channel 0 (op #3) is sent twice "
                              "(also op #2)"}});
}

TEST(PipelineScheduleVerify, DuplicateRecv) {
  Program program = generated(2, 2);
  std::vector<Instr> &instrs = instrsOf(program, 1);
  instrs.insert(instrs.begin() + 1, instrs[0]);
  expectViolations(program, {{1, 1,
                              "device 1: recv activation from device 0, "
                              "micro-batch 0, channel 0 (op #1) is received "
                              "twice (also op #0)"}});
}

TEST(PipelineScheduleVerify, PeerOutOfRange) {
  Program program = generated(2, 2);
  instrsOf(program, 0)[2].peer = 7;
  expectViolations(
      program,
      {{0, 2,
        "device 0: send activation to device 7, micro-batch 0, channel 0 (op "
        "#2) names device 7, but the program has 2 devices"},
       {1, 0,
        "device 1: recv activation from device 0, micro-batch 0, channel 0 (op "
        "#0) has no matching send on device 0"}});
}

TEST(PipelineScheduleVerify, PeerIsSelf) {
  Program program = generated(2, 2);
  instrsOf(program, 1)[0].peer = 1;
  expectViolations(
      program,
      {{0, 2,
        "device 0: send activation to device 1, micro-batch 0, channel 0 (op "
        "#2) has no matching recv on device 1"},
       {1, 0,
        "device 1: recv activation from device 1, micro-batch 0, channel 0 (op "
        "#0) has its own device as peer"}});
}

//===----------------------------------------------------------------------===//
// Violations: deadlock
//===----------------------------------------------------------------------===//

TEST(PipelineScheduleVerify, RendezvousDeadlockFromReorderedRecvs) {
  // Device 1 receives channel 1 before channel 0 while device 0 sends them
  // in channel order. A buffered transport would survive this (send 0 would
  // complete into a buffer); under rendezvous both sides wait forever.
  Program program = generated(2, 2, /*channels=*/2);
  std::swap(instrsOf(program, 1)[0], instrsOf(program, 1)[1]);
  expectViolations(
      program,
      {{0, 2,
        "deadlock: device 0 waits at op #2 (send activation to device 1, "
        "micro-batch 0, channel 0) while device 1 waits at op #0 (recv "
        "activation from device 0, micro-batch 0, channel 1)"},
       {1, 0,
        "deadlock: device 1 waits at op #0 (recv activation from device 0, "
        "micro-batch 0, channel 1) while device 0 waits at op #2 (send "
        "activation to device 1, micro-batch 0, channel 0)"}});
}

TEST(PipelineScheduleVerify, CyclicDeadlock) {
  // Device 0 waits for the gradient of micro-batch 1 before it has sent the
  // activation that produces it: a cycle under any transport. Device 2 is
  // blocked behind device 1 and is reported as well.
  Program program = generated(3, 2);
  ASSERT_EQ(describe(instrsOf(program, 0)[6]),
            "recv gradient from device 1, micro-batch 1, channel 0");
  moveInstr(program, 0, 6, 3);
  expectViolations(
      program,
      {{0, 3,
        "deadlock: device 0 waits at op #3 (recv gradient from device 1, "
        "micro-batch 1, channel 0) while device 1 waits at op #3 (recv "
        "activation from device 0, micro-batch 1, channel 0)"},
       {1, 3,
        "deadlock: device 1 waits at op #3 (recv activation from device 0, "
        "micro-batch 1, channel 0) while device 0 waits at op #3 (recv "
        "gradient from device 1, micro-batch 1, channel 0)"},
       {2, 3,
        "deadlock: device 2 waits at op #3 (recv activation from device 1, "
        "micro-batch 1, channel 0) while device 1 waits at op #3 (recv "
        "activation from device 0, micro-batch 1, channel 0)"}});
}

TEST(PipelineScheduleVerify, DeadlockLateInALargeProgram) {
  // The last device sends the gradient of micro-batch 0 before that of
  // micro-batch 1, which its neighbour receives first: the simulation must
  // run through the whole program to find it, and every device upstream is
  // then blocked behind its successor.
  const unsigned k = 16;
  Program program = generated(k, 64);
  // Device 15 ends with B1 SG1 B0 SG0 Opt; make it B0 SG0 B1 SG1 Opt.
  std::vector<Instr> &last = instrsOf(program, k - 1);
  std::size_t n = last.size();
  ASSERT_EQ(describe(last[n - 4]),
            "send gradient to device 14, micro-batch 1, channel 0");
  std::swap(last[n - 5], last[n - 3]);
  std::swap(last[n - 4], last[n - 2]);

  // Devices 1..14 end with RG1 B1 SG1 RG0 B0 SG0 Opt, device 0 with
  // RG1 B1 RG0 B0 Opt: each waits for the gradient of micro-batch 1.
  auto waitAt = [&](unsigned d) {
    return instrsOf(program, d).size() - (d == 0 ? 5 : 7);
  };
  auto waiting = [&](unsigned d, std::size_t at) {
    return "device " + std::to_string(d) + " waits at op #" +
           std::to_string(at) + " (" + describe(instrsOf(program, d)[at]) + ")";
  };
  std::vector<Violation> expected;
  for (unsigned d = 0; d + 1 < k; ++d) {
    std::size_t peerAt = d + 2 < k ? waitAt(d + 1) : n - 4;
    expected.push_back({d, waitAt(d),
                        "deadlock: " + waiting(d, waitAt(d)) + " while " +
                            waiting(d + 1, peerAt)});
  }
  expected.push_back({k - 1, n - 4,
                      "deadlock: " + waiting(k - 1, n - 4) + " while " +
                          waiting(k - 2, waitAt(k - 2))});
  ASSERT_EQ(describe(instrsOf(program, 14)[waitAt(14)]),
            "recv gradient from device 15, micro-batch 1, channel 0");
  ASSERT_EQ(describe(last[n - 4]),
            "send gradient to device 14, micro-batch 0, channel 0");
  expectViolations(program, expected);
}

//===----------------------------------------------------------------------===//
// Violations: forward/backward order and dependences
//===----------------------------------------------------------------------===//

TEST(PipelineScheduleVerify, BackwardBeforeForward) {
  Program program = generated(3, 4);
  std::vector<Instr> &instrs = instrsOf(program, 2);
  ASSERT_EQ(describe(instrs[11]), "forward of stage 2, micro-batch 3");
  ASSERT_EQ(describe(instrs[12]), "backward of stage 2, micro-batch 3");
  std::swap(instrs[11], instrs[12]);
  expectViolations(program, {{2, 11,
                              "device 2: backward of stage 2, micro-batch 3 "
                              "(op #11) runs before its forward (op #12)"}});
}

TEST(PipelineScheduleVerify, ForwardBeforeItsInputs) {
  Program program = generated(2, 2);
  moveInstr(program, 1, 5, 3);
  expectViolations(
      program,
      {{1, 3,
        "device 1: forward of stage 1, micro-batch 1 (op #3) runs before recv "
        "activation from device 0, micro-batch 1, channel 0 (op #4) delivers "
        "its input"},
       {1, 3,
        "device 1: forward of stage 1, micro-batch 1 (op #3) runs before load "
        "input 'labels', micro-batch 1 (op #5) delivers its input"}});
}

TEST(PipelineScheduleVerify, BackwardBeforeItsGradient) {
  Program program = generated(2, 2);
  std::swap(instrsOf(program, 0)[6], instrsOf(program, 0)[7]);
  expectViolations(program,
                   {{0, 6,
                     "device 0: backward of stage 0, micro-batch 1 (op #6) "
                     "runs before recv gradient from device 1, micro-batch 1, "
                     "channel 0 (op #7) delivers its gradient"}});
}

TEST(PipelineScheduleVerify, SendActivationBeforeItsForward) {
  Program program = generated(2, 2);
  std::swap(instrsOf(program, 0)[1], instrsOf(program, 0)[2]);
  expectViolations(program,
                   {{0, 1,
                     "device 0: send activation to device 1, micro-batch 0, "
                     "channel 0 (op #1) runs before forward of stage 0, "
                     "micro-batch 0 (op #2) produces it"}});
}

TEST(PipelineScheduleVerify, SendGradientBeforeItsBackward) {
  Program program = generated(2, 2);
  std::swap(instrsOf(program, 1)[6], instrsOf(program, 1)[7]);
  expectViolations(program,
                   {{1, 6,
                     "device 1: send gradient to device 0, micro-batch 1, "
                     "channel 0 (op #6) runs before backward of stage 1, "
                     "micro-batch 1 (op #7) produces it"}});
}

TEST(PipelineScheduleVerify, MissingForward) {
  Program program = generated(2, 2);
  std::vector<Instr> &instrs = instrsOf(program, 0);
  instrs.erase(instrs.begin() + 4);
  expectViolations(program, {{0, 6,
                              "device 0: stage 0 has no forward for "
                              "micro-batch 1"}});
}

TEST(PipelineScheduleVerify, MissingBackward) {
  Program program = generated(2, 2);
  std::vector<Instr> &instrs = instrsOf(program, 1);
  instrs.erase(instrs.begin() + 6);
  expectViolations(program, {{1, 5,
                              "device 1: stage 1 has no backward for "
                              "micro-batch 1"}});
}

TEST(PipelineScheduleVerify, DuplicateForward) {
  Program program = generated(2, 2);
  std::vector<Instr> &instrs = instrsOf(program, 1);
  instrs.insert(instrs.begin() + 3, instrs[2]);
  expectViolations(program, {{1, 3,
                              "device 1: forward of stage 1, micro-batch 0 "
                              "(op #3) duplicates op #2"}});
}

TEST(PipelineScheduleVerify, MicrobatchOutOfRange) {
  Program program = generated(2, 2);
  instrsOf(program, 1)[2].microbatch = 5;
  expectViolations(
      program,
      {{1, 2,
        "device 1: forward of stage 1, micro-batch 5 (op #2) is out of range: "
        "the program has 2 micro-batches"},
       {1, 8, "device 1: stage 1 has no forward for micro-batch 0"}});
}

TEST(PipelineScheduleVerify, OpOfAnotherStage) {
  Program program = generated(2, 2);
  instrsOf(program, 1)[2].stage = 0;
  expectViolations(
      program,
      {{1, 2,
        "device 1: forward of stage 0, micro-batch 0 (op #2) belongs to stage "
        "0, but device 1 runs stage 1"},
       {1, 8, "device 1: stage 1 has no forward for micro-batch 0"}});
}

TEST(PipelineScheduleVerify, DeviceWithoutStage) {
  Program program =
      buildGPipeSchedule(makeSpec(1, 1, 1, 1, /*inputsOnLast=*/false));
  std::vector<Instr> &instrs = instrsOf(program, 0);
  ASSERT_EQ(instrs.size(), 4u); // L0 F0 B0 Opt
  instrs.erase(instrs.begin() + 1, instrs.begin() + 3);
  expectViolations(
      program,
      {{0, 0, "device 0 runs no stage: it has no forward or backward"}});
}

TEST(PipelineScheduleVerify, MislabelledDevice) {
  Program program = generated(2, 2);
  program.devices[1].device = 5;
  expectViolations(program, {{1, 0, "device 1: program is labelled device 5"}});
}

//===----------------------------------------------------------------------===//
// Violations: optimizer step
//===----------------------------------------------------------------------===//

TEST(PipelineScheduleVerify, MissingOptimizerStep) {
  Program program = generated(2, 2);
  instrsOf(program, 0).pop_back();
  expectViolations(program, {{0, 9, "device 0 has no optimizer step"}});
}

TEST(PipelineScheduleVerify, EarlyOptimizerStep) {
  Program program = generated(2, 2);
  moveInstr(program, 0, 10, 9);
  expectViolations(program, {{0, 9,
                              "device 0: optimizer step (op #9) runs before "
                              "backward of stage 0, micro-batch 0 (op #10)"}});
}

TEST(PipelineScheduleVerify, TwoOptimizerSteps) {
  Program program = generated(2, 2);
  instrsOf(program, 0).push_back(optimizerStep());
  expectViolations(program, {{0, 11,
                              "device 0: optimizer step (op #11) duplicates "
                              "op #10"}});
}

TEST(PipelineScheduleVerify, ReportsEveryViolation) {
  Program program = generated(3, 4);
  std::vector<Instr> &device1 = instrsOf(program, 1);
  device1.erase(device1.begin() + 6);
  instrsOf(program, 2).pop_back();
  std::swap(instrsOf(program, 0)[1], instrsOf(program, 0)[2]);
  expectViolations(
      program,
      {{0, 1,
        "device 0: send activation to device 1, micro-batch 0, channel 0 (op "
        "#1) runs before forward of stage 0, micro-batch 0 (op #2) produces "
        "it"},
       {0, 8,
        "device 0: send activation to device 1, micro-batch 2, channel 0 (op "
        "#8) has no matching recv on device 1"},
       {2, 19, "device 2 has no optimizer step"}});
}

//===----------------------------------------------------------------------===//
// Send windows: sends that complete in the background, each awaited
//===----------------------------------------------------------------------===//

namespace {
/// The kinds of a device's program, one letter each: L(oad) F B W S R
/// w(ait) O(ptimizer step).
std::string kindsOf(const Program &program, unsigned device) {
  std::string text;
  for (const Instr &instr : program.devices[device].instrs)
    text += "LFBWSRwO"[int(instr.kind)];
  return text;
}
} // namespace

TEST(PipelineScheduleSendWindow, WaitsComeBeforeTheSendPastTheWindow) {
  // K=2, M=3. Device 0 sends three activations; with a window of 1 it waits
  // for each before the next send, and for the last before its step.
  Program program = generated(2, 3);
  placeSendWaits(program, 1);
  EXPECT_EQ(program.sendWindow, 1u);
  EXPECT_EQ(kindsOf(program, 0), "LFSLFwSLFwSRBRBRBwO");
  const std::vector<Instr> &device0 = instrsOf(program, 0);
  EXPECT_EQ(describe(device0[5]),
            "wait for the activation sent to device 1, micro-batch 0, "
            "channel 0");
  EXPECT_EQ(describe(device0[17]),
            "wait for the activation sent to device 1, micro-batch 2, "
            "channel 0");
  // Device 1 sends gradients: the same, in the drain.
  EXPECT_EQ(kindsOf(program, 1), "RLFRLFRLFBSBwSBwSwO");
  EXPECT_EQ(dump(verifySchedule(program)), "");

  // A window of 2 waits for the oldest before the third send.
  Program wide = generated(2, 3);
  placeSendWaits(wide, 2);
  EXPECT_EQ(kindsOf(wide, 0), "LFSLFSLFwSRBRBRBwwO");
  EXPECT_EQ(dump(verifySchedule(wide)), "");
}

TEST(PipelineScheduleSendWindow, GeneratedSchedulesVerifyCleanUnderEveryWindow) {
  for (unsigned k : {1u, 2u, 3u, 4u})
    for (unsigned m : {1u, 2u, 5u, 8u})
      for (unsigned c : {1u, 3u})
        for (unsigned window : {1u, 2u, 4u, 16u}) {
          SCOPED_TRACE("K=" + std::to_string(k) + " M=" + std::to_string(m) +
                       " channels=" + std::to_string(c) +
                       " window=" + std::to_string(window));
          Program program = generated(k, m, c);
          placeSendWaits(program, window);
          EXPECT_EQ(dump(verifySchedule(program)), "");
        }
}

TEST(PipelineScheduleSendWindow, MoreInFlightThanTheWindowIsRefused) {
  // Placed for a window of 2, declared 1: the second send to device 1 is
  // one too many.
  Program program = generated(2, 3);
  placeSendWaits(program, 2);
  program.sendWindow = 1;
  auto tooMany = [](unsigned device, std::size_t op, const char *what,
                    unsigned microbatch) {
    unsigned peer = 1 - device;
    return Violation{device, op,
                     "device " + std::to_string(device) + ": send " + what +
                         " to device " + std::to_string(peer) +
                         ", micro-batch " + std::to_string(microbatch) +
                         ", channel 0 (op #" + std::to_string(op) +
                         ") has 2 sends to device " + std::to_string(peer) +
                         " in flight, more than the send window of 1 the "
                         "program was planned for"};
  };
  ASSERT_EQ(kindsOf(program, 1), "RLFRLFRLFBSBSBwSwwO");
  expectViolations(program, {tooMany(0, 5, "activation", 1),
                             tooMany(0, 9, "activation", 2),
                             tooMany(1, 12, "gradient", 1),
                             tooMany(1, 15, "gradient", 0)});
}

TEST(PipelineScheduleSendWindow, ASendWithoutItsWaitIsRefused) {
  Program program = generated(2, 2);
  placeSendWaits(program, 1);
  std::vector<Instr> &device0 = instrsOf(program, 0);
  ASSERT_EQ(device0[5].kind, InstrKind::WaitSend);
  device0.erase(device0.begin() + 5);
  expectViolations(
      program, {{0, 2,
                 "device 0: send activation to device 1, micro-batch 0, "
                 "channel 0 (op #2) is never waited for: with a send window, "
                 "each send needs a wait_send after it, before the optimizer "
                 "step"},
                {0, 5,
                 "device 0: send activation to device 1, micro-batch 1, "
                 "channel 0 (op #5) has 2 sends to device 1 in flight, more "
                 "than the send window of 1 the program was planned for"}});
}

TEST(PipelineScheduleSendWindow, MisplacedWaitsAreRefused) {
  // A wait before its send, a wait after the optimizer step, and a wait in
  // a program whose sends complete as they are issued.
  Program program = generated(2, 2);
  placeSendWaits(program, 1);
  ASSERT_EQ(kindsOf(program, 0), "LFSLFwSRBRBwO");
  moveInstr(program, 0, 5, 1);  // the wait for micro-batch 0 before its send
  moveInstr(program, 0, 11, 12); // the last wait after the step
  expectViolations(
      program,
      {{0, 1,
        "device 0: wait for the activation sent to device 1, micro-batch 0, "
        "channel 0 (op #1) has no send before it that it has not already "
        "waited for"},
       {0, 3,
        "device 0: send activation to device 1, micro-batch 0, channel 0 "
        "(op #3) is never waited for: with a send window, each send needs a "
        "wait_send after it, before the optimizer step"},
       {0, 6,
        "device 0: send activation to device 1, micro-batch 1, channel 0 "
        "(op #6) has 2 sends to device 1 in flight, more than the send window "
        "of 1 the program was planned for"},
       {0, 12,
        "device 0: wait for the activation sent to device 1, micro-batch 1, "
        "channel 0 (op #12) runs after optimizer step (op #11), which needs "
        "every send complete"}});

  Program unwindowed = generated(2, 2);
  placeSendWaits(unwindowed, 1);
  unwindowed.sendWindow = 0;
  std::vector<Violation> violations = verifySchedule(unwindowed);
  ASSERT_FALSE(violations.empty());
  EXPECT_EQ(violations.front().message,
            "device 0: wait for the activation sent to device 1, micro-batch "
            "0, channel 0 (op #5) waits for a send, but the program's sends "
            "complete as they are issued (it has no send window)");
}

TEST(PipelineScheduleSendWindow, AWaitBeforeTheReceiveItNeedsDeadlocks) {
  // Device 1 forwards micro-batch 1 before micro-batch 0. Device 0 waits
  // for micro-batch 0's activation to be taken before it sends micro-batch
  // 1's, which device 1 wants first: a cycle through the wait. Without
  // that wait (a wider window) the same order runs.
  auto reordered = [] {
    Program program = generated(2, 2);
    std::vector<Instr> &device1 = instrsOf(program, 1);
    std::rotate(device1.begin(), device1.begin() + 3, device1.begin() + 6);
    return program;
  };
  Program program = reordered();
  placeSendWaits(program, 1);
  ASSERT_EQ(kindsOf(program, 0), "LFSLFwSRBRBwO");
  expectViolations(
      program,
      {{0, 5,
        "deadlock: device 0 waits at op #5 (wait for the activation sent to "
        "device 1, micro-batch 0, channel 0) while device 1 waits at op #0 "
        "(recv activation from device 0, micro-batch 1, channel 0)"},
       {1, 0,
        "deadlock: device 1 waits at op #0 (recv activation from device 0, "
        "micro-batch 1, channel 0) while device 0 waits at op #5 (wait for "
        "the activation sent to device 1, micro-batch 0, channel 0)"}});

  Program wide = reordered();
  placeSendWaits(wide, 2);
  EXPECT_EQ(dump(verifySchedule(wide)), "");
}
