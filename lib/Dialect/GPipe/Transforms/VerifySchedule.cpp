//===- VerifySchedule.cpp - Prove unrolled schedules sound ----------------===//
//
// The order-independent checks (matching, deadlock, dependences) live in
// PipelineSchedule; this pass adds what needs the model: device s runs stage
// s, micro-batch rows add up to the batch, and each transfer carries the type
// of its model channel between the right neighbours.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/PipelineSchedule.h"
#include "gpipe/Analysis/ScheduleIR.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringExtras.h"

#include <array>
#include <optional>

#define DEBUG_TYPE "gpipe-verify-schedule"

namespace gpipe {
#define GEN_PASS_DEF_VERIFYSCHEDULEPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;
namespace sched = gpipe::schedule;

/// The full-batch type of channel `channel` from stage `from` to `from + 1`:
/// the stage's result of that number.
static RankedTensorType channelType(MutableArrayRef<StageOp> stages,
                                    unsigned from, unsigned channel) {
  if (from + 1 >= stages.size() || channel >= stages[from].getNumResults())
    return {};
  return cast<RankedTensorType>(stages[from].getResult(channel).getType());
}

/// The names of the model inputs `stage` reads, in operand order.
static SmallVector<StringRef> inputNames(StageOp stage) {
  SmallVector<StringRef> names;
  for (Value value : stage.getInputs())
    if (auto input = value.getDefiningOp<InputOp>())
      names.push_back(input.getName());
  return names;
}

/// Checks what the model fixes: the stages each device runs (stage s on
/// device s mod K), the rows of each micro-batch, the inputs each stage
/// loads, and the neighbours, types and presence of every transfer.
static LogicalResult checkAgainstModel(const ScheduleInIR &schedule,
                                       ModelOp model,
                                       MutableArrayRef<StageOp> stages,
                                       ArrayRef<int64_t> rows) {
  bool ok = true;
  const unsigned numMicrobatches = rows.size();
  const unsigned numDevices = schedule.program.devices.size();
  const unsigned numStages = stages.size();
  const int64_t batch = model.getBatch();
  auto deviceOf = [&](unsigned stage) { return stage % numDevices; };
  // seen[direction][boundary][channel]: the micro-batches for which the
  // transfer has an end, sent or received (0: activation, 1: gradient). A
  // transfer with one end is reported by the schedule verifier, one with none
  // here.
  std::array<SmallVector<SmallVector<llvm::BitVector>>, 2> seen;
  for (auto &direction : seen)
    for (StageOp stage : stages.drop_back())
      direction.emplace_back(stage.getNumResults(),
                             llvm::BitVector(numMicrobatches));

  for (const sched::DeviceProgram &program : schedule.program.devices) {
    unsigned device = program.device;
    for (auto [index, instr] : llvm::enumerate(program.instrs)) {
      Operation *op = schedule.ops[device][index];
      auto fail = [&, index = index, &instr = instr]() -> InFlightDiagnostic {
        ok = false;
        return op->emitError()
               << "device " << device << ": " << sched::describe(instr)
               << " (op #" << index << ") ";
      };
      // A wait names its send, which carries the rows.
      if (instr.kind == sched::InstrKind::OptimizerStep ||
          instr.kind == sched::InstrKind::WaitSend)
        continue;
      bool isTransfer = instr.kind == sched::InstrKind::Send ||
                        instr.kind == sched::InstrKind::Recv;
      if (instr.microbatch < numMicrobatches && !isTransfer &&
          instr.rows != rows[instr.microbatch])
        fail() << "expects " << rows[instr.microbatch]
               << " rows (the schedule's micro-batch " << instr.microbatch
               << "), got " << instr.rows;
      const unsigned stage = instr.stage;
      if (stage >= numStages || deviceOf(stage) != device) {
        if (numStages == numDevices)
          fail() << "expects stage " << device << " (device " << device
                 << " runs stage " << device << "), got stage " << stage;
        else
          fail() << "expects one of device " << device << "'s stages ("
                 << device << ", " << device + numDevices
                 << ", ...), got stage " << stage;
        continue;
      }
      if (instr.kind == sched::InstrKind::LoadInput) {
        SmallVector<StringRef> names = inputNames(stages[stage]);
        if (names.empty())
          fail() << "loads an input, but stage " << stage
                 << " reads no model input";
        else if (!llvm::is_contained(names, instr.inputName))
          fail() << "expects an input that stage " << stage << " reads ('"
                 << llvm::join(names, "', '") << "'), got '" << instr.inputName
                 << "'";
      }
      if (!isTransfer)
        continue;

      // Activations flow to the next stage's device, gradients to the
      // previous one's.
      bool isActivation = instr.direction == sched::Direction::Activation;
      bool toNext = (instr.kind == sched::InstrKind::Send) == isActivation;
      bool hasNeighbour = toNext ? stage + 1 < numStages : stage > 0;
      int64_t expectedPeer =
          hasNeighbour ? int64_t(deviceOf(toNext ? stage + 1 : stage - 1))
                       : (toNext ? int64_t(device) + 1 : int64_t(device) - 1);
      if (!hasNeighbour || int64_t(instr.peer) != expectedPeer) {
        fail() << "expects peer device " << expectedPeer << ", got "
               << instr.peer;
        continue;
      }
      unsigned boundary = toNext ? stage : stage - 1;
      RankedTensorType full = channelType(stages, boundary, instr.channel);
      if (!full) {
        unsigned count = stages[boundary].getNumResults();
        fail() << "uses channel " << instr.channel << ", but stage " << boundary
               << " has " << count << (count == 1 ? " channel" : " channels")
               << " to stage " << boundary + 1;
        continue;
      }
      if (instr.microbatch < numMicrobatches)
        seen[isActivation ? 0 : 1][boundary][instr.channel].set(
            instr.microbatch);
      if (full.getRank() == 0 || full.getDimSize(0) != batch) {
        fail() << "uses channel " << instr.channel << " of stage " << boundary
               << ", whose type " << full << " does not have the batch size "
               << batch << " as leading dimension";
        continue;
      }
      if (instr.microbatch >= numMicrobatches)
        continue;
      SmallVector<int64_t> shape(full.getShape());
      shape[0] = rows[instr.microbatch];
      RankedTensorType expected = full.clone(shape);
      if (ArrayRef<int64_t>(instr.shape) != expected.getShape() ||
          instr.elementType != typeToString(expected.getElementType()))
        fail() << "expects " << expected << " (channel " << instr.channel
               << " of stage " << boundary << " at " << rows[instr.microbatch]
               << " rows), got "
               << op->getAttrOfType<TypeAttr>("type").getValue();
    }
  }

  // Every micro-batch of a stage needs each model input the stage reads and
  // each channel into it (activations from the previous stage, gradients from
  // the next); report what is missing on the forward or backward it feeds.
  for (const sched::DeviceProgram &program : schedule.program.devices) {
    unsigned device = program.device;
    for (unsigned stage = device; stage < numStages; stage += numDevices) {
      SmallVector<StringRef> names = inputNames(stages[stage]);
      SmallVector<std::optional<size_t>> forwardAt(numMicrobatches);
      SmallVector<std::optional<size_t>> backwardAt(numMicrobatches);
      // loaded[i]: the micro-batches for which input names[i] is loaded.
      SmallVector<llvm::BitVector> loaded(names.size(),
                                          llvm::BitVector(numMicrobatches));
      for (auto [index, instr] : llvm::enumerate(program.instrs)) {
        if (instr.kind == sched::InstrKind::OptimizerStep ||
            instr.microbatch >= numMicrobatches || instr.stage != stage)
          continue;
        auto &firstAt =
            instr.kind == sched::InstrKind::Forward ? forwardAt : backwardAt;
        if ((instr.kind == sched::InstrKind::Forward ||
             instr.kind == sched::InstrKind::Backward) &&
            !firstAt[instr.microbatch])
          firstAt[instr.microbatch] = index;
        if (instr.kind == sched::InstrKind::LoadInput) {
          const auto *name = llvm::find(names, instr.inputName);
          if (name != names.end())
            loaded[name - names.begin()].set(instr.microbatch);
        }
      }
      auto missing = [&](std::optional<size_t> consumer) -> InFlightDiagnostic {
        ok = false;
        Operation *at = consumer ? schedule.ops[device][*consumer]
                                 : schedule.programs[device];
        return at->emitError()
               << "device " << device << ": stage " << stage << " ";
      };
      for (unsigned m = 0; m < numMicrobatches; ++m) {
        for (auto [name, microbatches] : llvm::zip(names, loaded))
          if (!microbatches.test(m))
            missing(forwardAt[m]) << "has no load of input '" << name
                                  << "' for micro-batch " << m;
        for (bool isActivation : {true, false}) {
          // Activations come over boundary stage - 1, gradients over stage.
          if (isActivation ? stage == 0 : stage + 1 == numStages)
            continue;
          unsigned boundary = isActivation ? stage - 1 : stage;
          for (auto [channel, microbatches] :
               llvm::enumerate(seen[isActivation ? 0 : 1][boundary]))
            if (!microbatches.test(m))
              missing(isActivation ? forwardAt[m] : backwardAt[m])
                  << "receives no "
                  << (isActivation ? "activation" : "gradient")
                  << " on channel " << channel << " from device "
                  << deviceOf(isActivation ? boundary : boundary + 1)
                  << " for micro-batch " << m;
        }
      }
    }
  }
  return success(ok);
}

LogicalResult gpipe::verifyUnrolledSchedule(ScheduleOp schedule) {
  FailureOr<ModelOp> model = lookupScheduledModel(schedule);
  if (failed(model))
    return failure();
  int64_t totalRows = 0;
  for (int64_t rows : schedule.getRows())
    totalRows += rows;
  if (totalRows != static_cast<int64_t>(model->getBatch()))
    return schedule.emitOpError()
           << "expects micro-batch rows adding up to the batch size "
           << model->getBatch() << " of @" << model->getSymName() << ", got "
           << totalRows;
  FailureOr<ScheduleInIR> read = readSchedule(schedule, *model);
  if (failed(read))
    return failure();
  SmallVector<StageOp> stages = getStages(*model);
  bool ok =
      succeeded(checkAgainstModel(*read, *model, stages, schedule.getRows()));
  // An instruction of a stage its device does not run was reported above;
  // count it as the device's own so that it is not reported again.
  const unsigned numDevices = read->program.devices.size();
  for (sched::DeviceProgram &program : read->program.devices)
    for (sched::Instr &instr : program.instrs)
      if (instr.kind != sched::InstrKind::OptimizerStep &&
          (instr.stage >= stages.size() ||
           instr.stage % numDevices != program.device))
        instr.stage = program.device;
  for (const sched::Violation &violation :
       sched::verifySchedule(read->program)) {
    // A violation about something missing points past the last op.
    const auto &ops = read->ops[violation.device];
    Operation *at = violation.instrIndex < ops.size()
                        ? ops[violation.instrIndex]
                        : read->programs[violation.device];
    at->emitError(violation.message);
    ok = false;
  }
  return success(ok);
}

namespace {
struct VerifySchedulePass
    : public gpipe::impl::VerifySchedulePassBase<VerifySchedulePass> {
  void runOnOperation() override {
    bool ok = true;
    for (ScheduleOp schedule : getOperation().getOps<ScheduleOp>())
      ok &= succeeded(verifyUnrolledSchedule(schedule));
    if (!ok)
      signalPassFailure();
  }
};
} // namespace
