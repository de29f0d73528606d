//===- CompileToBundle.cpp - From gpipe dialect text to a bundle ----------===//

#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Target/BundleEmitter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

LogicalResult
gpipe::compileModuleToBundle(ModuleOp module,
                             const CompilePipelineOptions &options,
                             llvm::raw_ostream &os, StringRef sourcePath) {
  PassManager pm(module.getContext());
  buildCompilePipeline(pm, options);
  if (failed(pm.run(module)))
    return failure();
  return translateModuleToBundle(module, os, sourcePath, options.codegen,
                                 options.ptx);
}

LogicalResult gpipe::compileSourceToBundle(
    StringRef source, const CompilePipelineOptions &options,
    std::string &bundleJson, std::string &diagnostics) {
  DialectRegistry registry;
  registry.insert<GPipeDialect>();
  MLIRContext context(registry);
  context.disableMultithreading();
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    os << diag.getLocation() << ": " << diag << "\n";
    for (const Diagnostic &note : diag.getNotes())
      os << "  note: " << note << "\n";
    return success();
  });
  // MLIR's lexer finds the end of its buffer by the NUL after it, which a
  // caller's StringRef (a fuzzer's input) need not have: parse a copy.
  std::string text = source.str();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module)
    return failure();
  llvm::raw_string_ostream os(bundleJson);
  return compileModuleToBundle(*module, options, os);
}

LogicalResult gpipe::compileFileToBundle(StringRef path,
                                         const CompilePipelineOptions &options,
                                         std::string &bundleJson,
                                         std::string &error) {
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(path, &error);
  if (!file)
    return failure();
  // "<stdin>" for "-": nothing to resolve a weights path against.
  std::string source = file->getBufferIdentifier().str();
  DialectRegistry registry;
  registry.insert<GPipeDialect>();
  MLIRContext context(registry);
  // A tool's user wants the error and its location, not the model printed
  // after each one (gpipe-opt keeps mlir-opt's default).
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return failure();
  llvm::raw_string_ostream os(bundleJson);
  return compileModuleToBundle(*module, options, os, source);
}
