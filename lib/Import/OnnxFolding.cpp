//===- OnnxFolding.cpp - What an exported graph computes from constants ---===//
//
// Exporters write the shape arithmetic of a model (Shape, Gather, Concat,
// Unsqueeze), its mask and position-id builders (Range, Expand, Equal,
// Where, Trilu) and its constant tables (rotary embeddings' cos and sin) as
// nodes. The importer evaluates every node whose inputs are constants (not
// trained weights) or only a value's shape, as it meets them in graph order:
// what reaches gpipe is the model's computation with constants.
//
// Values are held as long double, whose 64-bit significand holds every
// int64 exactly; a float result is rounded to f32 after each node, as
// ONNX's f32 arithmetic is.
//
//===----------------------------------------------------------------------===//

#include "OnnxFolder.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

using namespace gpipe;
using namespace gpipe::onnx_import;
using namespace gpipe::onnx_import::folding;

namespace {


const std::set<std::string> &foldableOps() {
  static const std::set<std::string> ops = [] {
    std::set<std::string> all = {
        "Abs",         "Add",       "And",        "Cast",      "CastLike",
        "Ceil",
        "Concat",      "Cos",       "Div",        "Dropout",   "Equal",
        "Erf",         "Exp",       "Expand",     "Flatten",   "Floor",
        "Gather",      "Greater",   "GreaterOrEqual", "Identity", "Less",
        "LessOrEqual", "Log",       "MatMul",     "Max",       "Min",
        "Mul",         "Neg",       "Not",        "Or",        "Pow",
        "Reciprocal",  "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd",
        "ReduceSum",   "Relu",      "Reshape",    "Sigmoid",   "Sin",
        "Slice",       "Split",     "Sqrt",       "Squeeze",   "Sub",
        "Tanh",        "Transpose", "Unsqueeze",  "Where"};
    all.insert(foldOnlyOps().begin(), foldOnlyOps().end());
    return all;
  }();
  return ops;
}

} // namespace

const std::set<std::string> &gpipe::onnx_import::foldOnlyOps() {
  static const std::set<std::string> ops = {
      "Ceil",  "ConstantOfShape", "CumSum",     "Floor", "GatherElements",
      "GatherND", "Mod",
      "Range", "ReduceMin",       "ReduceProd", "Shape", "Size",
      "Tile",  "Trilu",           "Xor"};
  return ops;
}

Tensor folding::fromConstant(const Constant &c) {
  Tensor t;
  t.dims = c.dims;
  t.kind = c.isFloat ? Kind::Float : c.isBool ? Kind::Bool : Kind::Int;
  if (c.isFloat)
    t.v.assign(c.floats.begin(), c.floats.end());
  else
    t.v.assign(c.ints.begin(), c.ints.end());
  return t;
}

Constant folding::toConstant(const Tensor &t) {
  Constant c;
  c.dims = t.dims;
  c.isFloat = t.kind == Kind::Float;
  c.isBool = t.kind == Kind::Bool;
  for (long double x : t.v) {
    if (c.isFloat)
      c.floats.push_back(float(x));
    else
      c.ints.push_back(toInt64(x));
  }
  return c;
}

/// `x` as an element of `kind`: f32 rounding, truncation toward zero
/// (saturating, NaN 0), or x != 0.

long double folding::convert(long double x, Kind kind) {
  switch (kind) {
  case Kind::Float:
    return (long double)float(x);
  case Kind::Bool:
    return x != 0;
  case Kind::Int:
    if (std::isnan(x))
      return 0;
    return std::clamp(std::trunc(x), (long double)INT64_MIN,
                      (long double)INT64_MAX);
  }
  return x;
}

/// Row-major strides of `dims`.
std::vector<int64_t> folding::strides(const std::vector<int64_t> &dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int64_t i = int64_t(dims.size()) - 2; i >= 0; --i)
    s[size_t(i)] = s[size_t(i + 1)] * dims[size_t(i + 1)];
  return s;
}

/// For each element of `out`, the element of `in` (right-aligned, size-1
/// dimensions stretched) that NumPy broadcasting reads.
std::vector<int64_t> folding::broadcastSources(const std::vector<int64_t> &in,
                                      const std::vector<int64_t> &out) {
  const size_t rank = out.size(), offset = rank - in.size();
  std::vector<int64_t> inStrides = strides(in), step(rank, 0);
  for (size_t i = 0; i < in.size(); ++i)
    step[i + offset] = in[i] == 1 ? 0 : inStrides[i];
  int64_t total = 1;
  for (int64_t d : out)
    total *= d;
  std::vector<int64_t> sources(static_cast<size_t>(total));
  std::vector<int64_t> index(rank, 0);
  int64_t source = 0;
  for (int64_t e = 0; e < total; ++e) {
    sources[size_t(e)] = source;
    for (int64_t d = int64_t(rank) - 1; d >= 0; --d) {
      if (++index[size_t(d)] < out[size_t(d)]) {
        source += step[size_t(d)];
        break;
      }
      source -= step[size_t(d)] * (out[size_t(d)] - 1);
      index[size_t(d)] = 0;
    }
  }
  return sources;
}


bool Folder::elementwise(
    Kind kind, const std::function<long double(const long double *)> &f) {
  std::vector<int64_t> dims;
  for (const Tensor &t : in) {
    // NumPy broadcasting of every input's shape.
    std::vector<int64_t> a = dims, b = t.dims;
    if (a.size() < b.size())
      std::swap(a, b);
    std::vector<int64_t> out = a;
    for (size_t i = 0; i < b.size(); ++i) {
      int64_t &o = out[a.size() - b.size() + i];
      const int64_t d = b[i];
      if (o != d && o != 1 && d != 1)
        return fail("its inputs' shapes do not broadcast: " +
                    shapeText(dims) + " and " + shapeText(t.dims));
      o = o == 1 ? d : o;
    }
    dims = out;
  }
  if (!checkSize(dims))
    return false;
  std::vector<std::vector<int64_t>> sources;
  for (const Tensor &t : in)
    sources.push_back(broadcastSources(t.dims, dims));
  result.dims = dims;
  result.kind = kind;
  int64_t total = result.count();
  result.v.resize(size_t(total));
  std::vector<long double> args(in.size());
  for (int64_t e = 0; e < total; ++e) {
    for (size_t i = 0; i < in.size(); ++i)
      args[i] = in[i].v[size_t(sources[i][size_t(e)])];
    result.v[size_t(e)] = convert(f(args.data()), kind);
  }
  return true;
}

bool Folder::arithmetic(
    const std::function<long double(long double, long double)> &f) {
  Kind kind = Kind::Int;
  for (const Tensor &t : in)
    if (t.kind == Kind::Float)
      kind = Kind::Float;
  return elementwise(kind, [&](const long double *a) {
    long double r = a[0];
    for (size_t i = 1; i < in.size(); ++i)
      r = f(r, a[i]);
    return r;
  });
}

bool Folder::cast(Tensor &out) {
  int64_t to = intAttr("to", 0);
  if (n.op_type() == "CastLike" && (to = g.elementTypeOf(n.input(1))) < 0)
    return fail("input 1 ('" + n.input(1) + "') is never defined");
  switch (to) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    result.kind = Kind::Float;
    break;
  case onnx::TensorProto::BOOL:
    result.kind = Kind::Bool;
    break;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64:
    result.kind = Kind::Int;
    break;
  default:
    return fail("attribute to = " + std::to_string(to) +
                " is not a float, integer or bool element type");
  }
  result.dims = in[0].dims;
  for (long double x : in[0].v)
    result.v.push_back(convert(x, result.kind));
  out = result;
  return true;
}

bool Folder::run(std::vector<Tensor> &outputs) {
  for (int i = 0; i < n.input_size(); ++i) {
    if (n.input(i).empty()) {
      in.emplace_back();
      continue;
    }
    const Constant *c = g.constant(n.input(i));
    if (c)
      in.push_back(fromConstant(*c));
    else
      in.emplace_back(); // a value whose shape alone is read
  }
  const std::string &op = n.op_type();
  // The inputs each op reads unconditionally (libonnx's checker has checked
  // the node against its schema, but a value may be empty or a scalar).
  static const std::map<std::string, size_t> required = {
      {"Where", 3},   {"Range", 3},     {"Slice", 3},     {"Reshape", 2},
      {"Expand", 2},  {"Gather", 2},    {"GatherElements", 2},
      {"Tile", 2},    {"CumSum", 2},    {"MatMul", 2},    {"Pow", 2},
      {"Div", 2},     {"Mod", 2},       {"Sub", 2},       {"Equal", 2},
      {"Less", 2},    {"LessOrEqual", 2}, {"Greater", 2},
      {"GreaterOrEqual", 2}, {"And", 2}, {"Or", 2},       {"Xor", 2},
      {"CastLike", 2}, {"GatherND", 2}};
  auto need = required.find(op);
  const size_t count = need == required.end() ? 1 : need->second;
  if (in.size() < count)
    return fail("it has " + std::to_string(in.size()) + " inputs, " +
                std::to_string(count) + " expected");
  for (size_t i = 0; i < count; ++i)
    if (n.input(int(i)).empty())
      return fail("its input " + std::to_string(i) + " is missing");
  for (const char *scalarOp : {"Range"})
    if (op == scalarOp)
      for (size_t i = 0; i < 3; ++i)
        if (in[i].v.empty())
          return fail("input " + std::to_string(i) + " is empty");
  if (op == "CumSum" && in[1].v.empty())
    return fail("its axis (input 1) is empty");
  if (op == "Trilu" && has(1) && in[1].v.empty())
    return fail("its k (input 1) is empty");
  using LD = long double;
  auto unary = [&](LD (*f)(LD)) {
    in.resize(1);
    return elementwise(Kind::Float,
                       [f](const LD *a) { return f(a[0]); });
  };
  auto compare = [&](bool (*f)(LD, LD)) {
    return elementwise(Kind::Bool,
                       [f](const LD *a) { return LD(f(a[0], a[1])); });
  };
  bool ok = true;
  Tensor single;
  bool isSingle = true;
  if (op == "Shape" || op == "Size") {
    isSingle = false;
    ok = shape(outputs);
  } else if (op == "Identity" || op == "Dropout") {
    single = in[0];
  } else if (op == "Cast" || op == "CastLike") {
    ok = cast(single);
  } else if (op == "GatherND") {
    ok = gatherND(single);
  } else if (op == "ConstantOfShape") {
    ok = constantOfShape(single);
  } else if (op == "Range") {
    ok = range(single);
  } else if (op == "Expand") {
    ok = expand(single);
  } else if (op == "Reshape") {
    ok = reshape(ints(1), intAttr("allowzero", 0) != 0, single);
  } else if (op == "Flatten") {
    int64_t axis = intAttr("axis", 1);
    ok = normalize(axis, in[0].rank() + 1);
    if (ok) {
      int64_t left = 1;
      for (int64_t d = 0; d < axis; ++d)
        left *= in[0].dims[size_t(d)];
      ok = reshape({left, -1}, false, single);
      if (ok && in[0].count() == 0)
        single.dims = {left, 0};
    }
  } else if (op == "Squeeze" || op == "Unsqueeze") {
    ok = squeeze(op == "Unsqueeze", single);
  } else if (op == "Transpose") {
    ok = transpose(single);
  } else if (op == "Concat") {
    ok = concat(single);
  } else if (op == "Split") {
    isSingle = false;
    ok = split(outputs);
  } else if (op == "Slice") {
    ok = slice(single);
  } else if (op == "Gather") {
    ok = gather(single);
  } else if (op == "GatherElements") {
    ok = gatherElements(single);
  } else if (op == "Tile") {
    ok = tile(single);
  } else if (op == "Trilu") {
    ok = trilu(single);
  } else if (op == "CumSum") {
    ok = cumsum(single);
  } else if (op.rfind("Reduce", 0) == 0) {
    ok = reduce(single);
  } else if (op == "MatMul") {
    ok = matmul(single);
  } else if (op == "Where") {
    const Kind kind = in[1].kind == Kind::Float || in[2].kind == Kind::Float
                          ? Kind::Float
                          : in[1].kind;
    ok = elementwise(kind, [](const LD *a) { return a[0] != 0 ? a[1] : a[2]; });
    single = result;
  } else if (op == "Equal") {
    ok = compare([](LD a, LD b) { return a == b; });
    single = result;
  } else if (op == "Less") {
    ok = compare([](LD a, LD b) { return a < b; });
    single = result;
  } else if (op == "LessOrEqual") {
    ok = compare([](LD a, LD b) { return a <= b; });
    single = result;
  } else if (op == "Greater") {
    ok = compare([](LD a, LD b) { return a > b; });
    single = result;
  } else if (op == "GreaterOrEqual") {
    ok = compare([](LD a, LD b) { return a >= b; });
    single = result;
  } else if (op == "And" || op == "Or" || op == "Xor") {
    ok = compare(op == "And"  ? +[](LD a, LD b) { return a != 0 && b != 0; }
                 : op == "Or" ? +[](LD a, LD b) { return a != 0 || b != 0; }
                              : +[](LD a, LD b) { return (a != 0) != (b != 0); });
    single = result;
  } else if (op == "Not") {
    ok = elementwise(Kind::Bool, [](const LD *a) { return LD(a[0] == 0); });
    single = result;
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Max" ||
             op == "Min") {
    ok = arithmetic(op == "Add"   ? +[](LD a, LD b) { return a + b; }
                    : op == "Sub" ? +[](LD a, LD b) { return a - b; }
                    : op == "Mul" ? +[](LD a, LD b) { return a * b; }
                    : op == "Max" ? +[](LD a, LD b) { return std::max(a, b); }
                                  : +[](LD a, LD b) { return std::min(a, b); });
    single = result;
  } else if (op == "Div") {
    const bool integer = in[0].kind != Kind::Float && in[1].kind != Kind::Float;
    for (long double b : in[1].v)
      if (integer && b == 0)
        return fail("it divides an integer by 0");
    ok = arithmetic(integer ? +[](LD a, LD b) { return std::trunc(a / b); }
                            : +[](LD a, LD b) { return a / b; });
    single = result;
  } else if (op == "Mod") {
    const bool fmod = intAttr("fmod", 0) != 0;
    for (long double b : in[1].v)
      if (in[1].kind != Kind::Float && b == 0)
        return fail("it takes an integer modulo 0");
    ok = arithmetic(fmod ? +[](LD a, LD b) { return std::fmod(a, b); }
                         : +[](LD a, LD b) {
                             LD r = std::fmod(a, b);
                             return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
                           });
    single = result;
  } else if (op == "Pow") {
    in[1].kind = Kind::Float;
    const Kind kind = in[0].kind;
    ok = elementwise(kind, [](const LD *a) { return std::pow(a[0], a[1]); });
    single = result;
  } else if (op == "Neg" || op == "Abs" || op == "Relu" || op == "Floor" ||
             op == "Ceil") {
    const Kind kind = in[0].kind;
    in.resize(1);
    ok = elementwise(kind, [&op](const LD *a) -> LD {
      if (op == "Neg")
        return -a[0];
      if (op == "Abs")
        return std::fabs(a[0]);
      if (op == "Relu")
        return std::max<LD>(a[0], 0);
      return op == "Floor" ? std::floor(a[0]) : std::ceil(a[0]);
    });
    single = result;
  } else if (op == "Sqrt") {
    ok = unary([](LD x) { return std::sqrt(x); });
    single = result;
  } else if (op == "Exp") {
    ok = unary([](LD x) { return std::exp(x); });
    single = result;
  } else if (op == "Log") {
    ok = unary([](LD x) { return std::log(x); });
    single = result;
  } else if (op == "Sin") {
    ok = unary([](LD x) { return std::sin(x); });
    single = result;
  } else if (op == "Cos") {
    ok = unary([](LD x) { return std::cos(x); });
    single = result;
  } else if (op == "Tanh") {
    ok = unary([](LD x) { return std::tanh(x); });
    single = result;
  } else if (op == "Erf") {
    ok = unary([](LD x) { return std::erf(x); });
    single = result;
  } else if (op == "Reciprocal") {
    ok = unary([](LD x) { return 1 / x; });
    single = result;
  } else if (op == "Sigmoid") {
    ok = unary([](LD x) { return 1 / (1 + std::exp(-x)); });
    single = result;
  } else {
    return fail("op type '" + op + "' does not fold");
  }
  if (ok && isSingle)
    outputs.push_back(single);
  return ok;
}



bool gpipe::onnx_import::isFoldableOp(const std::string &op) {
  return foldableOps().count(op) != 0;
}

bool gpipe::onnx_import::isFoldOnlyOp(const std::string &op) {
  return foldOnlyOps().count(op) != 0;
}

std::vector<int64_t>
gpipe::onnx_import::reshaped(const std::vector<int64_t> &from,
                             const std::vector<int64_t> &target,
                             bool allowZero) {
  int64_t total = 1, known = 1, infer = -1;
  for (int64_t d : from)
    if (__builtin_mul_overflow(total, d, &total))
      return {}; // no tensor has that many elements
  std::vector<int64_t> shape = target;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowZero) {
      if (i >= from.size())
        return {};
      shape[i] = from[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0)
        return {};
      infer = int64_t(i);
      continue;
    }
    if (shape[i] < 0 || __builtin_mul_overflow(known, shape[i], &known))
      return {};
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      return {};
    shape[size_t(infer)] = total / known;
  } else if (known != total) {
    return {};
  }
  return shape;
}

bool GraphImporter::isTrainable(const std::string &name) const {
  const Constant *c = constant(name);
  if (!c || !c->isFloat || c->count() <= 1 || !initializerNames.count(name))
    return false;
  auto endsWith = [&](const std::string &suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
               0;
  };
  if (endsWith("inv_freq") || endsWith("position_ids") ||
      endsWith("running_mean") || endsWith("running_var") ||
      endsWith("masked_bias"))
    return false; // PyTorch buffers
  if (name.rfind("onnx::", 0) != 0)
    return true;
  // The exporter's own folding names what it folded after the op reading
  // it: a weight it transposed for a MatMul, Gemm or Conv is a weight; a
  // table it computed for a Mul or an Add is a constant.
  for (const onnx::NodeProto &user : graph.node())
    for (const std::string &input : user.input())
      if (input == name && user.op_type() != "MatMul" &&
          user.op_type() != "Gemm" && user.op_type() != "Conv")
        return false;
  return true;
}

std::string GraphImporter::fold(const onnx::NodeProto &n, bool &folded) {
  folded = false;
  const std::string &op = n.op_type();
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return {};
  if (!isFoldableOp(op))
    return {};
  const bool shapeOnly = op == "Shape" || op == "Size";
  bool anyInput = false;
  for (int i = 0; i < n.input_size(); ++i) {
    const std::string &name = n.input(i);
    if (name.empty())
      continue;
    anyInput = true;
    // A Shape reads only its input's shape (a weight's too), a CastLike
    // only its input 1's element type.
    if (((shapeOnly && i == 0) || (op == "CastLike" && i == 1)) &&
        (value(name) || constant(name)))
      continue;
    if (!constant(name) || isTrainable(name))
      return {}; // computed, or a weight the model trains
  }
  if (!anyInput)
    return {};
  Folder folder(*this, n);
  std::vector<Tensor> outputs;
  if (!folder.run(outputs))
    return "evaluating it from its constant inputs: " + folder.error;
  for (int i = 0; i < n.output_size() && i < int(outputs.size()); ++i)
    if (!n.output(i).empty())
      constants[n.output(i)] = toConstant(outputs[size_t(i)]);
  folded = true;
  return {};
}
