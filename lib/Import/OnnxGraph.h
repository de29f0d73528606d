//===- OnnxGraph.h - The importer's state while it writes a model -*- C++
//-*-===//
//
// Shared by the importer's driver (OnnxImporter.cpp: inputs, layers, loss)
// and its op conversions (OnnxOps.cpp): ONNX values as gpipe SSA values,
// the initializers, and the text of the layer being written.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_IMPORT_ONNXGRAPH_H
#define GPIPE_LIB_IMPORT_ONNXGRAPH_H

#include "OnnxPatterns.h"
#include "gpipe/Import/OnnxImporter.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace gpipe::onnx_import {

/// How an ONNX tensor is held in gpipe.
enum class Layout {
  Plain,  ///< the same shape and element order
  Nhwc,   ///< ONNX [N, C, H, W] held as [N, H, W, C]
  Pooled, ///< ONNX [N, C, 1, 1] held as [N, C]
  Ncl,    ///< ONNX [N, C, L] (a 1-D signal) held as the image [N, 1, L, C]
  /// ONNX [N * S, ...] (the batch merged with the next dimension, as
  /// Hugging Face's Conv1D runs its GEMM) held as [N, S, ...]: the batch
  /// stays dimension 0.
  Rows,
  /// ONNX's value is the held one (the batch in dimension 0) transposed and
  /// regrouped, as Value::viewGroups says: a Transpose that moves the batch
  /// (PyTorch's nn.MultiheadAttention works in [S, N, D]) writes nothing
  /// until an op needs the batch in front again (OnnxViews.cpp).
  Viewed,
};

/// Per ONNX dimension of a Viewed value, the held dimensions it merges, in
/// order (none for a dimension of size 1).
using ViewGroups = std::vector<std::vector<int64_t>>;

/// Whether gpipe holds the value as an [N, H, W, C] image.
inline bool isImage(Layout layout) {
  return layout == Layout::Nhwc || layout == Layout::Ncl;
}

/// A constant: an initializer or a Constant node's value.
struct Constant {
  /// Why its values cannot be read (an element type gpipe has no use for);
  /// reported only if a node needs them.
  std::string unreadable;
  std::vector<int64_t> dims;
  bool isFloat = true;
  bool isBool = false; ///< an integer constant of ONNX bool elements
  std::vector<float> floats;
  std::vector<int64_t> ints;
  /// Its number of elements.
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    return n;
  }
};

struct Value {
  std::string ssa;            ///< its name in its defining layer
  std::vector<int64_t> shape; ///< gpipe's shape
  bool isFloat = true;        ///< f32, else i32 (ids, labels) or i1
  bool isBool = false;        ///< i1 (a comparison's result)
  Layout layout = Layout::Plain;
  int layer = -1; ///< defining layer; -1: a model input
  /// An operand read from a constant (OnnxGeneralOps.cpp): its ONNX name and
  /// its values as the frozen parameter holds them.
  bool isConstant = false;
  /// An operand that is a trained weight (a parameter, in ONNX's layout).
  bool isParam = false;
  /// The ONNX (or the importer's) name of the value an operand reads, so
  /// that an op that passes it on unchanged names the same gpipe value.
  std::string origin;
  std::string constantName;
  std::vector<float> constantData;
  /// After a flatten of an NHWC image: the ONNX (C, H, W) index of each
  /// gpipe (H, W, C) column, for the weights that the columns meet.
  std::vector<int64_t> columnOrder;
  /// Layout::Viewed: ONNX's dimensions as groups of the held ones.
  ViewGroups viewGroups;
};

std::string tensorType(const std::vector<int64_t> &shape, bool isFloat);
/// `v`'s tensor type in gpipe (f32, i32 or i1).
std::string typeOf(const Value &v);
/// The shape ONNX sees of a value gpipe holds as `v`.
std::vector<int64_t> onnxShape(const Value &v);

/// ONNX's Reshape target (0 keeps the dimension unless `allowZero`, -1
/// infers one) applied to `from`; empty if it does not apply.
std::vector<int64_t> reshaped(const std::vector<int64_t> &from,
                              const std::vector<int64_t> &target,
                              bool allowZero = false);

/// Whether `perm` is a permutation of `rank` axes.
inline bool isPermutation(std::vector<int64_t> perm, int64_t rank) {
  std::sort(perm.begin(), perm.end());
  if (int64_t(perm.size()) != rank)
    return false;
  for (int64_t i = 0; i < rank; ++i)
    if (perm[size_t(i)] != i)
      return false;
  return true;
}

/// A Split's sizes: `sizes` as given, or ONNX's equal parts (the last one
/// smaller) where none are; false where they do not split `extent` into
/// `parts` outputs.
inline bool splitSizes(std::vector<int64_t> &sizes, int64_t extent,
                       int64_t parts) {
  if (sizes.empty() && parts > 0) {
    const int64_t each = (extent + parts - 1) / parts;
    for (int64_t p = 0; p < parts; ++p)
      sizes.push_back(std::clamp<int64_t>(extent - p * each, 0, each));
  }
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0 || size > extent - total) // also no overflow
      return false;
    total += size;
  }
  return int64_t(sizes.size()) == parts && total == extent;
}

/// Shrinks `dims` to 1 along every axis over which `data` does not vary (a
/// broadcast operand reads the same values either way).
void shrinkUniform(std::vector<int64_t> &dims, std::vector<float> &data);

/// Whether the importer evaluates op type `op` when its inputs are constants
/// or shapes (OnnxFolding.cpp), and whether that is all it does with it
/// (Shape, ConstantOfShape, Range, ...: no gpipe op computes them).
bool isFoldableOp(const std::string &op);
bool isFoldOnlyOp(const std::string &op);
/// The op types the importer only folds, sorted.
const std::set<std::string> &foldOnlyOps();

/// More elements than any tensor the importer reads (16 GiB of floats).
constexpr int64_t kMaxElements = int64_t(1) << 32;

/// A constant tensor's values into `out` (OnnxTensors.cpp); "" or why it
/// cannot be read.
std::string readTensor(const onnx::TensorProto &tensor, Constant &out);

/// Why node `n`'s op is not one the importer maps ("" if it is): its
/// domain or its type, with the list of those it maps.
std::string unsupportedOp(const onnx::NodeProto &n);
std::string shapeText(const std::vector<int64_t> &shape);

class GraphImporter {
public:
  GraphImporter(const onnx::ModelProto &model, const OnnxImportOptions &options,
                OnnxImport &result);

  /// Writes the whole model into result.mlir; "" or the error.
  std::string run();

  // For the op conversions (OnnxOps.cpp).
  const OnnxImportOptions &options;
  int64_t opset = 0;
  /// The model's batch (every input's dimension 0).
  int64_t batch = 0;
  /// The node being converted, for messages.
  const onnx::NodeProto *node = nullptr;

  /// "" after writing `node`'s gpipe ops, or the error (without the node's
  /// name, which the caller adds).
  std::string convertNode(const onnx::NodeProto &node);
  /// Evaluates `node` when it computes from constants and shapes alone
  /// (OnnxFolding.cpp): its outputs become constants and `folded` is set;
  /// "" or the error.
  std::string fold(const onnx::NodeProto &node, bool &folded);
  /// Whether constant `name` is a trained weight: a float initializer of more
  /// than one element, not a buffer the exporter or PyTorch names as one
  /// (`onnx::...`, `inv_freq`, `position_ids`, running statistics). Constant
  /// nodes' values and folded values never are.
  bool isTrainable(const std::string &name) const;
  /// The ONNX element type a CastLike reads from `name` (a computed value's
  /// or a constant's: FLOAT, BOOL or INT64), or -1 where `name` is undefined.
  int64_t elementTypeOf(const std::string &name) const {
    const Value *v = value(name);
    const Constant *c = constant(name);
    if (!v && !c)
      return -1;
    const bool isFloat = v ? v->isFloat : c->isFloat;
    const bool isBool = v ? v->isBool : c->isBool;
    return isFloat  ? onnx::TensorProto::FLOAT
           : isBool ? onnx::TensorProto::BOOL
                    : onnx::TensorProto::INT64;
  }
  /// Whether constant `name` is an initializer (not a Constant node's value
  /// nor a folded one).
  bool isInitializer(const std::string &name) const {
    return initializerNames.count(name) != 0;
  }
  /// Constant `c` (ONNX's `name`) as a frozen parameter of the current layer,
  /// `shape` its gpipe shape and `data` its values in that shape; cast to
  /// i32 or i1 after it where the constant is an integer or a bool. Fills
  /// `out` (shape, type, SSA text).
  void frozenConstant(const std::string &name, const Constant &c,
                      const std::vector<int64_t> &shape,
                      std::vector<float> data, Value &out);
  /// A value of the current layer, in ONNX's layout, for `v` (the same value
  /// when it is held so already); false with `error` where it cannot be.
  bool toOnnxLayout(Value &v, std::string &error);
  /// Rebinds ONNX value `name`, where it is Viewed, to the value in ONNX's
  /// layout (Plain, or Rows where the batch stays merged); false with
  /// `error` where the batch is not in front (OnnxViews.cpp).
  bool unview(const std::string &name, std::string &error);
  /// Gives value `name` (just defined or bound) the layout that `groups` of
  /// its held dimensions make: Plain or Rows where they are those, Viewed
  /// otherwise.
  void setView(const std::string &name, ViewGroups groups);
  /// The SSA text of value `name` as the current layer sees it.
  std::string use(const std::string &name);
  const Value *value(const std::string &name) const;
  /// The readable constant `name`, or null.
  const Constant *constant(const std::string &name) const;
  /// Why constant `name` cannot be read, or "".
  std::string unreadable(const std::string &name) const;
  /// Declares (once per layer) the pretrained parameter `name` of the
  /// current layer with gpipe's `shape` and `data`; its SSA text.
  std::string param(const std::string &name, const std::vector<int64_t> &shape,
                    std::vector<float> data, bool frozen = false);
  /// A new value for ONNX output `name` of the current layer; its SSA text.
  std::string define(const std::string &name, std::vector<int64_t> shape,
                     Layout layout = Layout::Plain, bool isFloat = true,
                     bool isBool = false);
  /// A new value for ONNX output `name` held as `like` is (its layout, and
  /// its groups where Viewed); its SSA text.
  std::string defineLike(const std::string &name, std::vector<int64_t> shape,
                         const Value &like, bool isFloat = true,
                         bool isBool = false);
  /// Makes ONNX value `name` the value `v` of the current layer (an operand
  /// that is already there: a parameter, a constant).
  void bind(const std::string &name, const Value &v);
  /// Makes ONNX value `alias` the same gpipe value as `of`.
  void alias(const std::string &alias, const std::string &of);
  void emit(const std::string &line) { body += "    " + line + "\n"; }
  /// Drops the current layer's frozen constants (and integer casts of them)
  /// that nothing reads, nor its `yielded` results, with their weights.
  void dropUnusedConstants(const std::vector<std::string> &yielded);
  /// The integer attribute `name` of the current node, or `otherwise`.
  int64_t intAttr(const std::string &name, int64_t otherwise) const;
  float floatAttr(const std::string &name, float otherwise) const;
  std::string stringAttr(const std::string &name,
                         const std::string &otherwise) const;
  std::vector<int64_t> intsAttr(const std::string &name) const;
  /// Whether the current node sets attribute `name`.
  bool hasAttr(const std::string &name) const;
  /// The consumers of ONNX value `name`.
  std::vector<const onnx::NodeProto *> consumersOf(const std::string &name);
  /// Whether ONNX value `name` is computed from the model's inputs (has the
  /// batch), by the graph's dataflow; a Shape's or Size's output is not.
  bool isPerExample(const std::string &name) const {
    return perExampleNames.count(name) != 0;
  }
  /// The node that computes ONNX value `name`, or null.
  const onnx::NodeProto *producerOf(const std::string &name) const;
  /// Whether `node` transposes a trained weight matrix for MatMuls alone
  /// (PyTorch's Linear exported without constant folding: MatMul(x,
  /// Transpose(W))): each MatMul then reads W with transpose_rhs, and the
  /// Transpose writes nothing.
  bool isWeightTransposeForMatMuls(const onnx::NodeProto &node);
  /// Marks `node` as converted with another (a MatMul's bias Add).
  void absorb(const onnx::NodeProto *absorbed) { skipped.insert(absorbed); }
  bool isGraphOutput(const std::string &name) const;
  /// Set by a loss node: the model's loss value.
  std::string lossValue;
  /// Why subgraphs that start like a pattern are not one (OnnxPatterns.h).
  std::vector<std::string> patternMisses;
  /// The `gpipe.input` of token positions [batch, seq] that a position
  /// table's Add reads (OnnxPatterns.h's positionTable), or "".
  std::string positionsSsa;
  std::vector<int64_t> positionsShape;

private:
  std::string readConstants();
  /// Whether `n` is an Identity of a constant (itself a constant).
  bool isConstantIdentity(const onnx::NodeProto &n) const;
  std::string declareInputs(std::string &text);
  /// Whether every use of `name` is the image input of a convolution, pool
  /// or batch norm (a rank-3 input is then a 1-D signal).
  bool feedsOnlyImageOps(const std::string &name);
  std::string groupLayers();
  std::string writeLayers(std::string &text);
  /// Writes `pattern` as its fused op, or each of its nodes as general ops
  /// where the fused op does not apply; "" or the error.
  std::string convertPatternOrItsNodes(const Pattern &pattern);
  std::string appendLoss(std::string &text, int &nextLayer);
  /// toOnnxLayout of a Viewed value (OnnxViews.cpp).
  bool materializeView(Value &v, std::string &error);
  /// The graph's outputs computed so far that are Viewed, in ONNX's
  /// layout; "" or the error (OnnxViews.cpp).
  std::string unviewOutputs();
  std::string layerRef(int layer, const std::string &valueName);

  const onnx::ModelProto &model;
  const onnx::GraphProto &graph;
  OnnxImport &result;
  std::map<std::string, Constant> constants;
  std::set<std::string> initializerNames;
  std::set<std::string> perExampleNames;
  std::map<std::string, Value> values;
  /// What the current layer wrote once for many uses: conversions to ONNX's
  /// layout (by SSA text) and frozen constants (by name and type).
  std::map<std::string, Value> layerCache;
  /// Per node (in graph order), its layer; per layer, its name.
  std::vector<int> layerOfNode;
  std::vector<std::string> layerNames;
  /// Per layer, the values it yields to later layers, in order.
  std::vector<std::vector<std::string>> exported;
  std::set<const onnx::NodeProto *> skipped;
  /// The recognised subgraphs, and each covered node's pattern.
  std::vector<Pattern> patterns;
  std::map<const onnx::NodeProto *, size_t> patternOfNode;
  /// Parameters: the layer that owns each, and those the current layer
  /// declared (name -> SSA).
  std::map<std::string, int> paramLayer;
  std::map<std::string, std::string> layerParams;
  std::set<std::string> inputNames;
  int currentLayer = -1;
  int nextSsa = 0;
  std::string body;
};

} // namespace gpipe::onnx_import

#endif // GPIPE_LIB_IMPORT_ONNXGRAPH_H
