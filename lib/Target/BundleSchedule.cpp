//===- BundleSchedule.cpp - The schedule's part of a bundle ---------------===//
//
// Copies each device's program (its instructions as the bundle names
// them) and memory plan (the sizes and every buffer's placement) from the
// compiled schedule.
//
//===----------------------------------------------------------------------===//

#include "BundleSchedule.h"

#include "gpipe/Analysis/MemoryPlanner.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Target/BundleEmitter.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;
using namespace gpipe;
namespace json = llvm::json;

/// The number of programs (devices) of `schedule`: one per stage, or one per
/// virtual_stages stages under interleaving.
static unsigned numDevicesOf(ScheduleOp schedule, ModelOp model) {
  return getStagesCount(model) / schedule.getVirtualStages().value_or(1);
}

FailureOr<json::Array> gpipe::bundle_detail::emitPrograms(ScheduleOp schedule,
                                                          ModelOp model) {
  json::Array programs;
  SmallVector<ProgramOp> ordered(numDevicesOf(schedule, model));
  for (ProgramOp program : schedule.getBody().front().getOps<ProgramOp>()) {
    if (program.getDevice() >= ordered.size())
      return program.emitOpError() << "is for a device the model does not have";
    ordered[program.getDevice()] = program;
  }
  for (auto [device, program] : llvm::enumerate(ordered)) {
    if (!program)
      return schedule.emitOpError() << "has no program for device " << device;
    json::Array instrs;
    for (Operation &op : program.getBody().front()) {
      json::Object instr =
          llvm::TypeSwitch<Operation *, json::Object>(&op)
              .Case([](LoadInputOp o) {
                json::Object out{{"op", "load_input"},
                                 {"name", o.getName()},
                                 {"mb", int64_t(o.getMb())}};
                if (o.getStage())
                  out["stage"] = int64_t(*o.getStage());
                return out;
              })
              .Case<ForwardOp, BackwardOp, BackwardWeightsOp>([&](auto o) {
                StageOp stage = model.lookupStage(o.getStage());
                return json::Object{
                    {"op", o->getName().stripDialect()},
                    {"stage", stage ? int64_t(stage.getIndex()) : int64_t(-1)},
                    {"mb", int64_t(o.getMb())}};
              })
              .Case<SendActivationOp, RecvActivationOp, SendGradientOp,
                    RecvGradientOp, WaitSendActivationOp,
                    WaitSendGradientOp>([](auto o) {
                json::Object out{{"op", o->getName().stripDialect()},
                                 {"peer", int64_t(o.getPeer())},
                                 {"mb", int64_t(o.getMb())},
                                 {"channel", int64_t(o.getChannel())}};
                if (o.getStage())
                  out["stage"] = int64_t(*o.getStage());
                return out;
              })
              .Case([](OptimizerStepOp) {
                return json::Object{{"op", "optimizer_step"}};
              })
              .Default([](Operation *) { return json::Object(); });
      if (instr.empty())
        return op.emitOpError() << "is not a schedule instruction";
      instrs.push_back(std::move(instr));
    }
    programs.push_back(std::move(instrs));
  }
  return programs;
}

FailureOr<json::Object>
gpipe::bundle_detail::emitMemoryPlan(ModelOp model, ScheduleOp schedule) {
  SmallVector<ProgramOp> programs(numDevicesOf(schedule, model));
  for (ProgramOp program : schedule.getBody().front().getOps<ProgramOp>())
    if (program.getDevice() < programs.size())
      programs[program.getDevice()] = program;
  json::Array devices;
  std::optional<int64_t> slots;
  for (auto [device, program] : llvm::enumerate(programs)) {
    if (!program)
      return schedule.emitOpError() << "has no gpipe.program for device "
                                    << device << " of " << programs.size();
    auto plan = program->getAttrOfType<DictionaryAttr>("gpipe.memory");
    if (!plan)
      return program.emitOpError()
             << "has no gpipe.memory plan; run gpipe-plan-memory first "
                "(gpipe-compile does): the runtime places buffers only where "
                "the compiler planned them";
    auto get = [&](StringRef key) -> std::optional<int64_t> {
      auto value = plan.getAs<IntegerAttr>(key);
      return value ? std::optional<int64_t>(value.getInt()) : std::nullopt;
    };
    std::optional<int64_t> resident = get("resident_bytes"),
                           peak = get("peak_bytes"), arena = get("arena_bytes"),
                           count = get("num_buffers");
    slots = get("optimizer_slots");
    if (!resident || !peak || !arena || !slots || !count)
      return program.emitOpError()
             << "has a gpipe.memory plan without resident_bytes, peak_bytes, "
                "arena_bytes, num_buffers and optimizer_slots";
    auto placement =
        program->getAttrOfType<DenseI64ArrayAttr>("gpipe.placement");
    if (!placement)
      return program.emitOpError()
             << "has " << *count << " buffers, more than the "
             << kMaxPlacedBuffers
             << " whose placement a bundle carries per device; use more "
                "stages or fewer micro-batches";
    ArrayRef<int64_t> words = placement.asArrayRef();
    if (words.size() != size_t(*count) * kPlacedBufferWords)
      return program.emitOpError()
             << "has a gpipe.placement of " << words.size()
             << " words, expected " << kPlacedBufferWords << " for each of its "
             << *count << " buffers";
    json::Array buffers;
    for (size_t i = 0; i < words.size(); i += kPlacedBufferWords)
      buffers.push_back(
          json::Array(llvm::ArrayRef(words.data() + i, kPlacedBufferWords)));
    devices.push_back(json::Object{{"resident_bytes", *resident},
                                   {"peak_bytes", *peak},
                                   {"arena_bytes", *arena},
                                   {"buffers", std::move(buffers)}});
  }
  return json::Object{{"optimizer_slots", slots.value_or(0)},
                      {"devices", std::move(devices)}};
}
