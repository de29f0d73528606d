//===- gpipe-opt.cpp - gpipe optimizer driver -----------------------------===//

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  gpipe::registerGPipePassesAndPipelines();
  mlir::DialectRegistry registry;
  registry.insert<gpipe::GPipeDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "gpipe optimizer driver\n", registry));
}
