//===- PtxKernels.h - Generated kernels as PTX for CUDA ---------*- C++ -*-===//
//
// The CUDA counterpart of NativeKernels.h: the same kernels (KernelSpec,
// their steps' scalar definitions shared with the CPU through
// emitKernelSteps) built as a gpu.module of gpu.func kernels, lowered to NVVM
// and written as ONE PTX module holding one `.entry` per kernel. The bundle
// carries it as `code.cuda` (docs/BundleFormat.md); the runtime loads it with
// cuModuleLoadData and launches the entries with cuLaunchKernel.
//
// The kernel ABI (every parameter 8 bytes):
//
//   .entry <symbol>(.u64 in0, ..., .u64 in{n-1}, .u64 out,
//                   .u64 size0, ..., .u64 size{rank-1})
//
//   - in_k: a `const float *`, the k-th input (KernelSpec::inputDims[k]);
//   - out: a `float *`, the output (KernelSpec::outputDims);
//   - size_d: an int64_t, the extent of iteration dimension d.
//
// Every array is dense and row-major over its own dimensions, in the order
// its list names them: input k's element at a point of the iteration space
// is at the flat index of the point's coordinates in inputDims[k]
// (ascending; a broadcast input lacks some dimensions, a transposed one
// lists them permuted), the output's at the flat index of its coordinates
// in outputDims. The output may be one of the inputs (written in place): an
// element-wise kernel reads a point's inputs before writing it.
//
// A launch runs one thread per OUTPUT element, any 1-D grid and block
// (blockIdx.x * blockDim.x + threadIdx.x strides by gridDim.x * blockDim.x
// over the flattened output, so any launch size covers it; no shared memory,
// no synchronization): for an element-wise kernel a thread computes its
// point's steps and stores the last; for a reduction (the last step
// reduce_sum, reduce_mean or reduce_max) it visits every point of the reduced
// dimensions in row-major order, sequentially (deterministic: the bits do not
// depend on the launch), combining the reduced value: a sum, or a maximum
// that propagates NaN (arith.maximumf), from 0 (-inf for the maximum); a mean
// is the sum divided by the step's constant "count". An empty output
// needs no launch.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TARGET_PTXKERNELS_H
#define GPIPE_TARGET_PTXKERNELS_H

#include "gpipe/Target/NativeKernels.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace gpipe {

/// The GPU the bundle's PTX targets by default (H100). The PTX ISA version is
/// 8.0 (CUDA 12.0 drivers and later).
constexpr llvm::StringLiteral kDefaultPtxChip = "sm_90";

/// Compiles `kernels` into one PTX module (text) for `chip` ("sm_90", or
/// another sm_XY that PTX ISA 8.0 supports), with one `.entry` per kernel
/// named by its symbol and the ABI above. The PTX needs no libdevice and
/// does not depend on the machine that compiles it (nor on a CUDA toolkit
/// there). Fails with a diagnostic at `loc` saying which step failed (a bad
/// kernel, the lowering, code generation) and with what.
mlir::FailureOr<std::string>
compilePtxKernels(llvm::ArrayRef<NamedKernel> kernels, llvm::StringRef chip,
                  mlir::Location loc);

/// The kernels as MLIR, for dumps and tests: the gpu.module of gpu.func
/// kernels (`stage` "gpu"), or after the lowering to NVVM (`stage` "nvvm").
mlir::FailureOr<std::string> printPtxKernelIR(llvm::ArrayRef<NamedKernel> kernels,
                                              llvm::StringRef stage,
                                              llvm::StringRef chip,
                                              mlir::Location loc);

/// For tests on machines without a GPU: the PTX kernels' bodies, with the
/// same math expansions, as host functions in the LLVM dialect, in `context`
/// (its dialects are loaded):
///
///   void <symbol>(const float *in0, ..., float *out, int64_t size0, ...,
///                 int64_t first, int64_t step)
///
/// computes the output elements first, first + step, ... as the GPU thread
/// whose global index is `first` in a launch of `step` threads. Each function
/// can be called through mlir::ExecutionEngine::invokePacked. Fails with a
/// diagnostic at `loc`.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildPtxKernelHostModule(mlir::MLIRContext &context,
                         llvm::ArrayRef<NamedKernel> kernels,
                         mlir::Location loc);

} // namespace gpipe

#endif // GPIPE_TARGET_PTXKERNELS_H
