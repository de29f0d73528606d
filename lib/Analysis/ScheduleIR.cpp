//===- ScheduleIR.cpp - Between gpipe.schedule and schedule::Program ------===//

#include "gpipe/Analysis/ScheduleIR.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace gpipe;
namespace sched = gpipe::schedule;

std::string gpipe::typeToString(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

SmallVector<StageOp> gpipe::getStages(ModelOp model) {
  return llvm::to_vector(model.getBody().front().getOps<StageOp>());
}

FailureOr<ModelOp> gpipe::lookupScheduledModel(ScheduleOp schedule) {
  auto model = SymbolTable::lookupNearestSymbolFrom<ModelOp>(
      schedule, schedule.getModelAttr());
  if (!model)
    return schedule.emitOpError() << "refers to " << schedule.getModelAttr()
                                  << ", which is not a gpipe.model";
  return model;
}

static sched::Instr transfer(sched::InstrKind kind, sched::Direction direction,
                             int64_t peer, int64_t mb, int64_t channel,
                             Type type, std::optional<uint64_t> stage) {
  auto tensor = cast<RankedTensorType>(type);
  sched::Instr instr;
  instr.stage = stage.value_or(0);
  instr.kind = kind;
  instr.direction = direction;
  instr.peer = peer;
  instr.microbatch = mb;
  instr.channel = channel;
  instr.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  instr.elementType = typeToString(tensor.getElementType());
  instr.rows = tensor.getRank() ? tensor.getDimSize(0) : 0;
  return instr;
}

FailureOr<ScheduleInIR> gpipe::readSchedule(ScheduleOp schedule,
                                            ModelOp model) {
  SmallVector<StageOp> stages = getStages(model);
  if (stages.empty())
    return schedule.emitOpError() << "refers to model @" << model.getSymName()
                                  << ", which has no stages";
  // K devices run the stages round-robin, V each.
  const uint64_t numLocal = schedule.getVirtualStages().value_or(1);
  if (stages.size() % numLocal != 0 || stages.size() / numLocal < 1)
    return schedule.emitOpError()
           << "runs " << numLocal << " virtual stages per device, which does "
           << "not divide the " << stages.size() << " stages of model @"
           << model.getSymName();
  const uint64_t numDevices = stages.size() / numLocal;
  ScheduleInIR result;
  result.program.numMicrobatches = schedule.getMicrobatches();
  result.program.numVirtualStages = numLocal;
  result.program.sendWindow = schedule.getSendWindow().value_or(0);
  result.program.devices.resize(numDevices);
  result.ops.resize(numDevices);
  result.programs.resize(numDevices);
  std::vector<bool> seen(numDevices, false);

  for (ProgramOp program : schedule.getBody().front().getOps<ProgramOp>()) {
    uint64_t device = program.getDevice();
    if (device >= numDevices)
      return program.emitOpError()
             << "is for device " << device << " but model @"
             << model.getSymName() << " has " << stages.size()
             << " stages, so devices 0.." << numDevices - 1;
    if (seen[device])
      return program.emitOpError()
             << "is a second program for device " << device;
    seen[device] = true;
    result.programs[device] = program;
    sched::DeviceProgram &out = result.program.devices[device];
    out.device = device;
    for (Operation &op : program.getBody().front()) {
      FailureOr<sched::Instr> instr =
          llvm::TypeSwitch<Operation *, FailureOr<sched::Instr>>(&op)
              .Case([&](LoadInputOp load) -> FailureOr<sched::Instr> {
                sched::Instr instr;
                instr.kind = sched::InstrKind::LoadInput;
                instr.inputName = load.getName().str();
                instr.microbatch = load.getMb();
                instr.rows = load.getRows();
                instr.stage = load.getStage().value_or(0);
                return instr;
              })
              .Case<ForwardOp, BackwardOp, BackwardWeightsOp>(
                  [&](auto run) -> FailureOr<sched::Instr> {
                    StageOp stage = model.lookupStage(run.getStage());
                    if (!stage)
                      return run.emitOpError()
                             << "refers to " << run.getStageAttr()
                             << ", which is not a stage of model @"
                             << model.getSymName();
                    sched::Instr instr;
                    instr.kind = isa<ForwardOp>(run.getOperation())
                                     ? sched::InstrKind::Forward
                                 : isa<BackwardOp>(run.getOperation())
                                     ? sched::InstrKind::Backward
                                     : sched::InstrKind::BackwardWeights;
                    instr.stage = stage.getIndex();
                    instr.microbatch = run.getMb();
                    instr.rows = run.getRows();
                    return instr;
                  })
              .Case([&](SendActivationOp o) {
                return transfer(sched::InstrKind::Send,
                                sched::Direction::Activation, o.getPeer(),
                                o.getMb(), o.getChannel(), o.getType(),
                                o.getStage());
              })
              .Case([&](RecvActivationOp o) {
                return transfer(sched::InstrKind::Recv,
                                sched::Direction::Activation, o.getPeer(),
                                o.getMb(), o.getChannel(), o.getType(),
                                o.getStage());
              })
              .Case([&](SendGradientOp o) {
                return transfer(sched::InstrKind::Send,
                                sched::Direction::Gradient, o.getPeer(),
                                o.getMb(), o.getChannel(), o.getType(),
                                o.getStage());
              })
              .Case([&](RecvGradientOp o) {
                return transfer(sched::InstrKind::Recv,
                                sched::Direction::Gradient, o.getPeer(),
                                o.getMb(), o.getChannel(), o.getType(),
                                o.getStage());
              })
              .Case<WaitSendActivationOp, WaitSendGradientOp>(
                  [&](auto wait) -> FailureOr<sched::Instr> {
                    sched::Instr instr;
                    instr.kind = sched::InstrKind::WaitSend;
                    instr.direction =
                        isa<WaitSendActivationOp>(wait.getOperation())
                            ? sched::Direction::Activation
                            : sched::Direction::Gradient;
                    instr.peer = wait.getPeer();
                    instr.microbatch = wait.getMb();
                    instr.channel = wait.getChannel();
                    instr.stage = wait.getStage().value_or(0);
                    return instr;
                  })
              .Case([&](OptimizerStepOp) {
                sched::Instr instr;
                instr.kind = sched::InstrKind::OptimizerStep;
                return instr;
              })
              .Default([&](Operation *other) -> FailureOr<sched::Instr> {
                return other->emitOpError() << "is not a schedule instruction";
              });
      if (failed(instr))
        return failure();
      // Loads and transfers serve the device's one stage, or name which of
      // its stages.
      if (!sched::isCompute(instr->kind) &&
          instr->kind != sched::InstrKind::OptimizerStep) {
        // Loads and transfers all spell it as their `stage` attribute.
        bool named = bool(op.getAttr("stage"));
        if (numLocal > 1 && !named)
          return op.emitOpError()
                 << "does not say which of device " << device
                 << "'s stages it serves (`stage`): devices run " << numLocal
                 << " stages each";
        if (!named)
          instr->stage = device;
      }
      out.instrs.push_back(std::move(*instr));
      result.ops[device].push_back(&op);
    }
  }
  for (auto [device, present] : llvm::enumerate(seen))
    if (!present)
      return schedule.emitOpError()
             << "has no program for device " << device
             << (numLocal == 1 ? " (stage " + std::to_string(device) + ")"
                               : std::string());
  return result;
}
