//===- OnnxFolder.h - Evaluating a node from constants ----------*- C++ -*-===//
//
// Private to lib/Import: the folder's tensors and its evaluation of one node
// (OnnxFolding.cpp: element-wise ops, casts and the driver; OnnxFoldShapes.cpp:
// shapes, layouts, indexing, reductions and products).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_IMPORT_ONNXFOLDER_H
#define GPIPE_LIB_IMPORT_ONNXFOLDER_H

#include "OnnxGraph.h"

#include <functional>

namespace gpipe::onnx_import::folding {


/// The most elements a folded tensor may have (64 Mi): an Expand of a
/// constant to a huge shape is the model's mistake, not memory to spend.
constexpr int64_t kMaxFolded = int64_t(1) << 26;

enum class Kind { Float, Int, Bool };

struct Tensor {
  std::vector<int64_t> dims;
  Kind kind = Kind::Float;
  std::vector<long double> v;

  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    return n;
  }
  int64_t rank() const { return int64_t(dims.size()); }
};


/// A constant as the folder holds it, and back.
Tensor fromConstant(const Constant &c);
Constant toConstant(const Tensor &t);
/// `x` as an element of `kind`: f32 rounding, truncation toward zero
/// (saturating, NaN 0), or x != 0.
long double convert(long double x, Kind kind);
/// `x` as an index or a size: truncated, saturated at int64's ends, NaN as 0
/// (a float tensor read as integers may hold any value, and converting one
/// outside int64's range is undefined); the checks that follow refuse it.
inline int64_t toInt64(long double x) {
  return int64_t(convert(x, Kind::Int));
}
/// Row-major strides of `dims`.
std::vector<int64_t> strides(const std::vector<int64_t> &dims);
/// For each element of `out`, the element of `in` (right-aligned, size-1
/// dimensions stretched) that NumPy broadcasting reads.
std::vector<int64_t> broadcastSources(const std::vector<int64_t> &in,
                                      const std::vector<int64_t> &out);

class Folder {
public:
  Folder(GraphImporter &g, const onnx::NodeProto &n) : g(g), n(n) {}

  /// The node's outputs, or "" with `error` set.
  bool run(std::vector<Tensor> &outputs);
  std::string error;

private:
  bool fail(const std::string &why) {
    error = why;
    return false;
  }
  const onnx::AttributeProto *attr(const std::string &name) const {
    for (const onnx::AttributeProto &a : n.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t intAttr(const std::string &name, int64_t otherwise) const {
    const onnx::AttributeProto *a = attr(name);
    return a ? a->i() : otherwise;
  }
  std::vector<int64_t> intsAttr(const std::string &name) const {
    const onnx::AttributeProto *a = attr(name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end())
             : std::vector<int64_t>();
  }
  bool has(int i) const { return i < n.input_size() && !n.input(i).empty(); }
  /// Input i's values as integers (axes, shapes, starts).
  std::vector<int64_t> ints(int i) const {
    std::vector<int64_t> out;
    for (long double x : in[size_t(i)].v)
      out.push_back(toInt64(x));
    return out;
  }
  /// `axis` in [-rank, rank) as [0, rank); false with `error` otherwise.
  bool normalize(int64_t &axis, int64_t rank) {
    if (axis < -rank || axis >= rank)
      return fail("axis " + std::to_string(axis) + " is outside [" +
                  std::to_string(-rank) + ", " + std::to_string(rank) +
                  ") for a tensor of rank " + std::to_string(rank));
    if (axis < 0)
      axis += rank;
    return true;
  }
  bool checkSize(const std::vector<int64_t> &dims) {
    int64_t total = 1;
    for (int64_t d : dims)
      if (d < 0 || __builtin_mul_overflow(total, d, &total) ||
          total > kMaxFolded)
        return fail("its result " + shapeText(dims) +
                    " is larger than the importer folds (2^26 elements)");
    return true;
  }
  /// The attribute-or-input axes list of a reduction, Squeeze or Unsqueeze.
  std::vector<int64_t> axesOf(int inputIndex, int opsetFromInput) const {
    if (g.opset >= opsetFromInput)
      return has(inputIndex) ? ints(inputIndex) : std::vector<int64_t>();
    return intsAttr("axes");
  }

  bool elementwise(Kind kind,
                   const std::function<long double(const long double *)> &f);
  bool arithmetic(const std::function<long double(long double, long double)> &f);
  bool shape(std::vector<Tensor> &out);
  bool cast(Tensor &out);
  bool constantOfShape(Tensor &out);
  bool range(Tensor &out);
  bool expand(Tensor &out);
  bool reshape(const std::vector<int64_t> &target, bool allowZero,
               Tensor &out);
  bool squeeze(bool unsqueeze, Tensor &out);
  bool transpose(Tensor &out);
  bool concat(Tensor &out);
  bool split(std::vector<Tensor> &out);
  bool slice(Tensor &out);
  bool gather(Tensor &out);
  bool gatherElements(Tensor &out);
  bool gatherND(Tensor &out);
  bool tile(Tensor &out);
  bool trilu(Tensor &out);
  bool cumsum(Tensor &out);
  bool reduce(Tensor &out);
  bool matmul(Tensor &out);

  GraphImporter &g;
  const onnx::NodeProto &n;
  std::vector<Tensor> in;
  Tensor result;
};

} // namespace gpipe::onnx_import::folding

#endif // GPIPE_LIB_IMPORT_ONNXFOLDER_H
