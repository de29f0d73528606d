//===- BackwardSplit.h - A stage's backward as B, then W --------*- C++ -*-===//
//
// Zero-bubble schedules (ZB-H1) run a stage's backward in two steps: B, what
// the input gradients sent to the previous stage need, as soon as the output
// gradients arrive; W, the parameter gradients, later, where the schedule
// has a bubble. splitBackward reorders a stage's backward ops into B, then
// W, and sets StageProgram::weightsFrom between them:
//  - B holds every op the input gradients depend on, in their order;
//  - a dense or layer-norm gradient in B keeps only its input gradient, and
//    a copy of it with only the parameter gradients goes to W (the two
//    GEMMs of a dense layer's backward, or the row and column reductions of
//    a layer norm's, are independent);
//  - an attention gradient computes its weights' (and biases') gradients
//    from the intermediate gradient of q, k and v that its input gradient
//    also needs, so it stays whole in B;
//  - every other op (bias, embedding and accumulated gradients, and what
//    only they read) goes to W.
// Stage 0 sends no input gradient: its B is empty and W is its backward.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_BACKWARDSPLIT_H
#define GPIPE_RUNTIME_BACKWARDSPLIT_H

#include "gpipe/runtime/bundle/Bundle.h"

namespace gpipe::runtime {

/// Whether an op of `kind` in B may leave its parameter gradients (results
/// 1 and on) to a copy in W: dense_grad, layer_norm_grad and conv2d_grad.
bool separatesWeightGradients(OpKind kind);

/// Splits `stage`'s backward (unsplit, as the compiler writes it) into B and
/// W in place. The ops computed are the same, once each, but for the two
/// halves of a separated op.
void splitBackward(StageProgram &stage);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_BACKWARDSPLIT_H
