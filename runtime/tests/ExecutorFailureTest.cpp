//===- ExecutorFailureTest.cpp - Failures end with an error, not a hang ---===//
//
// A bundle whose schedule cannot run is refused at load, naming the devices,
// ops and micro-batches involved; bad batches and bad bundles get errors that
// say what was expected, and the executor keeps working after a failed step.
//
//===----------------------------------------------------------------------===//

#include "ExecutorSupport.h"
#include "TestBundles.h"
#include "TestModels.h"

#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/verify/BundleValidation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

constexpr int64_t kBatch = 10;

/// Every parameter's values, read back from the executor.
std::map<std::string, std::vector<float>>
parametersOf(const PipelineExecutor &executor) {
  std::map<std::string, std::vector<float>> values;
  for (const ParamSpec &spec : executor.bundle().params)
    values[spec.name] = *executor.parameter(spec.name);
  return values;
}

//===----------------------------------------------------------------------===//
// Failures end with an error, never a hang or a crash
//===----------------------------------------------------------------------===//

/// Removes the first instruction of `device` matching the predicate and
/// returns its index.
template <typename Pred>
size_t removeInstr(Bundle &bundle, unsigned device, Pred pred) {
  auto &program = bundle.programs[device];
  for (size_t i = 0; i < program.size(); ++i)
    if (pred(program[i])) {
      program.erase(program.begin() + i);
      return i;
    }
  ADD_FAILURE() << "no such instruction";
  return 0;
}

/// Index of the first instruction of `device` matching the predicate.
template <typename Pred>
size_t findInstr(const Bundle &bundle, unsigned device, Pred pred) {
  const auto &program = bundle.programs[device];
  for (size_t i = 0; i < program.size(); ++i)
    if (pred(program[i]))
      return i;
  ADD_FAILURE() << "no such instruction";
  return 0;
}

void expectContains(const std::string &text, const std::string &part) {
  EXPECT_NE(text.find(part), std::string::npos)
      << "'" << part << "' not in: " << text;
}

/// The error PipelineExecutor::create gives for `bundle` ("" if it accepts).
std::string createError(Bundle bundle) {
  std::string error;
  auto executor = PipelineExecutor::create(std::move(bundle), {}, error);
  return executor ? "" : error;
}

// A recv whose send was removed is refused at load, naming the waiting
// device, its op and micro-batch, and the peer that never sends: no step
// runs into a receive timeout.
TEST(Executor, PeerThatNeverSendsIsRefusedAtLoad) {
  Bundle bundle =
      buildBundle(mlpGraph(kBatch), mlpSplit(3), 3, RematPolicy::Full);
  removeInstr(bundle, 0, [](const Instr &i) {
    return i.kind == InstrKind::SendActivation && i.microbatch == 1;
  });
  size_t recv = findInstr(bundle, 1, [](const Instr &i) {
    return i.kind == InstrKind::RecvActivation && i.microbatch == 1;
  });
  EXPECT_EQ(createError(bundle),
            "device 1: op #" + std::to_string(recv) +
                " (recv activation from device 0, micro-batch 1, channel 0): "
                "device 0 never sends it");
}

// A missing gradient send, on a skip channel, is refused the same way.
TEST(Executor, MissingGradientSendIsRefusedAtLoad) {
  Bundle bundle = buildBundle(residualGraph(kBatch), residualSplit(4), 2,
                              RematPolicy::None);
  removeInstr(bundle, 2, [](const Instr &i) {
    return i.kind == InstrKind::SendGradient && i.microbatch == 0 &&
           i.channel == 1;
  });
  size_t recv = findInstr(bundle, 1, [](const Instr &i) {
    return i.kind == InstrKind::RecvGradient && i.microbatch == 0 &&
           i.channel == 1;
  });
  EXPECT_EQ(createError(bundle),
            "device 1: op #" + std::to_string(recv) +
                " (recv gradient from device 2, micro-batch 0, channel 1): "
                "device 2 never sends it");
}

// Interleaving (4 stages on 2 devices): an instruction of a stage its device
// does not run, a transfer to the wrong device, and a transfer of stage 2
// whose receive names stage 1's boundary are each refused at load.
TEST(Executor, InterleavedStagesAreCheckedAtLoad) {
  auto interleaved = [] {
    return buildBundle(mlpGraph(kBatch), {0, 1, 2, 3}, 2, RematPolicy::Full,
                       gpipe::schedule::ScheduleKind::Interleaved, 2);
  };
  ASSERT_EQ(createError(interleaved()), "");
  Bundle bundle = interleaved();
  size_t forward = findInstr(bundle, 0, [](const Instr &i) {
    return i.kind == InstrKind::Forward && i.stage == 2;
  });
  bundle.programs[0][forward].stage = 1;
  EXPECT_EQ(createError(bundle),
            "device 0: op #" + std::to_string(forward) +
                " (forward of stage 1, micro-batch 0): device 0 runs stages "
                "0, 2, got stage 1");
  // Stage 3, the last, sends its gradient back to stage 2 on device 0.
  bundle = interleaved();
  size_t send = findInstr(bundle, 1, [](const Instr &i) {
    return i.kind == InstrKind::SendGradient && i.stage == 3;
  });
  bundle.programs[1][send].peer = 1;
  EXPECT_EQ(createError(bundle),
            "device 1: op #" + std::to_string(send) +
                " (send gradient to device 1, micro-batch 0, channel 0): "
                "expects peer device 0, got 1");
  // Device 1 receives stage 2's activation into stage 1 instead of 3: the
  // receive then names boundary 0, whose message device 0 already matched.
  bundle = interleaved();
  size_t recv = findInstr(bundle, 1, [](const Instr &i) {
    return i.kind == InstrKind::RecvActivation && i.stage == 3;
  });
  bundle.programs[1][recv].stage = 1;
  size_t first = findInstr(bundle, 1, [](const Instr &i) {
    return i.kind == InstrKind::RecvActivation && i.stage == 1;
  });
  EXPECT_EQ(createError(bundle),
            "device 1: op #" + std::to_string(recv) +
                " (recv activation from device 0, micro-batch 0, channel 0): "
                "repeats op #" +
                std::to_string(first));
}

// A send nobody receives is refused too.
TEST(Executor, UnreceivedSendIsRefusedAtLoad) {
  Bundle bundle =
      buildBundle(mlpGraph(kBatch), mlpSplit(2), 2, RematPolicy::Full);
  size_t send = findInstr(bundle, 0, [](const Instr &i) {
    return i.kind == InstrKind::SendActivation && i.microbatch == 1;
  });
  removeInstr(bundle, 1, [](const Instr &i) {
    return i.kind == InstrKind::RecvActivation && i.microbatch == 1;
  });
  EXPECT_EQ(createError(bundle),
            "device 0: op #" + std::to_string(send) +
                " (send activation to device 1, micro-batch 1, channel 0): "
                "device 1 never receives it");
}

// A cyclic wait (device 0 sends micro-batch 0 only after its first gradient
// recv, which device 1 sends only after that activation): every send has
// its recv, yet the programs cannot run; the refusal names where each device
// waits.
TEST(Executor, DeadlockIsRefusedAtLoadWithBothPositions) {
  Bundle bundle =
      buildBundle(mlpGraph(kBatch), mlpSplit(2), 2, RematPolicy::Full);
  auto &program = bundle.programs[0];
  size_t send = findInstr(bundle, 0, [](const Instr &i) {
    return i.kind == InstrKind::SendActivation && i.microbatch == 0;
  });
  Instr moved = program[send];
  program.erase(program.begin() + send);
  size_t recv = findInstr(bundle, 0, [](const Instr &i) {
    return i.kind == InstrKind::RecvGradient;
  });
  program.insert(program.begin() + recv + 1, moved);
  EXPECT_EQ(createError(bundle),
            "the schedule cannot go on: device 0 waits at op #" +
                std::to_string(recv) +
                " (recv gradient from device 1, micro-batch 1, channel 0); "
                "device 1 waits at op #0 (recv activation from device 0, "
                "micro-batch 0, channel 0)");
}

// A label outside the classes stops the step with the device, op,
// micro-batch and label; the executor stays usable.
TEST(Executor, BadLabelIsReportedAndTheExecutorRecovers) {
  Bundle bundle =
      buildBundle(mlpGraph(kBatch), mlpSplit(2), 3, RematPolicy::Full);
  size_t forward = findInstr(bundle, 1, [](const Instr &i) {
    return i.kind == InstrKind::Forward && i.microbatch == 2;
  });
  auto executor = makeExecutor(bundle);
  ASSERT_TRUE(executor);
  std::map<std::string, std::vector<float>> before = parametersOf(*executor);
  Batch batch = mlpBatch(kBatch, 1);
  batch["labels"].i32[8] = 12; // rows 7..9 are micro-batch 2 (4, 3, 3)
  StepResult step = executor->trainStep(batch);
  ASSERT_FALSE(step.ok());
  expectContains(step.error, "device 1: op #" + std::to_string(forward) +
                                 " (forward of stage 1, micro-batch 2): "
                                 "label 12 outside [0, 5) at position 1");
  expectContains(step.error, "softmax_cross_entropy");
  EXPECT_EQ(parametersOf(*executor), before);
  StepResult good = executor->trainStep(mlpBatch(kBatch, 1));
  EXPECT_TRUE(good.ok()) << good.error;
  EXPECT_EQ(executor->stepsDone(), 1);
}

// An embedding id outside the vocabulary, on the first device.
TEST(Executor, BadEmbeddingIdIsReported) {
  Bundle bundle = buildBundle(residualGraph(kBatch), residualSplit(3), 2,
                              RematPolicy::Full);
  auto executor = makeExecutor(bundle);
  ASSERT_TRUE(executor);
  Batch batch = residualBatch(kBatch, 1);
  batch["ids"].i32[6 * kSeq + 3] = -1; // rows 5..9 are micro-batch 1
  StepResult step = executor->trainStep(batch);
  ASSERT_FALSE(step.ok());
  expectContains(step.error, "device 0: op #");
  expectContains(step.error, "(forward of stage 0, micro-batch 1): "
                             "embedding id -1 outside [0, 11) at position 7");
}

// The batch must hold exactly the model inputs, with their types and shapes.
TEST(Executor, BadBatchesAreRejected) {
  auto executor = makeExecutor(
      buildBundle(mlpGraph(kBatch), mlpSplit(2), 2, RematPolicy::Full));
  ASSERT_TRUE(executor);
  Batch missing = mlpBatch(kBatch, 1);
  missing.erase("labels");
  expectContains(executor->trainStep(missing).error,
                 "missing model input 'labels' (expected i32 [10])");
  expectContains(executor->trainStep(mlpBatch(9, 1)).error,
                 "model input 'x': expected shape [10, 12], got [9, 12]");
  Batch wrongType = mlpBatch(kBatch, 1);
  wrongType["labels"] = HostTensor::floats({kBatch}, std::vector<float>(10));
  expectContains(executor->trainStep(wrongType).error,
                 "model input 'labels': expected i32 elements, got f32");
  Batch short_ = mlpBatch(kBatch, 1);
  short_["x"].f32.pop_back();
  expectContains(executor->trainStep(short_).error,
                 "model input 'x': shape [10, 12] needs 120 elements, got "
                 "119");
  Batch extra = mlpBatch(kBatch, 1);
  extra["y"] = HostTensor::floats({kBatch}, std::vector<float>(10));
  expectContains(executor->trainStep(extra).error,
                 "unexpected model input 'y'");
  EXPECT_EQ(executor->stepsDone(), 0);
}

/// The error `create` gives for a bundle modified by `edit`.
template <typename Edit> std::string createError(Edit edit) {
  Bundle bundle =
      buildBundle(mlpGraph(kBatch), mlpSplit(2), 2, RematPolicy::Full);
  edit(bundle);
  std::string error;
  auto executor = PipelineExecutor::create(bundle, {}, error);
  EXPECT_FALSE(executor);
  return error;
}

// Bad bundles are refused with a message saying what was expected.
// A parameter declared and never read, or read only by an op whose result
// reaches no output (dead code), has a zero gradient: the load-time rule asks
// only for the parameters the outputs depend on. FuzzCompile found the
// compiler writing both kinds (gpipe-report.mlir's unread 'a.b'; a mutated
// charlm whose attention result was dropped), which the rule refused. They
// train, and those parameters keep their values.
TEST(Executor, UnreadParameterLoadsAndKeepsItsValue) {
  ModelGraph graph = mlpGraph(kBatch);
  graph.param("unread", {3}, InitKind::Ones);
  (void)graph.dense(graph.inputValues[0],
                    graph.param("dead.w", {12, 2}, InitKind::Ones));
  Bundle bundle = buildBundle(graph, mlpSplit(2), 2, RematPolicy::Full);
  EXPECT_EQ(validateBundle(bundle), "");
  OptimizerConfig sgd;
  sgd.learningRate = 0.5f;
  ExecutorConfig config;
  config.optimizer = sgd;
  auto executor = makeExecutor(std::move(bundle), config);
  ASSERT_TRUE(executor);
  StepResult step = executor->trainStep(mlpBatch(kBatch, 3));
  ASSERT_TRUE(step.ok()) << step.error;
  EXPECT_EQ(*executor->parameter("unread"), std::vector<float>(3, 1.0f));
  EXPECT_EQ(*executor->parameter("dead.w"), std::vector<float>(24, 1.0f));
}

TEST(Executor, InvalidBundlesAreRefused) {
  std::string valid;
  Bundle good =
      buildBundle(mlpGraph(kBatch), mlpSplit(2), 2, RematPolicy::Full);
  EXPECT_EQ(validateBundle(good), "");

  // An empty backward would train to a clean exit and never update stage
  // 0's parameters.
  expectContains(createError([](Bundle &b) { b.stages[0].backward.clear(); }),
                 "stage 0: the backward never accumulates the gradient of "
                 "parameter 'l1.b', which the forward reads; its updates "
                 "would be lost");
  // A frozen parameter (a constant of the model) takes no gradient, and
  // needs none.
  expectContains(createError([](Bundle &b) {
                   for (ParamSpec &param : b.params)
                     if (param.name == "l1.b")
                       param.frozen = true;
                 }),
                 "stage 0: the backward accumulates a gradient into "
                 "parameter 'l1.b', which is frozen (a constant of the "
                 "model)");
  expectContains(createError([](Bundle &b) {
                   for (Op &op : b.stages[0].forward)
                     if (op.kind == OpKind::Dense) {
                       op.operands.resize(1);
                       break;
                     }
                 }),
                 "stage 0: forward op 4 (dense): expects 2 or 3 operands, "
                 "got 1");
  expectContains(createError([](Bundle &b) {
                   b.stages[1].backward[0].operands[0] = 1000;
                 }),
                 "is value 1000, outside [0, ");
  expectContains(createError([](Bundle &b) { b.programs.pop_back(); }),
                 "expects at least 2 devices for 2 stages on fewer programs "
                 "(interleaving), got 1 program");
  expectContains(createError([](Bundle &b) { b.microbatchRows[0] += 1; }),
                 "micro-batch rows sum to 11, expected the batch 10");
  expectContains(createError([](Bundle &b) {
                   std::swap(b.programs[0].front(), b.programs[0].back());
                 }),
                 "the optimizer step must be the last instruction");
  expectContains(createError([](Bundle &b) {
                   b.stages[0].values[b.stages[0].outputs[0]].shape.back() = 3;
                 }),
                 "expects the result of shape [10, 16], got [10, 3]");
  expectContains(createError([](Bundle &b) {
                   b.stages[1].forward.back().operands = {
                       b.stages[1].forward.back().operands[1],
                       b.stages[1].forward.back().operands[0]};
                 }),
                 "expects operand 0 of type f32, got i32");
  expectContains(createError([](Bundle &b) { b.params[0].stage = 1; }),
                 "names parameter 'l1.w' of stage 1");
  expectContains(createError([](Bundle &b) {
                   for (Instr &i : b.programs[1])
                     if (i.kind == InstrKind::Backward) {
                       i.microbatch = 0;
                     }
                 }),
                 "runs twice");
  expectContains(createError([](Bundle &b) { b.stages[1].recompute.clear(); }),
                 "is not available there");
}

} // namespace

namespace {
// A zero-bubble bundle (split backwards, BackwardWeights instructions) whose
// W is missing, repeated, early, or defines what B sends, is refused at load.
// A recompute that reads a forward value it does not define again is valid
// under remat selective alone (the forward kept the value, and the
// compiler's plan keeps its buffer); under full it reads a value that is
// gone.
TEST(Executor, OnlyASelectiveRecomputeReadsWhatTheForwardKept) {
  Bundle bundle =
      buildBundle(mlpGraph(kBatch), mlpSplit(2), 2, RematPolicy::Full);
  std::vector<Op> &recompute = bundle.stages[1].recompute;
  auto first =
      std::find_if(recompute.begin(), recompute.end(),
                   [](const Op &op) { return op.kind != OpKind::Param; });
  ASSERT_NE(first, recompute.end());
  const int kept = first->results[0];
  recompute.erase(first);
  auto reader =
      std::find_if(recompute.begin(), recompute.end(), [&](const Op &op) {
        return std::count(op.operands.begin(), op.operands.end(), kept) > 0;
      });
  ASSERT_NE(reader, recompute.end());
  const size_t operand =
      std::find(reader->operands.begin(), reader->operands.end(), kept) -
      reader->operands.begin();
  EXPECT_EQ(createError(bundle),
            "stage 1: recompute op " +
                std::to_string(reader - recompute.begin()) + " (" +
                opKindName(reader->kind) + "): operand " +
                std::to_string(operand) + " (value " + std::to_string(kept) +
                ") is not available there");
  bundle.remat = RematPolicy::Selective;
  EXPECT_EQ(createError(bundle), "");
}

TEST(Executor, InvalidSplitBackwardsAreRefused) {
  using gpipe::schedule::ScheduleKind;
  auto zb = [] {
    return buildBundle(mlpGraph(kBatch), mlpSplit(2), 2, RematPolicy::Full,
                       ScheduleKind::ZeroBubbleH1);
  };
  ASSERT_EQ(createError(zb()), "");
  auto isWeights = [](unsigned m) {
    return [m](const Instr &i) {
      return i.kind == InstrKind::BackwardWeights && i.microbatch == m;
    };
  };
  {
    Bundle b = zb();
    removeInstr(b, 1, isWeights(1));
    EXPECT_EQ(createError(b),
              "device 1: splits its backwards, but micro-batch 1 has no "
              "weight-gradient backward");
  }
  {
    Bundle b = zb();
    size_t w = findInstr(b, 1, isWeights(0));
    b.programs[1][w].microbatch = 1;
    expectContains(createError(b), "(weight-gradient backward of stage 1, "
                                   "micro-batch 1): runs twice");
  }
  {
    Bundle b = zb();
    size_t w = findInstr(b, 0, isWeights(0));
    size_t bwd = findInstr(b, 0, [](const Instr &i) {
      return i.kind == InstrKind::Backward && i.microbatch == 0;
    });
    Instr moved = b.programs[0][w];
    b.programs[0].erase(b.programs[0].begin() + w);
    b.programs[0].insert(b.programs[0].begin() + bwd, moved);
    expectContains(createError(b), "(weight-gradient backward of stage 0, "
                                   "micro-batch 0): comes before the backward "
                                   "of its micro-batch");
  }
  {
    // Stage 1's B ends before the op that defines its input gradient.
    Bundle b = zb();
    b.stages[1].weightsFrom = 0;
    expectContains(createError(b),
                   "stage 1: input gradient 0 (value " +
                       std::to_string(b.stages[1].inputGrads[0]) +
                       ") is defined by a weight-gradient op, after op 0: it "
                       "is sent before those run");
  }
  {
    Bundle b = zb();
    b.stages[1].weightsFrom = b.stages[1].backward.size() + 1;
    expectContains(createError(b), "splits its backward at op ");
  }
  {
    // The B half of a dense gradient with its input gradient dropped too.
    Bundle b = zb();
    for (Op &op : b.stages[1].backward)
      if (op.kind == OpKind::DenseGrad && op.results[0] >= 0) {
        op.results[0] = -1;
        op.results[1] = -1;
        break;
      }
    expectContains(createError(b), "defines none of its results");
  }
}
} // namespace
