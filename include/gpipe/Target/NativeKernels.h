//===- NativeKernels.h - Generated kernels as x86-64 shared objects -*- C++
//-*-===//
//
// Lowers generated kernels (KernelToLinalg.h) through MLIR to native code:
// linalg on tensors, bufferized, tiled, peeled and vectorized, then the LLVM
// dialect, LLVM IR, and one x86-64 shared object per instruction-set variant
// (linked by the system's C compiler driver: LLVM 22 ships no liblld). The
// runtime loads the variant its CPU runs (runtime/src/backends/
// GeneratedCode.cpp) without any compiler present.
//
// Each kernel's entry is `void <symbol>(void **args)`: args[0..n] point to
// the 1-D memref descriptors {allocated, aligned, offset, size, stride} of
// the inputs, then of the output (MLIR's C interface, packed so that every
// kernel has one C signature).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TARGET_NATIVEKERNELS_H
#define GPIPE_TARGET_NATIVEKERNELS_H

#include "gpipe/Conversion/KernelToLinalg.h"

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace gpipe {

/// A generated kernel and the symbol of its entry.
struct NamedKernel {
  std::string symbol;
  KernelSpec spec;
};

/// One instruction-set variant of the kernels' code.
struct NativeCodeVariant {
  /// x86-64 (SSE2), x86-64-v3 (AVX2, FMA) or x86-64-v4 (AVX-512): the psABI
  /// level names, which the runtime checks its CPU against.
  std::string isa;
  /// The shared object's bytes.
  std::string sharedObject;
};

/// The instruction-set variants generated, narrowest first.
llvm::ArrayRef<llvm::StringRef> nativeIsaVariants();

/// The kernels as MLIR (a module of linalg-on-tensors functions), for dumps
/// and tests. `stage` is "linalg", or "llvm" for the LLVM dialect of the
/// `isa` variant.
mlir::FailureOr<std::string> printKernelIR(llvm::ArrayRef<NamedKernel> kernels,
                                           llvm::StringRef stage,
                                           llvm::StringRef isa,
                                           mlir::Location loc);

/// Compiles `kernels` for every variant of nativeIsaVariants(). Fails with a
/// diagnostic at `loc` (the error says which step failed: lowering, code
/// generation, or linking, and with what).
mlir::FailureOr<std::vector<NativeCodeVariant>>
compileNativeKernels(llvm::ArrayRef<NamedKernel> kernels, mlir::Location loc);

} // namespace gpipe

#endif // GPIPE_TARGET_NATIVEKERNELS_H
