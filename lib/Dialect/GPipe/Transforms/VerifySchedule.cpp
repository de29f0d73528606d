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
static RankedTensorType channelType(MutableArrayRef<StageOp> stages, unsigned from,
                                    unsigned channel) {
  if (from + 1 >= stages.size() ||
      channel >= stages[from].getNumResults())
    return {};
  return cast<RankedTensorType>(stages[from].getResult(channel).getType());
}

/// Checks what the model fixes: the stage each device runs, the rows of each
/// micro-batch and the neighbours and types of every transfer.
static LogicalResult checkAgainstModel(const ScheduleInIR &schedule,
                                       MutableArrayRef<StageOp> stages,
                                       ArrayRef<int64_t> rows) {
  bool ok = true;
  for (const sched::DeviceProgram &program : schedule.program.devices) {
    unsigned device = program.device;
    for (auto [index, instr] : llvm::enumerate(program.instrs)) {
      Operation *op = schedule.ops[device][index];
      auto fail = [&]() -> InFlightDiagnostic {
        ok = false;
        return op->emitError() << "device " << device << ": "
                               << sched::describe(instr) << ": ";
      };
      if (instr.kind == sched::InstrKind::OptimizerStep)
        continue;
      if (instr.microbatch < rows.size() &&
          instr.rows != rows[instr.microbatch] &&
          instr.kind != sched::InstrKind::Send &&
          instr.kind != sched::InstrKind::Recv)
        fail() << "expects " << rows[instr.microbatch]
               << " rows (the schedule's micro-batch " << instr.microbatch
               << "), got " << instr.rows;
      if ((instr.kind == sched::InstrKind::Forward ||
           instr.kind == sched::InstrKind::Backward) &&
          instr.stage != device)
        fail() << "runs stage " << instr.stage << " but device " << device
               << " runs stage " << device;
      if (instr.kind != sched::InstrKind::Send &&
          instr.kind != sched::InstrKind::Recv)
        continue;

      // Activations flow to device + 1, gradients to device - 1.
      bool toNext = (instr.kind == sched::InstrKind::Send) ==
                    (instr.direction == sched::Direction::Activation);
      int64_t expectedPeer = toNext ? int64_t(device) + 1 : int64_t(device) - 1;
      if (int64_t(instr.peer) != expectedPeer) {
        fail() << "expects peer device " << expectedPeer << ", got "
               << instr.peer;
        continue;
      }
      unsigned boundary = toNext ? device : instr.peer;
      RankedTensorType full = channelType(stages, boundary, instr.channel);
      if (!full) {
        fail() << "uses channel " << instr.channel << " but stage "
               << boundary << " has "
               << (boundary + 1 < stages.size()
                       ? stages[boundary].getNumResults()
                       : 0)
               << " channels to stage " << boundary + 1;
        continue;
      }
      if (instr.microbatch >= rows.size())
        continue;
      SmallVector<int64_t> shape(full.getShape());
      shape[0] = rows[instr.microbatch];
      RankedTensorType expected = full.clone(shape);
      std::vector<int64_t> actualShape = instr.shape;
      if (ArrayRef<int64_t>(actualShape) != expected.getShape() ||
          instr.elementType != typeToString(expected.getElementType()))
        fail() << "expects " << expected << " (channel " << instr.channel
               << " of stage " << boundary << " at "
               << rows[instr.microbatch] << " rows)";
    }
  }
  return success(ok);
}

namespace {
struct VerifySchedulePass
    : public gpipe::impl::VerifySchedulePassBase<VerifySchedulePass> {
  void runOnOperation() override {
    bool ok = true;
    for (ScheduleOp schedule : getOperation().getOps<ScheduleOp>())
      ok &= succeeded(verify(schedule));
    if (!ok)
      signalPassFailure();
  }

  LogicalResult verify(ScheduleOp schedule) {
    FailureOr<ModelOp> model = lookupScheduledModel(schedule);
    if (failed(model))
      return failure();
    int64_t totalRows = 0;
    for (int64_t rows : schedule.getRows())
      totalRows += rows;
    if (totalRows != static_cast<int64_t>(model->getBatch()))
      return schedule.emitOpError()
             << "expects micro-batch rows adding up to the batch size "
             << model->getBatch() << " of @" << model->getSymName()
             << ", got " << totalRows;
    FailureOr<ScheduleInIR> read = readSchedule(schedule, *model);
    if (failed(read))
      return failure();
    SmallVector<StageOp> stages = getStages(*model);
    bool ok = succeeded(checkAgainstModel(*read, stages, schedule.getRows()));
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
};
} // namespace
