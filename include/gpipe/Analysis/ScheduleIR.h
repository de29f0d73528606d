//===- ScheduleIR.h - Between gpipe.schedule and schedule::Program -*- C++ -*-===//

#ifndef GPIPE_ANALYSIS_SCHEDULEIR_H
#define GPIPE_ANALYSIS_SCHEDULEIR_H

#include "gpipe/Analysis/PipelineSchedule.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "mlir/Support/LLVM.h"

#include <vector>

namespace gpipe {

/// A gpipe.schedule read into the IR-free form, with the op behind each
/// instruction so that findings can be reported on it.
struct ScheduleInIR {
  schedule::Program program;
  std::vector<std::vector<mlir::Operation *>> ops; ///< [device][instruction]
  std::vector<mlir::Operation *> programs;        ///< [device]
};

/// The stages of a model in body order (empty if it has none).
llvm::SmallVector<StageOp> getStages(ModelOp model);

/// The model a schedule refers to; emits an error when there is none.
mlir::FailureOr<ModelOp> lookupScheduledModel(ScheduleOp schedule);

/// Reads `schedule`. Programs must be for devices 0..K-1 (K = number of
/// stages of `model` / the schedule's virtual_stages), once each;
/// forward/backward must name a stage of the model, and under interleaving
/// loads and transfers their stage. Emits a diagnostic and fails otherwise.
mlir::FailureOr<ScheduleInIR> readSchedule(ScheduleOp schedule, ModelOp model);

/// Prints a type the way MLIR does, e.g. "f32".
std::string typeToString(mlir::Type type);

} // namespace gpipe

#endif // GPIPE_ANALYSIS_SCHEDULEIR_H
