//===- CompiledEdgeCasesTest.cpp - The compiler's graph edge cases --------===//
//
// Edge cases of the compiler's graph handling, compiled, trained one step
// and compared with an independent whole-batch double-precision reference
// (CompiledTrainingSupport.h) over K, M and every remat policy: multi-result
// layers, a parameter read twice, add(x, x), a dead use of a stage input (zero
// gradient), an f32 model input read by a later stage, non-causal attention, a
// layer norm epsilon, a weight computed from a parameter whose first
// dimension equals the batch, softmax + MSE.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/kernels/CpuKernels.h"
#include "gpipe/runtime/exec/Executor.h"

#include "AllClose.h"
#include "CompiledSupport.h"
#include "CompiledTrainingSupport.h"
#include "ReferenceOps.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace rt = gpipe::runtime;
namespace ref = gpipe::reference;
using ref::Vec;
using namespace compiledtraining;

namespace {

//===----------------------------------------------------------------------===//
// Edge cases of the compiler's graph handling
//===----------------------------------------------------------------------===//

/// Replaces each `@COSTi@` of `text` by the cost attribute forcing `split`.
std::string withSplit(std::string text, const std::vector<int> &split,
                      unsigned numLayers) {
  std::vector<uint64_t> costs = costsForSplit(split, numLayers);
  for (unsigned i = 0; i < numLayers; ++i) {
    std::string key = "@COST" + std::to_string(i) + "@";
    size_t at = text.find(key);
    if (at != std::string::npos)
      text.replace(at, key.size(), costAttr(costs, i));
  }
  return text;
}

/// First layers of K stages for a model of `numLayers` layers: one layer
/// per stage, the rest in the last.
std::vector<int> leadingSplit(unsigned k) {
  std::vector<int> split;
  for (unsigned c = 0; c < k; ++c)
    split.push_back(c);
  return split;
}

// A layer with three results; a parameter read by two denses; an add of a
// value with itself; a stage input used only by a dead op (its gradient is
// zeros); an f32 model input read by a later stage; a skip value from layer
// 0 to layer 2, carried through stage 1 when K >= 3. Batch 6, five layers.
constexpr int64_t kMiscBatch = 6;
const char *kMiscModel = R"(
gpipe.model @misc batch 6 {
  %x = gpipe.input "x" : tensor<6x8xf32>
  %labels = gpipe.input "labels" : tensor<6xi32>
  %a, %c, %z = gpipe.layer "l0" -> tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>@COST0@ {
    %w = gpipe.param "l0.w" glorot_uniform : tensor<8x8xf32>
    %b = gpipe.param "l0.b" uniform scale 0.1 : tensor<8xf32>
    %0 = gpipe.dense %x, %w, %b : (tensor<6x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
    %1 = gpipe.tanh %0 : tensor<6x8xf32>
    %2 = gpipe.dense %1, %w : (tensor<6x8xf32>, tensor<8x8xf32>) -> tensor<6x8xf32>
    %3 = gpipe.relu %0 : tensor<6x8xf32>
    gpipe.yield %1, %2, %3 : tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>
  }
  %d = gpipe.layer "l1" -> tensor<6x8xf32>@COST1@ {
    %0 = gpipe.add %c, %c : tensor<6x8xf32>
    %1 = gpipe.gelu %0 : tensor<6x8xf32>
    %dead = gpipe.relu %z : tensor<6x8xf32>
    gpipe.yield %1 : tensor<6x8xf32>
  }
  %e = gpipe.layer "l2" -> tensor<6x8xf32>@COST2@ {
    %w = gpipe.param "l2.w" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.dense %d, %w : (tensor<6x8xf32>, tensor<8x8xf32>) -> tensor<6x8xf32>
    %1 = gpipe.add %0, %x : tensor<6x8xf32>
    %2 = gpipe.add %1, %a : tensor<6x8xf32>
    gpipe.yield %2 : tensor<6x8xf32>
  }
  %logits = gpipe.layer "l3" -> tensor<6x5xf32>@COST3@ {
    %w = gpipe.param "l3.w" glorot_uniform : tensor<8x5xf32>
    %b = gpipe.param "l3.b" uniform scale 0.1 : tensor<5xf32>
    %0 = gpipe.dense %e, %w, %b : (tensor<6x8xf32>, tensor<8x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
    gpipe.yield %0 : tensor<6x5xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32>@COST4@ {
    %0 = gpipe.softmax_cross_entropy %logits, %labels : (tensor<6x5xf32>, tensor<6xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
)";

rt::Batch miscBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> x(rows * 8);
  for (float &v : x)
    v = rng.uniform();
  std::vector<int32_t> labels(rows);
  for (int32_t &v : labels)
    v = rng.below(5);
  return {{"x", rt::HostTensor::floats({rows, 8}, x)},
          {"labels", rt::HostTensor::ints({rows}, labels)}};
}

Reference miscReference(const Params &p, const rt::Batch &batch) {
  const int64_t n = batch.at("x").shape[0];
  Vec x = toVec(batch.at("x").f32);
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  Vec zero8(8, 0.0);
  Vec y0 = ref::denseForward(x, p.at("l0.w"), p.at("l0.b"), n, 8, 8);
  Vec a = ref::tanhForward(y0);
  Vec c = ref::denseForward(a, p.at("l0.w"), zero8, n, 8, 8);
  Vec s = ref::addForward(c, c);
  Vec d = ref::geluForward(s);
  Vec y2 = ref::denseForward(d, p.at("l2.w"), zero8, n, 8, 8);
  Vec e = ref::addForward(ref::addForward(y2, x), a);
  Vec logits = ref::denseForward(e, p.at("l3.w"), p.at("l3.b"), n, 8, 5);
  Reference r;
  r.loss = ref::softmaxCrossEntropyForward(logits, labels, n, 5);
  Vec dlogits = ref::softmaxCrossEntropyBackward(logits, labels, 1.0, n, 5);
  auto g3 = ref::denseBackward(dlogits, e, p.at("l3.w"), n, 8, 5);
  const Vec &de = g3.dx; // to y2, to x (no gradient), to a
  auto g2 = ref::denseBackward(de, d, p.at("l2.w"), n, 8, 8);
  Vec ds = ref::geluBackward(s, g2.dx);
  Vec dc = ref::addForward(ds, ds);
  auto gc = ref::denseBackward(dc, a, p.at("l0.w"), n, 8, 8);
  Vec da = ref::addForward(de, gc.dx);
  auto g0 = ref::denseBackward(ref::tanhBackward(y0, da), x, p.at("l0.w"), n,
                               8, 8);
  r.grads = {{"l0.w", ref::addForward(g0.dw, gc.dw)},
             {"l0.b", g0.db},
             {"l2.w", g2.dw},
             {"l3.w", g3.dw},
             {"l3.b", g3.db}};
  return r;
}

class CompiledMiscGradients : public ::testing::TestWithParam<SweepParam> {};

TEST_P(CompiledMiscGradients, MatchWholeBatchReference) {
  auto [k, m, remat] = GetParam();
  checkOneStep(withSplit(kMiscModel, leadingSplit(k), 5), k, m, remat,
               miscBatch(kMiscBatch, 7), miscReference);
}

INSTANTIATE_TEST_SUITE_P(Sweep, CompiledMiscGradients,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 4u),
                                            ::testing::Values(1u, 4u),
                                            kRematPolicies),
                         sweepName);

// Non-causal attention with 4 heads, a layer norm with epsilon 1e-3, and an
// embedding of an i32 model input (positions) read by a later stage.
// Batch 3, sequence 5, width 8, vocabulary 7; five layers.
const char *kAttnModel = R"(
gpipe.model @attn batch 3 {
  %ids = gpipe.input "ids" : tensor<3x5xi32>
  %positions = gpipe.input "positions" : tensor<3x5xi32>
  %labels = gpipe.input "labels" : tensor<3x5xi32>
  %e = gpipe.layer "embed" -> tensor<3x5x8xf32>@COST0@ {
    %t = gpipe.param "embed.tokens" normal scale 0.5 : tensor<7x8xf32>
    %0 = gpipe.embedding %ids, %t : (tensor<3x5xi32>, tensor<7x8xf32>) -> tensor<3x5x8xf32>
    gpipe.yield %0 : tensor<3x5x8xf32>
  }
  %r = gpipe.layer "attn" -> tensor<3x5x8xf32>@COST1@ {
    %g = gpipe.param "attn.ln.gamma" uniform scale 1.0 : tensor<8xf32>
    %b = gpipe.param "attn.ln.beta" uniform scale 0.1 : tensor<8xf32>
    %wqkv = gpipe.param "attn.qkv" glorot_uniform : tensor<8x24xf32>
    %wo = gpipe.param "attn.out" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.layer_norm %e, %g, %b {epsilon = 1.000000e-03 : f64} : (tensor<3x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<3x5x8xf32>
    %1 = gpipe.attention %0, %wqkv, %wo heads 4 : (tensor<3x5x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>) -> tensor<3x5x8xf32>
    %2 = gpipe.add %e, %1 : tensor<3x5x8xf32>
    gpipe.yield %2 : tensor<3x5x8xf32>
  }
  %q = gpipe.layer "pos" -> tensor<3x5x8xf32>@COST2@ {
    %p = gpipe.param "pos.table" normal scale 0.5 : tensor<5x8xf32>
    %0 = gpipe.embedding %positions, %p : (tensor<3x5xi32>, tensor<5x8xf32>) -> tensor<3x5x8xf32>
    %1 = gpipe.add %r, %0 : tensor<3x5x8xf32>
    gpipe.yield %1 : tensor<3x5x8xf32>
  }
  %logits = gpipe.layer "head" -> tensor<3x5x7xf32>@COST3@ {
    %w = gpipe.param "head.w" glorot_uniform : tensor<8x7xf32>
    %b = gpipe.param "head.b" uniform scale 0.1 : tensor<7xf32>
    %0 = gpipe.dense %q, %w, %b : (tensor<3x5x8xf32>, tensor<8x7xf32>, tensor<7xf32>) -> tensor<3x5x7xf32>
    gpipe.yield %0 : tensor<3x5x7xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32>@COST4@ {
    %0 = gpipe.softmax_cross_entropy %logits, %labels : (tensor<3x5x7xf32>, tensor<3x5xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
)";

rt::Batch attnBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<int32_t> ids(rows * 5), positions(rows * 5), labels(rows * 5);
  for (int32_t &v : ids)
    v = rng.below(7);
  for (int64_t i = 0; i < rows * 5; ++i)
    positions[i] = int32_t(i % 5);
  for (int32_t &v : labels)
    v = rng.below(7);
  return {{"ids", rt::HostTensor::ints({rows, 5}, ids)},
          {"positions", rt::HostTensor::ints({rows, 5}, positions)},
          {"labels", rt::HostTensor::ints({rows, 5}, labels)}};
}

Reference attnReference(const Params &p, const rt::Batch &batch) {
  const int64_t n = batch.at("ids").shape[0], rows = n * 5;
  const std::vector<int32_t> &ids = batch.at("ids").i32;
  const std::vector<int32_t> &positions = batch.at("positions").i32;
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  const double eps = 1e-3;
  Vec e = ref::embeddingForward(ids, p.at("embed.tokens"), 7, 8);
  Vec ln = ref::layerNormForward(e, p.at("attn.ln.gamma"), p.at("attn.ln.beta"),
                                 rows, 8, eps)
               .y;
  Vec att = ref::attentionForward(ln, p.at("attn.qkv"), p.at("attn.out"), n, 5,
                                  8, 4, /*causal=*/false)
                .y;
  Vec r = ref::addForward(e, att);
  Vec q = ref::addForward(
      r, ref::embeddingForward(positions, p.at("pos.table"), 5, 8));
  Vec logits = ref::denseForward(q, p.at("head.w"), p.at("head.b"), rows, 8, 7);
  Reference out;
  out.loss = ref::softmaxCrossEntropyForward(logits, labels, rows, 7);
  Vec dlogits = ref::softmaxCrossEntropyBackward(logits, labels, 1.0, rows, 7);
  auto gHead = ref::denseBackward(dlogits, q, p.at("head.w"), rows, 8, 7);
  const Vec &dq = gHead.dx; // = dr = dpos
  auto gAtt = ref::attentionBackward(dq, ln, p.at("attn.qkv"), p.at("attn.out"),
                                     n, 5, 8, 4, /*causal=*/false);
  auto gLn = ref::layerNormBackward(gAtt.dx, e, p.at("attn.ln.gamma"), rows, 8,
                                    eps);
  Vec de = ref::addForward(dq, gLn.dx);
  out.grads = {{"embed.tokens", ref::embeddingBackward(ids, de, 7, 8)},
               {"attn.ln.gamma", gLn.dgamma},
               {"attn.ln.beta", gLn.dbeta},
               {"attn.qkv", gAtt.dwqkv},
               {"attn.out", gAtt.dwo},
               {"pos.table", ref::embeddingBackward(positions, dq, 5, 8)},
               {"head.w", gHead.dw},
               {"head.b", gHead.db}};
  return out;
}

class CompiledAttentionGradients
    : public ::testing::TestWithParam<SweepParam> {};

TEST_P(CompiledAttentionGradients, MatchWholeBatchReference) {
  auto [k, m, remat] = GetParam();
  checkOneStep(withSplit(kAttnModel, leadingSplit(k), 5), k, m, remat,
               attnBatch(3, 8), attnReference);
}

INSTANTIATE_TEST_SUITE_P(Sweep, CompiledAttentionGradients,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 4u),
                                            ::testing::Values(1u, 2u, 3u),
                                            kRematPolicies),
                         sweepName);

// A weight computed from a parameter (tanh of it) whose first dimension
// equals the batch (12): it has no batch dimension, nor has its gradient.
// Softmax and an MSE loss against a model input.
const char *kWeightTransformModel = R"(
gpipe.model @weight_transform batch 12 {
  %x = gpipe.input "x" : tensor<12x12xf32>
  %t = gpipe.input "t" : tensor<12x4xf32>
  %h = gpipe.layer "fc1" -> tensor<12x16xf32>@COST0@ {
    %w = gpipe.param "fc1.w" glorot_uniform : tensor<12x16xf32>
    %wt = gpipe.tanh %w : tensor<12x16xf32>
    %0 = gpipe.dense %x, %wt : (tensor<12x12xf32>, tensor<12x16xf32>) -> tensor<12x16xf32>
    gpipe.yield %0 : tensor<12x16xf32>
  }
  %p = gpipe.layer "fc2" -> tensor<12x4xf32>@COST1@ {
    %w = gpipe.param "fc2.w" glorot_uniform : tensor<16x4xf32>
    %0 = gpipe.dense %h, %w : (tensor<12x16xf32>, tensor<16x4xf32>) -> tensor<12x4xf32>
    %1 = gpipe.softmax %0 : tensor<12x4xf32>
    gpipe.yield %1 : tensor<12x4xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32>@COST2@ {
    %0 = gpipe.mse_loss %p, %t : (tensor<12x4xf32>, tensor<12x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
)";

rt::Batch weightTransformBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> x(rows * 12), t(rows * 4);
  for (float &v : x)
    v = rng.uniform();
  for (float &v : t)
    v = 0.5f * (rng.uniform() + 1.0f);
  return {{"x", rt::HostTensor::floats({rows, 12}, x)},
          {"t", rt::HostTensor::floats({rows, 4}, t)}};
}

Reference weightTransformReference(const Params &p, const rt::Batch &batch) {
  const int64_t n = batch.at("x").shape[0];
  Vec x = toVec(batch.at("x").f32), t = toVec(batch.at("t").f32);
  Vec wt = ref::tanhForward(p.at("fc1.w"));
  Vec h = ref::denseForward(x, wt, Vec(16, 0.0), n, 12, 16);
  Vec z = ref::denseForward(h, p.at("fc2.w"), Vec(4, 0.0), n, 16, 4);
  Vec y = ref::softmaxForward(z, n, 4);
  Reference r;
  r.loss = ref::mseForward(y, t);
  Vec dz = ref::softmaxBackward(z, ref::mseBackward(y, t, 1.0), n, 4);
  auto g2 = ref::denseBackward(dz, h, p.at("fc2.w"), n, 16, 4);
  auto g1 = ref::denseBackward(g2.dx, x, wt, n, 12, 16);
  r.grads = {{"fc1.w", ref::tanhBackward(p.at("fc1.w"), g1.dw)},
             {"fc2.w", g2.dw}};
  return r;
}

class CompiledWeightTransformGradients
    : public ::testing::TestWithParam<SweepParam> {};

TEST_P(CompiledWeightTransformGradients, MatchWholeBatchReference) {
  auto [k, m, remat] = GetParam();
  checkOneStep(withSplit(kWeightTransformModel, leadingSplit(k), 3), k, m,
               remat, weightTransformBatch(12, 9), weightTransformReference);
}

INSTANTIATE_TEST_SUITE_P(Sweep, CompiledWeightTransformGradients,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u),
                                            ::testing::Values(1u, 3u),
                                            kRematPolicies),
                         sweepName);

} // namespace
