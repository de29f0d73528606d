//===- TransformerBuilder.h - Transformers as gpipe text --------*- C++ -*-===//
//
// Writes a decoder-only Transformer of any size as gpipe dialect text, with
// the op structure and names of python-free-examples/transformer/
// transformer.mlir: an "embed" layer (token and position embeddings), per
// block a "blockN.attn" layer (layer norm, causal multi-head attention,
// dropout, residual add) and a "blockN.mlp" layer (layer norm, dense, GELU,
// dense, dropout, residual add), a "head" layer (final layer norm, dense to
// the vocabulary) and a "loss" layer (softmax cross-entropy). A model of B
// blocks has 2B + 3 layers.
//
// The library has no MLIR dependency: tools parse the text with their own
// context (capacity searches, tests).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_MODELS_TRANSFORMERBUILDER_H
#define GPIPE_MODELS_TRANSFORMERBUILDER_H

#include <cstdint>
#include <string>

namespace gpipe {

/// The size of a decoder-only Transformer. The defaults are those of
/// python-free-examples/transformer/transformer.mlir.
struct TransformerConfig {
  std::string name = "transformer"; ///< the model's symbol name
  int64_t blocks = 4;    ///< attention + MLP blocks (0 leaves embed and head)
  int64_t width = 64;    ///< model width (embedding size)
  int64_t heads = 4;     ///< attention heads; must divide width
  int64_t ffWidth = 256; ///< hidden width of each block's MLP
  int64_t seq = 32;      ///< sequence length
  int64_t batch = 32;    ///< mini-batch size N (sequences)
  int64_t vocab = 96;    ///< vocabulary size
  double dropout = 0.1;  ///< rate of every dropout, in [0, 1)
};

/// Layers of the model: embed, two per block, head and loss.
inline int64_t numTransformerLayers(const TransformerConfig &config) {
  return 2 * config.blocks + 3;
}

/// An empty string if `config` describes a valid model, else what is wrong
/// ("expects heads to divide the width 100, got 8 heads").
std::string validateTransformerConfig(const TransformerConfig &config);

/// Number of trainable parameters (scalars) of the model.
uint64_t countTransformerParameters(const TransformerConfig &config);

/// The model as gpipe dialect text (a module holding one gpipe.model).
/// `config` must be valid (validateTransformerConfig).
std::string buildTransformerModel(const TransformerConfig &config);

} // namespace gpipe

#endif // GPIPE_MODELS_TRANSFORMERBUILDER_H
