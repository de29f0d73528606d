//===- OnnxViews.cpp - Values whose batch a Transpose moved ---------------===//
//
// gpipe keeps the batch in dimension 0 of every value: that is the dimension
// the pipeline splits into micro-batches. PyTorch's nn.MultiheadAttention
// transposes its input to [S, N, D], projects it, splits the heads into
// [S, N * H, D / H] and transposes that to [N * H, S, D / H] before the
// scores; the output goes the same way back.
//
// Such a value is held with its batch in front and viewed: each ONNX
// dimension is a group of held dimensions (ViewGroups). Transposes and
// reshapes change the groups and write nothing, or at most split a held
// dimension; a Gather of one index and a dense layer read the held value.
// Any other op reads the value in ONNX's layout, which exists where the
// batch leads ONNX's dimension 0: one transpose (and a reshape) then
// writes it. Where the batch is elsewhere, the op is refused.
//
//===----------------------------------------------------------------------===//

#include "NodeConverter.h"

#include <algorithm>
#include <numeric>
#include <set>

using namespace gpipe;
using namespace gpipe::onnx_import;

namespace {

/// The groups a Plain or Rows value is: its held dimensions one by one (the
/// first two together in Rows).
ViewGroups groupsOf(const Value &v) {
  if (v.layout == Layout::Viewed)
    return v.viewGroups;
  ViewGroups groups;
  size_t d = 0;
  if (v.layout == Layout::Rows) {
    groups.push_back({0, 1});
    d = 2;
  }
  for (; d < v.shape.size(); ++d)
    groups.push_back({int64_t(d)});
  return groups;
}

/// The held dimensions in ONNX's order.
std::vector<int64_t> orderOf(const ViewGroups &groups) {
  std::vector<int64_t> order;
  for (const std::vector<int64_t> &group : groups)
    order.insert(order.end(), group.begin(), group.end());
  return order;
}

std::string groupsText(const ViewGroups &groups) {
  std::string text;
  for (const std::vector<int64_t> &group : groups)
    text += shapeText(group);
  return text;
}

std::vector<int64_t> permutedShape(const std::vector<int64_t> &shape,
                                   const std::vector<int64_t> &perm) {
  std::vector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(shape[size_t(p)]);
  return out;
}

bool isIdentity(const std::vector<int64_t> &perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i))
      return false;
  return true;
}

/// Renumbers `groups` after held dimension `d` was split in two: d stays
/// the outer part, d + 1 is the inner one, and later dimensions move up.
void splitHeld(ViewGroups &groups, int64_t d) {
  for (std::vector<int64_t> &group : groups) {
    std::vector<int64_t> out;
    for (int64_t h : group) {
      out.push_back(h > d ? h + 1 : h);
      if (h == d)
        out.push_back(d + 1);
    }
    group = std::move(out);
  }
}

/// Where a Viewed value whose batch does not lead holds it, for messages.
std::string batchPlace(const Value &v) {
  size_t at = 0;
  while (at < v.viewGroups.size() &&
         std::find(v.viewGroups[at].begin(), v.viewGroups[at].end(), 0) ==
             v.viewGroups[at].end())
    ++at;
  return at == 0 ? "holds the batch inside dimension 0, after another "
                   "dimension (a Transpose moved it there)"
                 : "holds the batch in dimension " + std::to_string(at) +
                       " (a Transpose moved it there)";
}

} // namespace

void GraphImporter::setView(const std::string &name, ViewGroups groups) {
  Value &v = values.at(name);
  v.columnOrder.clear();
  const std::vector<int64_t> order = orderOf(groups);
  bool singles = true;
  for (size_t j = 0; j < groups.size(); ++j)
    singles = singles && groups[j].size() == 1;
  if (isIdentity(order) && order.size() == v.shape.size() && singles) {
    v.layout = Layout::Plain;
    v.viewGroups.clear();
    return;
  }
  bool rows = isIdentity(order) && order.size() == v.shape.size() &&
              !groups.empty() && groups[0] == std::vector<int64_t>{0, 1};
  for (size_t j = 1; j < groups.size() && rows; ++j)
    rows = groups[j].size() == 1;
  if (rows) {
    v.layout = Layout::Rows;
    v.viewGroups.clear();
    return;
  }
  v.layout = Layout::Viewed;
  v.viewGroups = std::move(groups);
}

bool GraphImporter::materializeView(Value &v, std::string &error) {
  const std::string key = "view:" + v.ssa + groupsText(v.viewGroups);
  auto cached = layerCache.find(key);
  if (cached != layerCache.end()) {
    v = cached->second;
    return true;
  }
  const ViewGroups &groups = v.viewGroups;
  const std::vector<int64_t> onnx = onnxShape(v);
  if (onnx.empty()) {
    error = "its input is a per-example value viewed as a scalar";
    return false;
  }
  // ONNX's dimension 0 must start with the batch (or with dimensions of
  // size 1 before it).
  bool batchLeads = !groups.empty();
  if (batchLeads) {
    auto batch = std::find(groups[0].begin(), groups[0].end(), 0);
    batchLeads = batch != groups[0].end();
    for (auto d = groups[0].begin(); batchLeads && d != batch; ++d)
      batchLeads = v.shape[size_t(*d)] == 1;
  }
  if (!batchLeads) {
    error = "its input " + shapeText(onnx) + " " + batchPlace(v) +
            ", and this op reads its input with "
            "the batch in dimension 0, as gpipe keeps it; only Transpose, "
            "Reshape, Squeeze, Unsqueeze, element-wise ops, Gather of one "
            "index and MatMul or Gemm by a matrix read it as it is";
    return false;
  }
  std::vector<int64_t> order = orderOf(groups);
  order.erase(std::find(order.begin(), order.end(), 0));
  order.insert(order.begin(), 0);
  // [N, (rest of ONNX's dimension 0), ONNX's others]: Rows where the batch
  // shares dimension 0.
  const int64_t batch = v.shape[0], rest = onnx[0] / batch;
  const Layout layout = rest != 1 ? Layout::Rows : Layout::Plain;
  std::vector<int64_t> held = {batch};
  if (rest != 1)
    held.push_back(rest);
  held.insert(held.end(), onnx.begin() + 1, onnx.end());
  Value out = v;
  out.viewGroups.clear();
  const std::string name = v.ssa + "#unviewed" + groupsText(groups);
  if (!isIdentity(order)) {
    out.shape = permutedShape(v.shape, order);
    out.origin = name + "#t";
    out.ssa = define(out.origin, out.shape, layout, v.isFloat, v.isBool);
    emit(out.ssa + " = gpipe.transpose " + v.ssa + " perm " +
         shapeText(order) + " : " + typeOf(v) + " -> " + typeOf(out));
  }
  if (held != out.shape) {
    Value reshaped = out;
    reshaped.shape = held;
    reshaped.origin = name;
    reshaped.ssa = define(name, held, layout, v.isFloat, v.isBool);
    emit(reshaped.ssa + " = gpipe.reshape " + out.ssa + " : " + typeOf(out) +
         " -> " + typeOf(reshaped));
    out = reshaped;
  }
  out.layout = layout;
  layerCache[key] = out;
  v = out;
  return true;
}

bool GraphImporter::unview(const std::string &name, std::string &error) {
  const Value *held = value(name);
  if (!held || held->layout != Layout::Viewed)
    return true;
  Value v = *held;
  v.ssa = use(name);
  if (!materializeView(v, error))
    return false;
  bind(name, v);
  return true;
}

std::string GraphImporter::unviewOutputs() {
  for (const onnx::ValueInfoProto &output : graph.output()) {
    const Value *v = value(output.name());
    if (!v || v->layout != Layout::Viewed)
      continue;
    std::string error;
    if (!unview(output.name(), error))
      return "graph output '" + output.name() + "' " +
             shapeText(onnxShape(*v)) + " " + batchPlace(*v) +
             "; gpipe's outputs keep the batch in dimension 0";
  }
  return {};
}

bool NodeConverter::isMatrix(const std::string &name) {
  if (const Constant *c = g.constant(name))
    return c->isFloat && c->dims.size() == 2;
  const Value *v = g.value(name); // computed from weights alone (a slice)
  return v && !g.isPerExample(name) && v->layout == Layout::Plain &&
         v->isFloat && v->shape.size() == 2;
}

bool NodeConverter::readsViews() {
  const std::string &op = n.op_type();
  // Element-wise ops (with constants that vary along single held
  // dimensions, or values viewed alike: alignLayouts).
  static const std::set<std::string> elementwise = {
      "Add", "Sub",  "Mul", "Div", "Pow",  "Max",     "Min",
      "Abs", "Cos",  "Erf", "Exp", "Log",  "Neg",     "Sin",
      "Relu", "Tanh", "Sigmoid", "Sqrt", "Reciprocal", "Gelu"};
  if (elementwise.count(op) || op == "Transpose" || op == "Reshape" ||
      op == "Squeeze" || op == "Unsqueeze" || op == "Identity" ||
      op == "Gemm")
    return true;
  if (op == "MatMul") { // by a matrix: a weight, its Transpose, a constant
    const onnx::NodeProto *transposed = g.producerOf(input(1));
    return g.value(input(0)) &&
           (isMatrix(input(1)) ||
            (transposed && g.isWeightTransposeForMatMuls(*transposed)));
  }
  if (op == "Gather") { // one constant index
    const Constant *c = g.constant(input(1));
    return c && !c->isFloat && c->dims.empty() && c->ints.size() == 1;
  }
  return false;
}

std::string NodeConverter::viewTranspose(const Value &x,
                                         const std::vector<int64_t> &perm) {
  const ViewGroups groups = groupsOf(x);
  ViewGroups out;
  for (int64_t p : perm)
    out.push_back(groups[size_t(p)]);
  g.bind(n.output(0), x);
  g.setView(n.output(0), std::move(out));
  return {};
}

std::string NodeConverter::viewReshape(const Value &x,
                                       const std::vector<int64_t> &target) {
  ViewGroups groups = groupsOf(x);
  std::vector<int64_t> held = x.shape;
  for (int64_t d : target)
    if (d < 1)
      return unsupported("its shape " + shapeText(target) +
                         " has a dimension below 1");
  for (int64_t d : held)
    if (d < 1)
      return unsupported("its input " + shapeText(onnxShape(x)) +
                         " has no elements");
  // Each target dimension takes the next held dimensions (in ONNX's order)
  // whose sizes multiply to it; a held dimension that a target dimension
  // ends inside is split first. Held dimensions of size 1 (but the batch)
  // join the group before them.
  ViewGroups out;
  for (bool split = true; split;) {
    split = false;
    out.assign(target.size(), {});
    const std::vector<int64_t> order = orderOf(groups);
    std::vector<int64_t> sized, free;
    for (int64_t d : order)
      (held[size_t(d)] == 1 && d != 0 ? free : sized).push_back(d);
    size_t next = 0;
    for (size_t j = 0; j < target.size() && !split; ++j) {
      int64_t size = 1;
      while (size < target[j]) {
        if (next == sized.size())
          return unsupported("its shape " + shapeText(target) +
                             " does not regroup " +
                             shapeText(onnxShape(x)));
        const int64_t d = sized[next], extent = held[size_t(d)];
        if (target[j] % (size * extent) == 0) {
          out[j].push_back(d);
          size *= extent;
          ++next;
          continue;
        }
        const int64_t outer = target[j] / size;
        if (target[j] % size != 0 || extent % outer != 0)
          return unsupported("its shape " + shapeText(target) +
                             " cuts across the dimensions of " +
                             shapeText(onnxShape(x)) + " (held as " +
                             shapeText(x.shape) + ")");
        if (d == 0)
          return unsupported("it splits the batch (reshaping " +
                             shapeText(onnxShape(x)) + " to " +
                             shapeText(target) +
                             "); gpipe keeps the batch whole in dimension 0");
        held[size_t(d)] = outer;
        held.insert(held.begin() + d + 1, extent / outer);
        splitHeld(groups, d);
        split = true;
        break;
      }
    }
    if (split)
      continue;
    for (; next < sized.size(); ++next) {
      if (held[size_t(sized[next])] != 1)
        return unsupported("its shape " + shapeText(target) +
                           " does not regroup " + shapeText(onnxShape(x)));
      free.push_back(sized[next]); // a batch of 1
    }
    if (out.empty())
      return unsupported("it reshapes a per-example value to a scalar");
    // Dimensions of size 1 join the group of the one before them.
    for (int64_t d : free) {
      int64_t anchor = -1;
      for (int64_t o : order) {
        if (o == d)
          break;
        if (std::find(free.begin(), free.end(), o) == free.end())
          anchor = o;
      }
      auto group = out.begin();
      if (anchor >= 0)
        while (std::find(group->begin(), group->end(), anchor) == group->end())
          ++group;
      auto at = anchor < 0 ? group->begin()
                           : std::find(group->begin(), group->end(), anchor) + 1;
      group->insert(at, d);
    }
  }
  Value y = x;
  if (held != x.shape) {
    y.shape = held;
    y.ssa = g.define(n.output(0), held, Layout::Viewed, x.isFloat, x.isBool);
    g.emit(y.ssa + " = gpipe.reshape " + x.ssa + " : " + typeOf(x) + " -> " +
           typeOf(y));
  } else {
    g.bind(n.output(0), x);
  }
  g.setView(n.output(0), std::move(out));
  return {};
}

std::string NodeConverter::viewGather(const Value &x, int64_t axis,
                                      int64_t index) {
  ViewGroups groups = groupsOf(x);
  // The gathered dimension must be one held dimension, not the batch.
  int64_t held = -1;
  for (int64_t d : groups[size_t(axis)])
    if (x.shape[size_t(d)] != 1)
      held = held < 0 && d != 0 ? d : -2;
  if (held < 0) {
    if (!g.unview(input(0), error))
      return error;
    return generalGather();
  }
  std::vector<int64_t> starts(x.shape.size(), 0), steps(x.shape.size(), 1);
  const int64_t extent = x.shape[size_t(held)];
  starts[size_t(held)] = index < 0 ? index + extent : index;
  std::vector<int64_t> shape = x.shape;
  shape[size_t(held)] = 1;
  emitSlice(x, starts, steps, shape, n.output(0));
  // The sliced dimension (now of size 1) joins a neighbouring group.
  std::vector<int64_t> gone = groups[size_t(axis)];
  groups.erase(groups.begin() + axis);
  if (groups.empty())
    return unsupported("it gathers from a value of one dimension");
  std::vector<int64_t> &host =
      groups[size_t(axis > 0 ? axis - 1 : 0)];
  host.insert(axis > 0 ? host.end() : host.begin(), gone.begin(), gone.end());
  g.setView(n.output(0), std::move(groups));
  return {};
}

bool NodeConverter::viewColumns(Value &x) {
  ViewGroups groups = x.viewGroups;
  if (groups.empty() || groups.back().empty())
    return g.toOnnxLayout(x, error);
  const std::vector<int64_t> columns = groups.back();
  if (std::find(columns.begin(), columns.end(), 0) != columns.end()) {
    error = "its input " + shapeText(onnxShape(x)) +
            " holds the batch in its last dimension (a Transpose moved it "
            "there); a dense layer multiplies the last dimension";
    return false;
  }
  const size_t rank = x.shape.size();
  // Held as [the other dimensions in held order, the columns in ONNX's].
  std::vector<int64_t> order;
  for (size_t d = 0; d < rank; ++d)
    if (std::find(columns.begin(), columns.end(), int64_t(d)) ==
        columns.end())
      order.push_back(int64_t(d));
  const size_t kept = order.size();
  order.insert(order.end(), columns.begin(), columns.end());
  if (isIdentity(order) && columns.size() == 1)
    return true;
  std::vector<int64_t> position(rank);
  for (size_t i = 0; i < rank; ++i)
    position[size_t(order[i])] = int64_t(i);
  Value moved = x;
  const std::string name = n.output(0) + "#columns";
  if (!isIdentity(order)) {
    moved.shape = permutedShape(x.shape, order);
    moved.ssa = g.define(name + "#t", moved.shape, Layout::Plain, x.isFloat);
    g.emit(moved.ssa + " = gpipe.transpose " + x.ssa + " perm " +
           shapeText(order) + " : " + typeOf(x) + " -> " + typeOf(moved));
  }
  std::vector<int64_t> held(moved.shape.begin(), moved.shape.begin() + kept);
  held.push_back(onnxShape(x).back());
  for (std::vector<int64_t> &group : groups)
    for (int64_t &d : group)
      d = position[size_t(d)];
  groups.back() = {int64_t(kept)};
  if (held != moved.shape) {
    Value merged = moved;
    merged.shape = held;
    merged.ssa = g.define(name, held, Layout::Plain, x.isFloat);
    g.emit(merged.ssa + " = gpipe.reshape " + moved.ssa + " : " +
           typeOf(moved) + " -> " + typeOf(merged));
    moved = merged;
  }
  moved.layout = Layout::Viewed;
  moved.viewGroups = std::move(groups);
  x = moved;
  return true;
}
