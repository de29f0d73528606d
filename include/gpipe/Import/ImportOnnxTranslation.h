//===- ImportOnnxTranslation.h - gpipe-translate --import-onnx --*- C++ -*-===//

#ifndef GPIPE_IMPORT_IMPORTONNXTRANSLATION_H
#define GPIPE_IMPORT_IMPORTONNXTRANSLATION_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

namespace gpipe {

/// Registers `--import-onnx` (and its options) with gpipe-translate: writes
/// the model to the output and its parameters to `--weights FILE` (default:
/// the output's name with `.safetensors`).
void registerImportOnnxTranslation();
/// The output path of the running translation (gpipe-translate's -o), from
/// which --import-onnx names the parameters file.
void setImportOnnxOutput(llvm::StringRef path);
/// The category of --import-onnx's options, for --help.
llvm::cl::OptionCategory &importOnnxCategory();

} // namespace gpipe

#endif // GPIPE_IMPORT_IMPORTONNXTRANSLATION_H
