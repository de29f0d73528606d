//===- NodeConverter.h - One ONNX node as gpipe ops ------------*- C++ -*-===//
//
// Private to lib/Import: the conversion of one node, shared by the general
// ops (OnnxOps.cpp) and the image ops (OnnxImageOps.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_IMPORT_NODECONVERTER_H
#define GPIPE_LIB_IMPORT_NODECONVERTER_H

#include "OnnxGraph.h"

namespace gpipe::onnx_import {

/// `v` printed so that MLIR reads it back as the same f64.
std::string number(double v);

/// The conversion of one node, with the importer's services.
class NodeConverter {
public:
  NodeConverter(GraphImporter &g, const onnx::NodeProto &n) : g(g), n(n) {}

  std::string run();

private:
  std::string input(int i) const {
    return i < n.input_size() ? n.input(i) : std::string();
  }
  /// Activation operand i: its SSA text, or "" with `error` set.
  std::string activation(int i, const Value *&v) {
    v = g.value(input(i));
    if (!v) {
      error = g.constant(input(i))
                  ? "input " + std::to_string(i) + " ('" + input(i) +
                        "') is a constant; gpipe's " + n.op_type() +
                        " takes it computed"
                  : "input " + std::to_string(i) + " ('" + input(i) +
                        "') is never defined";
      return {};
    }
    return g.use(input(i));
  }
  /// Weight operand i (a non-empty float initializer), or null with `error`
  /// set.
  const Constant *weight(int i) {
    const Constant *c = g.constant(input(i));
    if (!g.unreadable(input(i)).empty())
      error = "input " + std::to_string(i) + " ('" + input(i) +
              "'): " + g.unreadable(input(i));
    else if (!c || !c->isFloat)
      error = "input " + std::to_string(i) + " ('" + input(i) +
              "') must be a float initializer (a parameter), " +
              (c ? "it is an integer constant" : "it is computed");
    else if (c->floats.empty())
      error = "input " + std::to_string(i) + " ('" + input(i) +
              "') has no elements (shape " + shapeText(c->dims) + ")";
    return error.empty() ? c : nullptr;
  }
  std::string param(int i, const std::vector<int64_t> &shape,
                    std::vector<float> data) {
    // A layer's weight computed from constants (not an initializer) is not
    // one the model trains.
    std::string ssa = g.param(input(i), shape, std::move(data),
                              !g.isInitializer(input(i)));
    if (ssa.empty())
      error = "initializer '" + input(i) +
              "' is read by more than one layer, in different layouts; a tied "
              "weight is read alike by each (--untie-weights imports a copy "
              "per layer, each trained apart)";
    return ssa;
  }
  bool onlyFirstOutputUsed() {
    for (int i = 1; i < n.output_size(); ++i)
      if (!n.output(i).empty() &&
          (!g.consumersOf(n.output(i)).empty() || g.isGraphOutput(n.output(i))))
        return false;
    return true;
  }
  std::string unsupported(const std::string &what) { return error = what; }

  // The general ops (OnnxGeneralOps.cpp, OnnxShapeOps.cpp).
  /// Operand i: a computed value, a trained weight, or a constant as a
  /// frozen parameter (shrunk where it does not vary when `broadcasts`);
  /// false with `error` set.
  bool operand(int i, Value &out, bool broadcasts);
  /// Operand i in ONNX's layout.
  bool plainOperand(int i, Value &out, bool broadcasts = false) {
    return operand(i, out, broadcasts) && g.toOnnxLayout(out, error);
  }
  /// `v` held in `layout` (a constant permuted to it, a computed value of
  /// another layout converted to ONNX's), ONNX rank `onnxRank`.
  bool inLayout(Value &v, Layout layout, size_t onnxRank);
  /// The operands of an element-wise op in one layout: the computed
  /// operands' if they share one, ONNX's otherwise.
  bool alignLayouts(std::vector<Value> &operands);
  /// Writes `op` of `a` and `b` (broadcasting) as ONNX value `name`; its
  /// SSA text, or "" with `error` set.
  std::string emitBinary(const std::string &op, const Value &a,
                         const Value &b, const std::string &name, bool isBool);
  /// `v` cast to i1 (`toBool`) or f32 where it is not.
  bool castOperand(Value &v, bool toBool);
  bool asFloat(Value &v) { return castOperand(v, false); }
  bool asBool(Value &v) { return castOperand(v, true); }
  std::string elementwiseUnary(const char *op);
  std::string elementwiseBinary(const char *op);
  std::string compare(const char *op, bool swap);
  std::string logical(const char *op);
  std::string where();
  std::string cast();
  std::string clip();
  std::string reduce(const char *op);
  std::string reshape();
  std::string transpose();
  std::string expand();
  std::string slice();
  std::string split();
  /// SequenceAt of a SplitToSequence: the part it names, sliced.
  std::string sequenceAt();
  std::string concat();
  std::string generalGather();
  std::string matmul();
  /// Writes a reshape of `x` to `shape` as ONNX value `name` (a layout of
  /// its own where the batch would merge); "" or the error.
  std::string emitReshape(const Value &x, const std::vector<int64_t> &shape,
                          const std::string &name);
  /// Writes the slice of `x` from `starts` by `steps`, shaped `shape`, as
  /// ONNX value `name`.
  void emitSlice(const Value &x, const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps,
                 const std::vector<int64_t> &shape, const std::string &name);
  /// Writes `x` stretched to `shape` (over the batch where dimension 0 goes
  /// from 1 to it) as ONNX value `name`; its SSA text.
  std::string emitBroadcast(const Value &x, const std::vector<int64_t> &shape,
                            const std::string &name);
  // Values viewed through a Transpose that moves the batch (OnnxViews.cpp).
  /// Whether the node reads a Viewed input as it is held; the others read
  /// it in ONNX's layout (GraphImporter::unview).
  bool readsViews();
  /// Whether ONNX value `name` is a float matrix the same for every example
  /// (a weight, a constant, a slice of a weight).
  bool isMatrix(const std::string &name);
  /// Transpose, Reshape (to `target`) and Gather of one constant index
  /// (along `axis`) of a Viewed or Rows value, or of a per-example one whose
  /// batch a Transpose moves.
  std::string viewTranspose(const Value &x, const std::vector<int64_t> &perm);
  std::string viewReshape(const Value &x, const std::vector<int64_t> &target);
  std::string viewGather(const Value &x, int64_t axis, int64_t index);
  /// `x` (Viewed) held with its last ONNX dimension as its last dimension,
  /// for a dense layer's columns; false with `error` set.
  bool viewColumns(Value &x);
  /// Constant operand `v` of an element-wise op held as `like` (Viewed) is:
  /// false, `v` unchanged, where it varies along an ONNX dimension that is
  /// not one held dimension (OnnxGeneralOps.cpp).
  bool viewConstant(Value &v, const Value &like);
  /// Whether trained weight `param` broadcasts against `like` (Viewed) as
  /// it broadcasts against its ONNX value.
  bool viewsAsHeld(const Value &param, const Value &like);
  std::string unary(const char *op);
  std::string dense(bool gemm);
  std::string add();
  /// An Add of a position table [S, D] (input `tableInput`) to [batch, S, D].
  std::string positionTable(int tableInput, const Constant &table);
  std::string softmax();
  std::string dropout();
  std::string flatten();
  std::string conv();
  std::string pool(bool max);
  std::string globalAveragePool();
  std::string batchNorm();
  std::string layerNorm();
  std::string gather();
  std::string crossEntropy();
  /// The current node's 2-D window attributes (a 1-D node's as height 1):
  /// `kernel` given, `stride` and the symmetric [PH, PW] padding read from
  /// strides, pads and auto_pad for an input of `height` x `width` pixels;
  /// false with `error` set when the padding is uneven.
  bool window(const std::vector<int64_t> &kernel, int64_t height, int64_t width,
              std::vector<int64_t> &stride, std::vector<int64_t> &pad);
  /// A 1-D attribute list as 2-D: [v] -> [fill, v] (pads [b, e] ->
  /// [0, b, 0, e]).
  std::vector<int64_t> planar(const std::vector<int64_t> &v, int64_t fill);

  GraphImporter &g;
  const onnx::NodeProto &n;
  std::string error;
};

} // namespace gpipe::onnx_import

#endif // GPIPE_LIB_IMPORT_NODECONVERTER_H
