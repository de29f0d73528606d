//===- OnnxPatterns.cpp - Finding GELU and attention subgraphs ------------===//
//
// Each matcher starts at the one node its pattern cannot lack (GELU's Erf or
// Tanh, attention's Softmax) and walks producers and consumers. A pattern's
// inner values must be used only inside it: a value seen by another node
// would vanish with the fused op.
//
//===----------------------------------------------------------------------===//

#include "OnnxPatterns.h"
#include "OnnxGraph.h"

#include <algorithm>
#include <cmath>

using namespace gpipe;
using namespace gpipe::onnx_import;

namespace {

class Finder {
public:
  Finder(const onnx::GraphProto &graph,
         const std::map<std::string, Constant> &constants,
         std::vector<std::string> &misses)
      : graph(graph), constants(constants), misses(misses) {
    for (const onnx::NodeProto &n : graph.node()) {
      for (const std::string &out : n.output())
        producers[out] = &n;
      for (const std::string &in : n.input())
        consumers[in].push_back(&n);
    }
  }

  std::vector<Pattern> run() {
    std::vector<Pattern> found;
    std::set<const onnx::NodeProto *> taken;
    for (const onnx::NodeProto &n : graph.node()) {
      if (!n.domain().empty())
        continue;
      Pattern p;
      bool matched = false;
      if (n.op_type() == "Erf")
        matched = gelu(n, p, /*erf=*/true);
      else if (n.op_type() == "Tanh")
        matched = gelu(n, p, /*erf=*/false);
      else if (n.op_type() == "Softmax")
        matched = attention(n, p);
      if (!matched)
        continue;
      bool overlaps = false;
      for (const onnx::NodeProto *node : p.nodes)
        overlaps = overlaps || taken.count(node);
      if (overlaps)
        continue;
      if (!closed(p)) {
        miss(n, std::string(p.kind == Pattern::Kind::Attention
                                ? "multi-head attention"
                                : "GELU") +
                    " but a value inside it is used outside it");
        continue;
      }
      taken.insert(p.nodes.begin(), p.nodes.end());
      found.push_back(std::move(p));
    }
    return found;
  }

private:
  const onnx::NodeProto *producer(const std::string &name) const {
    auto it = producers.find(name);
    return it == producers.end() ? nullptr : it->second;
  }
  /// The single node that reads `name`, or null.
  const onnx::NodeProto *onlyConsumer(const std::string &name) const {
    auto it = consumers.find(name);
    return it == consumers.end() || it->second.size() != 1 ? nullptr
                                                           : it->second[0];
  }
  const Constant *constant(const std::string &name) const {
    auto it = constants.find(name);
    return it == constants.end() || !it->second.unreadable.empty()
               ? nullptr
               : &it->second;
  }
  /// Whether `name` is a float constant of one element close to `want`.
  bool scalarNear(const std::string &name, double want) const {
    double v;
    return scalar(name, v) && std::fabs(v - want) <= 1e-6 * std::fabs(want);
  }
  bool scalar(const std::string &name, double &v) const {
    const Constant *c = constant(name);
    if (!c || !c->isFloat || c->floats.size() != 1)
      return false;
    v = c->floats[0];
    return true;
  }
  static bool is(const onnx::NodeProto *n, const char *op) {
    return n && n->op_type() == op && n->domain().empty();
  }
  /// For a binary node with one scalar constant input near `want`, the other
  /// input's name ("" if it does not match).
  std::string otherThanScalar(const onnx::NodeProto *n, double want) const {
    if (!n || n->input_size() != 2)
      return {};
    if (scalarNear(n->input(1), want))
      return n->input(0);
    if (scalarNear(n->input(0), want))
      return n->input(1);
    return {};
  }
  static std::string otherInput(const onnx::NodeProto &n,
                                const std::string &one) {
    if (n.input_size() != 2)
      return {};
    if (n.input(0) == one)
      return n.input(1);
    return n.input(1) == one ? n.input(0) : std::string();
  }
  bool isGraphOutput(const std::string &name) const {
    for (const onnx::ValueInfoProto &out : graph.output())
      if (out.name() == name)
        return true;
    return false;
  }
  /// Every value the pattern computes, except its result, is read only
  /// inside it.
  bool closed(const Pattern &p) const {
    for (const onnx::NodeProto *n : p.nodes)
      for (const std::string &out : n->output()) {
        if (n == p.last || out.empty())
          continue;
        if (isGraphOutput(out))
          return false;
        auto it = consumers.find(out);
        if (it != consumers.end())
          for (const onnx::NodeProto *user : it->second)
            if (!p.nodes.count(user))
              return false;
      }
    return true;
  }
  std::string miss(const onnx::NodeProto &anchor, const std::string &why) {
    misses.push_back("node '" + anchor.name() + "' (" + anchor.op_type() +
                     ") starts like " + why);
    return {};
  }

  bool gelu(const onnx::NodeProto &core, Pattern &p, bool erf);
  /// The tanh formula's argument √(2/π)(x + 0.044715 x³): x, or "".
  std::string tanhArgument(const onnx::NodeProto &core, Pattern &p);
  bool attention(const onnx::NodeProto &softmax, Pattern &p);
  /// A [B, S, D] projection split into heads: Transpose(perm) of Reshape of
  /// it. Fills the reshape's target and the projection's weights; returns x.
  std::string heads(const std::string &value,
                    const std::vector<std::vector<int64_t>> &perms, Pattern &p,
                    std::string &weight, std::string &bias);
  /// Where `mask` is a causal mask of the scores: the scores' name ("" if
  /// it is not one).
  std::string causal(const onnx::NodeProto *mask, Pattern &p);
  /// x W (+ b) with W and b initializers: x, or "".
  std::string projection(const std::string &value, Pattern &p,
                         std::string &weight, std::string &bias);

  const onnx::GraphProto &graph;
  const std::map<std::string, Constant> &constants;
  std::vector<std::string> &misses;
  std::map<std::string, const onnx::NodeProto *> producers;
  std::map<std::string, std::vector<const onnx::NodeProto *>> consumers;
};

std::string Finder::tanhArgument(const onnx::NodeProto &core, Pattern &p) {
  const onnx::NodeProto *scaled = producer(core.input(0));
  std::string inner = otherThanScalar(is(scaled, "Mul") ? scaled : nullptr,
                                      std::sqrt(2.0 / M_PI));
  const onnx::NodeProto *sum = producer(inner);
  if (!is(sum, "Add"))
    return {};
  // x + 0.044715 x³, the cube as x (x x) in either order.
  for (int i = 0; i < 2; ++i) {
    const std::string x = sum->input(i);
    const onnx::NodeProto *term = producer(sum->input(1 - i));
    std::string cubeName =
        otherThanScalar(is(term, "Mul") ? term : nullptr, 0.044715);
    const onnx::NodeProto *cube = producer(cubeName);
    if (!is(cube, "Mul"))
      continue;
    const onnx::NodeProto *square = producer(otherInput(*cube, x));
    if (!is(square, "Mul") || square->input(0) != x || square->input(1) != x)
      continue;
    p.nodes.insert({scaled, sum, term, cube, square});
    return x;
  }
  return {};
}

bool Finder::gelu(const onnx::NodeProto &core, Pattern &p, bool erf) {
  std::string x;
  if (erf) { // Erf(x / √2) or Erf(x · 1/√2)
    const onnx::NodeProto *arg = producer(core.input(0));
    if (is(arg, "Div") && scalarNear(arg->input(1), std::sqrt(2.0)))
      x = arg->input(0);
    else if (is(arg, "Mul"))
      x = otherThanScalar(arg, std::sqrt(0.5));
    if (x.empty())
      return miss(core, "GELU's Erf formula but its input is not x / √2"),
             false;
    p.nodes.insert(arg);
  } else {
    x = tanhArgument(core, p);
    if (x.empty())
      return false; // a plain Tanh
  }
  p.nodes.insert(&core);
  const char *formula = erf ? "GELU's Erf formula" : "GELU's tanh formula";
  // 1 + core, then times x and times 1/2 in either order.
  const onnx::NodeProto *plusOne = onlyConsumer(core.output(0));
  if (!is(plusOne, "Add") || otherThanScalar(plusOne, 1.0) != core.output(0))
    return miss(core, std::string(formula) + " but is not followed by + 1"),
           false;
  p.nodes.insert(plusOne);
  const onnx::NodeProto *product = onlyConsumer(plusOne->output(0));
  if (!is(product, "Mul"))
    return miss(core, std::string(formula) + " but 1 + " +
                          (erf ? "erf" : "tanh") + " is not multiplied"),
           false;
  p.nodes.insert(product);
  const std::string factor = otherInput(*product, plusOne->output(0));
  const onnx::NodeProto *half = producer(factor);
  if (factor == x) { // (x (1 + erf)) / 2
    const onnx::NodeProto *last = onlyConsumer(product->output(0));
    if (!is(last, "Mul") || otherThanScalar(last, 0.5) != product->output(0))
      return miss(core, std::string(formula) + " but x (1 + " +
                            (erf ? "erf" : "tanh") + ") is not halved"),
             false;
    p.nodes.insert(last);
    p.last = last;
  } else if (is(half, "Mul") && otherThanScalar(half, 0.5) == x) {
    p.nodes.insert(half); // (x / 2) (1 + erf)
    p.last = product;
  } else {
    return miss(core, std::string(formula) + " but 1 + " +
                          (erf ? "erf" : "tanh") +
                          " is not multiplied by x or x / 2"),
           false;
  }
  p.kind = erf ? Pattern::Kind::GeluErf : Pattern::Kind::GeluTanh;
  p.input = x;
  return true;
}

std::string Finder::projection(const std::string &value, Pattern &p,
                               std::string &weight, std::string &bias) {
  const onnx::NodeProto *n = producer(value);
  if (is(n, "Add")) {
    for (int i = 0; i < 2 && bias.empty(); ++i) {
      const Constant *c = constant(n->input(i));
      if (c && c->isFloat && c->dims.size() == 1 &&
          is(producer(n->input(1 - i)), "MatMul"))
        bias = n->input(i);
    }
    if (bias.empty())
      return {};
    p.nodes.insert(n);
    n = producer(otherInput(*n, bias));
  }
  if (!is(n, "MatMul"))
    return {};
  const Constant *w = constant(n->input(1));
  if (!w || !w->isFloat || w->dims.size() != 2)
    return {};
  weight = n->input(1);
  p.nodes.insert(n);
  return n->input(0);
}

std::string Finder::heads(const std::string &value,
                          const std::vector<std::vector<int64_t>> &perms,
                          Pattern &p, std::string &weight, std::string &bias) {
  std::string current = value;
  for (auto perm = perms.rbegin(); perm != perms.rend(); ++perm) {
    const onnx::NodeProto *t = producer(current);
    if (!is(t, "Transpose"))
      return {};
    std::vector<int64_t> got;
    for (const onnx::AttributeProto &a : t->attribute())
      if (a.name() == "perm")
        got.assign(a.ints().begin(), a.ints().end());
    if (got != *perm)
      return {};
    p.nodes.insert(t);
    current = t->input(0);
  }
  const onnx::NodeProto *r = producer(current);
  if (!is(r, "Reshape") || r->input_size() != 2)
    return {};
  const Constant *target = constant(r->input(1));
  if (!target || target->isFloat)
    return {};
  for (const onnx::AttributeProto &a : r->attribute())
    if (a.name() == "allowzero" && a.i() != 0)
      return {};
  p.headShapes.push_back(target->ints);
  p.nodes.insert(r);
  return projection(r->input(0), p, weight, bias);
}

/// Whether constant `c` is an [..., S, S] mask (leading dimensions 1) whose
/// element (i, j) is `hidden(value)` exactly when key j > query i.
template <typename Hidden>
static bool causalMask(const Constant *c, Hidden hidden, int64_t &size) {
  if (!c || c->dims.size() < 2)
    return false;
  const size_t rank = c->dims.size();
  for (size_t i = 0; i + 2 < rank; ++i)
    if (c->dims[i] != 1)
      return false;
  size = c->dims[rank - 1];
  if (c->dims[rank - 2] != size || size <= 0)
    return false;
  for (int64_t i = 0; i < size; ++i)
    for (int64_t j = 0; j < size; ++j) {
      const size_t at = size_t(i * size + j);
      const bool value = c->isFloat ? hidden(double(c->floats[at]))
                                    : hidden(double(c->ints[at]));
      if (value != (j > i))
        return false;
    }
  return true;
}

std::string Finder::causal(const onnx::NodeProto *mask, Pattern &p) {
  auto negative = [](double v) { return v <= -1e4; };
  double fill;
  if (is(mask, "Where") && mask->input_size() == 3) {
    // Where(hidden, -inf, scores) or Where(visible, scores, -inf).
    const Constant *cond = constant(mask->input(0));
    if (cond && !cond->isFloat && scalar(mask->input(1), fill) &&
        negative(fill) &&
        causalMask(
            cond, [](double v) { return v != 0; }, p.maskSize))
      return mask->input(2);
    if (cond && !cond->isFloat && scalar(mask->input(2), fill) &&
        negative(fill) &&
        causalMask(
            cond, [](double v) { return v == 0; }, p.maskSize))
      return mask->input(1);
  }
  if (is(mask, "Add") && mask->input_size() == 2) // scores + (0 or -inf)
    for (int i = 0; i < 2; ++i) {
      const Constant *bias = constant(mask->input(i));
      if (bias && bias->isFloat &&
          causalMask(
              bias, [&](double v) { return negative(v); }, p.maskSize)) {
        for (float v : bias->floats)
          if (!negative(v) && v != 0.0f)
            return {};
        return mask->input(1 - i);
      }
    }
  return {};
}

bool Finder::attention(const onnx::NodeProto &softmax, Pattern &p) {
  // Scores: (q k^T) * scale, (q k^T) / c, or q k^T; then maybe a causal mask.
  const onnx::NodeProto *scores = producer(softmax.input(0));
  if (std::string unmasked = causal(scores, p); !unmasked.empty()) {
    p.causal = true;
    p.nodes.insert(scores);
    scores = producer(unmasked);
  }
  const onnx::NodeProto *product = scores;
  double c;
  if (is(scores, "Mul") || is(scores, "Div")) {
    const bool div = is(scores, "Div");
    int constantSide = scalar(scores->input(1), c) ? 1 : -1;
    if (constantSide < 0 && !div && scalar(scores->input(0), c))
      constantSide = 0;
    if (constantSide < 0)
      return false;
    p.scale = div ? 1.0 / c : c;
    product = producer(scores->input(1 - constantSide));
    p.nodes.insert(scores);
  }
  if (!is(product, "MatMul") || constant(product->input(1)))
    return false;
  const char *what = "multi-head attention";
  for (const onnx::AttributeProto &a : softmax.attribute())
    if (a.name() == "axis" && a.i() != -1 && a.i() != 3)
      return miss(softmax,
                  std::string(what) + " but its softmax is not over the keys"),
             false;
  p.nodes.insert({&softmax, product});
  const std::string x = heads(product->input(0), {{0, 2, 1, 3}}, p, p.wq, p.bq);
  std::string xk = heads(product->input(1), {{0, 2, 3, 1}}, p, p.wk, p.bk);
  if (xk.empty())
    xk = heads(product->input(1), {{0, 2, 1, 3}, {0, 1, 3, 2}}, p, p.wk, p.bk);
  if (x.empty() || xk != x)
    return miss(softmax, std::string(what) +
                             " but its scores are not q k^T of heads split "
                             "from projections x Wq (+ bq), x Wk (+ bk) of "
                             "one x"),
           false;
  // probs v, heads merged back, the output projection.
  const onnx::NodeProto *mix = onlyConsumer(softmax.output(0));
  if (!is(mix, "MatMul") || mix->input(0) != softmax.output(0) ||
      heads(mix->input(1), {{0, 2, 1, 3}}, p, p.wv, p.bv) != x)
    return miss(softmax, std::string(what) +
                             " but its probabilities do not multiply heads "
                             "split from x Wv (+ bv)"),
           false;
  p.nodes.insert(mix);
  const onnx::NodeProto *merge = onlyConsumer(mix->output(0));
  std::vector<int64_t> perm;
  if (is(merge, "Transpose"))
    for (const onnx::AttributeProto &a : merge->attribute())
      if (a.name() == "perm")
        perm.assign(a.ints().begin(), a.ints().end());
  const onnx::NodeProto *reshape = perm == std::vector<int64_t>{0, 2, 1, 3}
                                       ? onlyConsumer(merge->output(0))
                                       : nullptr;
  const Constant *target =
      is(reshape, "Reshape") ? constant(reshape->input(1)) : nullptr;
  const onnx::NodeProto *out =
      target && !target->isFloat ? onlyConsumer(reshape->output(0)) : nullptr;
  const Constant *wo = is(out, "MatMul") && out->input(0) == reshape->output(0)
                           ? constant(out->input(1))
                           : nullptr;
  if (!wo || !wo->isFloat || wo->dims.size() != 2)
    return miss(softmax, std::string(what) +
                             " but its heads are not merged (Transpose "
                             "[0, 2, 1, 3], Reshape) into a MatMul by an "
                             "initializer"),
           false;
  p.mergedShape = target->ints;
  p.wo = out->input(1);
  p.nodes.insert({merge, reshape, out});
  p.last = out;
  if (const onnx::NodeProto *add = onlyConsumer(out->output(0));
      is(add, "Add") && !isGraphOutput(out->output(0))) {
    const std::string other = otherInput(*add, out->output(0));
    const Constant *b = constant(other);
    if (b && b->isFloat && b->dims == std::vector<int64_t>{wo->dims[1]}) {
      p.bo = other;
      p.nodes.insert(add);
      p.last = add;
    }
  }
  // The scope that names the fused parameters: blocks.0/attn -> blocks.0.attn.
  std::string name = softmax.name();
  size_t slash = name.rfind('/');
  std::string scope = slash == std::string::npos ? "" : name.substr(0, slash);
  while (!scope.empty() && scope[0] == '/')
    scope.erase(0, 1);
  std::replace(scope.begin(), scope.end(), '/', '.');
  p.scope = scope.empty() ? "attention" : scope;
  p.kind = Pattern::Kind::Attention;
  p.input = x;
  return true;
}

} // namespace

std::vector<Pattern> gpipe::onnx_import::findPatterns(
    const onnx::GraphProto &graph,
    const std::map<std::string, Constant> &constants,
    std::vector<std::string> &misses) {
  return Finder(graph, constants, misses).run();
}

const Constant *gpipe::onnx_import::positionTable(
    const onnx::NodeProto &add,
    const std::map<std::string, Constant> &constants, int &tableInput) {
  if (add.op_type() != "Add" || !add.domain().empty() || add.input_size() != 2)
    return nullptr;
  tableInput = -1;
  for (int i = 0; i < 2; ++i) {
    auto it = constants.find(add.input(i));
    if (it != constants.end() && it->second.unreadable.empty() &&
        it->second.isFloat && it->second.dims.size() == 2)
      tableInput = i;
  }
  if (tableInput < 0 || constants.count(add.input(1 - tableInput)))
    return nullptr; // no table, or two constants
  return &constants.at(add.input(tableInput));
}
