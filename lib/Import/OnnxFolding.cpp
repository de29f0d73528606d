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

#include "OnnxGraph.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>

using namespace gpipe;
using namespace gpipe::onnx_import;

namespace {

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

const std::set<std::string> &foldOnlyOps() {
  static const std::set<std::string> ops = {
      "Ceil",  "ConstantOfShape", "CumSum",     "Floor", "GatherElements", "Mod",
      "Range", "ReduceMin",       "ReduceProd", "Shape", "Size",
      "Tile",  "Trilu",           "Xor"};
  return ops;
}

const std::set<std::string> &foldableOps() {
  static const std::set<std::string> ops = [] {
    std::set<std::string> all = {
        "Abs",         "Add",       "And",        "Cast",      "Ceil",
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

Tensor fromConstant(const Constant &c) {
  Tensor t;
  t.dims = c.dims;
  t.kind = c.isFloat ? Kind::Float : c.isBool ? Kind::Bool : Kind::Int;
  if (c.isFloat)
    t.v.assign(c.floats.begin(), c.floats.end());
  else
    t.v.assign(c.ints.begin(), c.ints.end());
  return t;
}

Constant toConstant(const Tensor &t) {
  Constant c;
  c.dims = t.dims;
  c.isFloat = t.kind == Kind::Float;
  c.isBool = t.kind == Kind::Bool;
  for (long double x : t.v) {
    if (c.isFloat)
      c.floats.push_back(float(x));
    else
      c.ints.push_back(int64_t(x));
  }
  return c;
}

/// `x` as an element of `kind`: f32 rounding, truncation toward zero
/// (saturating, NaN 0), or x != 0.
long double convert(long double x, Kind kind) {
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
std::vector<int64_t> strides(const std::vector<int64_t> &dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int64_t i = int64_t(dims.size()) - 2; i >= 0; --i)
    s[size_t(i)] = s[size_t(i + 1)] * dims[size_t(i + 1)];
  return s;
}

/// For each element of `out`, the element of `in` (right-aligned, size-1
/// dimensions stretched) that NumPy broadcasting reads.
std::vector<int64_t> broadcastSources(const std::vector<int64_t> &in,
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
      out.push_back(int64_t(x));
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

bool Folder::shape(std::vector<Tensor> &out) {
  const Value *v = g.value(n.input(0));
  std::vector<int64_t> dims;
  if (v)
    dims = onnxShape(*v);
  else
    dims = g.constant(n.input(0))->dims;
  Tensor t;
  t.kind = Kind::Int;
  if (n.op_type() == "Size") {
    int64_t total = 1;
    for (int64_t d : dims)
      total *= d;
    t.v = {(long double)total};
    out.push_back(t);
    return true;
  }
  const int64_t rank = int64_t(dims.size());
  int64_t start = std::clamp<int64_t>(intAttr("start", 0), -rank, rank);
  int64_t end = std::clamp<int64_t>(intAttr("end", rank), -rank, rank);
  start += start < 0 ? rank : 0;
  end += end < 0 ? rank : 0;
  for (int64_t i = start; i < end; ++i)
    t.v.push_back((long double)dims[size_t(i)]);
  t.dims = {int64_t(t.v.size())};
  out.push_back(t);
  return true;
}

bool Folder::cast(Tensor &out) {
  const int64_t to = intAttr("to", 0);
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

bool Folder::constantOfShape(Tensor &out) {
  std::vector<int64_t> dims = ints(0);
  if (!checkSize(dims))
    return false;
  Tensor fill;
  fill.v = {0};
  if (const onnx::AttributeProto *value = attr("value")) {
    Constant c;
    std::string why = readTensor(value->t(), c);
    if (!why.empty())
      return fail("its value: " + why);
    if (c.count() != 1)
      return fail("its value has " + std::to_string(c.count()) +
                  " elements; ONNX gives it one");
    fill = fromConstant(c);
  }
  out.dims = dims;
  out.kind = fill.kind;
  out.v.assign(size_t(out.count()), fill.v[0]);
  return true;
}

bool Folder::range(Tensor &out) {
  for (int i = 0; i < 3; ++i)
    if (in[size_t(i)].count() != 1)
      return fail("input " + std::to_string(i) + " is not a scalar");
  const long double start = in[0].v[0], limit = in[1].v[0],
                    delta = in[2].v[0];
  if (delta == 0)
    return fail("its delta is 0");
  const long double steps = std::ceil((limit - start) / delta);
  const int64_t count = steps > 0 ? int64_t(steps) : 0;
  if (!checkSize({count}))
    return false;
  out.kind = in[0].kind;
  out.dims = {count};
  for (int64_t i = 0; i < count; ++i)
    out.v.push_back(convert(start + delta * i, out.kind));
  return true;
}

bool Folder::expand(Tensor &out) {
  std::vector<int64_t> target = ints(1);
  const Tensor x = in[0];
  in = {x};
  // Broadcast against a tensor of the target's shape (size-1 target
  // dimensions keep the input's size, as Expand's rule is NumPy's).
  for (int64_t d : target)
    if (d < 0)
      return fail("its shape " + shapeText(target) + " has a negative size");
  Tensor ones;
  ones.dims = target;
  ones.v.assign(size_t(std::max<int64_t>(ones.count(), 0)), 0);
  if (!checkSize(target))
    return false;
  in.push_back(ones);
  if (!elementwise(x.kind, [](const long double *a) { return a[0]; }))
    return false;
  out = result;
  return true;
}

bool Folder::reshape(const std::vector<int64_t> &target, bool allowZero,
                     Tensor &out) {
  std::vector<int64_t> dims = reshaped(in[0].dims, target, allowZero);
  if (dims.empty() && !target.empty())
    return fail("its shape " + shapeText(target) + " does not apply to " +
                shapeText(in[0].dims));
  out = in[0];
  out.dims = dims;
  return true;
}

bool Folder::squeeze(bool unsqueeze, Tensor &out) {
  std::vector<int64_t> axes = axesOf(1, 13);
  std::vector<int64_t> dims = in[0].dims;
  if (unsqueeze) {
    const int64_t rank = int64_t(dims.size() + axes.size());
    for (int64_t &a : axes)
      if (!normalize(a, rank))
        return false;
    std::sort(axes.begin(), axes.end());
    for (int64_t a : axes)
      dims.insert(dims.begin() + std::min<int64_t>(a, int64_t(dims.size())),
                  1);
  } else {
    const int64_t rank = int64_t(dims.size());
    std::vector<bool> drop(dims.size(), false);
    for (int64_t a : axes) {
      if (!normalize(a, rank))
        return false;
      if (dims[size_t(a)] != 1)
        return fail("it squeezes axis " + std::to_string(a) + " of size " +
                    std::to_string(dims[size_t(a)]));
      drop[size_t(a)] = true;
    }
    std::vector<int64_t> kept;
    for (size_t i = 0; i < dims.size(); ++i)
      if (!(axes.empty() ? dims[i] == 1 : bool(drop[i])))
        kept.push_back(dims[i]);
    dims = kept;
  }
  out = in[0];
  out.dims = dims;
  return true;
}

bool Folder::transpose(Tensor &out) {
  const Tensor &x = in[0];
  const int64_t rank = x.rank();
  std::vector<int64_t> perm = intsAttr("perm");
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool isPermutation = int64_t(sorted.size()) == rank;
  for (int64_t i = 0; i < rank && isPermutation; ++i)
    isPermutation = sorted[size_t(i)] == i;
  if (!isPermutation)
      return fail("attribute perm " + shapeText(perm) +
                  " is not a permutation of " + std::to_string(rank) +
                  " axes");
  std::vector<int64_t> inStrides = strides(x.dims);
  out.kind = x.kind;
  for (int64_t p : perm)
    out.dims.push_back(x.dims[size_t(p)]);
  out.v.resize(x.v.size());
  std::vector<int64_t> index(size_t(rank), 0);
  for (size_t e = 0; e < out.v.size(); ++e) {
    int64_t source = 0;
    for (int64_t d = 0; d < rank; ++d)
      source += index[size_t(d)] * inStrides[size_t(perm[size_t(d)])];
    out.v[e] = x.v[size_t(source)];
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[size_t(d)] < out.dims[size_t(d)])
        break;
      index[size_t(d)] = 0;
    }
  }
  return true;
}

bool Folder::concat(Tensor &out) {
  int64_t axis = intAttr("axis", 0);
  const int64_t rank = in[0].rank();
  if (!normalize(axis, rank))
    return false;
  out.dims = in[0].dims;
  out.dims[size_t(axis)] = 0;
  out.kind = in[0].kind;
  for (const Tensor &t : in) {
    if (t.kind == Kind::Float)
      out.kind = Kind::Float;
    if (t.rank() != rank)
      return fail("its inputs have ranks " + std::to_string(rank) + " and " +
                  std::to_string(t.rank()));
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && t.dims[size_t(d)] != in[0].dims[size_t(d)])
        return fail("its inputs " + shapeText(in[0].dims) + " and " +
                    shapeText(t.dims) + " differ outside axis " +
                    std::to_string(axis));
    out.dims[size_t(axis)] += t.dims[size_t(axis)];
  }
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= out.dims[size_t(d)];
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor &t : in) {
      const int64_t block = t.count() / std::max<int64_t>(outer, 1);
      out.v.insert(out.v.end(), t.v.begin() + o * block,
                   t.v.begin() + (o + 1) * block);
    }
  return true;
}

bool Folder::split(std::vector<Tensor> &outs) {
  const Tensor &x = in[0];
  int64_t axis = intAttr("axis", 0);
  if (!normalize(axis, x.rank()))
    return false;
  std::vector<int64_t> sizes =
      g.opset >= 13 ? (has(1) ? ints(1) : std::vector<int64_t>())
                    : intsAttr("split");
  const int64_t parts = n.output_size(), extent = x.dims[size_t(axis)];
  if (sizes.empty()) {
    const int64_t each = (extent + parts - 1) / parts;
    for (int64_t p = 0; p < parts; ++p)
      sizes.push_back(std::clamp<int64_t>(extent - p * each, 0, each));
  }
  if (int64_t(sizes.size()) != parts ||
      std::any_of(sizes.begin(), sizes.end(),
                  [](int64_t size) { return size < 0; }) ||
      std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != extent)
    return fail("its split sizes " + shapeText(sizes) + " do not divide " +
                std::to_string(extent) + " into " + std::to_string(parts) +
                " outputs");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dims[size_t(d)];
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.dims[size_t(d)];
  int64_t offset = 0;
  for (int64_t size : sizes) {
    Tensor t;
    t.kind = x.kind;
    t.dims = x.dims;
    t.dims[size_t(axis)] = size;
    for (int64_t o = 0; o < outer; ++o) {
      auto begin = x.v.begin() + (o * extent + offset) * inner;
      t.v.insert(t.v.end(), begin, begin + size * inner);
    }
    offset += size;
    outs.push_back(t);
  }
  return true;
}

bool Folder::slice(Tensor &out) {
  const Tensor &x = in[0];
  const int64_t rank = x.rank();
  std::vector<int64_t> starts = ints(1), ends = ints(2), axes, steps;
  if (has(3))
    axes = ints(3);
  else
    for (int64_t i = 0; i < int64_t(starts.size()); ++i)
      axes.push_back(i);
  steps = has(4) ? ints(4) : std::vector<int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return fail("its starts, ends, axes and steps differ in length");
  std::vector<int64_t> first(size_t(rank), 0), step(size_t(rank), 1),
      dims = x.dims;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes[i];
    if (!normalize(axis, rank))
      return false;
    const int64_t extent = x.dims[size_t(axis)], s = steps[i];
    if (s == 0)
      return fail("a step is 0");
    int64_t b = starts[i], e = ends[i];
    b += b < 0 ? extent : 0;
    e += e < 0 ? extent : 0;
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, extent);
      e = std::clamp<int64_t>(e, 0, extent);
      dims[size_t(axis)] = e > b ? (e - b + s - 1) / s : 0;
    } else if (extent == 0) {
      dims[size_t(axis)] = 0;
    } else {
      b = std::clamp<int64_t>(b, 0, extent - 1);
      e = std::clamp<int64_t>(e, -1, extent - 1);
      dims[size_t(axis)] = b > e ? (b - e - s - 1) / -s : 0;
    }
    first[size_t(axis)] = b;
    step[size_t(axis)] = s;
  }
  out.kind = x.kind;
  out.dims = dims;
  std::vector<int64_t> inStrides = strides(x.dims), index(size_t(rank), 0);
  const int64_t total = out.count();
  for (int64_t e = 0; e < total; ++e) {
    int64_t source = 0;
    for (int64_t d = 0; d < rank; ++d)
      source += (first[size_t(d)] + index[size_t(d)] * step[size_t(d)]) *
                inStrides[size_t(d)];
    out.v.push_back(x.v[size_t(source)]);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[size_t(d)] < dims[size_t(d)])
        break;
      index[size_t(d)] = 0;
    }
  }
  return true;
}

bool Folder::gather(Tensor &out) {
  const Tensor &x = in[0], &indices = in[1];
  int64_t axis = intAttr("axis", 0);
  if (!normalize(axis, x.rank()))
    return false;
  const int64_t extent = x.dims[size_t(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dims[size_t(d)];
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.dims[size_t(d)];
  out.kind = x.kind;
  out.dims.assign(x.dims.begin(), x.dims.begin() + axis);
  out.dims.insert(out.dims.end(), indices.dims.begin(), indices.dims.end());
  out.dims.insert(out.dims.end(), x.dims.begin() + axis + 1, x.dims.end());
  if (!checkSize(out.dims))
    return false;
  for (int64_t o = 0; o < outer; ++o)
    for (long double raw : indices.v) {
      int64_t i = int64_t(raw);
      if (i < -extent || i >= extent)
        return fail("index " + std::to_string(i) + " is outside [" +
                    std::to_string(-extent) + ", " + std::to_string(extent) +
                    ")");
      i += i < 0 ? extent : 0;
      auto begin = x.v.begin() + (o * extent + i) * inner;
      out.v.insert(out.v.end(), begin, begin + inner);
    }
  return true;
}

bool Folder::gatherElements(Tensor &out) {
  const Tensor &x = in[0], &indices = in[1];
  int64_t axis = intAttr("axis", 0);
  if (!normalize(axis, x.rank()))
    return false;
  if (indices.rank() != x.rank())
    return fail("its indices have rank " + std::to_string(indices.rank()) +
                ", its data " + std::to_string(x.rank()));
  out.kind = x.kind;
  out.dims = indices.dims;
  std::vector<int64_t> xStrides = strides(x.dims), index(x.dims.size(), 0);
  const int64_t extent = x.dims[size_t(axis)];
  for (size_t e = 0; e < indices.v.size(); ++e) {
    int64_t source = 0;
    for (int64_t d = 0; d < x.rank(); ++d) {
      int64_t at = index[size_t(d)];
      if (d == axis) {
        at = int64_t(indices.v[e]);
        if (at < -extent || at >= extent)
          return fail("index " + std::to_string(at) + " is outside [" +
                      std::to_string(-extent) + ", " +
                      std::to_string(extent) + ")");
        at += at < 0 ? extent : 0;
      } else if (at >= x.dims[size_t(d)]) {
        return fail("its indices " + shapeText(indices.dims) +
                    " exceed its data " + shapeText(x.dims));
      }
      source += at * xStrides[size_t(d)];
    }
    out.v.push_back(x.v[size_t(source)]);
    for (int64_t d = indices.rank() - 1; d >= 0; --d) {
      if (++index[size_t(d)] < indices.dims[size_t(d)])
        break;
      index[size_t(d)] = 0;
    }
  }
  return true;
}

bool Folder::tile(Tensor &out) {
  const Tensor &x = in[0];
  std::vector<int64_t> repeats = ints(1);
  if (int64_t(repeats.size()) != x.rank())
    return fail("its repeats " + shapeText(repeats) + " do not match rank " +
                std::to_string(x.rank()));
  out.kind = x.kind;
  for (int64_t d = 0; d < x.rank(); ++d)
    out.dims.push_back(x.dims[size_t(d)] * repeats[size_t(d)]);
  if (!checkSize(out.dims))
    return false;
  std::vector<int64_t> inStrides = strides(x.dims), index(x.dims.size(), 0);
  const int64_t total = out.count();
  for (int64_t e = 0; e < total; ++e) {
    int64_t source = 0;
    for (size_t d = 0; d < x.dims.size(); ++d)
      source += (index[d] % x.dims[d]) * inStrides[d];
    out.v.push_back(x.v[size_t(source)]);
    for (int64_t d = x.rank() - 1; d >= 0; --d) {
      if (++index[size_t(d)] < out.dims[size_t(d)])
        break;
      index[size_t(d)] = 0;
    }
  }
  return true;
}

bool Folder::trilu(Tensor &out) {
  const Tensor &x = in[0];
  if (x.rank() < 2)
    return fail("its input has rank " + std::to_string(x.rank()) +
                "; Trilu takes matrices");
  const int64_t k = has(1) ? ints(1)[0] : 0;
  const bool upper = intAttr("upper", 1) != 0;
  const int64_t rows = x.dims[size_t(x.rank() - 2)],
                cols = x.dims[size_t(x.rank() - 1)];
  out = x;
  for (size_t e = 0; e < out.v.size(); ++e) {
    const int64_t j = int64_t(e) % cols, i = (int64_t(e) / cols) % rows;
    const bool keep = upper ? j - i >= k : j - i <= k;
    if (!keep)
      out.v[e] = 0;
  }
  return true;
}

bool Folder::cumsum(Tensor &out) {
  const Tensor &x = in[0];
  int64_t axis = ints(1)[0];
  if (!normalize(axis, x.rank()))
    return false;
  const bool exclusive = intAttr("exclusive", 0) != 0,
             reverse = intAttr("reverse", 0) != 0;
  const int64_t extent = x.dims[size_t(axis)];
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.dims[size_t(d)];
  const int64_t outer = x.count() / std::max<int64_t>(extent * inner, 1);
  out = x;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c) {
      long double sum = 0;
      for (int64_t step = 0; step < extent; ++step) {
        const int64_t i = reverse ? extent - 1 - step : step;
        const size_t at = size_t((o * extent + i) * inner + c);
        const long double value = x.v[at];
        if (!exclusive)
          sum += value;
        out.v[at] = convert(sum, x.kind);
        if (exclusive)
          sum += value;
      }
    }
  return true;
}

bool Folder::reduce(Tensor &out) {
  const Tensor &x = in[0];
  const std::string &op = n.op_type();
  std::vector<int64_t> axes = axesOf(1, op == "ReduceSum" ? 13 : 18);
  const bool keep = intAttr("keepdims", 1) != 0;
  if (axes.empty() && intAttr("noop_with_empty_axes", 0) != 0) {
    out = x;
    return true;
  }
  std::vector<bool> reduced(x.dims.size(), axes.empty());
  for (int64_t a : axes) {
    if (!normalize(a, x.rank()))
      return false;
    reduced[size_t(a)] = true;
  }
  std::vector<int64_t> keptDims;
  for (size_t d = 0; d < x.dims.size(); ++d)
    keptDims.push_back(reduced[d] ? 1 : x.dims[d]);
  Tensor acc;
  acc.dims = keptDims;
  const bool isMax = op == "ReduceMax", isMin = op == "ReduceMin",
             isProd = op == "ReduceProd";
  acc.v.assign(size_t(acc.count()),
               isMax   ? -INFINITY
               : isMin ? INFINITY
               : isProd ? 1
                        : 0);
  std::vector<int64_t> sources = broadcastSources(keptDims, x.dims);
  for (size_t e = 0; e < x.v.size(); ++e) {
    long double &a = acc.v[size_t(sources[e])];
    const long double v = x.v[e];
    a = isMax ? std::max(a, v) : isMin ? std::min(a, v) : isProd ? a * v : a + v;
  }
  const int64_t count = x.count() / std::max<int64_t>(acc.count(), 1);
  out.kind = x.kind;
  for (long double a : acc.v)
    out.v.push_back(convert(op == "ReduceMean" ? a / count : a, x.kind));
  for (size_t d = 0; d < keptDims.size(); ++d)
    if (!reduced[d] || keep)
      out.dims.push_back(keptDims[d]);
  return true;
}

bool Folder::matmul(Tensor &out) {
  Tensor a = in[0], b = in[1];
  const bool vectorA = a.rank() == 1, vectorB = b.rank() == 1;
  if (vectorA)
    a.dims.insert(a.dims.begin(), 1);
  if (vectorB)
    b.dims.push_back(1);
  const int64_t m = a.dims[a.dims.size() - 2], k = a.dims.back(),
                nCols = b.dims.back();
  if (b.dims[b.dims.size() - 2] != k)
    return fail("its operands " + shapeText(in[0].dims) + " and " +
                shapeText(in[1].dims) + " do not contract");
  std::vector<int64_t> batchA(a.dims.begin(), a.dims.end() - 2),
      batchB(b.dims.begin(), b.dims.end() - 2);
  // The batch dimensions broadcast as element-wise shapes do.
  Tensor ta, tb;
  ta.dims = batchA;
  tb.dims = batchB;
  ta.v.assign(size_t(ta.count()), 0);
  tb.v.assign(size_t(tb.count()), 0);
  std::vector<Tensor> saved = in;
  in = {ta, tb};
  if (!elementwise(Kind::Int, [](const long double *) { return 0.0L; }))
    return false;
  std::vector<int64_t> batch = result.dims;
  in = saved;
  std::vector<int64_t> srcA = broadcastSources(batchA, batch),
                       srcB = broadcastSources(batchB, batch);
  out.kind = a.kind == Kind::Float || b.kind == Kind::Float ? Kind::Float
                                                            : Kind::Int;
  out.dims = batch;
  out.dims.push_back(m);
  out.dims.push_back(nCols);
  if (!checkSize(out.dims))
    return false;
  for (size_t p = 0; p < srcA.size(); ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < nCols; ++j) {
        long double sum = 0;
        for (int64_t l = 0; l < k; ++l)
          sum += a.v[size_t(srcA[p] * m * k + i * k + l)] *
                 b.v[size_t(srcB[p] * k * nCols + l * nCols + j)];
        out.v.push_back(convert(sum, out.kind));
      }
  if (vectorB)
    out.dims.pop_back();
  if (vectorA)
    out.dims.erase(out.dims.end() - (vectorB ? 1 : 2));
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
      {"GreaterOrEqual", 2}, {"And", 2}, {"Or", 2},       {"Xor", 2}};
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
  } else if (op == "Cast") {
    ok = cast(single);
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

} // namespace

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
    total *= d;
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
    if (shapeOnly && i == 0 && value(name))
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
