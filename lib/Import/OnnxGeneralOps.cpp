//===- OnnxGeneralOps.cpp - ONNX's tensor ops as gpipe's general ops ------===//
//
// The ops a model computes that are not layers: element-wise arithmetic with
// NumPy broadcasting, comparisons, logic, Where, Cast, Clip, reductions,
// Reshape/Transpose/Squeeze/Unsqueeze/Expand, Slice/Split/Concat, Gather
// along any axis and MatMul of two computed tensors. Each maps onto one
// gpipe op (a Pow by 2 or 3 onto products) that the compiler generates and
// fuses.
//
// An operand may be a constant (folded, or a Constant node's): it becomes a
// frozen parameter of the layer, shrunk to size 1 along the axes where it
// does not vary when the op broadcasts it (a mask expanded to the batch
// stays [1, ...]). A float initializer the model trains is a parameter.
//
//===----------------------------------------------------------------------===//

#include "NodeConverter.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace gpipe;
using namespace gpipe::onnx_import;

namespace {

/// The permutation that holds ONNX's [N, C, H, W] as [N, H, W, C].
const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};

/// `c`'s values as floats (an integer or bool constant's exactly, below
/// 2^24).
std::vector<float> floatsOf(const Constant &c) {
  if (c.isFloat)
    return c.floats;
  std::vector<float> out;
  for (int64_t v : c.ints)
    out.push_back(float(v));
  return out;
}

/// `data` of shape `dims` permuted by `perm` (result dimension d is input
/// dimension perm[d]).
std::vector<float> permuted(const std::vector<float> &data,
                            const std::vector<int64_t> &dims,
                            const std::vector<int64_t> &perm) {
  const size_t rank = dims.size();
  std::vector<int64_t> stride(rank, 1), outDims(rank), index(rank, 0);
  for (int64_t d = int64_t(rank) - 2; d >= 0; --d)
    stride[size_t(d)] = stride[size_t(d + 1)] * dims[size_t(d + 1)];
  for (size_t d = 0; d < rank; ++d)
    outDims[d] = dims[size_t(perm[d])];
  std::vector<float> out(data.size());
  for (size_t e = 0; e < data.size(); ++e) {
    int64_t source = 0;
    for (size_t d = 0; d < rank; ++d)
      source += index[d] * stride[size_t(perm[d])];
    out[e] = data[size_t(source)];
    for (int64_t d = int64_t(rank) - 1; d >= 0; --d) {
      if (++index[size_t(d)] < outDims[size_t(d)])
        break;
      index[size_t(d)] = 0;
    }
  }
  return out;
}

} // namespace

void gpipe::onnx_import::shrinkUniform(std::vector<int64_t> &dims, std::vector<float> &data) {
  for (size_t axis = 0; axis < dims.size(); ++axis) {
    if (dims[axis] <= 1)
      continue;
    int64_t inner = 1;
    for (size_t d = axis + 1; d < dims.size(); ++d)
      inner *= dims[d];
    const int64_t extent = dims[axis], outer = int64_t(data.size()) /
                                                   (extent * inner);
    bool uniform = true;
    for (int64_t o = 0; o < outer && uniform; ++o)
      for (int64_t i = 1; i < extent && uniform; ++i)
        uniform = std::equal(&data[size_t((o * extent + i) * inner)],
                             &data[size_t((o * extent + i + 1) * inner)],
                             &data[size_t(o * extent * inner)],
                             [](float a, float b) {
                               return std::memcmp(&a, &b, 4) == 0;
                             });
    if (!uniform)
      continue;
    std::vector<float> kept;
    for (int64_t o = 0; o < outer; ++o)
      kept.insert(kept.end(), &data[size_t(o * extent * inner)],
                  &data[size_t((o * extent + 1) * inner)]);
    data = std::move(kept);
    dims[axis] = 1;
  }
}

namespace {

/// NumPy broadcasting of two shapes; false where they do not.
bool broadcast(const std::vector<int64_t> &a, const std::vector<int64_t> &b,
               std::vector<int64_t> &out) {
  const std::vector<int64_t> &longer = a.size() >= b.size() ? a : b;
  const std::vector<int64_t> &shorter = a.size() >= b.size() ? b : a;
  out = longer;
  for (size_t i = 0; i < shorter.size(); ++i) {
    int64_t &o = out[longer.size() - shorter.size() + i];
    const int64_t d = shorter[i];
    if (o != d && o != 1 && d != 1)
      return false;
    o = o == 1 ? d : o;
  }
  return true;
}

} // namespace

bool NodeConverter::operand(int i, Value &out, bool broadcasts) {
  if (const Value *v = g.value(input(i))) {
    out = *v;
    out.ssa = g.use(input(i));
    out.origin = input(i);
    return true;
  }
  const Constant *c = g.constant(input(i));
  if (!c) {
    const std::string why = g.unreadable(input(i));
    error = "input " + std::to_string(i) + " ('" + input(i) + "') " +
            (why.empty() ? "is never defined" : why);
    return false;
  }
  if (g.isTrainable(input(i))) {
    out = Value();
    out.shape = c->dims;
    out.isParam = true;
    out.ssa = param(i, c->dims, c->floats);
    return error.empty();
  }
  std::vector<int64_t> dims = c->dims;
  std::vector<float> data = floatsOf(*c);
  if (broadcasts)
    shrinkUniform(dims, data);
  g.frozenConstant(input(i), *c, dims, std::move(data), out);
  return true;
}

bool NodeConverter::inLayout(Value &v, Layout layout, size_t onnxRank) {
  if (v.layout == layout)
    return true;
  if (v.layout != Layout::Plain || !v.isConstant)
    return g.toOnnxLayout(v, error);
  // A constant broadcast against a value held in `layout`: its ONNX
  // dimensions, right-aligned to the value's rank, in the held order.
  std::vector<int64_t> dims = v.shape;
  if (dims.size() > onnxRank)
    return g.toOnnxLayout(v, error);
  dims.insert(dims.begin(), onnxRank - dims.size(), 1);
  std::vector<float> data = v.constantData;
  std::vector<int64_t> held;
  switch (layout) {
  case Layout::Nhwc:
    data = permuted(data, dims, kToNhwc);
    held = {dims[0], dims[2], dims[3], dims[1]};
    break;
  case Layout::Pooled: // [N, C, 1, 1] held as [N, C]
    if (dims[2] != 1 || dims[3] != 1)
      return g.toOnnxLayout(v, error);
    held = {dims[0], dims[1]};
    break;
  case Layout::Ncl: // [N, C, L] held as [N, 1, L, C]
    data = permuted(data, dims, {0, 2, 1});
    held = {dims[0], 1, dims[2], dims[1]};
    break;
  case Layout::Rows: // [N * S, D] held as [N, S, D]: one row for all
    if (dims[0] != 1) {
      error = "a constant of shape " + shapeText(v.shape) +
              " meets a value whose rows merge the batch with the next "
              "dimension; gpipe keeps the batch in dimension 0";
      return false;
    }
    held.assign(dims.begin() + 1, dims.end());
    break;
  case Layout::Plain:
    return true;
  case Layout::Viewed: // never shared: element-wise ops read it unviewed
    return g.toOnnxLayout(v, error);
  }
  Constant c;
  c.isFloat = v.isFloat;
  c.isBool = v.isBool;
  g.frozenConstant(v.constantName, c, held, std::move(data), v);
  v.layout = layout;
  return true;
}

bool NodeConverter::viewConstant(Value &v, const Value &like) {
  const size_t rank = like.viewGroups.size();
  std::vector<int64_t> dims = v.shape;
  if (dims.size() > rank)
    return false;
  dims.insert(dims.begin(), rank - dims.size(), 1);
  // Each ONNX dimension along which it varies is one held dimension.
  std::vector<int64_t> held(like.shape.size(), 1), varying, atoms;
  for (size_t j = 0; j < rank; ++j) {
    if (dims[j] == 1)
      continue;
    int64_t atom = -1;
    for (int64_t d : like.viewGroups[j])
      if (like.shape[size_t(d)] != 1)
        atom = atom < 0 ? d : -2;
    if (atom < 0 || like.shape[size_t(atom)] != dims[j])
      return false;
    held[size_t(atom)] = dims[j];
    varying.push_back(dims[j]);
    atoms.push_back(atom);
  }
  std::vector<int64_t> perm(atoms.size());
  for (size_t i = 0; i < perm.size(); ++i)
    perm[i] = int64_t(i);
  std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    return atoms[size_t(a)] < atoms[size_t(b)];
  });
  std::vector<float> data =
      varying.empty() ? v.constantData
                      : permuted(v.constantData, varying, perm);
  Constant c;
  c.isFloat = v.isFloat;
  c.isBool = v.isBool;
  g.frozenConstant(v.constantName, c, held, std::move(data), v);
  v.layout = Layout::Viewed;
  v.viewGroups = like.viewGroups;
  return true;
}

bool NodeConverter::viewsAsHeld(const Value &param, const Value &like) {
  // Right-aligned to the held shape, each dimension of `param` that varies
  // must sit on the held dimension its ONNX dimension is.
  const size_t rank = like.viewGroups.size(), held = like.shape.size(),
               r = param.shape.size();
  if (r > rank || r > held)
    return false;
  for (size_t i = 0; i < r; ++i) {
    if (param.shape[i] == 1)
      continue;
    const std::vector<int64_t> &group = like.viewGroups[rank - r + i];
    if (group.size() != 1 || group[0] != int64_t(held - r + i))
      return false;
  }
  return true;
}

bool NodeConverter::alignLayouts(std::vector<Value> &operands) {
  // Values viewed alike (a Transpose moved their batch) are computed as
  // held, with constants permuted to the held layout (where they vary along
  // single held dimensions) and weights, or values computed from weights
  // alone (a slice of one), that broadcast against the held value as they
  // are.
  auto weightLike = [&](const Value &v) {
    return v.isParam || (!v.isConstant && v.layout == Layout::Plain &&
                         !v.origin.empty() && !g.isPerExample(v.origin));
  };
  const Value *like = nullptr;
  bool viewed = true;
  for (const Value &v : operands)
    if (!v.isConstant && !weightLike(v)) {
      viewed = viewed && v.layout == Layout::Viewed &&
               (!like || (v.shape == like->shape &&
                          v.viewGroups == like->viewGroups));
      like = like ? like : &v;
    }
  if (like && viewed) {
    std::vector<Value> held = operands;
    bool all = true;
    for (Value &v : held)
      all = all && (v.isConstant    ? viewConstant(v, *like)
                    : weightLike(v) ? viewsAsHeld(v, *like)
                                    : true);
    if (all) {
      operands = std::move(held);
      return true;
    }
  }

  // The layout the computed operands share, if they do and it is not Plain;
  // Plain for every operand otherwise.
  Layout shared = Layout::Plain;
  size_t rank = 0;
  bool first = true, mixed = false;
  for (const Value &v : operands) {
    if (v.isConstant)
      continue;
    if (first) {
      shared = v.layout;
      rank = onnxShape(v).size();
    } else if (v.layout != shared) {
      mixed = true;
    }
    first = false;
  }
  if (mixed)
    shared = Layout::Plain;
  for (Value &v : operands)
    if (!(shared == Layout::Plain ? g.toOnnxLayout(v, error)
                                  : inLayout(v, shared, rank)))
      return false;
  return true;
}

std::string NodeConverter::emitBinary(const std::string &op, const Value &a,
                                      const Value &b, const std::string &name,
                                      bool isBool) {
  std::vector<int64_t> shape;
  if (!broadcast(a.shape, b.shape, shape)) {
    error = "its operands' shapes " + shapeText(a.shape) + " and " +
            shapeText(b.shape) + " do not broadcast";
    return {};
  }
  Value result;
  result.shape = shape;
  result.isFloat = !isBool;
  result.isBool = isBool;
  // The layout of the computed operand (a constant or a weight is held
  // as it).
  const Value &lead = a.layout == Layout::Viewed   ? a
                      : b.layout == Layout::Viewed ? b
                      : a.isConstant || a.isParam  ? b
                                                   : a;
  result.layout = lead.layout;
  std::string y = g.defineLike(name, shape, lead, !isBool, isBool);
  const bool oneType = a.shape == shape && b.shape == shape &&
                       typeOf(a) == typeOf(b) && typeOf(a) == typeOf(result);
  const std::string types =
      oneType ? typeOf(a)
              : typeOf(a) + ", " + typeOf(b) + " -> " + typeOf(result);
  g.emit(y + " = gpipe." + op + " " + a.ssa + ", " + b.ssa + " : " + types);
  return y;
}

bool NodeConverter::castOperand(Value &v, bool toBool) {
  if (toBool ? v.isBool : v.isFloat)
    return true;
  Value cast = v;
  cast.isFloat = !toBool;
  cast.isBool = toBool;
  cast.origin = n.output(0) + (toBool ? "#bool" : "#float") + v.ssa;
  cast.ssa = g.define(cast.origin, v.shape, v.layout, !toBool, toBool);
  g.emit(cast.ssa + " = gpipe.cast " + v.ssa + " : " + typeOf(v) + " -> " +
         typeOf(cast));
  v = cast;
  return true;
}

std::string NodeConverter::elementwiseUnary(const char *op) {
  Value x;
  if (!operand(0, x, false) || !asFloat(x))
    return error;
  std::string y = g.defineLike(n.output(0), x.shape, x);
  g.emit(y + " = gpipe." + op + " " + x.ssa + " : " + typeOf(x));
  return {};
}

std::string NodeConverter::elementwiseBinary(const char *op) {
  std::vector<Value> operands(2);
  for (int i = 0; i < 2; ++i)
    if (!operand(i, operands[size_t(i)], true))
      return error;
  if (!alignLayouts(operands))
    return error;
  for (Value &v : operands)
    asFloat(v);
  const std::string mnemonic = op;
  // x^2 and x^3 (RMSNorm's square, GELU's cube) as products: exact, and a
  // step the fused kernel does without pow.
  if (mnemonic == "pow" && operands[1].isConstant &&
      operands[1].constantData.size() == 1 &&
      (operands[1].constantData[0] == 2.0f ||
       operands[1].constantData[0] == 3.0f) &&
      !operands[0].isConstant) {
    const Value &x = operands[0];
    if (operands[1].constantData[0] == 2.0f) {
      emitBinary("mul", x, x, n.output(0), false);
      return error;
    }
    Value square = x;
    square.ssa = emitBinary("mul", x, x, n.output(0) + "#square", false);
    emitBinary("mul", square, x, n.output(0), false);
    return error;
  }
  emitBinary(mnemonic, operands[0], operands[1], n.output(0), false);
  return error;
}

std::string NodeConverter::compare(const char *op, bool swap) {
  std::vector<Value> operands(2);
  for (int i = 0; i < 2; ++i)
    if (!operand(i, operands[size_t(i)], true))
      return error;
  if (!alignLayouts(operands))
    return error;
  for (Value &v : operands)
    asFloat(v);
  if (swap)
    std::swap(operands[0], operands[1]);
  emitBinary(op, operands[0], operands[1], n.output(0), true);
  return error;
}

std::string NodeConverter::logical(const char *op) {
  const std::string mnemonic = op;
  std::vector<Value> operands(mnemonic == "not" ? 1 : 2);
  for (size_t i = 0; i < operands.size(); ++i)
    if (!operand(int(i), operands[i], true))
      return error;
  if (!alignLayouts(operands))
    return error;
  for (Value &v : operands)
    asBool(v);
  if (mnemonic == "not") {
    std::string y = g.define(n.output(0), operands[0].shape,
                             operands[0].layout, false, true);
    g.emit(y + " = gpipe.not " + operands[0].ssa + " : " +
           typeOf(operands[0]));
    return {};
  }
  emitBinary(mnemonic, operands[0], operands[1], n.output(0), true);
  return error;
}

std::string NodeConverter::where() {
  std::vector<Value> operands(3);
  for (int i = 0; i < 3; ++i)
    if (!operand(i, operands[size_t(i)], true))
      return error;
  if (!alignLayouts(operands))
    return error;
  asBool(operands[0]);
  asFloat(operands[1]);
  asFloat(operands[2]);
  std::vector<int64_t> shape, partial;
  if (!broadcast(operands[0].shape, operands[1].shape, partial) ||
      !broadcast(partial, operands[2].shape, shape))
    return unsupported("its operands' shapes " +
                       shapeText(operands[0].shape) + ", " +
                       shapeText(operands[1].shape) + " and " +
                       shapeText(operands[2].shape) + " do not broadcast");
  Layout layout = Layout::Plain;
  for (const Value &v : operands)
    if (!v.isConstant)
      layout = v.layout;
  std::string y = g.define(n.output(0), shape, layout);
  g.emit(y + " = gpipe.where " + operands[0].ssa + ", " + operands[1].ssa +
         ", " + operands[2].ssa + " : " + typeOf(operands[0]) + ", " +
         typeOf(operands[1]) + ", " + typeOf(operands[2]) + " -> " +
         tensorType(shape, true));
  return {};
}

std::string NodeConverter::cast() {
  Value x;
  if (!operand(0, x, false))
    return error;
  int64_t to = g.intAttr("to", 0);
  if (n.op_type() == "CastLike" && (to = g.elementTypeOf(input(1))) < 0)
    return unsupported("input 1 ('" + input(1) + "') is never defined");
  Value y = x;
  switch (to) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    y.isFloat = true;
    y.isBool = false;
    break;
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::INT64:
    y.isFloat = y.isBool = false;
    break;
  case onnx::TensorProto::BOOL:
    y.isFloat = false;
    y.isBool = true;
    break;
  default:
    return unsupported("attribute to = " +
                       onnx::TensorProto::DataType_Name(
                           onnx::TensorProto::DataType(to)) +
                       " is not supported (float, int32, int64 or bool)");
  }
  if (y.isFloat == x.isFloat && y.isBool == x.isBool) {
    // f32 is gpipe's one float type (f64, f16, bf16 casts keep f32), as
    // i32 is its integer.
    g.bind(n.output(0), x);
    return {};
  }
  std::string ys =
      g.define(n.output(0), x.shape, x.layout, y.isFloat, y.isBool);
  g.emit(ys + " = gpipe.cast " + x.ssa + " : " + typeOf(x) + " -> " +
         typeOf(y));
  return {};
}

std::string NodeConverter::clip() {
  Value x;
  if (!operand(0, x, false) || !asFloat(x))
    return error;
  double bounds[2] = {-std::numeric_limits<float>::max(),
                      std::numeric_limits<float>::max()};
  for (int i = 1; i <= 2; ++i) {
    if (g.opset < 11) {
      bounds[i - 1] = g.floatAttr(i == 1 ? "min" : "max", float(bounds[i - 1]));
      continue;
    }
    if (input(i).empty())
      continue;
    const Constant *c = g.constant(input(i));
    if (!c || c->count() != 1)
      return unsupported("its " + std::string(i == 1 ? "min" : "max") +
                         " must be a constant scalar");
    bounds[i - 1] = c->isFloat ? c->floats[0] : double(c->ints[0]);
  }
  std::string y = g.define(n.output(0), x.shape, x.layout);
  g.emit(y + " = gpipe.clip " + x.ssa + " min " + number(bounds[0]) +
         " max " + number(bounds[1]) + " : " + typeOf(x));
  return {};
}
