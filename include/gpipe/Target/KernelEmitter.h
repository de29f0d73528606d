//===- KernelEmitter.h - Fused element-wise kernels as C++/CUDA -*- C++ -*-===//
//
// Writes the fused element-wise kernels of a compiled model (see
// gpipe/Conversion/ElementwiseFusion.h) as one self-contained source that
// compiles both as C++ for the host and as CUDA: per kernel a scalar
// `GPIPE_HD` body, a grid-stride `__global__` wrapper (under __CUDACC__) and a
// host loop, plus a table of GpipeKernelInfo describing every kernel.
//
// A readable dump of the named ops' fusions (gpipe-translate
// --gpipe-emit-kernels), not what the product runs: bundles carry kernels
// generated through MLIR (KernelRegions.h, NativeKernels.h).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TARGET_KERNELEMITTER_H
#define GPIPE_TARGET_KERNELEMITTER_H

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace gpipe {

/// Writes the fused element-wise kernels of `model`. Emits a diagnostic on
/// failure.
mlir::LogicalResult emitElementwiseKernels(ModelOp model,
                                           llvm::raw_ostream &os);

/// Writes the kernels of the module's only gpipe.model.
mlir::LogicalResult translateModuleToKernels(mlir::ModuleOp module,
                                             llvm::raw_ostream &os);

/// Registers `--gpipe-emit-kernels` with mlir-translate style tools.
void registerEmitKernelsTranslation();

} // namespace gpipe

#endif // GPIPE_TARGET_KERNELEMITTER_H
