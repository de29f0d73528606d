//===- gpipe-opt.cpp - gpipe optimizer driver -----------------------------===//

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Support/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"

/// The options LLVM's libraries register when they load (targets, Polly,
/// IR2Vec, ...) move to --help-hidden: --help keeps mlir-opt's own, which
/// MlirOptMain registers later, and the generic ones. All still work.
static void hideLibraryOptions() {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::cl::Option *option = entry.second;
    bool generic = llvm::is_contained(option->Categories,
                                      &llvm::cl::getGeneralCategory()) &&
                   (entry.first == "help" || entry.first == "version" ||
                    entry.first == "help-list");
    if (!generic && option->getOptionHiddenFlag() == llvm::cl::NotHidden)
      option->setHiddenFlag(llvm::cl::Hidden);
  }
}

int main(int argc, char **argv) {
  hideLibraryOptions();
  gpipe::addVersionPrinter("gpipe-opt");
  gpipe::registerGPipePassesAndPipelines();
  // The upstream passes users combine with gpipe's.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();
  mlir::DialectRegistry registry;
  registry.insert<gpipe::GPipeDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "gpipe optimizer driver\n", registry));
}
