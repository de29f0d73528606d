//===- FuzzOnnxImport.cpp - libFuzzer target: any bytes as an ONNX model --===//
//
// gpipe-translate --import-onnx's core on arbitrary bytes: an error or a
// model, never a crash. Inputs it has produced that the importer refuses or
// checks first: zero strides and out-of-range axes (which crash libonnx's
// shape inference), an overflowing element count, empty weights.
// scripts/fuzz-compiler.sh runs it from the ONNX fixtures.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Import/OnnxImporter.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gpipe::OnnxImportOptions options;
  options.loss = size % 2 ? "mse" : "softmax-cross-entropy";
  options.weightsFile = "w.safetensors";
  gpipe::OnnxImport result;
  std::string error = gpipe::importOnnx(
      std::string_view(reinterpret_cast<const char *>(data), size), options,
      result);
  if (error.empty() && result.mlir.empty())
    std::abort(); // a success must give a model
  return 0;
}
