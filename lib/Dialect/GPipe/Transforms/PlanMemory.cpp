//===- PlanMemory.cpp - Each device's static memory arena -----------------===//
//
// Describes each stage as the runtime will run it (the values the bundle
// writer numbers, in the same order, with their bytes and the state their ops
// save; the forward, recompute and backward op lists; parameter-gradient
// results the runtime accumulates in place dropped), replays each device's
// unrolled program with MemoryPlanner and records the plan on the program.
//
//===----------------------------------------------------------------------===//

#include "MemoryCapOption.h"
#include "gpipe/Analysis/ByteCount.h"
#include "gpipe/Analysis/MemoryPlanner.h"
#include "gpipe/Analysis/PipelineSchedule.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <functional>

namespace gpipe {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

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
    stage.values[id].fixed += extra.fixed;
    stage.values[id].perRow += extra.perRow;
  }

private:
  int64_t batch;
  PlannedStage &stage;
  llvm::DenseMap<Value, int> ids;
  std::vector<bool> batched;
};
} // namespace

/// Bytes of the state the runtime saves with `op`'s result for the backward.
static int64_t savedStateBytes(Operation *op) {
  return llvm::TypeSwitch<Operation *, int64_t>(op)
      .Case([](LayerNormOp norm) {
        auto type = cast<RankedTensorType>(norm.getType());
        return 2 * (type.getNumElements() / type.getShape().back()) *
               kElementBytes; // mean, rstd per row
      })
      .Case([](AttentionOp attention) {
        auto type = cast<RankedTensorType>(attention.getType());
        int64_t b = type.getDimSize(0), s = type.getDimSize(1),
                d = type.getDimSize(2);
        // qkv, probabilities, context
        return (b * s * 3 * d + b * int64_t(attention.getHeads()) * s * s +
                b * s * d) *
               kElementBytes;
      })
      .Case([](DropoutOp dropout) {
        return numElements(dropout.getResult()); // one byte of mask each
      })
      .Case([](SoftmaxCrossEntropyOp loss) {
        return numElements(loss->getOperand(0)) * kElementBytes; // softmax
      })
      .Default([](Operation *) { return int64_t(0); });
}

/// Scratch the runtime's kernel of `op` needs while it runs.
static int64_t scratchBytes(Operation *op) {
  if (auto grad = dyn_cast<AttentionGradOp>(op))
    return 4 * numElements(grad->getOperand(2)) * kElementBytes;
  return 0;
}

/// Whether the runtime accumulates result `index` of `op` straight into a
/// parameter's gradient when an accumulate_grad is its only use.
static bool accumulatesInPlace(Operation *op, unsigned index) {
  if (isa<BiasGradOp, EmbeddingGradOp>(op))
    return true;
  return isa<DenseGradOp, LayerNormGradOp, AttentionGradOp>(op) && index > 0;
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
  if (defineResults && op->getNumResults() > 0)
    values.addSaved(values.lookup(op->getResult(0)), savedStateBytes(op),
                    batched);
  planned.scratch = values.sizeOf(scratchBytes(op), batched);
  return planned;
}

static FailureOr<PlannedStage> describeStage(StageOp stage,
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

  SmallVector<Operation *> forwardOps;
  for (LayerOp layer : body.getOps<LayerOp>()) {
    Block &layerBody = layer.getBody().front();
    for (Operation &op : layerBody.without_terminator()) {
      forwardOps.push_back(&op);
      if (auto param = dyn_cast<ParamOp>(op)) {
        // A view of the resident parameter: no bytes of its own.
        int id = values.define(param.getResult(), false);
        out.values[id] = ByteSize();
        out.forward.push_back({{}, {id}, {}, "param"});
        out.residentBytes += numElements(param.getResult()) * kElementBytes *
                             (2 + int64_t(optimizerSlots));
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
  out.recompute = out.forward; // the same ops on the same ids

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
  auto forwardIt = forwardOps.begin();
  for (Operation &op : backBody.without_terminator()) {
    if (auto ref = dyn_cast<ParamRefOp>(op)) {
      while (forwardIt != forwardOps.end() && !isa<ParamOp>(*forwardIt))
        ++forwardIt;
      if (forwardIt == forwardOps.end())
        return ref.emitOpError()
               << "has no matching gpipe.param in the forward";
      values.alias(ref.getResult(), values.lookup((*forwardIt)->getResult(0)));
      ++forwardIt;
      continue;
    }
    if (op.hasAttr("gpipe.recompute")) {
      while (forwardIt != forwardOps.end() && isa<ParamOp>(*forwardIt))
        ++forwardIt;
      if (forwardIt == forwardOps.end())
        return op.emitOpError() << "has no matching op in the forward";
      for (auto [copy, original] :
           llvm::zip(op.getResults(), (*forwardIt)->getResults()))
        values.alias(copy, values.lookup(original));
      ++forwardIt;
      continue;
    }
    if (auto accumulate = dyn_cast<AccumulateGradOp>(op)) {
      auto grad = dyn_cast<OpResult>(accumulate.getGrad());
      if (!grad || !inPlace(grad))
        out.backward.push_back(
            {{values.lookup(accumulate.getGrad())}, {}, {}, "accumulate_grad"});
      continue;
    }
    SmallVector<bool> skip;
    for (OpResult result : op.getResults())
      skip.push_back(inPlace(result));
    out.backward.push_back(describeOp(&op, values, true, skip));
  }
  for (Value grad : backBody.getTerminator()->getOperands())
    out.inputGrads.push_back(values.lookup(grad));
  return out;
}

static PlannedInstrKind plannedKind(schedule::InstrKind kind,
                                    schedule::Direction direction) {
  bool activation = direction == schedule::Direction::Activation;
  switch (kind) {
  case schedule::InstrKind::LoadInput:
    return PlannedInstrKind::LoadInput;
  case schedule::InstrKind::Forward:
    return PlannedInstrKind::Forward;
  case schedule::InstrKind::Backward:
    return PlannedInstrKind::Backward;
  case schedule::InstrKind::Send:
    return activation ? PlannedInstrKind::SendActivation
                      : PlannedInstrKind::SendGradient;
  case schedule::InstrKind::Recv:
    return activation ? PlannedInstrKind::RecvActivation
                      : PlannedInstrKind::RecvGradient;
  case schedule::InstrKind::OptimizerStep:
    return PlannedInstrKind::OptimizerStep;
  }
  return PlannedInstrKind::OptimizerStep;
}

static std::vector<PlannedInstr> describeProgram(ProgramOp program) {
  std::vector<PlannedInstr> instrs;
  for (Operation &op : program.getBody().front()) {
    PlannedInstr instr;
    llvm::TypeSwitch<Operation *>(&op)
        .Case([&](LoadInputOp o) {
          instr = {PlannedInstrKind::LoadInput, o.getMb(), 0,
                   o.getName().str()};
        })
        .Case([&](ForwardOp o) {
          instr = {PlannedInstrKind::Forward, o.getMb(), 0, ""};
        })
        .Case([&](BackwardOp o) {
          instr = {PlannedInstrKind::Backward, o.getMb(), 0, ""};
        })
        .Case([&](SendActivationOp o) {
          instr = {PlannedInstrKind::SendActivation, o.getMb(), o.getChannel(),
                   ""};
        })
        .Case([&](RecvActivationOp o) {
          instr = {PlannedInstrKind::RecvActivation, o.getMb(), o.getChannel(),
                   ""};
        })
        .Case([&](SendGradientOp o) {
          instr = {PlannedInstrKind::SendGradient, o.getMb(), o.getChannel(),
                   ""};
        })
        .Case([&](RecvGradientOp o) {
          instr = {PlannedInstrKind::RecvGradient, o.getMb(), o.getChannel(),
                   ""};
        })
        .Case([&](OptimizerStepOp) {
          instr = {PlannedInstrKind::OptimizerStep, 0, 0, ""};
        });
    instrs.push_back(instr);
  }
  return instrs;
}

static KeepPolicy keepPolicy(StringRef remat) {
  if (remat == "none")
    return KeepPolicy::All;
  if (remat == "except-last")
    return KeepPolicy::Last;
  return KeepPolicy::None;
}

static StringRef rematName(KeepPolicy keep) {
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

namespace {
struct PlanMemoryPass : public gpipe::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    std::optional<uint64_t> cap;
    if (failed(parseMemoryCapOption(getOperation(), memoryCap, cap)))
      return signalPassFailure();
    for (ScheduleOp schedule : getOperation().getOps<ScheduleOp>())
      if (failed(planSchedule(schedule, cap)))
        return signalPassFailure();
  }

  LogicalResult planSchedule(ScheduleOp schedule, std::optional<uint64_t> cap) {
    auto model = SymbolTable::lookupNearestSymbolFrom<ModelOp>(
        schedule, schedule.getModelAttr());
    if (!model)
      return schedule.emitOpError() << "refers to " << schedule.getModelAttr()
                                    << ", which is not a gpipe.model";
    Block &body = model.getBody().front();
    Value loss = model.getReturnOp().getLoss();
    SmallVector<PlannedStage> stages;
    std::optional<KeepPolicy> keep;
    for (StageOp stage : body.getOps<StageOp>()) {
      StageBackwardOp backward;
      for (StageBackwardOp candidate : body.getOps<StageBackwardOp>())
        if (candidate.getStage() == stage.getSymName())
          backward = candidate;
      if (!backward)
        return stage.emitOpError()
               << "has no gpipe.stage_backward; run gpipe-differentiate first";
      keep = keepPolicy(backward.getRemat().value_or("full"));
      FailureOr<PlannedStage> planned =
          describeStage(stage, backward, loss.getDefiningOp() == stage,
                        model.getBatch(), optimizerSlots);
      if (failed(planned))
        return failure();
      stages.push_back(std::move(*planned));
    }
    std::vector<int64_t> rows(schedule.getRows().begin(),
                              schedule.getRows().end());

    Builder builder(schedule.getContext());
    SmallVector<DeviceMemoryPlan> plans;
    for (ProgramOp program : schedule.getBody().front().getOps<ProgramOp>()) {
      unsigned device = program.getDevice();
      if (device >= stages.size())
        return program.emitOpError()
               << "is for device " << device << " but the model has "
               << stages.size() << " stages";
      DeviceProgram input{stages[device], describeProgram(program), rows,
                          keep.value_or(KeepPolicy::None)};
      DeviceMemoryPlan plan;
      std::string error = planDeviceMemory(input, plan);
      if (!error.empty())
        return program.emitOpError() << "cannot be planned: " << error;
      program->setAttr(
          "gpipe.memory",
          builder.getDictionaryAttr({
              builder.getNamedAttr("resident_bytes", builder.getI64IntegerAttr(
                                                         plan.residentBytes)),
              builder.getNamedAttr("peak_bytes",
                                   builder.getI64IntegerAttr(plan.peakBytes)),
              builder.getNamedAttr("arena_bytes",
                                   builder.getI64IntegerAttr(plan.arenaBytes)),
              builder.getNamedAttr(
                  "num_buffers",
                  builder.getI64IntegerAttr(int64_t(plan.buffers.size()))),
              builder.getNamedAttr("peak_op", builder.getI64IntegerAttr(
                                                  int64_t(plan.peakInstr))),
              builder.getNamedAttr("peak_at",
                                   builder.getStringAttr(plan.peakWhere)),
              builder.getNamedAttr("optimizer_slots",
                                   builder.getI64IntegerAttr(optimizerSlots)),
          }));
      if (plans.size() <= device)
        plans.resize(device + 1);
      plans[device] = std::move(plan);
    }
    if (!cap)
      return success();
    return checkCap(schedule, model, stages, rows, plans,
                    keep.value_or(KeepPolicy::None), *cap);
  }

  /// Refuses a plan over the cap, naming each device short and what fits.
  LogicalResult checkCap(ScheduleOp schedule, ModelOp model,
                         ArrayRef<PlannedStage> stages,
                         const std::vector<int64_t> &rows,
                         ArrayRef<DeviceMemoryPlan> plans, KeepPolicy keep,
                         uint64_t cap) {
    int64_t largest = 0;
    for (const DeviceMemoryPlan &plan : plans)
      largest = std::max(largest, plan.arenaBytes);
    if (uint64_t(largest) <= cap)
      return success();
    InFlightDiagnostic diag = schedule.emitOpError();
    diag << "does not fit the per-device memory cap of " << formatBytes(cap)
         << " (" << cap << " bytes):";
    for (auto [device, plan] : llvm::enumerate(plans))
      if (uint64_t(plan.arenaBytes) > cap)
        diag << " device " << device << " needs "
             << formatBytes(plan.arenaBytes) << " (" << plan.arenaBytes
             << " bytes; resident " << formatBytes(plan.residentBytes)
             << ", peak at " << plan.peakWhere << "), short by "
             << formatBytes(plan.arenaBytes - int64_t(cap)) << ";";
    diag << " with remat " << rematName(keep) << " and " << rows.size()
         << " micro-batches the smallest cap that fits is "
         << formatBytes(largest) << " (" << largest << " bytes)";
    std::string fits = whatFits(model, stages, cap);
    if (!fits.empty())
      diag << "; " << fits;
    else
      diag << "; no remat policy or micro-batch count fits this partition "
              "(try more stages)";
    return failure();
  }

  /// The cheapest (remat, micro-batches) with these stages that fits `cap`.
  std::string whatFits(ModelOp model, ArrayRef<PlannedStage> stages,
                       uint64_t cap) {
    const int64_t batch = model.getBatch();
    for (KeepPolicy keep :
         {KeepPolicy::All, KeepPolicy::Last, KeepPolicy::None})
      for (int64_t m = 1; m <= batch; m *= 2) {
        std::optional<int64_t> arena = largestArena(stages, batch, m, keep);
        if (arena && uint64_t(*arena) <= cap)
          return "it fits with remat " + rematName(keep).str() + " and " +
                 std::to_string(m) + " micro-batches (largest device " +
                 formatBytes(*arena) + ")";
      }
    return {};
  }

  std::optional<int64_t> largestArena(ArrayRef<PlannedStage> stages,
                                      int64_t batch, int64_t m,
                                      KeepPolicy keep) {
    schedule::PipelineSpec spec;
    spec.numStages = stages.size();
    spec.numMicrobatches = m;
    spec.batchSize = batch;
    for (size_t s = 0; s + 1 < stages.size(); ++s)
      spec.boundaries.push_back(std::vector<schedule::BoundaryTensor>(
          stages[s].outputs.size(), schedule::BoundaryTensor{{batch}, "f32"}));
    for (const PlannedStage &stage : stages) {
      std::vector<std::string> names;
      for (size_t i = 0; i < stage.inputs.size(); ++i)
        if (stage.inputChannels[i] == ~0u &&
            !llvm::is_contained(names, stage.inputNames[i]))
          names.push_back(stage.inputNames[i]);
      spec.stageInputs.push_back(std::move(names));
    }
    schedule::MicrobatchSplit split = schedule::splitMicrobatches(batch, m);
    if (!split.error.empty())
      return std::nullopt;
    schedule::Program program = schedule::buildGPipeSchedule(spec);
    int64_t largest = 0;
    for (const schedule::DeviceProgram &device : program.devices) {
      DeviceProgram input{stages[device.device], {}, split.rows, keep};
      for (const schedule::Instr &instr : device.instrs)
        input.instrs.push_back({plannedKind(instr.kind, instr.direction),
                                instr.microbatch, instr.channel,
                                instr.inputName});
      DeviceMemoryPlan plan;
      if (!planDeviceMemory(input, plan).empty())
        return std::nullopt;
      largest = std::max(largest, plan.arenaBytes);
    }
    return largest;
  }
};
} // namespace
