//===- CompileToBundle.h - From gpipe dialect text to a bundle --*- C++ -*-===//
//
// The whole compiler as one call, for tools and tests that embed it:
// gpipe-compile with the given options, then the bundle writer.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TARGET_COMPILETOBUNDLE_H
#define GPIPE_TARGET_COMPILETOBUNDLE_H

#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace gpipe {

/// Runs gpipe-compile with `options` on `module` (in place) and writes the
/// resulting bundle (docs/BundleFormat.md) to `os`. Diagnostics go to the
/// context's handlers. `sourcePath`, the file the module was read from,
/// anchors a relative weights path (see emitBundle).
mlir::LogicalResult compileModuleToBundle(mlir::ModuleOp module,
                                          const CompilePipelineOptions &options,
                                          llvm::raw_ostream &os,
                                          llvm::StringRef sourcePath = "");

/// Parses `source` (a module holding a gpipe.model) in a fresh context and
/// compiles it as compileModuleToBundle does into `bundleJson`. On failure
/// `diagnostics` holds every diagnostic, one per line with its location.
mlir::LogicalResult compileSourceToBundle(llvm::StringRef source,
                                          const CompilePipelineOptions &options,
                                          std::string &bundleJson,
                                          std::string &diagnostics);

/// Compiles the gpipe text in the file at `path` (a relative weights path
/// becomes absolute, relative to the file's directory), printing the parser's
/// and the passes' diagnostics to stderr with their source locations. A file
/// that cannot be read fails with `error` set ("cannot open input file ...");
/// otherwise `error` stays empty and the diagnostics say why.
mlir::LogicalResult compileFileToBundle(llvm::StringRef path,
                                        const CompilePipelineOptions &options,
                                        std::string &bundleJson,
                                        std::string &error);

} // namespace gpipe

#endif // GPIPE_TARGET_COMPILETOBUNDLE_H
