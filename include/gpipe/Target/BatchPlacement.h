//===- BatchPlacement.h - Where a generated op puts the batch ---*- C++ -*-===//
//
// The bundle emission's checks of the ops that run on a micro-batch's rows
// (a generated kernel, a broadcasting add, a matmul): each refuses, with a
// diagnostic on the op, one whose per-micro-batch result would differ from
// the whole batch's.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TARGET_BATCHPLACEMENT_H
#define GPIPE_TARGET_BATCHPLACEMENT_H

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

namespace gpipe {

/// A generated op (or a broadcasting add) over a batch of `batch` examples,
/// `operandBatched[k]` saying whether operand k is per example: refuses an
/// operand that is not per example but spans the batch dimension of a result
/// that is, a forward reduction over the batch, a slice, concat, reshape,
/// transpose or gather that moves or cuts the batch.
mlir::LogicalResult checkBatchPlacement(mlir::Operation *op, int64_t batch,
                                        llvm::ArrayRef<bool> operandBatched);

/// A matmul: in a forward, a per-example operand keeps the batch in the
/// result's dimension 0; an operand that is not per example does not span a
/// batch dimension of a per-example result.
mlir::LogicalResult checkMatmulPlacement(MatmulOp op,
                                         llvm::ArrayRef<bool> operandBatched);

} // namespace gpipe

#endif // GPIPE_TARGET_BATCHPLACEMENT_H
