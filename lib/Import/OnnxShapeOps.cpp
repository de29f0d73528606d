//===- OnnxShapeOps.cpp - ONNX's shape and indexing ops as gpipe ops ------===//
//
// Reductions, Reshape/Squeeze/Unsqueeze, Transpose, Expand, Slice, Split,
// Concat, Gather along any axis and MatMul of computed tensors, on values in
// ONNX's layout. Their shapes, axes and indices are constants (folded where
// the exporter computed them). A Reshape that merges the batch with the next
// dimension ([N, S, D] to [N * S, D], Hugging Face's Conv1D) writes nothing:
// the value is held as it was, in the Rows layout, until a Reshape back.
//
//===----------------------------------------------------------------------===//

#include "NodeConverter.h"

#include <algorithm>
#include <numeric>

using namespace gpipe;
using namespace gpipe::onnx_import;

namespace {

/// `axis` in [-rank, rank) as [0, rank); false where it is outside.
bool normalizeAxis(int64_t &axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return false;
  axis += axis < 0 ? rank : 0;
  return true;
}

std::string axisError(int64_t axis, int64_t rank) {
  return "axis " + std::to_string(axis) + " is outside [" +
         std::to_string(-rank) + ", " + std::to_string(rank) +
         ") for an input of rank " + std::to_string(rank);
}

std::string listText(const std::vector<int64_t> &v) { return shapeText(v); }

std::string indexOutside(int64_t index, int64_t extent, int64_t axis) {
  return "index " + std::to_string(index) + " is outside [" +
         std::to_string(-extent) + ", " + std::to_string(extent) +
         ") of axis " + std::to_string(axis);
}

} // namespace

std::string NodeConverter::reduce(const char *op) {
  Value x;
  if (!plainOperand(0, x) || !asFloat(x))
    return error;
  const int64_t rank = int64_t(x.shape.size());
  std::vector<int64_t> axes;
  // ReduceSum takes its axes as an input from opset 13, the others from 18.
  const bool fromInput = g.opset >= (n.op_type() == "ReduceSum" ? 13 : 18);
  if (fromInput) {
    if (!input(1).empty()) {
      const Constant *c = g.constant(input(1));
      if (!c || c->isFloat)
        return unsupported("its axes (input 1) must be an integer constant");
      axes = c->ints;
    }
  } else {
    axes = g.intsAttr("axes");
  }
  if (axes.empty()) {
    if (g.intAttr("noop_with_empty_axes", 0) != 0) {
      g.alias(n.output(0), input(0));
      return {};
    }
    axes.resize(size_t(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t &a : axes)
    if (!normalizeAxis(a, rank))
      return unsupported(axisError(a, rank));
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  const bool keep = g.intAttr("keepdims", 1) != 0;
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    const bool reduced = std::binary_search(axes.begin(), axes.end(), d);
    if (!reduced || keep)
      shape.push_back(reduced ? 1 : x.shape[size_t(d)]);
  }
  std::string y = g.define(n.output(0), shape);
  g.emit(y + " = gpipe." + op + " " + x.ssa + " axes " + listText(axes) +
         " : " + typeOf(x) + " -> " + tensorType(shape, true));
  return {};
}

std::string NodeConverter::emitReshape(const Value &x,
                                       const std::vector<int64_t> &shape,
                                       const std::string &name) {
  Value y = x;
  if (x.layout == Layout::Rows) {
    // ONNX's [N * S, ...]: back to [N, S, ...] is the held value itself;
    // another width of the rows stays merged.
    const std::vector<int64_t> &held = x.shape;
    if (shape == held) {
      y.layout = Layout::Plain;
      g.bind(name, y);
      return {};
    }
    if (shape.empty() || shape[0] != held[0] * held[1]) {
      error = "it reshapes " + shapeText(onnxShape(x)) + ", whose rows merge "
              "the batch with the next dimension, to " + shapeText(shape) +
              "; gpipe keeps the batch in dimension 0: only a Reshape back to " +
              shapeText(held) + " or one keeping the merged rows is supported";
      return error;
    }
    y.shape = {held[0], held[1]};
    y.shape.insert(y.shape.end(), shape.begin() + 1, shape.end());
  } else {
    y.shape = shape;
    if (shape == x.shape) {
      g.bind(name, y);
      return {};
    }
    // [N, S, ...] to [N * S, ...]: held as it is, its rows merged.
    if (x.shape.size() >= 2 && !shape.empty() && shape[0] != x.shape[0] &&
        shape[0] == x.shape[0] * x.shape[1]) {
      y.layout = Layout::Rows;
      y.shape = {x.shape[0], x.shape[1]};
      y.shape.insert(y.shape.end(), shape.begin() + 1, shape.end());
      if (y.shape == x.shape) {
        g.bind(name, y);
        return {};
      }
    }
  }
  y.isConstant = false;
  y.ssa = g.define(name, y.shape, y.layout, x.isFloat, x.isBool);
  g.emit(y.ssa + " = gpipe.reshape " + x.ssa + " : " + typeOf(x) + " -> " +
         typeOf(y));
  return {};
}

std::string NodeConverter::reshape() {
  Value x;
  if (!operand(0, x, false))
    return error;
  if (x.layout != Layout::Rows && x.layout != Layout::Viewed &&
      !g.toOnnxLayout(x, error))
    return error;
  const std::vector<int64_t> from = onnxShape(x);
  const std::string &op = n.op_type();
  std::vector<int64_t> target;
  if (op == "Reshape") {
    const Constant *c = g.constant(input(1));
    if (!c || c->isFloat)
      return unsupported("its shape (input 1) must be an integer constant "
                         "(computed from shapes and constants)");
    target = reshaped(from, c->ints, g.intAttr("allowzero", 0) != 0);
    if (target.empty() && !c->ints.empty())
      return unsupported("its shape " + shapeText(c->ints) +
                         " does not apply to " + shapeText(from));
  } else { // Squeeze, Unsqueeze
    std::vector<int64_t> axes;
    if (g.opset >= 13) {
      if (!input(1).empty()) {
        const Constant *c = g.constant(input(1));
        if (!c || c->isFloat)
          return unsupported("its axes (input 1) must be an integer constant");
        axes = c->ints;
      }
    } else {
      axes = g.intsAttr("axes");
    }
    target = from;
    if (op == "Unsqueeze") {
      const int64_t rank = int64_t(from.size() + axes.size());
      for (int64_t &a : axes)
        if (!normalizeAxis(a, rank))
          return unsupported(axisError(a, rank));
      std::sort(axes.begin(), axes.end());
      for (int64_t a : axes)
        target.insert(target.begin() + a, 1);
    } else {
      const int64_t rank = int64_t(from.size());
      std::vector<bool> drop(from.size(), axes.empty());
      for (int64_t a : axes) {
        if (!normalizeAxis(a, rank))
          return unsupported(axisError(a, rank));
        if (from[size_t(a)] != 1)
          return unsupported("it squeezes axis " + std::to_string(a) +
                             " of size " + std::to_string(from[size_t(a)]));
        drop[size_t(a)] = true;
      }
      target.clear();
      for (size_t d = 0; d < from.size(); ++d)
        if (!(drop[d] && from[d] == 1))
          target.push_back(from[d]);
    }
  }
  if (x.layout == Layout::Rows && target == from) {
    g.bind(n.output(0), x);
    return {};
  }
  // Merged rows to other than the held shape or other rows ([N * H, S, D]
  // to [N, H * S, D]), and a viewed value: regrouped.
  if (x.layout == Layout::Viewed ||
      (x.layout == Layout::Rows && target != x.shape &&
       (target.empty() || target[0] != x.shape[0] * x.shape[1])))
    return viewReshape(x, target);
  emitReshape(x, target, n.output(0));
  return error;
}

std::string NodeConverter::transpose() {
  if (g.isWeightTransposeForMatMuls(n))
    return {}; // each MatMul reads the weight with transpose_rhs
  Value x;
  if (!operand(0, x, false))
    return error;
  std::vector<int64_t> perm = g.intsAttr("perm");
  const int64_t rank = int64_t(onnxShape(x).size());
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  if (!isPermutation(perm, rank))
      return unsupported("attribute perm " + shapeText(perm) +
                         " is not a permutation of " + std::to_string(rank) +
                         " axes");
  if (x.layout == Layout::Viewed || x.layout == Layout::Rows)
    return viewTranspose(x, perm);
  if (x.layout == Layout::Nhwc && perm == std::vector<int64_t>{0, 2, 3, 1}) {
    x.layout = Layout::Plain; // NCHW to NHWC: what gpipe holds
    g.bind(n.output(0), x);
    return {};
  }
  if (!g.toOnnxLayout(x, error))
    return error;
  // The batch moved (nn.MultiheadAttention's [S, N, D]): held as it is.
  if (perm[0] != 0 && g.isPerExample(input(0)))
    return viewTranspose(x, perm);
  std::vector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(x.shape[size_t(p)]);
  std::vector<int64_t> identity(static_cast<size_t>(rank));
  std::iota(identity.begin(), identity.end(), 0);
  if (perm == identity) {
    g.bind(n.output(0), x);
    return {};
  }
  std::string y = g.define(n.output(0), shape, Layout::Plain, x.isFloat);
  g.emit(y + " = gpipe.transpose " + x.ssa + " perm " + listText(perm) +
         " : " + typeOf(x) + " -> " + tensorType(shape, x.isFloat));
  return {};
}

std::string NodeConverter::expand() {
  Value x;
  if (!plainOperand(0, x))
    return error;
  const Constant *c = g.constant(input(1));
  if (!c || c->isFloat)
    return unsupported("its shape (input 1) must be an integer constant");
  // NumPy broadcasting of the input against the shape (a 1 keeps the
  // input's size).
  std::vector<int64_t> shape = c->ints;
  if (shape.size() < x.shape.size())
    shape.insert(shape.begin(), x.shape.size() - shape.size(), 1);
  std::vector<int64_t> padded = x.shape;
  padded.insert(padded.begin(), shape.size() - padded.size(), 1);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1)
      return unsupported("its shape " + shapeText(c->ints) +
                         " has a size below 1");
    if (shape[d] == 1)
      shape[d] = padded[d];
    else if (padded[d] != 1 && padded[d] != shape[d])
      return unsupported("it expands " + shapeText(x.shape) + " to " +
                         shapeText(c->ints) + ", which do not broadcast");
  }
  if (shape == x.shape) {
    g.bind(n.output(0), x);
    return {};
  }
  if (!asFloat(x))
    return error;
  emitBroadcast(x, shape, n.output(0));
  return error;
}

std::string NodeConverter::emitBroadcast(const Value &x,
                                         const std::vector<int64_t> &shape,
                                         const std::string &name) {
  // Size 1 stretched to the batch in dimension 0: per example (a class
  // token expanded to every example). A per-example x has the batch there.
  const bool overBatch = g.batch > 1 && x.shape.size() == shape.size() &&
                         !shape.empty() && x.shape[0] == 1 &&
                         shape[0] == g.batch;
  std::string y = g.define(name, shape);
  g.emit(y + " = gpipe.broadcast_to " + x.ssa + (overBatch ? " batch" : "") +
         " : " + typeOf(x) + " -> " + tensorType(shape, true));
  return y;
}

std::string NodeConverter::slice() {
  Value x;
  if (!plainOperand(0, x))
    return error;
  const int64_t rank = int64_t(x.shape.size());
  auto ints = [&](int i, std::vector<int64_t> &out) {
    if (input(i).empty())
      return true;
    const Constant *c = g.constant(input(i));
    if (!c || c->isFloat) {
      error = "its input " + std::to_string(i) + " ('" + input(i) +
              "') must be an integer constant";
      return false;
    }
    out = c->ints;
    return true;
  };
  std::vector<int64_t> starts, ends, axes, steps;
  if (g.opset < 10) {
    starts = g.intsAttr("starts");
    ends = g.intsAttr("ends");
    axes = g.intsAttr("axes");
  } else if (!ints(1, starts) || !ints(2, ends) || !ints(3, axes) ||
             !ints(4, steps)) {
    return error;
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return unsupported("its starts, ends, axes and steps differ in length");
  std::vector<int64_t> first(size_t(rank), 0), step(size_t(rank), 1),
      shape = x.shape;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes[i];
    if (!normalizeAxis(axis, rank))
      return unsupported(axisError(axes[i], rank));
    if (steps[i] <= 0)
      return unsupported("step " + std::to_string(steps[i]) + " on axis " +
                         std::to_string(axis) +
                         " is not supported (only positive steps)");
    const int64_t extent = x.shape[size_t(axis)];
    int64_t b = starts[i], e = ends[i];
    b += b < 0 ? extent : 0;
    e += e < 0 ? extent : 0;
    b = std::clamp<int64_t>(b, 0, extent);
    e = std::clamp<int64_t>(e, 0, extent);
    const int64_t size = e > b ? (e - b + steps[i] - 1) / steps[i] : 0;
    if (size == 0)
      return unsupported("it slices nothing of axis " + std::to_string(axis) +
                         " (an empty tensor)");
    first[size_t(axis)] = b;
    step[size_t(axis)] = steps[i];
    shape[size_t(axis)] = size;
  }
  if (shape == x.shape) {
    g.bind(n.output(0), x);
    return {};
  }
  if (!asFloat(x))
    return error;
  emitSlice(x, first, step, shape, n.output(0));
  return {};
}

void NodeConverter::emitSlice(const Value &x,
                              const std::vector<int64_t> &starts,
                              const std::vector<int64_t> &steps,
                              const std::vector<int64_t> &shape,
                              const std::string &name) {
  std::string y = g.define(name, shape);
  g.emit(y + " = gpipe.slice " + x.ssa + " starts " + listText(starts) +
         " steps " + listText(steps) + " : " + typeOf(x) + " -> " +
         tensorType(shape, true));
}

std::string NodeConverter::split() {
  Value x;
  if (!plainOperand(0, x) || !asFloat(x))
    return error;
  const int64_t rank = int64_t(x.shape.size());
  int64_t axis = g.intAttr("axis", 0);
  if (!normalizeAxis(axis, rank))
    return unsupported(axisError(axis, rank));
  std::vector<int64_t> sizes;
  if (g.opset >= 13 && !input(1).empty()) {
    if (g.hasAttr("num_outputs"))
      return unsupported("it has both a split (input 1) and the attribute "
                         "num_outputs; ONNX allows one of them");
    const Constant *c = g.constant(input(1));
    if (!c || c->isFloat)
      return unsupported("its split (input 1) must be an integer constant");
    sizes = c->ints;
  } else if (g.opset < 13) {
    sizes = g.intsAttr("split");
  }
  const int64_t parts = n.output_size(), extent = x.shape[size_t(axis)];
  if (g.hasAttr("num_outputs") && g.intAttr("num_outputs", 0) != parts)
    return unsupported("attribute num_outputs = " +
                       std::to_string(g.intAttr("num_outputs", 0)) +
                       " differs from its " + std::to_string(parts) +
                       " outputs");
  if (!splitSizes(sizes, extent, parts))
    return unsupported("its sizes " + shapeText(sizes) + " do not split " +
                       std::to_string(extent) + " into " +
                       std::to_string(parts) + " outputs");
  int64_t offset = 0;
  for (int64_t p = 0; p < parts; ++p) {
    std::vector<int64_t> starts(size_t(rank), 0), steps(size_t(rank), 1);
    std::vector<int64_t> shape = x.shape;
    starts[size_t(axis)] = offset;
    shape[size_t(axis)] = sizes[size_t(p)];
    offset += sizes[size_t(p)];
    if (n.output(int(p)).empty())
      continue;
    if (sizes[size_t(p)] == 0)
      return unsupported("its output " + std::to_string(p) + " is empty");
    emitSlice(x, starts, steps, shape, n.output(int(p)));
  }
  return {};
}

std::string NodeConverter::sequenceAt() {
  const onnx::NodeProto *split = g.producerOf(input(0));
  if (!split || split->op_type() != "SplitToSequence")
    return unsupported("input 0 ('" + input(0) +
                       "') must be a SplitToSequence's sequence");
  const Constant *position = g.constant(input(1));
  if (!position || position->isFloat || position->ints.size() != 1)
    return unsupported("its position (input 1) must be an integer constant "
                       "scalar");
  Value x;
  if (!plainOperand(0, x) || !asFloat(x))
    return error;
  const int64_t rank = int64_t(x.shape.size());
  int64_t axis = 0, keepDims = 1;
  for (const onnx::AttributeProto &a : split->attribute()) {
    if (a.name() == "axis")
      axis = a.i();
    if (a.name() == "keepdims")
      keepDims = a.i();
  }
  if (!normalizeAxis(axis, rank))
    return unsupported("its sequence's " + axisError(axis, rank));
  // The parts: sizes given, chunks of a scalar size (the last smaller), or
  // every index alone (then squeezed unless keepdims).
  const int64_t extent = x.shape[size_t(axis)];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (split->input_size() > 1 && !split->input(1).empty()) {
    const Constant *c = g.constant(split->input(1));
    if (!c || c->isFloat)
      return unsupported("its sequence's split (input 1) must be an integer "
                         "constant");
    if (c->dims.empty()) {
      const int64_t chunk = c->ints.empty() ? 0 : c->ints[0];
      if (chunk <= 0)
        return unsupported("its sequence's split size " +
                           std::to_string(chunk) + " must be positive");
      for (int64_t at = 0; at < extent; at += chunk)
        sizes.push_back(std::min(chunk, extent - at));
    } else {
      sizes = c->ints;
    }
  } else {
    sizes.assign(size_t(extent), 1);
    squeeze = keepDims == 0;
  }
  if (!splitSizes(sizes, extent, int64_t(sizes.size())))
    return unsupported("its sequence's sizes " + shapeText(sizes) +
                       " do not split " + std::to_string(extent));
  int64_t at = position->ints[0];
  const int64_t parts = int64_t(sizes.size());
  if (at < -parts || at >= parts)
    return unsupported("its position " + std::to_string(at) +
                       " is outside [" + std::to_string(-parts) + ", " +
                       std::to_string(parts) + ")");
  at += at < 0 ? parts : 0;
  std::vector<int64_t> starts(size_t(rank), 0), steps(size_t(rank), 1);
  for (int64_t p = 0; p < at; ++p)
    starts[size_t(axis)] += sizes[size_t(p)];
  std::vector<int64_t> shape = x.shape;
  shape[size_t(axis)] = sizes[size_t(at)];
  if (shape[size_t(axis)] == 0)
    return unsupported("its part " + std::to_string(at) + " is empty");
  if (!squeeze) {
    emitSlice(x, starts, steps, shape, n.output(0));
    return {};
  }
  // The slice under a name of the importer's own (no ONNX value has '#').
  emitSlice(x, starts, steps, shape, n.output(0) + "#part");
  Value sliced = *g.value(n.output(0) + "#part");
  std::vector<int64_t> squeezed = shape;
  squeezed.erase(squeezed.begin() + axis);
  return emitReshape(sliced, squeezed, n.output(0));
}

std::string NodeConverter::concat() {
  std::vector<Value> parts(size_t(n.input_size()));
  for (int i = 0; i < n.input_size(); ++i)
    if (!plainOperand(i, parts[size_t(i)]) || !asFloat(parts[size_t(i)]))
      return error;
  const int64_t rank = int64_t(parts[0].shape.size());
  int64_t axis = g.intAttr("axis", 0);
  if (!normalizeAxis(axis, rank))
    return unsupported(axisError(axis, rank));
  if (parts.size() == 1) {
    g.bind(n.output(0), parts[0]);
    return {};
  }
  std::vector<int64_t> shape = parts[0].shape;
  shape[size_t(axis)] = 0;
  std::string operands, types;
  for (const Value &p : parts) {
    if (int64_t(p.shape.size()) != rank)
      return unsupported("its inputs have ranks " + std::to_string(rank) +
                         " and " + std::to_string(p.shape.size()));
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && p.shape[size_t(d)] != parts[0].shape[size_t(d)])
        return unsupported("its inputs " + shapeText(parts[0].shape) +
                           " and " + shapeText(p.shape) +
                           " differ outside axis " + std::to_string(axis));
    shape[size_t(axis)] += p.shape[size_t(axis)];
    operands += (operands.empty() ? "" : ", ") + p.ssa;
    types += (types.empty() ? "" : ", ") + typeOf(p);
  }
  std::string y = g.define(n.output(0), shape);
  g.emit(y + " = gpipe.concat " + operands + " axis " + std::to_string(axis) +
         " : " + types + " -> " + tensorType(shape, true));
  return {};
}

std::string NodeConverter::generalGather() {
  if (const Value *v = g.value(input(0)); v && v->layout == Layout::Viewed) {
    // One constant index (readsViews): the held value sliced.
    Value x;
    if (!operand(0, x, false))
      return error;
    const int64_t rank = int64_t(onnxShape(x).size());
    int64_t axis = g.intAttr("axis", 0);
    if (!normalizeAxis(axis, rank))
      return unsupported(axisError(axis, rank));
    const int64_t extent = onnxShape(x)[size_t(axis)],
                  index = g.constant(input(1))->ints.at(0);
    if (index < -extent || index >= extent)
      return unsupported(indexOutside(index, extent, axis));
    return viewGather(x, axis, index);
  }
  Value x;
  if (!plainOperand(0, x) || !asFloat(x))
    return error;
  const int64_t rank = int64_t(x.shape.size());
  int64_t axis = g.intAttr("axis", 0);
  if (!normalizeAxis(axis, rank))
    return unsupported(axisError(axis, rank));
  const int64_t extent = x.shape[size_t(axis)];
  std::vector<int64_t> indexDims, shape(x.shape.begin(),
                                        x.shape.begin() + axis);
  Value indices;
  bool batched = false;
  std::vector<int64_t> fullIndexDims;
  if (const Constant *c = g.constant(input(1))) {
    if (c->isFloat)
      return unsupported("its indices are float");
    // Indices that repeat along an axis (token types of a constant, a
    // position per example) are gathered once and broadcast.
    indexDims = c->dims;
    std::vector<float> values(c->ints.begin(), c->ints.end());
    shrinkUniform(indexDims, values);
    Constant flat = *c;
    flat.ints.assign(values.begin(), values.end());
    flat.dims = {int64_t(values.size())};
    fullIndexDims = c->dims;
    for (int64_t i : c->ints)
      if (i < -extent || i >= extent)
        return unsupported(indexOutside(i, extent, axis));
    g.frozenConstant(input(1), flat, flat.dims, std::move(values), indices);
  } else {
    if (!plainOperand(1, indices))
      return error;
    if (indices.isFloat || indices.isBool)
      return unsupported("its indices are not integers");
    indexDims = indices.shape;
    // Per-example indices [N, k] into a per-example value along an axis
    // after the batch: each example reads its own rows.
    if (indexDims.size() != 2 || axis == 0 || indexDims[0] != x.shape[0])
      return unsupported(
          "computed indices " + shapeText(indexDims) + " along axis " +
          std::to_string(axis) + " of " + shapeText(x.shape) +
          " are supported only as [batch, k] along an axis after the batch");
    batched = true;
  }
  // gpipe's gather takes 1-D indices (or [batch, k] batched): N-D constant
  // indices are flattened, and the result reshaped to ONNX's.
  const int64_t count =
      batched ? indexDims[1]
              : std::accumulate(indexDims.begin(), indexDims.end(), int64_t(1),
                                std::multiplies<int64_t>());
  std::vector<int64_t> gathered = x.shape;
  gathered[size_t(axis)] = count;
  shape.insert(shape.end(), batched ? indexDims.begin() + 1 : indexDims.begin(),
               indexDims.end());
  shape.insert(shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  Value result = x;
  result.isConstant = false;
  result.shape = gathered;
  std::vector<int64_t> full = shape;
  if (!fullIndexDims.empty() && fullIndexDims != indexDims) {
    full.assign(x.shape.begin(), x.shape.begin() + axis);
    full.insert(full.end(), fullIndexDims.begin(), fullIndexDims.end());
    full.insert(full.end(), x.shape.begin() + axis + 1, x.shape.end());
  }
  const std::string name =
      gathered == full ? n.output(0) : n.output(0) + "#gathered";
  result.ssa = g.define(name, gathered);
  result.origin = name;
  g.emit(result.ssa + " = gpipe.gather " + x.ssa + "[" + indices.ssa +
         "] axis " + std::to_string(axis) + (batched ? " batched" : "") +
         " : " + typeOf(x) + ", " + typeOf(indices) + " -> " +
         typeOf(result));
  if (full != shape) {
    const std::string reshapedName = n.output(0) + "#unstretched";
    if (!emitReshape(result, shape, reshapedName).empty())
      return error;
    Value unstretched = *g.value(reshapedName);
    unstretched.ssa = g.use(reshapedName);
    emitBroadcast(unstretched, full, n.output(0));
  } else if (gathered != shape) {
    emitReshape(result, shape, n.output(0));
  }
  return error;
}

std::string NodeConverter::matmul() {
  Value a, b;
  // MatMul(x, Transpose(W)): W read as it is, transposed by the GEMM.
  const onnx::NodeProto *transposed = g.producerOf(input(1));
  const bool transposeRhs =
      transposed && g.isWeightTransposeForMatMuls(*transposed);
  if (transposeRhs) {
    const Constant *w = g.constant(transposed->input(0));
    b.shape = w->dims;
    b.ssa = g.param(transposed->input(0), w->dims, w->floats);
    if (b.ssa.empty())
      return unsupported("initializer '" + transposed->input(0) +
                         "' is read by more than one layer, in different "
                         "layouts; a tied weight is read alike by each "
                         "(--untie-weights imports a copy per layer)");
    std::swap(b.shape[0], b.shape[1]); // as the product reads it
  }
  // A value whose batch a Transpose moved, by a matrix (a weight, its
  // Transpose, a constant): its held columns.
  const Value *held = g.value(input(0));
  if ((transposeRhs || isMatrix(input(1))) && held &&
      held->layout == Layout::Viewed) {
    Value viewed;
    if (!operand(0, viewed, false) ||
        (!transposeRhs && !operand(1, b, false)) || !viewColumns(viewed))
      return error;
    if (viewed.layout == Layout::Viewed) {
      std::vector<int64_t> shape = viewed.shape;
      shape.back() = b.shape.back();
      std::vector<int64_t> stored = b.shape;
      if (transposeRhs)
        std::swap(stored[0], stored[1]);
      std::string y = g.defineLike(n.output(0), shape, viewed);
      g.emit(y + " = gpipe.matmul " + viewed.ssa + ", " + b.ssa +
             (transposeRhs ? " transpose_rhs" : "") + " : (" +
             typeOf(viewed) + ", " + tensorType(stored, true) + ") -> " +
             tensorType(shape, true));
      return {};
    }
  }
  if (!plainOperand(0, a) || (!transposeRhs && !plainOperand(1, b)) ||
      !asFloat(a) || !asFloat(b))
    return error;
  if (a.shape.size() < 2 || b.shape.size() < 2)
    return unsupported("operands " + shapeText(a.shape) + " and " +
                       shapeText(b.shape) +
                       ": gpipe's matmul takes matrices (rank >= 2)");
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(),
                cols = b.shape.back();
  if (b.shape[b.shape.size() - 2] != k)
    return unsupported("operands " + shapeText(a.shape) + " and " +
                       shapeText(b.shape) + " do not contract (" +
                       std::to_string(k) + " against " +
                       std::to_string(b.shape[b.shape.size() - 2]) + ")");
  std::vector<int64_t> batchA(a.shape.begin(), a.shape.end() - 2),
      batchB(b.shape.begin(), b.shape.end() - 2);
  std::vector<int64_t> shape = batchA.size() >= batchB.size() ? batchA : batchB;
  const std::vector<int64_t> &shorter =
      batchA.size() >= batchB.size() ? batchB : batchA;
  for (size_t i = 0; i < shorter.size(); ++i) {
    int64_t &o = shape[shape.size() - shorter.size() + i];
    if (o != shorter[i] && o != 1 && shorter[i] != 1)
      return unsupported("the batch dimensions of " + shapeText(a.shape) +
                         " and " + shapeText(b.shape) + " do not broadcast");
    o = o == 1 ? shorter[i] : o;
  }
  shape.push_back(m);
  shape.push_back(cols);
  std::string y = g.define(n.output(0), shape);
  std::vector<int64_t> stored = b.shape;
  if (transposeRhs)
    std::swap(stored[0], stored[1]);
  g.emit(y + " = gpipe.matmul " + a.ssa + ", " + b.ssa +
         (transposeRhs ? " transpose_rhs" : "") + " : (" + typeOf(a) + ", " +
         tensorType(stored, true) + ") -> " + tensorType(shape, true));
  return {};
}
