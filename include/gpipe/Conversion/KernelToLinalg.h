//===- KernelToLinalg.h - A fused element-wise kernel as linalg -*- C++ -*-===//
//
// A generated kernel is a chain of element-wise steps over f32 elements (the
// bundle's element-wise ops, fused by the bundle emission: KernelRegions.h).
// This builds it as one `linalg.generic` on tensors, the start of its
// lowering to native code (NativeKernels.h).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_CONVERSION_KERNELTOLINALG_H
#define GPIPE_CONVERSION_KERNELTOLINALG_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <vector>

namespace gpipe {

/// One step of a kernel: an element-wise op (the bundle's relu, gelu,
/// gelu_erf, tanh, add, add_grads and their gradients relu_grad, gelu_grad,
/// gelu_erf_grad, tanh_grad; the general ops of GPipeElementwiseOps.td and
/// their gradients), by mnemonic, operands in the op's order, on earlier
/// values: operand k < numInputs is input k, otherwise step k - numInputs.
struct KernelStep {
  std::string op;
  llvm::SmallVector<unsigned> operands;
  /// The op's constants by name, sorted (clip: max, min).
  std::vector<std::pair<std::string, double>> constants = {};

  /// The constant `name` (0 if the step has none of that name).
  double constant(llvm::StringRef name) const;
};

/// A kernel: `numInputs` inputs of n elements each, steps in order, the last
/// one's value written to the output.
struct KernelSpec {
  unsigned numInputs = 0;
  std::vector<KernelStep> steps;

  /// "add(in0,in1)->t0; clip[max=6,min=0](t0)->out": the steps with their
  /// constants, the inputs and the intermediate values named; identical
  /// kernels describe alike.
  std::string describe() const;
};

/// Whether `op` (an op's mnemonic) can be a kernel step.
bool isKernelStepOp(llvm::StringRef op);

/// Whether the runtime also has a kernel of its own for step `op` (the
/// bundle's named element-wise ops); the general ops have none.
bool hasLibraryKernel(llvm::StringRef op);

/// Adds to `module` a public `func.func @name(in0, ..., out)` over
/// tensor<?xf32> whose body is one linalg.generic computing `kernel`, the
/// output argument marked writable so that bufferization writes it in place.
/// Fails (with a diagnostic at `loc`) on an unknown step or a bad operand.
mlir::LogicalResult buildKernelFunction(mlir::ModuleOp module,
                                        mlir::Location loc,
                                        llvm::StringRef name,
                                        const KernelSpec &kernel);

} // namespace gpipe

#endif // GPIPE_CONVERSION_KERNELTOLINALG_H
