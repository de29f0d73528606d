//===- UnrollSchedule.cpp - One program per device ------------------------===//

#include "gpipe/Analysis/PipelineSchedule.h"
#include "gpipe/Analysis/ScheduleIR.h"
#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/Analysis/ScheduleText.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/OptionAliases.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Dialect/GPipe/Transforms/SplitBackward.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/MemoryBuffer.h"

#define DEBUG_TYPE "gpipe-unroll-schedule"

namespace gpipe {
#define GEN_PASS_DEF_UNROLLSCHEDULEPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;
namespace sched = gpipe::schedule;

namespace {
/// The channels of a model: for each boundary s -> s+1, the full-batch type
/// of each channel, indexed by channel number.
using ChannelTypes = SmallVector<SmallVector<RankedTensorType>>;
} // namespace

/// Reads the stages and their channels; fails unless the model is fully
/// staged (every layer in a stage) and
/// every value passed between stages goes through a send/recv pair whose
/// channel number is the producing stage's result number, as
/// gpipe-insert-send-recv writes them. Channels are split per micro-batch, so
/// each must have the batch as its leading dimension.
static FailureOr<ChannelTypes> readChannels(ModelOp model,
                                            ArrayRef<StageOp> stages) {
  if (stages.empty())
    return model.emitOpError() << "has no stages; run gpipe-form-stages and "
                                  "gpipe-insert-send-recv first";
  auto layers = model.getBody().front().getOps<LayerOp>();
  if (!layers.empty())
    return (*layers.begin()).emitOpError()
           << "is not in a stage; run gpipe-form-stages first";
  for (StageOp stage : stages)
    for (Value input : stage.getInputs())
      if (auto producer = input.getDefiningOp<StageOp>())
        return stage.emitOpError()
               << "reads a result of stage " << producer.getIndex()
               << " without a channel; run gpipe-insert-send-recv first";

  // Channel c of boundary s carries result c of stage s; every result of a
  // stage but the last is needed by the next stage.
  ChannelTypes channels(stages.size() - 1);
  for (auto [from, boundary] : llvm::enumerate(channels))
    boundary.resize(StageOp(stages[from]).getNumResults());
  for (SendOp send : model.getBody().front().getOps<SendOp>()) {
    uint64_t from = send.getFrom();
    uint64_t channel = send.getChannel();
    if (from + 1 >= stages.size())
      return send.emitOpError()
             << "sends from stage " << from << " but the last stage is "
             << stages.size() - 1;
    auto result = dyn_cast<OpResult>(send.getValue());
    if (!result || result.getOwner() != StageOp(stages[from]).getOperation() ||
        result.getResultNumber() != channel)
      return send.emitOpError()
             << "expects to send result #" << channel << " of stage " << from
             << " (channel i of a boundary carries result i of the stage)";
    auto type = cast<RankedTensorType>(send.getValue().getType());
    if (type.getRank() == 0 ||
        type.getDimSize(0) != static_cast<int64_t>(model.getBatch()))
      return send.emitOpError()
             << "expects a channel with the batch size " << model.getBatch()
             << " as leading dimension (it is split per micro-batch), got "
             << type;
    auto &boundary = channels[from];
    if (boundary[channel])
      return send.emitOpError()
             << "reuses channel " << channel << " from stage " << from;
    boundary[channel] = type;
  }
  for (auto [from, boundary] : llvm::enumerate(channels))
    for (auto [channel, type] : llvm::enumerate(boundary))
      if (!type)
        return model.emitOpError()
               << "has no channel " << channel << " from stage " << from
               << " to stage " << from + 1 << ": result #" << channel
               << " of stage " << from << " is never sent";

  // Every recv must be the other end of a send, with its type.
  SmallVector<SmallVector<bool>> received(channels.size());
  for (auto [from, boundary] : llvm::enumerate(channels))
    received[from].assign(boundary.size(), false);
  for (RecvOp recv : model.getBody().front().getOps<RecvOp>()) {
    uint64_t from = recv.getFrom();
    uint64_t channel = recv.getChannel();
    if (from >= channels.size() || channel >= channels[from].size())
      return recv.emitOpError()
             << "receives channel " << channel << " from stage " << from
             << ", which no gpipe.send sends";
    if (received[from][channel])
      return recv.emitOpError() << "receives channel " << channel
                                << " from stage " << from << " twice";
    received[from][channel] = true;
    if (recv.getType() != channels[from][channel])
      return recv.emitOpError()
             << "expects the type " << channels[from][channel] << " of channel "
             << channel << " from stage " << from << ", got " << recv.getType();
  }
  for (auto [from, boundary] : llvm::enumerate(received))
    for (auto [channel, seen] : llvm::enumerate(boundary))
      if (!seen)
        return model.emitOpError()
               << "sends channel " << channel << " from stage " << from
               << " to stage " << from + 1 << " but never receives it";

  for (StageOp stage : stages)
    for (Value input : stage.getInputs())
      if (auto recv = input.getDefiningOp<RecvOp>();
          recv && recv.getTo() != stage.getIndex())
        return stage.emitOpError()
               << "reads channel " << recv.getChannel() << " from stage "
               << recv.getFrom() << " to stage " << recv.getTo()
               << ", but its index is " << stage.getIndex();
  return channels;
}

namespace {
struct UnrollSchedulePass
    : public gpipe::impl::UnrollSchedulePassBase<UnrollSchedulePass> {
  using Base::Base;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(Pass::initializeOptions(options, errorHandler)) ||
        failed(resolveOptionAlias(numMicrobatches, numMicrobatchesAlias,
                                  errorHandler)))
      return failure();
    return resolveOptionAlias(numVirtualStages, numVirtualStagesAlias,
                              errorHandler);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!scheduleFile.empty() && failed(readScheduleFile()))
      return signalPassFailure();
    SymbolTable symbols(module);
    for (ModelOp model : llvm::to_vector(module.getOps<ModelOp>()))
      if (failed(unroll(model, symbols)))
        return signalPassFailure();
  }

  /// Parses `scheduleFile` into `userOrder`.
  LogicalResult readScheduleFile() {
    // Reported at the module's location, not on it, so that the whole module
    // is not printed with the message.
    Location loc = getOperation().getLoc();
    if (schedule != sched::ScheduleKind::GPipe)
      return emitError(loc)
             << "expects either schedule=" << sched::scheduleKindName(schedule)
             << " or schedule-file, not both";
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
        llvm::MemoryBuffer::getFile(scheduleFile);
    if (!file)
      return emitError(loc) << "cannot open schedule file '" << scheduleFile
                            << "': " << file.getError().message();
    userOrder.emplace();
    std::string error =
        sched::parseComputeOrder((*file)->getBuffer().str(), *userOrder);
    if (!error.empty())
      return emitError(loc)
             << "schedule file '" << scheduleFile << "', " << error;
    return success();
  }

  LogicalResult unroll(ModelOp model, SymbolTable &symbols) {
    for (ScheduleOp existing : getOperation().getOps<ScheduleOp>())
      if (existing.getModel() == model.getSymName())
        return model.emitOpError()
               << "is already scheduled by @" << existing.getSymName();
    SmallVector<StageOp> stages = getStages(model);
    FailureOr<ChannelTypes> channels = readChannels(model, stages);
    if (failed(channels))
      return failure();

    sched::MicrobatchSplit split =
        sched::splitMicrobatches(model.getBatch(), numMicrobatches);
    if (!split.error.empty())
      return model.emitOpError() << "cannot be scheduled: " << split.error;

    std::string virtualStages = sched::checkVirtualStages(
        userOrder ? sched::ScheduleKind::Interleaved : schedule.getValue(),
        stages.size(), numVirtualStages);
    if (!virtualStages.empty())
      return model.emitOpError() << "cannot be scheduled: " << virtualStages;

    sched::PipelineSpec spec;
    spec.numStages = stages.size();
    spec.numVirtualStages = numVirtualStages;
    spec.numMicrobatches = numMicrobatches;
    spec.batchSize = model.getBatch();
    for (auto &boundary : *channels) {
      auto &tensors = spec.boundaries.emplace_back();
      for (RankedTensorType type : boundary)
        tensors.push_back({{type.getShape().begin(), type.getShape().end()},
                           typeToString(type.getElementType())});
    }
    for (StageOp stage : stages) {
      auto &names = spec.stageInputs.emplace_back();
      for (Value input : stage.getInputs())
        if (auto op = input.getDefiningOp<InputOp>())
          names.push_back(op.getName().str());
    }
    sched::Program program;
    if (userOrder) {
      sched::ScheduleBuild build =
          sched::buildFromComputeOrder(spec, *userOrder);
      if (!build.error.empty())
        return model.emitOpError() << "cannot run the schedule in '"
                                   << scheduleFile << "': " << build.error;
      program = std::move(build.program);
    } else {
      program = sched::buildSchedule(spec, schedule);
    }
    // W steps (ZB-H1's, or a schedule file's) need each stage's backward
    // split into B, then W.
    bool splits = llvm::any_of(program.devices, [](const auto &device) {
      return llvm::any_of(device.instrs, [](const sched::Instr &instr) {
        return instr.kind == sched::InstrKind::BackwardWeights;
      });
    });
    if (splits)
      for (StageBackwardOp backward :
           model.getBody().front().getOps<StageBackwardOp>())
        splitStageBackward(backward);
    if (sendWindow > 0)
      sched::placeSendWaits(program, sendWindow);
    emitSchedule(model, stages, *channels, split.rows, program, symbols);
    return success();
  }

  /// The compute order read from `scheduleFile`, if one is given.
  std::optional<sched::ComputeOrder> userOrder;

  /// Materialises `program` as a gpipe.schedule right after the model.
  void emitSchedule(ModelOp model, ArrayRef<StageOp> stages,
                    const ChannelTypes &channels, ArrayRef<int64_t> rows,
                    const sched::Program &program, SymbolTable &symbols) {
    OpBuilder builder(model.getContext());
    builder.setInsertionPointAfter(model);
    Location loc = model.getLoc();
    auto schedule = ScheduleOp::create(
        builder, loc, (model.getSymName() + "_schedule").str(),
        model.getSymName(), numMicrobatches, rows, /*virtual_stages=*/nullptr,
        /*send_window=*/nullptr);
    if (numVirtualStages > 1)
      schedule.setVirtualStages(numVirtualStages);
    if (program.sendWindow > 0)
      schedule.setSendWindow(program.sendWindow);
    symbols.insert(schedule); // uniques the name if it is taken
    builder.createBlock(&schedule.getBody());
    for (const sched::DeviceProgram &device : program.devices) {
      auto programOp = ProgramOp::create(builder, loc, device.device);
      OpBuilder::InsertionGuard guard(builder);
      builder.createBlock(&programOp.getBody());
      for (const sched::Instr &instr : device.instrs)
        emitInstr(builder, loc, stages, channels, device.device, instr);
    }
  }

  void emitInstr(OpBuilder &builder, Location loc, ArrayRef<StageOp> stages,
                 const ChannelTypes &channels, unsigned device,
                 const sched::Instr &instr) {
    // The boundary a transfer crosses: from its stage to the next for what
    // goes forward from it or comes back to it, from the previous one
    // otherwise.
    bool towardsNext = (instr.kind == sched::InstrKind::Send) ==
                       (instr.direction == sched::Direction::Activation);
    auto microbatchType = [&]() {
      unsigned boundary = towardsNext ? instr.stage : instr.stage - 1;
      RankedTensorType full = channels[boundary][instr.channel];
      SmallVector<int64_t> shape(full.getShape());
      shape[0] = instr.rows;
      return full.clone(shape);
    };
    // Loads and transfers name their stage where devices run several.
    IntegerAttr servedStage = numVirtualStages > 1
                                  ? builder.getI64IntegerAttr(instr.stage)
                                  : IntegerAttr();
    switch (instr.kind) {
    case sched::InstrKind::LoadInput:
      LoadInputOp::create(builder, loc, instr.inputName, instr.microbatch,
                          instr.rows, servedStage);
      return;
    case sched::InstrKind::Forward:
      ForwardOp::create(builder, loc, StageOp(stages[instr.stage]).getSymName(),
                        instr.microbatch, instr.rows);
      return;
    case sched::InstrKind::Backward:
      BackwardOp::create(builder, loc,
                         StageOp(stages[instr.stage]).getSymName(),
                         instr.microbatch, instr.rows);
      return;
    case sched::InstrKind::BackwardWeights:
      BackwardWeightsOp::create(builder, loc,
                                StageOp(stages[instr.stage]).getSymName(),
                                instr.microbatch, instr.rows);
      return;
    case sched::InstrKind::Send:
      if (instr.direction == sched::Direction::Activation)
        SendActivationOp::create(builder, loc, instr.peer, instr.microbatch,
                                 instr.channel, microbatchType(), servedStage);
      else
        SendGradientOp::create(builder, loc, instr.peer, instr.microbatch,
                               instr.channel, microbatchType(), servedStage);
      return;
    case sched::InstrKind::Recv:
      if (instr.direction == sched::Direction::Activation)
        RecvActivationOp::create(builder, loc, instr.peer, instr.microbatch,
                                 instr.channel, microbatchType(), servedStage);
      else
        RecvGradientOp::create(builder, loc, instr.peer, instr.microbatch,
                               instr.channel, microbatchType(), servedStage);
      return;
    case sched::InstrKind::WaitSend:
      if (instr.direction == sched::Direction::Activation)
        WaitSendActivationOp::create(builder, loc, instr.peer, instr.microbatch,
                                     instr.channel, servedStage);
      else
        WaitSendGradientOp::create(builder, loc, instr.peer, instr.microbatch,
                                   instr.channel, servedStage);
      return;
    case sched::InstrKind::OptimizerStep:
      OptimizerStepOp::create(builder, loc);
      return;
    }
  }
};
} // namespace
