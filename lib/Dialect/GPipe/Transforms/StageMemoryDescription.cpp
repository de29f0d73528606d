//===- StageMemoryDescription.cpp - Stages as the memory planner sees them ===//
//
// Describes each stage as the runtime will run it (the values the bundle
// writer numbers, in the same order, with their bytes and the state their ops
// save; the forward, recompute and backward op lists; parameter-gradient
// results the runtime accumulates in place dropped).
//
//===----------------------------------------------------------------------===//

#include "StageMemoryDescription.h"
#include "gpipe/Dialect/GPipe/Transforms/RecomputeCopies.h"
#include "gpipe/Dialect/GPipe/Transforms/SplitBackward.h"
#include "gpipe/runtime/bundle/OpTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace gpipe;

/// The runtime stores every element in 4 bytes (f32 values, i32 ids).
static constexpr int64_t kElementBytes = 4;

static int64_t numElements(Value value) {
  return cast<RankedTensorType>(value.getType()).getNumElements();
}

namespace {
/// Numbers one stage's values as the bundle writer does and sizes them.
class StageValues {
public:
  StageValues(int64_t batch, PlannedStage &stage)
      : batch(batch), stage(stage) {}

  int define(Value value, bool perExample) {
    auto type = cast<RankedTensorType>(value.getType());
    perExample =
        perExample && type.getRank() > 0 && type.getDimSize(0) == batch;
    int id = stage.values.size();
    ids[value] = id;
    batched.push_back(perExample);
    stage.values.push_back(
        sizeOf(numElements(value) * kElementBytes, perExample));
    return id;
  }
  void alias(Value value, int id) { ids[value] = id; }
  int lookup(Value value) const {
    auto it = ids.find(value);
    return it == ids.end() ? -1 : it->second;
  }
  bool isBatched(int id) const { return batched[id]; }
  /// `bytes` at the full batch, per row if per example.
  ByteSize sizeOf(int64_t bytes, bool perExample) const {
    return perExample ? ByteSize{0, bytes / batch} : ByteSize{bytes, 0};
  }
  void addSaved(int id, int64_t bytes, bool perExample) {
    ByteSize extra = sizeOf(bytes, perExample);
    overflowed |= __builtin_add_overflow(stage.values[id].fixed, extra.fixed,
                                         &stage.values[id].fixed) ||
                  __builtin_add_overflow(stage.values[id].perRow, extra.perRow,
                                         &stage.values[id].perRow);
  }
  /// Adds `bytes` to the stage's resident bytes, checked.
  void addResident(int64_t elements, int64_t copies) {
    int64_t bytes;
    overflowed |=
        __builtin_mul_overflow(elements, kElementBytes * copies, &bytes) ||
        __builtin_add_overflow(stage.residentBytes, bytes,
                               &stage.residentBytes);
  }
  /// A size past int64 was met: the stage cannot be planned.
  bool overflowed = false;

private:
  int64_t batch;
  PlannedStage &stage;
  llvm::DenseMap<Value, int> ids;
  std::vector<bool> batched;
};
} // namespace

runtime::SavedState gpipe::savedStateOf(Operation *op) {
  std::optional<runtime::OpKind> kind =
      runtime::opKindNamed(op->getName().stripDialect().str());
  if (!kind || op->getNumOperands() == 0)
    return {};
  auto type = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  if (!type)
    return {};
  int64_t heads = 1;
  if (auto attention = dyn_cast<AttentionOp>(op))
    heads = attention.getHeads();
  ArrayRef<int64_t> shape = type.getShape();
  return runtime::savedStateOf(*kind, shape.data(), shape.size(), heads);
}

/// Scratch the runtime's kernel of `op` needs while it runs (the op table's
/// rule, from its operands' shapes and window attributes).
static int64_t scratchBytes(Operation *op) {
  std::optional<runtime::OpKind> kind =
      runtime::opKindNamed(op->getName().stripDialect().str());
  if (!kind)
    return 0;
  SmallVector<const int64_t *> shapes;
  SmallVector<size_t> ranks;
  for (Value operand : op->getOperands()) {
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(operand.getType()).getShape();
    shapes.push_back(shape.data());
    ranks.push_back(shape.size());
  }
  return runtime::scratchBytesOf(
      *kind, shapes.data(), ranks.data(), shapes.size(),
      getWindowAttrs(op).value_or(runtime::WindowAttrs()));
}

/// Whether the runtime accumulates result `index` of `op` straight into a
/// parameter's gradient when an accumulate_grad is its only use.
static bool accumulatesInPlace(Operation *op, unsigned index) {
  if (isa<BiasGradOp, EmbeddingGradOp>(op))
    return true;
  return isa<DenseGradOp, LayerNormGradOp, AttentionGradOp, Conv2dGradOp,
             BatchNormGradOp>(op) &&
         index > 0;
}

static PlannedOp describeOp(Operation *op, StageValues &values,
                            bool defineResults,
                            ArrayRef<bool> skipResult = {}) {
  PlannedOp planned;
  planned.name = op->getName().stripDialect().str();
  SmallVector<bool> operandBatched;
  for (Value operand : op->getOperands()) {
    int id = values.lookup(operand);
    planned.operands.push_back(id);
    operandBatched.push_back(id >= 0 && values.isBatched(id));
  }
  for (OpResult result : op->getResults()) {
    int id =
        defineResults
            ? values.define(result, isPerExampleResult(result, operandBatched))
            : values.lookup(result);
    if (skipResult.empty() || !skipResult[result.getResultNumber()])
      planned.results.push_back(id);
  }
  // Saved state and scratch scale with the first operand's rows.
  bool batched = !operandBatched.empty() && operandBatched.front();
  if (defineResults && op->getNumResults() > 0) {
    runtime::SavedState saved = savedStateOf(op);
    values.addSaved(values.lookup(op->getResult(0)), saved.total(),
                    batched && saved.perRow);
  }
  planned.scratch = values.sizeOf(scratchBytes(op), batched);
  return planned;
}

/// A fused pair's kernel reads the first op's operands until the second is
/// done: they live that long. The pairs are chooseFusions', on `ops` alone.
static void keepFusedOperandsLive(std::vector<PlannedOp> &ops) {
  std::vector<runtime::FusionKind> fusions = runtime::chooseFusions(
      ops.size(), [&](size_t i) { return runtime::opKindNamed(ops[i].name); },
      [&](size_t i) {
        return ops[i].operands.empty() ? -1 : ops[i].operands[0];
      },
      [&](size_t i) {
        return ops[i].results.empty() ? -1 : ops[i].results[0];
      });
  for (size_t i = 0; i < fusions.size(); ++i) {
    if (fusions[i] == runtime::FusionKind::None)
      continue;
    size_t next = i + 1;
    while (ops[next].name == "param")
      ++next;
    llvm::append_range(ops[next].operands, ops[i].operands);
  }
}

FailureOr<PlannedStage> gpipe::describeStageMemory(StageOp stage,
                                                   StageBackwardOp backward,
                                                   bool isLast, int64_t batch,
                                                   unsigned optimizerSlots) {
  PlannedStage out;
  StageValues values(batch, out);
  Block &body = stage.getBody().front();
  for (auto [operand, argument] :
       llvm::zip(stage.getInputs(), body.getArguments())) {
    out.inputs.push_back(values.define(argument, true));
    if (auto input = operand.getDefiningOp<InputOp>()) {
      out.inputChannels.push_back(~0u);
      out.inputNames.push_back(input.getName().str());
    } else if (auto recv = operand.getDefiningOp<RecvOp>()) {
      out.inputChannels.push_back(recv.getChannel());
      out.inputNames.push_back("");
    } else {
      return stage.emitOpError() << "has an input that is neither a model "
                                    "input nor a gpipe.recv; run "
                                    "gpipe-insert-send-recv first";
    }
  }

  llvm::DenseMap<Operation *, size_t> forwardIndex; // its index in out.forward
  for (LayerOp layer : body.getOps<LayerOp>()) {
    Block &layerBody = layer.getBody().front();
    for (Operation &op : layerBody.without_terminator()) {
      forwardIndex[&op] = out.forward.size();
      if (auto param = dyn_cast<ParamOp>(op)) {
        // A view of the resident parameter: no bytes of its own.
        int id = values.define(param.getResult(), false);
        out.values[id] = ByteSize();
        out.forward.push_back({{}, {id}, {}, "param"});
        values.addResident(numElements(param.getResult()),
                           2 + int64_t(optimizerSlots));
        continue;
      }
      out.forward.push_back(describeOp(&op, values, /*defineResults=*/true));
    }
    for (auto [result, yielded] : llvm::zip(
             layer.getResults(), layerBody.getTerminator()->getOperands()))
      values.alias(result, values.lookup(yielded));
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  if (isLast)
    out.loss = values.lookup(yield.getValues()[0]);
  else
    for (Value value : yield.getValues())
      out.outputs.push_back(values.lookup(value));

  // The recompute: the parameters and the forward ops the backward copies
  // and reruns, in the forward's order, on the same ids.
  FailureOr<llvm::DenseMap<Operation *, Operation *>> copies =
      matchRecomputeCopies(stage, backward);
  if (failed(copies))
    return failure();
  llvm::DenseSet<Operation *> rerun = rerunRecomputes(backward, *copies);
  std::vector<char> recomputed(out.forward.size(), 0);
  for (auto [copy, original] : *copies)
    if (rerun.contains(copy))
      recomputed[forwardIndex.lookup(original)] = 1;
  for (size_t i = 0; i < out.forward.size(); ++i)
    if (recomputed[i] || out.forward[i].name == "param")
      out.recompute.push_back(out.forward[i]);
  keepFusedOperandsLive(out.forward);
  keepFusedOperandsLive(out.recompute);

  Block &backBody = backward.getBody().front();
  for (auto [argument, forwardArg] :
       llvm::zip(backBody.getArguments(), body.getArguments()))
    values.alias(argument, values.lookup(forwardArg));
  for (BlockArgument grad :
       backBody.getArguments().drop_front(body.getNumArguments()))
    out.outputGrads.push_back(values.define(grad, true));

  // Results accumulated in place: their only use is one accumulate_grad.
  auto inPlace = [](OpResult result) {
    return accumulatesInPlace(result.getOwner(), result.getResultNumber()) &&
           result.hasOneUse() && isa<AccumulateGradOp>(*result.user_begin());
  };
  for (Operation &op : backBody.without_terminator()) {
    if (Operation *original = copies->lookup(&op)) {
      for (auto [copy, forwardResult] :
           llvm::zip(op.getResults(), original->getResults()))
        values.alias(copy, values.lookup(forwardResult));
      continue;
    }
    // A split backward's W ops run in their own instruction.
    std::vector<PlannedOp> &list =
        isWeightsOp(&op) ? out.backwardWeights : out.backward;
    if (auto accumulate = dyn_cast<AccumulateGradOp>(op)) {
      auto grad = dyn_cast<OpResult>(accumulate.getGrad());
      if (!grad || !inPlace(grad))
        list.push_back(
            {{values.lookup(accumulate.getGrad())}, {}, {}, "accumulate_grad"});
      continue;
    }
    // The halves of a split dense or layer-norm gradient leave the other
    // half's results unused, and an input gradient may have no reader: the
    // bundle writes them as -1, unallocated.
    bool split = isSplitBackward(backward) && separatesWeightGradients(&op);
    SmallVector<bool> skip;
    for (OpResult result : op.getResults())
      skip.push_back(inPlace(result) || (split && result.use_empty()) ||
                     isUnreadInputGradient(result));
    list.push_back(describeOp(&op, values, true, skip));
  }
  for (Value grad : backBody.getTerminator()->getOperands())
    out.inputGrads.push_back(values.lookup(grad));
  if (values.overflowed)
    return stage.emitOpError()
           << "needs 2^63 bytes or more for its parameters (with their "
              "gradients and optimizer state) or for one value with its "
              "saved state; the model is too large to plan";
  return out;
}

std::vector<PlannedInstr> gpipe::describeProgramMemory(ProgramOp program,
                                                       ModelOp model,
                                                       unsigned numDevices) {
  // The index among the device's stages of a stage, named by symbol or by
  // number (a load or transfer without one serves the device's first).
  auto localOf = [&](std::optional<uint64_t> stage) -> unsigned {
    return stage ? unsigned(*stage / numDevices) : 0;
  };
  auto localOfSymbol = [&](StringRef symbol) -> unsigned {
    StageOp stage = model.lookupStage(symbol);
    return stage ? unsigned(stage.getIndex() / numDevices) : 0;
  };
  // ScheduleOp's verifier bounds micro-batches and channels below 2^32.
  std::vector<PlannedInstr> instrs;
  for (Operation &op : program.getBody().front()) {
    PlannedInstr instr;
    llvm::TypeSwitch<Operation *>(&op)
        .Case([&](LoadInputOp o) {
          instr = {PlannedInstrKind::LoadInput, localOf(o.getStage()),
                   unsigned(o.getMb()), 0, o.getName().str()};
        })
        .Case([&](ForwardOp o) {
          instr = {PlannedInstrKind::Forward, localOfSymbol(o.getStage()),
                   unsigned(o.getMb()), 0, ""};
        })
        .Case([&](BackwardOp o) {
          instr = {PlannedInstrKind::Backward, localOfSymbol(o.getStage()),
                   unsigned(o.getMb()), 0, ""};
        })
        .Case([&](BackwardWeightsOp o) {
          instr = {PlannedInstrKind::BackwardWeights,
                   localOfSymbol(o.getStage()), unsigned(o.getMb()), 0, ""};
        })
        .Case([&](SendActivationOp o) {
          instr = {PlannedInstrKind::SendActivation, localOf(o.getStage()),
                   unsigned(o.getMb()), unsigned(o.getChannel()), ""};
        })
        .Case([&](RecvActivationOp o) {
          instr = {PlannedInstrKind::RecvActivation, localOf(o.getStage()),
                   unsigned(o.getMb()), unsigned(o.getChannel()), ""};
        })
        .Case([&](SendGradientOp o) {
          instr = {PlannedInstrKind::SendGradient, localOf(o.getStage()),
                   unsigned(o.getMb()), unsigned(o.getChannel()), ""};
        })
        .Case([&](RecvGradientOp o) {
          instr = {PlannedInstrKind::RecvGradient, localOf(o.getStage()),
                   unsigned(o.getMb()), unsigned(o.getChannel()), ""};
        })
        .Case([&](WaitSendActivationOp o) {
          instr = {PlannedInstrKind::WaitSendActivation, localOf(o.getStage()),
                   unsigned(o.getMb()), unsigned(o.getChannel()), ""};
        })
        .Case([&](WaitSendGradientOp o) {
          instr = {PlannedInstrKind::WaitSendGradient, localOf(o.getStage()),
                   unsigned(o.getMb()), unsigned(o.getChannel()), ""};
        })
        .Case([&](OptimizerStepOp) {
          instr = {PlannedInstrKind::OptimizerStep, 0, 0, 0, ""};
        });
    instrs.push_back(instr);
  }
  return instrs;
}

KeepPolicy gpipe::keepPolicyOf(StringRef remat) {
  if (remat == "none")
    return KeepPolicy::All;
  if (remat == "except-last")
    return KeepPolicy::Last;
  return KeepPolicy::None;
}

StringRef gpipe::rematNameOf(KeepPolicy keep) {
  switch (keep) {
  case KeepPolicy::All:
    return "none";
  case KeepPolicy::Last:
    return "except-last";
  case KeepPolicy::None:
    return "full";
  }
  return "full";
}

FailureOr<std::vector<PlannedStage>>
gpipe::describeModelStages(ModelOp model, unsigned optimizerSlots,
                           KeepPolicy &keep) {
  Block &body = model.getBody().front();
  Value loss = model.getReturnOp().getLoss();
  std::vector<PlannedStage> stages;
  keep = KeepPolicy::None;
  for (StageOp stage : body.getOps<StageOp>()) {
    StageBackwardOp backward;
    for (StageBackwardOp candidate : body.getOps<StageBackwardOp>())
      if (candidate.getStage() == stage.getSymName())
        backward = candidate;
    if (!backward)
      return stage.emitOpError()
             << "has no gpipe.stage_backward; run gpipe-differentiate first";
    keep = keepPolicyOf(backward.getRemat().value_or("full"));
    FailureOr<PlannedStage> planned =
        describeStageMemory(stage, backward, loss.getDefiningOp() == stage,
                            model.getBatch(), optimizerSlots);
    if (failed(planned))
      return failure();
    stages.push_back(std::move(*planned));
  }
  return stages;
}
