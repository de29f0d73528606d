//===- CostModel.h - Forward cost of gpipe ops from their shapes -*- C++ -*-===//

#ifndef GPIPE_ANALYSIS_COSTMODEL_H
#define GPIPE_ANALYSIS_COSTMODEL_H

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

namespace gpipe {

/// Bytes of a statically shaped tensor (elements x ceil(bits / 8)).
uint64_t tensorBytes(mlir::Type type);

/// A product (a dense of 8 inputs or more, an attention, a convolution; not a
/// norm or an activation) costs at least this many FLOPs per element it
/// writes: gpipe-split-layers cuts before them, remat selective keeps them.
inline constexpr uint64_t kProductFlopsPerElement = 16;

/// The `cost` attribute of an op, a layer or a stage, or null when absent.
CostAttr getCost(mlir::Operation *op);

/// Field-wise sum.
CostAttr addCosts(mlir::MLIRContext *context, CostAttr lhs, CostAttr rhs);

/// Estimates the forward cost of a compute op from its shapes: FLOPs (a
/// multiply-add counts two), bytes of the parameters it reads directly and
/// bytes of the activations it keeps for the backward. Fails, with a
/// diagnostic, for ops that are not compute ops and for costs of 2^63 or more.
mlir::FailureOr<CostAttr> estimateOpCost(mlir::Operation *op);

} // namespace gpipe

#endif // GPIPE_ANALYSIS_COSTMODEL_H
