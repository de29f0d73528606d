//===- gpipe-translate.cpp - gpipe translation driver ---------------------===//

#include "gpipe/Target/BundleEmitter.h"
#include "gpipe/Target/KernelEmitter.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  gpipe::registerToBundleTranslation();
  gpipe::registerEmitKernelsTranslation();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "gpipe translation driver\n"));
}
