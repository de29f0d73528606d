//===- PtxMath.h - The PTX kernels' math expansions -------------*- C++ -*-===//
//
// Private to lib/Target: PtxKernels.cpp expands the math ops of the kernels
// (on the GPU, and in their host copies for tests) before it lowers them, so
// that nothing is left to link (PtxMath.cpp says how and why).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_TARGET_PTXMATH_H
#define GPIPE_LIB_TARGET_PTXMATH_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

namespace gpipe::ptx_detail {

/// Replaces the math ops of `symbols` (a gpu.module or a module) by their
/// expansions: the CPU's polynomial approximations for exp, log, tanh, erf,
/// erfc; sin, cos and pow in double precision, rounded once.
mlir::LogicalResult expandMath(mlir::Operation *symbols);

} // namespace gpipe::ptx_detail

#endif // GPIPE_LIB_TARGET_PTXMATH_H
