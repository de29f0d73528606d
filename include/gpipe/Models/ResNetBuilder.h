//===- ResNetBuilder.h - Residual networks as gpipe text --------*- C++ -*-===//
//
// Writes a CIFAR-style ResNet (He et al. 2016, section 4.2) for channels-last
// images as gpipe dialect text: a "stem" layer (3x3 conv, batch norm, relu),
// three groups of residual blocks at widths w, 2w and 4w (the first block of
// the second and third groups halves the image with stride 2 and projects
// its shortcut with a strided 1x1 conv and batch norm), a "head" layer
// (global average pooling, dense to the classes) and a "loss" layer.
//
// Each block is two layers, "gG.bB.a" (conv, batch norm, relu) and "gG.bB.b"
// (conv, batch norm, the shortcut added, relu), so the block's input -- its
// skip connection -- crosses a stage boundary wherever the partitioner cuts
// inside a block. A network with n blocks per group has 6n + 2 weighted
// layers (ResNet-8, -14, -20, ...) and 6n + 3 gpipe layers.
//
// Like TransformerBuilder, no MLIR dependency: tools parse the text.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_MODELS_RESNETBUILDER_H
#define GPIPE_MODELS_RESNETBUILDER_H

#include <cstdint>
#include <string>

namespace gpipe {

/// The size of the network. The defaults are those of
/// python-free-examples/resnet/resnet.mlir (ResNet-8 for Fashion-MNIST).
struct ResNetConfig {
  std::string name = "resnet"; ///< the model's symbol name
  int64_t blocksPerGroup = 1;  ///< n: the depth is 6n + 2
  int64_t width = 16;          ///< w: the first group's channels
  int64_t batch = 128;         ///< mini-batch size N
  int64_t height = 28, imageWidth = 28, channels = 1; ///< the input images
  int64_t classes = 10;
  double momentum = 0.1; ///< of every batch norm's running statistics
};

/// Weighted layers (convolutions and the dense head): 6n + 2.
inline int64_t resnetDepth(const ResNetConfig &config) {
  return 6 * config.blocksPerGroup + 2;
}

/// gpipe layers: stem, two per block, head and loss.
inline int64_t numResNetLayers(const ResNetConfig &config) {
  return 6 * config.blocksPerGroup + 3;
}

/// "" if `config` describes a valid network, else what is wrong ("expects an
/// image of at least 4 x 4 pixels (two halvings), got 3 x 28").
std::string validateResNetConfig(const ResNetConfig &config);

/// Trainable parameters (scalars), without the running statistics.
uint64_t countResNetParameters(const ResNetConfig &config);

/// The network as gpipe dialect text; `config` must be valid.
std::string buildResNetModel(const ResNetConfig &config);

} // namespace gpipe

#endif // GPIPE_MODELS_RESNETBUILDER_H
