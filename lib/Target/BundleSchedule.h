//===- BundleSchedule.h - The schedule's part of a bundle -------*- C++ -*-===//
//
// Private to lib/Target: the per-device programs and memory plans that the
// bundle emission (BundleEmitter.cpp) copies from a compiled schedule
// (docs/BundleFormat.md).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_TARGET_BUNDLESCHEDULE_H
#define GPIPE_LIB_TARGET_BUNDLESCHEDULE_H

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

#include "mlir/Support/LLVM.h"
#include "llvm/Support/JSON.h"

namespace gpipe::bundle_detail {

/// The bundle's `programs`: each device's instructions, in device order.
mlir::FailureOr<llvm::json::Array> emitPrograms(ScheduleOp schedule,
                                                ModelOp model);

/// The per-device plans of gpipe-plan-memory with every buffer's placement:
/// the runtime takes its buffers from them and plans nothing itself.
mlir::FailureOr<llvm::json::Object> emitMemoryPlan(ModelOp model,
                                                   ScheduleOp schedule);

} // namespace gpipe::bundle_detail

#endif // GPIPE_LIB_TARGET_BUNDLESCHEDULE_H
