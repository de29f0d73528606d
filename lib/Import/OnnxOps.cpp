//===- OnnxOps.cpp - One ONNX node as gpipe ops ---------------------------===//
//
// Each supported op type maps onto gpipe's ops, checking every attribute it
// does not implement (an unsupported value is an error that names it).
// Weights are initializers, moved into gpipe's layouts:
//   Gemm/MatMul B [K, N] (Gemm's transB: [N, K], transposed);
//   Conv W [F, C/g, KH, KW] -> [KH, KW, C/g, F];
// and a dense weight that meets the columns of a flattened NHWC image has
// its rows reordered to match them.
//
//===----------------------------------------------------------------------===//

#include "NodeConverter.h"
#include "OnnxPatterns.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

using namespace gpipe;
using namespace gpipe::onnx_import;

const std::vector<std::string> &gpipe::supportedOnnxOps() {
  static const std::vector<std::string> ops = [] {
    // The layers, the general ops, and the ops the importer only folds.
    std::vector<std::string> all = {
        "Abs",         "Add",           "And",
        "AveragePool", "BatchNormalization", "Cast",
        "CastLike",    "Clip",          "Concat",
        "Constant",    "Gelu",          "SequenceAt",
        "SplitToSequence",
        "Conv",        "Cos",           "Div",
        "Dropout",     "Equal",         "Erf",
        "Exp",         "Expand",        "Flatten",
        "Gather",      "Gemm",          "GlobalAveragePool",
        "Greater",     "GreaterOrEqual", "Identity",
        "LayerNormalization", "Less",   "LessOrEqual",
        "Log",         "MatMul",        "Max",
        "MaxPool",     "Min",           "Mul",
        "Neg",         "Not",           "Or",
        "Pow",         "Reciprocal",    "ReduceMax",
        "ReduceMean",  "ReduceSum",     "Relu",
        "Reshape",     "Sigmoid",       "Sin",
        "Slice",       "Softmax",       "SoftmaxCrossEntropyLoss",
        "Split",       "Sqrt",          "Squeeze",
        "Sub",         "Tanh",          "Transpose",
        "Unsqueeze",   "Where"};
    all.insert(all.end(), foldOnlyOps().begin(), foldOnlyOps().end());
    std::sort(all.begin(), all.end());
    return all;
  }();
  return ops;
}

namespace {

std::string supportedOpsText() {
  std::string all;
  for (const std::string &name : supportedOnnxOps())
    all += (all.empty() ? "" : ", ") + name;
  return all;
}

/// [rows, cols] row-major, transposed.
std::vector<float> transposed(const std::vector<float> &m, int64_t rows,
                              int64_t cols) {
  std::vector<float> t(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t[size_t(c * rows + r)] = m[size_t(r * cols + c)];
  return t;
}

} // namespace

std::string gpipe::onnx_import::number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", v);
  std::string s = text;
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

std::string gpipe::onnx_import::unsupportedOp(const onnx::NodeProto &n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return "op domain '" + n.domain() +
           "' is not supported; gpipe maps the default domain's ops: " +
           supportedOpsText();
  const std::vector<std::string> &ops = supportedOnnxOps();
  if (!std::binary_search(ops.begin(), ops.end(), n.op_type()))
    return "op type '" + n.op_type() + "' is not supported; gpipe maps " +
           supportedOpsText();
  return {};
}

std::string NodeConverter::run() {
  const std::string &op = n.op_type();
  std::string unsupported = unsupportedOp(n);
  if (!unsupported.empty())
    return unsupported;
  if (isFoldOnlyOp(op))
    return "op type '" + op +
           "' is evaluated only from constants and shapes, and an input of "
           "this node is computed from the model's inputs";
  if (!readsViews())
    for (int i = 0; i < n.input_size(); ++i)
      if (!g.unview(input(i), error))
        return error;
  if (op == "Relu")
    return unary("relu");
  if (op == "Tanh")
    return unary("tanh");
  if (op == "Gemm")
    return dense(true);
  if (op == "MatMul")
    return g.isTrainable(input(1)) && g.value(input(0)) ? dense(false)
                                                          : matmul();
  if (op == "Add")
    return add();
  if (op == "Softmax")
    return softmax();
  // A SplitToSequence's sequence is no tensor: each SequenceAt slices its
  // part of the input, which the sequence names.
  if (op == "Identity" || op == "SplitToSequence") {
    Value v;
    if (!operand(0, v, false))
      return error;
    g.bind(n.output(0), v);
    return {};
  }
  static const std::map<std::string, const char *> unaryOps = {
      {"Abs", "abs"},   {"Cos", "cos"},         {"Erf", "erf"},
      {"Exp", "exp"},   {"Log", "log"},         {"Neg", "neg"},
      {"Sin", "sin"},   {"Reciprocal", "reciprocal"},
      {"Sigmoid", "sigmoid"}, {"Sqrt", "sqrt"}};
  if (auto it = unaryOps.find(op); it != unaryOps.end())
    return elementwiseUnary(it->second);
  static const std::map<std::string, const char *> binaryOps = {
      {"Sub", "sub"}, {"Mul", "mul"}, {"Div", "div"},
      {"Pow", "pow"}, {"Max", "max"}, {"Min", "min"}};
  if (auto it = binaryOps.find(op); it != binaryOps.end()) {
    if (n.input_size() != 2)
      return this->unsupported(std::to_string(n.input_size()) +
                         " inputs (gpipe's " + it->second + " takes two)");
    return elementwiseBinary(it->second);
  }
  if (op == "Equal")
    return compare("eq", false);
  if (op == "Less")
    return compare("lt", false);
  if (op == "LessOrEqual")
    return compare("le", false);
  if (op == "Greater")
    return compare("gt", false);
  if (op == "GreaterOrEqual")
    return compare("ge", false);
  if (op == "And" || op == "Or" || op == "Not")
    return logical(op == "And" ? "and" : op == "Or" ? "or" : "not");
  if (op == "Where")
    return where();
  if (op == "Cast" || op == "CastLike")
    return cast();
  if (op == "Gelu") {
    const std::string approximate = g.stringAttr("approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      return this->unsupported("attribute approximate = '" + approximate +
                         "' is not supported (none or tanh)");
    return unary(approximate == "none" ? "gelu_erf" : "gelu");
  }
  if (op == "SequenceAt")
    return sequenceAt();
  if (op == "Clip")
    return clip();
  if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax")
    return reduce(op == "ReduceMean"  ? "reduce_mean"
                  : op == "ReduceSum" ? "reduce_sum"
                                      : "reduce_max");
  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze")
    return reshape();
  if (op == "Transpose")
    return transpose();
  if (op == "Expand")
    return expand();
  if (op == "Slice")
    return slice();
  if (op == "Split")
    return split();
  if (op == "Concat")
    return concat();
  if (op == "Dropout")
    return dropout();
  if (op == "Flatten")
    return flatten();
  if (op == "Conv")
    return conv();
  if (op == "MaxPool" || op == "AveragePool")
    return pool(op == "MaxPool");
  if (op == "GlobalAveragePool")
    return globalAveragePool();
  if (op == "BatchNormalization")
    return batchNorm();
  if (op == "LayerNormalization")
    return layerNorm();
  if (op == "Gather") {
    const Constant *table = g.constant(input(0));
    return table && g.isTrainable(input(0)) && table->dims.size() == 2 &&
                   g.intAttr("axis", 0) == 0 && g.value(input(1))
               ? gather()
               : generalGather();
  }
  if (op == "SoftmaxCrossEntropyLoss")
    return crossEntropy();
  return "op type '" + op + "' has no conversion"; // a gap in this table
}

std::string NodeConverter::unary(const char *op) {
  const Value *x;
  std::string ssa = activation(0, x);
  if (ssa.empty())
    return error;
  std::string y = g.defineLike(n.output(0), x->shape, *x);
  g.emit(y + " = gpipe." + op + " " + ssa + " : " + tensorType(x->shape, true));
  return {};
}

std::string NodeConverter::dense(bool gemm) {
  const Value *x;
  std::string xs = activation(0, x);
  if (xs.empty())
    return error;
  Value viewed; // of the columns, where a Transpose moved the batch
  if (x->layout == Layout::Viewed) {
    viewed = *x;
    viewed.ssa = xs;
    if (!viewColumns(viewed))
      return error;
    x = &viewed;
    xs = viewed.ssa;
  }
  const Constant *b = weight(1);
  if (!b)
    return error;
  if (isImage(x->layout))
    return unsupported("input 0 is an image ([N, C, H, W]); flatten it first");
  if (b->dims.size() != 2)
    return unsupported("input 1 has shape " + shapeText(b->dims) +
                       "; a dense weight is a matrix");
  bool transB = false;
  if (gemm) {
    if (g.intAttr("transA", 0) != 0)
      return unsupported("attribute transA = 1 is not supported");
    if (g.floatAttr("alpha", 1.0f) != 1.0f)
      return unsupported(
          "attribute alpha = " + number(g.floatAttr("alpha", 1.0f)) +
          " is not supported (only 1)");
    if (n.input_size() > 2 && !input(2).empty() &&
        g.floatAttr("beta", 1.0f) != 1.0f)
      return unsupported(
          "attribute beta = " + number(g.floatAttr("beta", 1.0f)) +
          " is not supported (only 1)");
    transB = g.intAttr("transB", 0) != 0;
  }
  const int64_t k = transB ? b->dims[1] : b->dims[0];
  const int64_t width = transB ? b->dims[0] : b->dims[1];
  if (x->shape.back() != k)
    return unsupported("input 0 has " + std::to_string(x->shape.back()) +
                       " columns, the weight " + std::to_string(k) + " rows");
  std::vector<float> w = transB ? transposed(b->floats, width, k) : b->floats;
  if (!x->columnOrder.empty()) { // rows in the flattened image's order
    std::vector<float> ordered(w.size());
    for (int64_t r = 0; r < k; ++r)
      std::copy_n(&w[size_t(x->columnOrder[size_t(r)] * width)], width,
                  &ordered[size_t(r * width)]);
    w = std::move(ordered);
  }
  // The bias: Gemm's C, or the Add that a MatMul's only use is.
  std::string biasName, output = n.output(0);
  if (gemm && n.input_size() > 2 && !input(2).empty()) {
    biasName = input(2);
  } else if (!gemm) {
    auto users = g.consumersOf(output);
    if (users.size() == 1 && users[0]->op_type() == "Add" &&
        !g.isGraphOutput(output)) {
      const onnx::NodeProto &addNode = *users[0];
      std::string other =
          addNode.input(0) == output ? addNode.input(1) : addNode.input(0);
      const Constant *c = g.constant(other);
      if (c && c->isFloat && c->dims == std::vector<int64_t>{width}) {
        biasName = other;
        g.absorb(&addNode);
        output = addNode.output(0);
      }
    }
  }
  std::string operands = xs + ", " + param(1, {k, width}, std::move(w));
  if (!error.empty())
    return error;
  std::string types =
      tensorType(x->shape, true) + ", " + tensorType({k, width}, true);
  if (!biasName.empty()) {
    const Constant *c = g.constant(biasName);
    if (!c || !c->isFloat ||
        (c->dims != std::vector<int64_t>{width} &&
         c->dims != std::vector<int64_t>{1, width}))
      return unsupported("the bias '" + biasName +
                         "' must be a float initializer of shape [" +
                         std::to_string(width) + "]");
    std::string bs = g.param(biasName, {width}, c->floats);
    if (bs.empty())
      return unsupported("initializer '" + biasName +
                         "' is read by more than one layer, in different "
                         "layouts; a tied weight is read alike by each "
                         "(--untie-weights imports a copy per layer)");
    operands += ", " + bs;
    types += ", " + tensorType({width}, true);
  }
  std::vector<int64_t> shape = x->shape;
  shape.back() = width;
  // The rows stay as they are held (merged with the batch, or viewed).
  std::string y = x->layout == Layout::Rows || x->layout == Layout::Viewed
                      ? g.defineLike(output, shape, *x)
                      : g.define(output, shape);
  if (output != n.output(0))
    g.alias(n.output(0), output);
  g.emit(y + " = gpipe.dense " + operands + " : (" + types + ") -> " +
         tensorType(shape, true));
  return {};
}

std::string NodeConverter::add() {
  for (int i = 0; i < 2 && !g.positionsSsa.empty(); ++i)
    if (const Constant *table = g.constant(input(i));
        table && table->isFloat && table->dims.size() == 2)
      return positionTable(i, *table);
  const Value *a = g.value(input(0)), *b = g.value(input(1));
  if (!a || !b || a->shape != b->shape || a->layout != b->layout ||
      a->viewGroups != b->viewGroups || !a->isFloat || !b->isFloat)
    return elementwiseBinary("add"); // broadcasting, or a constant operand
  std::string as = g.use(input(0)), bs = g.use(input(1));
  std::string y = g.defineLike(n.output(0), a->shape, *a);
  g.emit(y + " = gpipe.add " + as + ", " + bs + " : " +
         tensorType(a->shape, true));
  return {};
}

std::string NodeConverter::positionTable(int tableInput,
                                         const Constant &table) {
  const Value *x;
  std::string xs = activation(1 - tableInput, x);
  if (xs.empty())
    return error;
  const std::vector<int64_t> want = {g.positionsShape[0], g.positionsShape[1],
                                     table.dims[1]};
  if (x->shape != want || x->layout != Layout::Plain)
    return unsupported(
        "it adds the initializer '" + input(tableInput) + "' " +
        shapeText(table.dims) + " to " + shapeText(x->shape) +
        "; gpipe's add takes equal shapes, and a position table [S, D] "
        "only added to [batch, S, D] with S = " +
        std::to_string(g.positionsShape[1]));
  std::string ts = param(tableInput, table.dims, table.floats);
  if (!error.empty())
    return error;
  std::string e = g.define(n.output(0) + "#positions", x->shape);
  g.emit(e + " = gpipe.embedding " + g.positionsSsa + ", " + ts + " : (" +
         tensorType(g.positionsShape, false) + ", " +
         tensorType(table.dims, true) + ") -> " + tensorType(x->shape, true));
  std::string y = g.define(n.output(0), x->shape);
  g.emit(y + " = gpipe.add " + xs + ", " + e + " : " +
         tensorType(x->shape, true));
  return {};
}

std::string NodeConverter::softmax() {
  const Value *x;
  std::string xs = activation(0, x);
  if (xs.empty())
    return error;
  const int64_t rank = int64_t(onnxShape(*x).size());
  int64_t axis = g.intAttr("axis", g.opset >= 13 ? -1 : 1);
  if (axis < 0)
    axis += rank;
  if (isImage(x->layout))
    return unsupported("input 0 is an image [N, C, H, W], which gpipe holds "
                       "channels-last; a softmax over it is not supported");
  if (axis != rank - 1)
    return unsupported(
        "attribute axis = " + std::to_string(g.intAttr("axis", -1)) +
        " is not supported (only the last dimension)");
  std::string y = g.define(n.output(0), x->shape, x->layout);
  g.emit(y + " = gpipe.softmax " + xs + " : " + tensorType(x->shape, true));
  return {};
}

std::string NodeConverter::dropout() {
  const Value *x;
  std::string xs = activation(0, x);
  if (xs.empty())
    return error;
  if (!onlyFirstOutputUsed())
    return unsupported("its mask output is used; gpipe's dropout keeps its "
                       "mask to itself");
  if (x->shape.size() < 2)
    return unsupported("input 0 has shape " + shapeText(x->shape) +
                       "; gpipe's dropout takes [batch, features...]");
  if (!input(2).empty())
    return unsupported("its training_mode input is not supported (gpipe's "
                       "dropout is on in training and off in evaluation)");
  double rate = g.floatAttr("ratio", 0.5f);
  if (g.opset >= 12) {
    rate = 0.5;
    if (!input(1).empty()) {
      const Constant *c = g.constant(input(1));
      if (!c || !c->isFloat || c->floats.size() != 1)
        return unsupported("its ratio must be a constant scalar");
      rate = c->floats[0];
    }
  }
  if (rate == 0.0) {
    g.alias(n.output(0), input(0));
    return {};
  }
  int64_t seed = 0;
  for (int i = 0; i < int(n.name().size()); ++i)
    seed = (seed * 131 + static_cast<unsigned char>(n.name()[size_t(i)])) %
           1000003;
  std::string y = g.define(n.output(0), x->shape, x->layout);
  g.emit(y + " = gpipe.dropout " + xs + " rate " + number(rate) + " seed " +
         std::to_string(seed) + " : " + tensorType(x->shape, true));
  return {};
}

std::string NodeConverter::flatten() {
  const Value *x;
  std::string xs = activation(0, x);
  if (xs.empty())
    return error;
  if (g.intAttr("axis", 1) != 1)
    return unsupported(
        "attribute axis = " + std::to_string(g.intAttr("axis", 1)) +
        " is not supported (only 1: the batch stays)");
  if (x->shape.size() == 2) { // [N, C], also a pooled [N, C, 1, 1]
    g.alias(n.output(0), input(0));
    return {};
  }
  int64_t columns = 1;
  for (size_t i = 1; i < x->shape.size(); ++i)
    columns *= x->shape[i];
  std::vector<int64_t> order;
  if (isImage(x->layout) && (x->shape[1] > 1 || x->shape[2] > 1)) {
    // gpipe holds the image channels-last, so its flattened columns are in
    // (H, W, C) order, ONNX's in (C, H, W): only a dense weight that the
    // columns meet can be reordered to match.
    bool onlyDense = !g.isGraphOutput(n.output(0));
    for (const onnx::NodeProto *user : g.consumersOf(n.output(0)))
      onlyDense = onlyDense &&
                  (user->op_type() == "Gemm" || user->op_type() == "MatMul") &&
                  user->input(0) == n.output(0) && g.constant(user->input(1));
    if (!onlyDense)
      return unsupported(
          "flattening an image of " + std::to_string(x->shape[1]) + " x " +
          std::to_string(x->shape[2]) +
          " pixels is supported only into a Gemm or MatMul by an "
          "initializer (gpipe holds images channels-last)");
    const int64_t h = x->shape[1], w = x->shape[2], c = x->shape[3];
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j)
        for (int64_t k = 0; k < c; ++k)
          order.push_back(k * h * w + i * w + j);
  }
  std::string y = g.define(n.output(0), {x->shape[0], columns});
  const_cast<Value *>(g.value(n.output(0)))->columnOrder = std::move(order);
  g.emit(y + " = gpipe.flatten " + xs + " : (" + tensorType(x->shape, true) +
         ") -> " + tensorType({x->shape[0], columns}, true));
  return {};
}

std::string NodeConverter::layerNorm() {
  const Value *x;
  std::string xs = activation(0, x);
  if (xs.empty())
    return error;
  const int64_t rank = int64_t(x->shape.size());
  int64_t axis = g.intAttr("axis", -1);
  if (axis < 0)
    axis += rank;
  if (isImage(x->layout))
    return unsupported("input 0 is an image [N, C, H, W], which gpipe holds "
                       "channels-last; a layer norm over it is not supported");
  if (axis != rank - 1)
    return unsupported(
        "attribute axis = " + std::to_string(g.intAttr("axis", -1)) +
        " is not supported (only the last dimension)");
  if (!onlyFirstOutputUsed())
    return unsupported("its Mean and InvStdDev outputs are not supported");
  if (n.input_size() < 3 || input(2).empty())
    return unsupported("it has no bias B; gpipe's layer_norm has one");
  const int64_t width = x->shape.back();
  std::string operands = xs, types = tensorType(x->shape, true);
  for (int i = 1; i <= 2; ++i) {
    const Constant *c = weight(i);
    if (!c)
      return error;
    if (c->dims != std::vector<int64_t>{width})
      return unsupported("input " + std::to_string(i) + " has shape " +
                         shapeText(c->dims) + ", expected [" +
                         std::to_string(width) + "]");
    operands += ", " + param(i, {width}, c->floats);
    if (!error.empty())
      return error;
    types += ", " + tensorType({width}, true);
  }
  std::string y = g.define(n.output(0), x->shape);
  g.emit(y + " = gpipe.layer_norm " + operands +
         " {epsilon = " + number(g.floatAttr("epsilon", 1e-5f)) +
         " : f64} : (" + types + ") -> " + tensorType(x->shape, true));
  return {};
}

std::string NodeConverter::gather() {
  const Constant *table = g.constant(input(0));
  const Value *ids;
  if (!table || !table->isFloat || table->dims.size() != 2 ||
      table->floats.empty())
    return unsupported("only a lookup in a float initializer [V, D] (an "
                       "embedding) is supported");
  std::string is = activation(1, ids);
  if (is.empty())
    return error;
  if (ids->isFloat)
    return unsupported("its indices are float");
  if (g.intAttr("axis", 0) != 0)
    return unsupported(
        "attribute axis = " + std::to_string(g.intAttr("axis", 0)) +
        " is not supported (only 0)");
  std::string ts = param(0, table->dims, table->floats);
  if (!error.empty())
    return error;
  std::vector<int64_t> shape = ids->shape;
  shape.push_back(table->dims[1]);
  std::string y = g.define(n.output(0), shape);
  g.emit(y + " = gpipe.embedding " + is + ", " + ts + " : (" +
         tensorType(ids->shape, false) + ", " + tensorType(table->dims, true) +
         ") -> " + tensorType(shape, true));
  return {};
}

std::string NodeConverter::crossEntropy() {
  const Value *logits, *labels;
  std::string ls = activation(0, logits);
  if (ls.empty())
    return error;
  std::string ys = activation(1, labels);
  if (ys.empty())
    return error;
  if (n.input_size() > 2 && !input(2).empty())
    return unsupported("class weights (input 2) are not supported");
  if (g.stringAttr("reduction", "mean") != "mean")
    return unsupported(
        "attribute reduction = " + g.stringAttr("reduction", "mean") +
        " is not supported (only mean)");
  if (g.hasAttr("ignore_index"))
    return unsupported("attribute ignore_index is not supported");
  if (logits->shape.size() != 2 || labels->isFloat)
    return unsupported("only [N, C] scores and integer [N] labels are "
                       "supported");
  if (!onlyFirstOutputUsed())
    return unsupported("its log_prob output is not supported");
  std::string y = g.define(n.output(0), {});
  g.emit(y + " = gpipe.softmax_cross_entropy " + ls + ", " + ys + " : (" +
         tensorType(logits->shape, true) + ", " +
         tensorType(labels->shape, false) + ") -> tensor<f32>");
  g.lossValue = n.output(0);
  return {};
}

std::string GraphImporter::convertNode(const onnx::NodeProto &n) {
  return NodeConverter(*this, n).run();
}
