//===- PtxKernelBody.h - A PTX kernel's computation -------------*- C++ -*-===//
//
// Private to lib/Target: the body of a generated kernel over raw pointers
// (the ABI of PtxKernels.h), which PtxKernels.cpp wraps in a gpu.func for the
// GPU, or in a func.func for tests on the host.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_TARGET_PTXKERNELBODY_H
#define GPIPE_LIB_TARGET_PTXKERNELBODY_H

#include "gpipe/Target/NativeKernels.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/ValueRange.h"
#include "mlir/Support/LLVM.h"

namespace gpipe::ptx_detail {

/// The arguments of a kernel body, as the ABI orders them, and the thread's
/// first output element and stride.
struct BodyArgs {
  mlir::ValueRange inputs;
  mlir::Value output;
  mlir::ValueRange sizes;
  mlir::Value first, step;
};

/// Checks `kernel` as the CPU's lowering does (emitKernelSteps in a scratch
/// block), so that the index arithmetic meets only valid dimensions.
mlir::LogicalResult checkKernel(mlir::MLIRContext *ctx, mlir::Location loc,
                                const NamedKernel &kernel);

/// Emits at `b` the computation of output elements first, first + step, ...
/// (the kernel checked).
mlir::LogicalResult emitKernelBody(mlir::OpBuilder &b, mlir::Location loc,
                                   const NamedKernel &kernel,
                                   const BodyArgs &args);

/// The kernel's parameter types: the pointers, then the sizes.
llvm::SmallVector<mlir::Type> parameterTypes(mlir::MLIRContext *ctx,
                                             const KernelSpec &spec);

} // namespace gpipe::ptx_detail

#endif // GPIPE_LIB_TARGET_PTXKERNELBODY_H
