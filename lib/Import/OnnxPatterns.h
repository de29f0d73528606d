//===- OnnxPatterns.h - Subgraphs imported as one gpipe op ------*- C++ -*-===//
//
// Private to lib/Import. Exporters write some of gpipe's ops as subgraphs
// of general tensor ops: PyTorch's nn.GELU as x/√2, Erf, +1, ·x, ·½ (or the
// tanh formula), and multi-head self-attention as three projections,
// Reshape/Transpose into heads, a scaled MatMul, Softmax, MatMul,
// Transpose/Reshape back and the output projection, optionally with a causal
// mask (PyTorch's masked_fill of a lower-triangular buffer: a Where). The
// finder recognises them in the graph before the conversion; each becomes one
// gpipe op, written where its last node is. The general ops inside them (Mul,
// Div, Erf, Reshape, Transpose, Where) are accepted only there.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_IMPORT_ONNXPATTERNS_H
#define GPIPE_LIB_IMPORT_ONNXPATTERNS_H

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace gpipe::onnx_import {

struct Constant;
class GraphImporter;

struct Pattern {
  enum class Kind { GeluErf, GeluTanh, Attention };
  Kind kind = Kind::GeluErf;
  /// Every node it covers (not the Constant nodes it reads).
  std::set<const onnx::NodeProto *> nodes;
  /// Its last node in graph order: the pattern is written there, and that
  /// node's output is the pattern's result.
  const onnx::NodeProto *last = nullptr;
  std::string input; ///< x, the one activation it reads

  // Attention: the projections' initializers (biases may be ""), the
  // head-splitting reshapes' targets (q, k, v), the merging reshape's target,
  // and the scores' scale.
  std::string wq, wk, wv, wo, bq, bk, bv, bo;
  std::vector<std::vector<int64_t>> headShapes;
  std::vector<int64_t> mergedShape;
  double scale = 1.0;
  /// A causal mask before the softmax (a Where or Add of a constant that
  /// hides key j > query i), and its size (the sequence it was made for).
  bool causal = false;
  int64_t maskSize = 0;
  /// The name scope of the softmax (`/blocks.0/attn/Softmax` -> blocks.0.attn)
  /// for the fused parameters' names.
  std::string scope;
};

/// The patterns in `graph`, reading constants from `constants`. Where a
/// subgraph starts like a pattern but differs, `misses` gets why (for the
/// error on its stray general ops).
std::vector<Pattern>
findPatterns(const onnx::GraphProto &graph,
             const std::map<std::string, Constant> &constants,
             std::vector<std::string> &misses);

/// A position table: an Add of a float initializer [S, D] to a computed
/// value (PyTorch's `tok_emb(ids) + pos_emb`). gpipe has no broadcasting
/// add; the importer writes it as an embedding of an added input
/// `positions` [batch, S] (0, 1, ..., S - 1 in every row, as gpipe's own
/// Transformer takes them).
/// The position table [S, D] that `add` adds (its input `tableInput`), or
/// null.
const Constant *positionTable(const onnx::NodeProto &add,
                              const std::map<std::string, Constant> &constants,
                              int &tableInput);

/// Writes `pattern` into the importer's current layer; "" or the error.
std::string convertPattern(GraphImporter &g, const Pattern &pattern);

} // namespace gpipe::onnx_import

#endif // GPIPE_LIB_IMPORT_ONNXPATTERNS_H
