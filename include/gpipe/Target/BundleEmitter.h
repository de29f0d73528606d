//===- BundleEmitter.h - Write a compiled model as a program bundle -*- C++
//-*-===//
//
// The contract with the runtime: docs/BundleFormat.md.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TARGET_BUNDLEEMITTER_H
#define GPIPE_TARGET_BUNDLEEMITTER_H

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

namespace gpipe {

/// The bundle of `model` (compiled: stages, stage backwards, channels) with
/// the per-device programs of `schedule`. Emits a diagnostic on failure.
/// `sourcePath` is the file the model was read from: the model's relative
/// `gpipe.weights` path is resolved against its directory and written
/// absolute; with no file ("", "<stdin>", a name whose directory does not
/// exist) it is written as it is. With `ptx`, a bundle with generated
/// kernels also carries them as PTX (code.cuda: PtxKernels.h).
mlir::FailureOr<llvm::json::Value>
emitBundle(ModelOp model, ScheduleOp schedule, llvm::StringRef sourcePath = "",
           KernelCodegen codegen = KernelCodegen::None, bool ptx = false);

/// Writes the bundle of the module's only schedule and its model as JSON
/// (`sourcePath` and `ptx` as in emitBundle).
mlir::LogicalResult
translateModuleToBundle(mlir::ModuleOp module, llvm::raw_ostream &os,
                        llvm::StringRef sourcePath = "",
                        KernelCodegen codegen = KernelCodegen::None,
                        bool ptx = false);

/// Number of stages of a model.
unsigned getStagesCount(ModelOp model);

/// Registers `--gpipe-to-bundle` with mlir-translate style tools.
void registerToBundleTranslation();

} // namespace gpipe

#endif // GPIPE_TARGET_BUNDLEEMITTER_H
