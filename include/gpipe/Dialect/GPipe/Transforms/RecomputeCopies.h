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
// Under remat `selective` the forward keeps the products' results (a dense,
// an attention, a convolution: costly per element they hold) for the
// backward, and the recompute reruns only the cheap ops between them and
// what the gradients read (norms, activations, dropout, residual adds).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_DIALECT_GPIPE_TRANSFORMS_RECOMPUTECOPIES_H
#define GPIPE_DIALECT_GPIPE_TRANSFORMS_RECOMPUTECOPIES_H

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

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

/// The mark gpipe-differentiate puts on the copies.
inline constexpr llvm::StringLiteral kRecomputeAttr = "gpipe.recompute";

/// Whether remat `selective` keeps `forwardOp`'s result (and saved state)
/// for the backward rather than recompute it: a product
/// (kProductFlopsPerElement, CostModel.h), its saved state counted among the
/// elements it writes.
bool keptUnderSelectiveRemat(mlir::Operation *forwardOp);

/// The recompute ops of `backward` that run again, given `copies`
/// (matchRecomputeCopies'): all of them, but under remat `selective` only
/// those the gradients read, directly or through other reruns, without
/// passing a kept result.
llvm::DenseSet<mlir::Operation *> rerunRecomputes(
    StageBackwardOp backward,
    const llvm::DenseMap<mlir::Operation *, mlir::Operation *> &copies);

/// The share of the FLOPs of `stage`'s forward ops (their costs, or their
/// estimates) that `backward`'s recompute reruns; 1 where they cost nothing.
double rerunFlopShare(StageOp stage, StageBackwardOp backward);

} // namespace gpipe

#endif // GPIPE_DIALECT_GPIPE_TRANSFORMS_RECOMPUTECOPIES_H
