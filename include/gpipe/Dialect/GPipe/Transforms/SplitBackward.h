//===- SplitBackward.h - A stage backward as B, then W, in IR ---*- C++ -*-===//
//
// Zero-bubble schedules run each stage's backward in two instructions: B
// (gpipe.backward), what the input gradients need, and W
// (gpipe.backward_weights), the parameter gradients. splitStageBackward
// reorders a gpipe.stage_backward's ops into B, then W, marking W's with the
// unit attribute `gpipe.weights`, by the rule of the runtime's
// BackwardSplit.h: a dense or layer-norm gradient that B needs keeps its
// input gradient and a clone computes its parameter gradients in W; an
// attention gradient stays whole in B; every op the input gradients do not
// need goes to W. The memory description and the bundle emitter read the
// marks (the emitter writes the split as the stage's `weights_from`).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_DIALECT_GPIPE_TRANSFORMS_SPLITBACKWARD_H
#define GPIPE_DIALECT_GPIPE_TRANSFORMS_SPLITBACKWARD_H

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

namespace gpipe {

/// The mark of a W op, and of a stage_backward that is split.
constexpr const char *kWeightsAttr = "gpipe.weights";
constexpr const char *kSplitAttr = "gpipe.split";

/// Whether `op` is in W of a split backward.
inline bool isWeightsOp(mlir::Operation *op) {
  return op->hasAttr(kWeightsAttr);
}

/// Whether `backward` is split into B and W.
inline bool isSplitBackward(StageBackwardOp backward) {
  return backward->hasAttr(kSplitAttr);
}

/// Whether `op` may hand its parameter gradients to a clone in W (and so
/// leave a result unused): dense_grad, layer_norm_grad, conv2d_grad.
inline bool separatesWeightGradients(mlir::Operation *op) {
  return mlir::isa<DenseGradOp, LayerNormGradOp, Conv2dGradOp>(op);
}

/// Whether `result` is an input gradient that nothing reads (the first
/// layer's dx, whose input is the model's), which the runtime then does not
/// compute: result 0 of dense_grad, layer_norm_grad, batch_norm_grad,
/// attention_grad or conv2d_grad (the runtime's DropsFirstResult). The
/// memory plan leaves it unallocated and the bundle writes it as -1.
inline bool isUnreadInputGradient(mlir::OpResult result) {
  return result.getResultNumber() == 0 && result.use_empty() &&
         mlir::isa<DenseGradOp, LayerNormGradOp, BatchNormGradOp,
                   AttentionGradOp, Conv2dGradOp>(result.getOwner());
}

/// Splits `backward` (once: a split one is left as it is).
void splitStageBackward(StageBackwardOp backward);

} // namespace gpipe

#endif // GPIPE_DIALECT_GPIPE_TRANSFORMS_SPLITBACKWARD_H
