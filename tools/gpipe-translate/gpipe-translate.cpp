//===- gpipe-translate.cpp - gpipe translation driver ---------------------===//
//
//   gpipe-translate --gpipe-to-bundle compiled.mlir -o model.bundle.json
//   gpipe-translate --gpipe-emit-kernels compiled.mlir -o kernels.cu
//   gpipe-translate --import-onnx model.onnx -o model.mlir [--loss ...]
//
// mlir-translate's driver, reduced to gpipe's translations and the options
// they use, so that --help shows only those (mlirTranslateMain registers
// every LLVM option it links).
//
//===----------------------------------------------------------------------===//

#include "gpipe/Import/ImportOnnxTranslation.h"
#include "gpipe/Support/Version.h"
#include "gpipe/Target/BundleEmitter.h"
#include "gpipe/Target/KernelEmitter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/ToolUtilities.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

static int fail(const llvm::Twine &message) {
  llvm::errs() << "gpipe-translate: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  gpipe::addVersionPrinter("gpipe-translate");
  gpipe::registerToBundleTranslation();
  gpipe::registerEmitKernelsTranslation();
  gpipe::registerImportOnnxTranslation();

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
  cl::opt<bool> verifyDiagnostics(
      "verify-diagnostics",
      cl::desc("check the diagnostics against the input's expected-* "
               "comments instead of printing them"),
      cl::init(false), cl::cat(category));
  // A list, not an opt: an opt would silently keep the last of two. Not
  // cl::Required either: LLVM would report it once per translation name.
  cl::list<const Translation *, bool, TranslationParser> translations(
      cl::desc("Translations:"), cl::cat(category));
  cl::HideUnrelatedOptions({&category, &gpipe::importOnnxCategory()});
  cl::ParseCommandLineOptions(argc, argv, "gpipe translation driver\n");

  if (translations.size() != 1) {
    // The names the parser knows, each with the translation it stands for.
    auto &parser = translations.getParser();
    auto nameOf = [&](const Translation *translation) {
      for (unsigned i = 0, e = parser.getNumOptions(); i < e; ++i)
        if (cl::OptionValue<const Translation *>(translation)
                .compare(parser.getOptionValue(i)))
          return "--" + parser.getOption(i).str();
      return std::string("?");
    };
    llvm::SmallVector<std::string> known;
    for (unsigned i = 0, e = parser.getNumOptions(); i < e; ++i)
      known.push_back("--" + parser.getOption(i).str());
    llvm::sort(known);
    std::string given = translations.empty()
                            ? "none"
                            : std::to_string(translations.size()) + ":";
    for (const Translation *translation : translations)
      given += " " + nameOf(translation);
    return fail("expected one translation (" + llvm::join(known, " or ") +
                "), got " + given);
  }
  const Translation &translation = *translations.front();
  gpipe::setImportOnnxOutput(outputPath);

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputPath, &error);
  if (!input)
    return fail(error);
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputPath, &error);
  if (!output)
    return fail(error);
  auto translate = [&](std::unique_ptr<llvm::MemoryBuffer> chunk,
                       raw_ostream &os) -> LogicalResult {
    MLIRContext context;
    auto sourceMgr = std::make_shared<llvm::SourceMgr>();
    sourceMgr->AddNewSourceBuffer(std::move(chunk), llvm::SMLoc());
    if (!verifyDiagnostics) {
      SourceMgrDiagnosticHandler diagnostics(*sourceMgr, &context);
      return translation(sourceMgr, os, &context);
    }
    // The translation is expected to fail: only the diagnostics count.
    context.printOpOnDiagnostic(false);
    SourceMgrDiagnosticVerifierHandler diagnostics(*sourceMgr, &context);
    (void)translation(sourceMgr, os, &context);
    return diagnostics.verify();
  };
  if (failed(splitAndProcessBuffer(std::move(input), translate, output->os(),
                                   splitInput ? kDefaultSplitMarker : "",
                                   splitInput ? "// -----" : "")))
    return 1;
  output->keep();
  return 0;
}
