//===- OnnxFusedOps.cpp - A recognised subgraph as one gpipe op -----------===//
//
// Writes the patterns OnnxPatterns.cpp finds: GELU as gpipe.gelu_erf or
// gpipe.gelu (the tanh formula), attention as gpipe.attention, whose
// parameters are the projections' initializers side by side: Wq | Wk | Wv
// as one [D, 3D] weight named `<scope>.qkv.weight` (each block keeps its
// bits) and the biases likewise as `<scope>.qkv.bias`. The shapes the
// finder could not know (the reshapes' targets, the scale) are checked here
// against the input's.
//
//===----------------------------------------------------------------------===//

#include "NodeConverter.h"
#include "OnnxPatterns.h"

#include <cmath>

using namespace gpipe;
using namespace gpipe::onnx_import;

namespace {

class FusedWriter {
public:
  FusedWriter(GraphImporter &g, const Pattern &p) : g(g), p(p) {}

  std::string gelu() {
    const Value *x = g.value(p.input);
    if (!x || !x->isFloat)
      return "GELU of '" + p.input + "', which is not a computed float value";
    const char *op = p.kind == Pattern::Kind::GeluErf ? "gelu_erf" : "gelu";
    std::string xs = g.use(p.input);
    std::string y = g.define(p.last->output(0), x->shape, x->layout);
    g.emit(y + " = gpipe." + op + " " + xs + " : " +
           tensorType(x->shape, true));
    return {};
  }

  std::string attention();

private:
  /// Initializer `name` as a float matrix of `shape`, or null with `error`.
  const Constant *matrix(const std::string &name,
                         const std::vector<int64_t> &shape) {
    const Constant *c = g.constant(name);
    if (!c || !c->isFloat || c->dims != shape)
      error = "attention's initializer '" + name + "' must be float " +
              shapeText(shape) + ", it is " +
              (c ? shapeText(c->dims) : std::string("not readable"));
    return error.empty() ? c : nullptr;
  }
  /// Declares parameter `name`; "" with `error` for a tied weight.
  std::string param(const std::string &name, const std::vector<int64_t> &shape,
                    std::vector<float> data) {
    std::string ssa = g.param(name, shape, std::move(data));
    if (ssa.empty())
      error = "initializer '" + name +
              "' is read by more than one layer, in different layouts; a "
              "tied weight is read alike by each (--untie-weights imports a "
              "copy per layer, each trained apart)";
    return ssa;
  }

  GraphImporter &g;
  const Pattern &p;
  std::string error;
};

std::string FusedWriter::attention() {
  const Value *x = g.value(p.input);
  if (!x || !x->isFloat || x->layout != Layout::Plain || x->shape.size() != 3)
    return "attention's input '" + p.input + "' has shape " +
           (x ? shapeText(x->shape) : std::string("(none)")) +
           "; gpipe's attention takes a float [batch, seq, width]";
  const int64_t b = x->shape[0], s = x->shape[1], d = x->shape[2];
  int64_t heads = 0;
  for (const std::vector<int64_t> &target : p.headShapes) {
    std::vector<int64_t> split = reshaped(x->shape, target);
    if (split.size() != 4 || split[0] != b || split[1] != s ||
        split[2] * split[3] != d || (heads && split[2] != heads))
      return "attention splits [" + std::to_string(b) + ", " +
             std::to_string(s) + ", " + std::to_string(d) +
             "] into heads with Reshape " + shapeText(target) +
             "; gpipe needs [batch, seq, heads, width / heads], the same " +
             "heads for q, k and v";
    heads = split[2];
  }
  if (reshaped({b, s, heads, d / heads}, p.mergedShape) !=
      std::vector<int64_t>{b, s, d})
    return "attention merges its heads with Reshape " +
           shapeText(p.mergedShape) + "; gpipe needs [" + std::to_string(b) +
           ", " + std::to_string(s) + ", " + std::to_string(d) + "]";
  const double want = 1.0 / std::sqrt(double(d / heads));
  if (std::fabs(p.scale / want - 1.0) > 1e-6)
    return "attention scales its scores by " + number(p.scale) +
           "; gpipe's attention scales by 1/sqrt(width / heads) = " +
           number(want);
  if (p.causal && p.maskSize != s)
    return "attention's causal mask is " + std::to_string(p.maskSize) + " x " +
           std::to_string(p.maskSize) + " for a sequence of " +
           std::to_string(s);
  const Constant *wq = matrix(p.wq, {d, d}), *wk = matrix(p.wk, {d, d}),
                 *wv = matrix(p.wv, {d, d}), *wo = matrix(p.wo, {d, d});
  if (!error.empty())
    return error;
  std::vector<float> wqkv(size_t(d * 3 * d));
  const Constant *blocks[] = {wq, wk, wv};
  for (int64_t r = 0; r < d; ++r)
    for (int64_t j = 0; j < 3; ++j)
      std::copy_n(&blocks[j]->floats[size_t(r * d)], d,
                  &wqkv[size_t(r * 3 * d + j * d)]);
  std::string xs = g.use(p.input);
  std::string wqkvs =
      param(p.scope + ".qkv.weight", {d, 3 * d}, std::move(wqkv));
  std::string wos = error.empty() ? param(p.wo, {d, d}, wo->floats) : "";
  if (!error.empty())
    return error;
  std::string operands = xs + ", " + wqkvs + ", " + wos;
  std::string types = tensorType(x->shape, true) + ", " +
                      tensorType({d, 3 * d}, true) + ", " +
                      tensorType({d, d}, true);
  // Biases: all four, a missing one as zeros (the op has both or neither).
  if (!p.bq.empty() || !p.bk.empty() || !p.bv.empty() || !p.bo.empty()) {
    std::vector<float> bqkv(size_t(3 * d), 0.0f), bo(size_t(d), 0.0f);
    const std::string *names[] = {&p.bq, &p.bk, &p.bv};
    for (int j = 0; j < 3; ++j)
      if (!names[j]->empty()) {
        const Constant *c = matrix(*names[j], {d});
        if (!c)
          return error;
        std::copy(c->floats.begin(), c->floats.end(), &bqkv[size_t(j * d)]);
      }
    if (!p.bo.empty()) {
      const Constant *c = matrix(p.bo, {d});
      if (!c)
        return error;
      bo = c->floats;
    }
    std::string bqkvs = param(p.scope + ".qkv.bias", {3 * d}, std::move(bqkv));
    std::string bos = error.empty()
                          ? param(p.bo.empty() ? p.scope + ".out.bias" : p.bo,
                                  {d}, std::move(bo))
                          : "";
    if (!error.empty())
      return error;
    operands += " bias " + bqkvs + ", " + bos;
    types += ", " + tensorType({3 * d}, true) + ", " + tensorType({d}, true);
  }
  std::string y = g.define(p.last->output(0), x->shape);
  g.emit(y + " = gpipe.attention " + operands + " heads " +
         std::to_string(heads) + (p.causal ? " causal" : "") + " : (" + types +
         ") -> " + tensorType(x->shape, true));
  return {};
}

} // namespace

std::string gpipe::onnx_import::convertPattern(GraphImporter &g,
                                               const Pattern &pattern) {
  FusedWriter writer(g, pattern);
  return pattern.kind == Pattern::Kind::Attention ? writer.attention()
                                                  : writer.gelu();
}
