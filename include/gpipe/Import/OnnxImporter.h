//===- OnnxImporter.h - ONNX models as gpipe models -------------*- C++ -*-===//
//
// Reads an ONNX model (protobuf, opset <= 17, with Debian's libonnx) and
// writes the gpipe model it computes: the graph inputs become
// `gpipe.input`s, the initializers `pretrained` parameters whose values go to
// a safetensors file beside the model (named by the model's `gpipe.weights`
// attribute), and the nodes are grouped into layers by the exporter's name
// scopes (PyTorch names nodes `/layer1/conv1/Conv`). Tensors cross from
// ONNX's layouts into gpipe's: images NCHW to NHWC, dense weights [in, out],
// convolution weights [KH, KW, C, F]; each element keeps its bits.
//
// Only models of the ops it maps reach ONNX's checker; the graph inputs'
// shapes must be static; ONNX's shape inference checks the result. Anything the
// importer cannot represent is an error that names the node, its op type and
// the opset: it never writes a partial model.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_IMPORT_ONNXIMPORTER_H
#define GPIPE_IMPORT_ONNXIMPORTER_H

#include "gpipe/runtime/bundle/SafeTensors.h"

#include <string_view>

#include <cstdint>
#include <string>
#include <vector>

namespace gpipe {

struct OnnxImportOptions {
  /// Name-scope components that name a layer: with 1, `/layer1/conv1/Conv`
  /// belongs to layer "layer1"; with 2, to "layer1/conv1". Nodes without a
  /// scope, and every node with 0, form a layer each. kAutoLayerDepth: the
  /// depth of the model's numbered blocks (`/hf/transformer/h.0/...` gives
  /// 3, `/features/features.1/...` 2), 1 where it has none.
  static constexpr int kAutoLayerDepth = -1;
  int layerDepth = kAutoLayerDepth;
  /// The loss to append when the graph has none: "softmax-cross-entropy"
  /// (of the first output against the integer input `labels`) or "mse"
  /// (against a float input `labels` of the output's shape).
  std::string loss;
  std::string labels = "labels";
  /// Fixes a symbolic first dimension (the batch) of every graph input; 0:
  /// the model's inputs must be static.
  int64_t batch = 0;
  /// The `gpipe.weights` attribute: where the runtime finds the parameters
  /// (relative to the model file).
  std::string weightsFile;
  /// The model's symbol; empty: onnxModelName(the graph's name).
  std::string modelName;
  /// An initializer more than one layer uses (tied input and output
  /// embeddings) becomes a parameter per layer, `<name>@<layer>` after the
  /// first: the same forward, each copy trained by its own layer's gradient.
  /// Otherwise such a model is refused.
  bool untieWeights = false;
};

struct OnnxImport {
  std::string mlir; ///< the gpipe.model, as text
  /// The initializers, in gpipe's layouts, under their ONNX names.
  std::vector<runtime::NamedTensor> weights;
  /// Whether gpipe holds the graph's output channels-last (an image ONNX
  /// sees as [N, C, H, W] or [N, C, L]): its predictions are then in that
  /// order.
  bool outputChannelsLast = false;
};

/// Imports `bytes` (an ONNX model file). Returns "" or the error.
std::string importOnnx(std::string_view bytes, const OnnxImportOptions &options,
                       OnnxImport &result);

/// `text` (a file or graph name) as a model symbol: other characters than
/// letters and digits become '_', and a leading digit gets "onnx_".
std::string onnxModelName(std::string_view text);

/// The ONNX op types the importer maps, sorted.
const std::vector<std::string> &supportedOnnxOps();

} // namespace gpipe

#endif // GPIPE_IMPORT_ONNXIMPORTER_H
