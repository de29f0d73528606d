//===- PlanMemory.cpp - Each device's static memory arena -----------------===//
//
// Describes each stage as the runtime will run it (StageMemoryDescription),
// replays each device's unrolled program with MemoryPlanner and records the
// plan on the program.
//
//===----------------------------------------------------------------------===//

#include "MemoryCapOption.h"
#include "StageMemoryDescription.h"
#include "gpipe/Analysis/ByteCount.h"
#include "gpipe/Analysis/CellMemoryPlanner.h"
#include "gpipe/Analysis/MemoryPlanner.h"
#include "gpipe/Analysis/PipelineSchedule.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace gpipe {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;

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
    KeepPolicy keep;
    FailureOr<std::vector<PlannedStage>> stages =
        describeModelStages(model, optimizerSlots, keep);
    if (failed(stages))
      return failure();
    std::vector<int64_t> rows(schedule.getRows().begin(),
                              schedule.getRows().end());

    // Interleaving: K devices run the stages round-robin, V each.
    const unsigned numLocal = schedule.getVirtualStages().value_or(1);
    const unsigned numDevices = stages->size() / numLocal;
    Builder builder(schedule.getContext());
    SmallVector<DeviceMemoryPlan> plans;
    for (ProgramOp program : schedule.getBody().front().getOps<ProgramOp>()) {
      unsigned device = program.getDevice();
      if (device >= numDevices)
        return program.emitOpError()
               << "is for device " << device << " but the model has "
               << stages->size() << " stages on " << numDevices << " devices";
      DeviceProgram input{stagesOfDevice(*stages, device, numDevices),
                          describeProgramMemory(program, model, numDevices),
                          rows, keep};
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
              builder.getNamedAttr("send_held_bytes", builder.getI64IntegerAttr(
                                                          plan.sendHeldBytes)),
              builder.getNamedAttr("peak_op", builder.getI64IntegerAttr(
                                                  int64_t(plan.peakInstr))),
              builder.getNamedAttr("peak_at",
                                   builder.getStringAttr(plan.peakWhere)),
              builder.getNamedAttr("optimizer_slots",
                                   builder.getI64IntegerAttr(optimizerSlots)),
          }));
      // Every buffer, in the order the program defines them, with what it
      // holds: the runtime takes each value's buffer from here and verifies
      // the placement instead of planning again. Omitted beyond
      // kMaxPlacedBuffers; gpipe-translate then refuses to write a bundle.
      if (plan.buffers.size() <= kMaxPlacedBuffers) {
        SmallVector<int64_t> placement;
        placement.reserve(kPlacedBufferWords * plan.buffers.size());
        for (const PlannedBuffer &buffer : plan.buffers)
          placement.append({buffer.bytes, buffer.offset, buffer.start,
                            buffer.end, buffer.instr, buffer.microbatch,
                            buffer.value});
        program->setAttr("gpipe.placement",
                         builder.getDenseI64ArrayAttr(placement));
      }
      if (plans.size() <= device)
        plans.resize(device + 1);
      plans[device] = std::move(plan);
    }
    if (!cap)
      return success();
    return checkCap(schedule, model, *stages, numLocal, rows, plans, keep,
                    *cap);
  }

  /// Refuses a plan over the cap, naming each device short and what fits.
  LogicalResult checkCap(ScheduleOp schedule, ModelOp model,
                         ArrayRef<PlannedStage> stages, unsigned numLocal,
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
    diag << " with remat " << rematNameOf(keep) << " and " << rows.size()
         << " micro-batches the smallest cap that fits is "
         << formatBytes(largest) << " (" << largest << " bytes)";
    std::string fits = whatFits(model, stages, numLocal, cap,
                                schedule.getSendWindow().value_or(0));
    if (!fits.empty())
      diag << "; " << fits;
    else
      diag << "; no schedule, remat policy or micro-batch count fits this "
              "partition "
              "(try more stages)";
    return failure();
  }

  /// The cheapest (remat, micro-batches) with these stages that fits `cap`;
  /// interleaved stages (numLocal > 1) stay interleaved.
  std::string whatFits(ModelOp model, ArrayRef<PlannedStage> stages,
                       unsigned numLocal, uint64_t cap, unsigned sendWindow) {
    const int64_t batch = model.getBatch();
    using schedule::ScheduleKind;
    std::vector<ScheduleKind> kinds = {ScheduleKind::GPipe,
                                       ScheduleKind::OneFOneB};
    if (numLocal > 1)
      kinds = {ScheduleKind::Interleaved};
    for (KeepPolicy keep :
         {KeepPolicy::All, KeepPolicy::Last, KeepPolicy::None})
      for (int64_t m = 1; m <= batch; m *= 2)
        for (ScheduleKind kind : kinds) {
          std::optional<int64_t> arena =
              largestArena(stages, batch, m, keep, kind, numLocal, sendWindow);
          if (!arena || uint64_t(*arena) > cap)
            continue;
          std::string withSchedule =
              kind == ScheduleKind::GPipe
                  ? ""
                  : "schedule " + std::string(scheduleKindName(kind)) + ", ";
          return "it fits with " + withSchedule + "remat " +
                 rematNameOf(keep).str() + " and " + std::to_string(m) +
                 " micro-batches (largest device " + formatBytes(*arena) + ")";
        }
    return {};
  }

  std::optional<int64_t> largestArena(ArrayRef<PlannedStage> stages,
                                      int64_t batch, int64_t m, KeepPolicy keep,
                                      schedule::ScheduleKind kind,
                                      unsigned numLocal, unsigned sendWindow) {
    std::vector<PlannedStage> pipeline(stages.begin(), stages.end());
    std::vector<std::vector<PlannedInstr>> programs = pipelineInstructions(
        pipeline, batch, unsigned(m), kind, numLocal, sendWindow);
    if (programs.empty())
      return std::nullopt;
    std::vector<int64_t> rows =
        schedule::splitMicrobatches(batch, unsigned(m)).rows;
    int64_t largest = 0;
    for (size_t device = 0; device < programs.size(); ++device) {
      DeviceProgram input{
          stagesOfDevice(pipeline, unsigned(device), unsigned(programs.size())),
          std::move(programs[device]), rows, keep};
      DeviceMemoryPlan plan;
      if (!planDeviceMemory(input, plan).empty())
        return std::nullopt;
      largest = std::max(largest, plan.arenaBytes);
    }
    return largest;
  }
};
} // namespace
