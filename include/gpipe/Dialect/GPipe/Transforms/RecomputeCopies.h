//===- RecomputeCopies.h - A backward's copies of its stage's forward -*- C++
//-*-===//
//
// gpipe-differentiate starts each stage backward with a copy of its stage's
// forward (ops marked `gpipe.recompute`, parameters as `gpipe.param_ref`),
// then drops the copies the gradients do not read: a backward recomputes
// only what it needs (the pre-activation a GELU's gradient reads, not the
// GELU). The memory description and the bundle emitter pair each copy with
// the forward op it copies, so that both give it the forward's value ids.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_DIALECT_GPIPE_TRANSFORMS_RECOMPUTECOPIES_H
#define GPIPE_DIALECT_GPIPE_TRANSFORMS_RECOMPUTECOPIES_H

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

#include "llvm/ADT/DenseMap.h"

namespace gpipe {

/// Erases the recompute ops of `backward` whose results nothing reads, last
/// first, so that the ops only they read go too.
void eraseUnreadRecomputes(StageBackwardOp backward);

/// The forward op of `stage` that each `gpipe.param_ref` and recompute op of
/// `backward` copies: the next one in the forward's order (layers flattened)
/// of the same name and attributes (but `cost`) whose operands are the
/// copy's. An error on the first copy that has none.
mlir::FailureOr<llvm::DenseMap<mlir::Operation *, mlir::Operation *>>
matchRecomputeCopies(StageOp stage, StageBackwardOp backward);

} // namespace gpipe

#endif // GPIPE_DIALECT_GPIPE_TRANSFORMS_RECOMPUTECOPIES_H
