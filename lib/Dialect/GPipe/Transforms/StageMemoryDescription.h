//===- StageMemoryDescription.h - Stages as the memory planner sees them --===//
//
// Shared by gpipe-plan-memory (the stages of the partition) and
// gpipe-partition (each layer as a stage of its own, to plan candidate cells).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TRANSFORMS_STAGEMEMORYDESCRIPTION_H
#define GPIPE_TRANSFORMS_STAGEMEMORYDESCRIPTION_H

#include "gpipe/Analysis/MemoryPlanner.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/runtime/bundle/OpTable.h"

#include "mlir/Support/LLVM.h"

#include <vector>

namespace gpipe {

/// The state the runtime saves with `op`'s result for the backward (the op
/// table's rule, shared with every executor).
runtime::SavedState savedStateOf(mlir::Operation *op);

/// One stage and its backward as the runtime runs them.
mlir::FailureOr<PlannedStage> describeStageMemory(StageOp stage,
                                                  StageBackwardOp backward,
                                                  bool isLast, int64_t batch,
                                                  unsigned optimizerSlots);

/// Every stage of a differentiated model, in order, and the rematerialisation
/// policy of their backwards (as which micro-batches keep their values).
mlir::FailureOr<std::vector<PlannedStage>>
describeModelStages(ModelOp model, unsigned optimizerSlots, KeepPolicy &keep);

/// A device program's instructions, each with the index of its stage among
/// the device's (stage d + vK of `model` is the v-th of device d of
/// `numDevices`).
std::vector<PlannedInstr>
describeProgramMemory(ProgramOp program, ModelOp model, unsigned numDevices);

KeepPolicy keepPolicyOf(llvm::StringRef remat);
llvm::StringRef rematNameOf(KeepPolicy keep);

} // namespace gpipe

#endif // GPIPE_TRANSFORMS_STAGEMEMORYDESCRIPTION_H
