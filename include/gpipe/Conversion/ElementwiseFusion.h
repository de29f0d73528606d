//===- ElementwiseFusion.h - Element-wise ops into kernels -----*- C++ -*-===//
//
// Finds, in every stage and stage backward of a compiled model, the groups of
// element-wise ops (relu, gelu, gelu_erf, tanh, add and, in stage backwards,
// relu_grad, gelu_grad, gelu_erf_grad, tanh_grad) that one fused kernel can
// compute: an in-tree whose
// intermediate values each have exactly one use, by the next op of the group.
// A value used elsewhere (kept for the backward, yielded by the stage, read
// by a non element-wise op) is the group's output. Values a layer yields are
// looked through: a layer result with a single element-wise user in the same
// stage fuses with its producer, so groups can span layers.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_CONVERSION_ELEMENTWISEFUSION_H
#define GPIPE_CONVERSION_ELEMENTWISEFUSION_H

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace gpipe {

/// Whether `op` is one of the element-wise ops that kernels are fused from.
bool isFusableElementwiseOp(mlir::Operation *op);

/// One fused element-wise kernel.
struct FusedKernel {
  /// The stage the kernel belongs to (its symbol name).
  std::string stage;
  /// Whether the kernel runs in the stage's backward.
  bool backward = false;
  /// Position of the kernel among those of its stage body (forward or
  /// backward), in execution order of the outputs.
  unsigned index = 0;
  /// The ops, in execution order; the last computes `output`.
  llvm::SmallVector<mlir::Operation *> ops;
  /// The values the kernel reads, in order of first use.
  llvm::SmallVector<mlir::Value> inputs;
  /// The only value the kernel writes.
  mlir::Value output;
  /// Elements of every input and of the output.
  int64_t numElements = 0;
};

/// The fused kernels of every stage forward (in model order), then of every
/// stage backward (in model order). Emits a diagnostic and fails on a model
/// without stages or on an element-wise op that cannot be fused (element type
/// other than f32, operands of different shapes).
mlir::FailureOr<llvm::SmallVector<FusedKernel>>
analyzeElementwiseFusion(ModelOp model);

/// The fused kernels of one stage body: `ops` are the body's ops in execution
/// order (for a forward stage, the ops of its layers, flattened).
mlir::FailureOr<llvm::SmallVector<FusedKernel>>
fuseElementwiseOps(llvm::ArrayRef<mlir::Operation *> ops);

} // namespace gpipe

#endif // GPIPE_CONVERSION_ELEMENTWISEFUSION_H
