//===- gpipe-translate.cpp - gpipe translation driver ---------------------===//
//
//   gpipe-translate --gpipe-to-bundle compiled.mlir -o model.bundle.json
//   gpipe-translate --gpipe-emit-kernels compiled.mlir -o kernels.cu
//
// mlir-translate's driver, reduced to gpipe's translations and the options
// they use, so that --help shows only those (mlirTranslateMain registers
// every LLVM option it links).
//
//===----------------------------------------------------------------------===//

#include "gpipe/Target/BundleEmitter.h"
#include "gpipe/Target/KernelEmitter.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/ToolUtilities.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  gpipe::registerToBundleTranslation();
  gpipe::registerEmitKernelsTranslation();

  cl::OptionCategory category("gpipe-translate");
  cl::opt<std::string> inputPath(cl::Positional, cl::desc("<input file>"),
                                 cl::init("-"), cl::cat(category));
  cl::opt<std::string> outputPath("o", cl::desc("output file (default: -)"),
                                  cl::value_desc("filename"), cl::init("-"),
                                  cl::cat(category));
  cl::opt<bool> splitInput(
      "split-input-file",
      cl::desc("translate each '// -----' chunk of the input separately"),
      cl::init(false), cl::cat(category));
  cl::opt<const Translation *, false, TranslationParser> translation(
      cl::desc("Translations:"), cl::Required, cl::cat(category));
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "gpipe translation driver\n");

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputPath, &error);
  if (!input) {
    llvm::errs() << "gpipe-translate: error: " << error << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputPath, &error);
  if (!output) {
    llvm::errs() << "gpipe-translate: error: " << error << "\n";
    return 1;
  }
  auto translate = [&](std::unique_ptr<llvm::MemoryBuffer> chunk,
                       raw_ostream &os) {
    MLIRContext context;
    auto sourceMgr = std::make_shared<llvm::SourceMgr>();
    sourceMgr->AddNewSourceBuffer(std::move(chunk), llvm::SMLoc());
    SourceMgrDiagnosticHandler diagnostics(*sourceMgr, &context);
    return (*translation)(sourceMgr, os, &context);
  };
  if (failed(splitAndProcessBuffer(std::move(input), translate, output->os(),
                                   splitInput ? kDefaultSplitMarker : "",
                                   splitInput ? "// -----" : "")))
    return 1;
  output->keep();
  return 0;
}
