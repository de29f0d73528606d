//===- ElementwiseGradients.h - Gradients of the general element-wise ops -===//
//
// gpipe-differentiate's rules for the ops of GPipeElementwiseOps.td, apart
// from the layer ops' rules in Differentiate.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TRANSFORMS_ELEMENTWISEGRADIENTS_H
#define GPIPE_TRANSFORMS_ELEMENTWISEGRADIENTS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

namespace gpipe {

/// Adds `grad` to the gradient of `value`.
using ContributeFn =
    llvm::function_ref<void(mlir::Value value, mlir::Value grad)>;
/// Whether `value` takes a gradient (a float tensor that is no model input).
using WantsGradientFn = llvm::function_ref<bool(mlir::Value value)>;

/// Emits the gradient ops of the general element-wise op `op` given `dy`, the
/// gradient of its result. Returns false if `op` is not one of them.
bool emitElementwiseGradient(mlir::Operation *op, mlir::Value dy,
                             mlir::OpBuilder &builder, ContributeFn contribute,
                             WantsGradientFn wants);

} // namespace gpipe

#endif // GPIPE_TRANSFORMS_ELEMENTWISEGRADIENTS_H
