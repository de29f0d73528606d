//===- CompiledBiasedBlockTest.cpp - A PyTorch-style block, end to end ----===//
//
// The block an ONNX-imported PyTorch Transformer has: a pre-norm causal
// attention whose q/k/v and output projections carry biases, and a feed-
// forward of dense (bias), exact GELU (gelu_erf, fused with its dense by the
// executor), dense, each with a residual. Written as gpipe dialect text,
// compiled (gpipe-compile) at K = 1, 2 and 3 stages, M = 1, 2 and 3 micro-
// batches (batch 4: M = 3 splits unevenly) and every remat policy, written
// as a bundle, read back and trained one step. The loss and every gradient
// (the biases' included) match an independent whole-batch reference in
// double precision (runtime/tests/ReferenceOps.h); and Adam steps at K = 2
// give the losses and parameters of K = 1.
//
//===----------------------------------------------------------------------===//

#include "AllClose.h"
#include "CompiledSupport.h"
#include "ReferenceOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>

namespace rt = gpipe::runtime;
namespace ref = gpipe::reference;
using gpipe::testing::allClose;
using gpipe::testing::compile;
using gpipe::testing::Compiled;
using gpipe::testing::currentParams;
using gpipe::testing::makeExecutor;
using gpipe::testing::Params;
using gpipe::testing::Reference;
using gpipe::testing::rematName;
using gpipe::testing::toVec;
using ref::Vec;

namespace {

constexpr int64_t kBatch = 4, kSeq = 3, kWidth = 8, kHidden = 16, kVocab = 7;
constexpr int64_t kHeads = 2;

// Layer costs {1, 99, 98, 1, 1}: the two-stage partition puts the embedding
// and attention on stage 0, the feed-forward, head and loss on stage 1.
const char *kModel = R"(
gpipe.model @biased batch 4 {
  %ids = gpipe.input "ids" : tensor<4x3xi32>
  %labels = gpipe.input "labels" : tensor<4x3xi32>
  %e = gpipe.layer "embed" -> tensor<4x3x8xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %t = gpipe.param "embed.tokens" normal scale 0.5 : tensor<7x8xf32>
    %0 = gpipe.embedding %ids, %t : (tensor<4x3xi32>, tensor<7x8xf32>) -> tensor<4x3x8xf32>
    gpipe.yield %0 : tensor<4x3x8xf32>
  }
  %r = gpipe.layer "attn" -> tensor<4x3x8xf32> attributes {cost = #gpipe.cost<flops = 99, param_bytes = 0, activation_bytes = 0>} {
    %g = gpipe.param "attn.ln.gamma" uniform scale 1.0 : tensor<8xf32>
    %b = gpipe.param "attn.ln.beta" uniform scale 0.1 : tensor<8xf32>
    %wqkv = gpipe.param "attn.qkv" glorot_uniform : tensor<8x24xf32>
    %wo = gpipe.param "attn.out" glorot_uniform : tensor<8x8xf32>
    %bqkv = gpipe.param "attn.bqkv" uniform scale 0.5 : tensor<24xf32>
    %bo = gpipe.param "attn.bo" uniform scale 0.5 : tensor<8xf32>
    %0 = gpipe.layer_norm %e, %g, %b : (tensor<4x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x3x8xf32>
    %1 = gpipe.attention %0, %wqkv, %wo bias %bqkv, %bo heads 2 causal : (tensor<4x3x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>, tensor<24xf32>, tensor<8xf32>) -> tensor<4x3x8xf32>
    %2 = gpipe.add %e, %1 : tensor<4x3x8xf32>
    gpipe.yield %2 : tensor<4x3x8xf32>
  }
  %m = gpipe.layer "mlp" -> tensor<4x3x8xf32> attributes {cost = #gpipe.cost<flops = 98, param_bytes = 0, activation_bytes = 0>} {
    %w1 = gpipe.param "mlp.w1" glorot_uniform : tensor<8x16xf32>
    %b1 = gpipe.param "mlp.b1" uniform scale 0.5 : tensor<16xf32>
    %w2 = gpipe.param "mlp.w2" glorot_uniform : tensor<16x8xf32>
    %0 = gpipe.dense %r, %w1, %b1 : (tensor<4x3x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x3x16xf32>
    %1 = gpipe.gelu_erf %0 : tensor<4x3x16xf32>
    %2 = gpipe.dense %1, %w2 : (tensor<4x3x16xf32>, tensor<16x8xf32>) -> tensor<4x3x8xf32>
    %3 = gpipe.add %r, %2 : tensor<4x3x8xf32>
    gpipe.yield %3 : tensor<4x3x8xf32>
  }
  %logits = gpipe.layer "head" -> tensor<4x3x7xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %w = gpipe.param "head.w" glorot_uniform : tensor<8x7xf32>
    %0 = gpipe.dense %m, %w : (tensor<4x3x8xf32>, tensor<8x7xf32>) -> tensor<4x3x7xf32>
    gpipe.yield %0 : tensor<4x3x7xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.softmax_cross_entropy %logits, %labels : (tensor<4x3x7xf32>, tensor<4x3xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
)";

rt::Batch makeBatch(uint64_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, kVocab - 1);
  std::vector<int32_t> ids(kBatch * kSeq), labels(kBatch * kSeq);
  for (int32_t &v : ids)
    v = token(rng);
  for (int32_t &v : labels)
    v = token(rng);
  return {{"ids", rt::HostTensor::ints({kBatch, kSeq}, ids)},
          {"labels", rt::HostTensor::ints({kBatch, kSeq}, labels)}};
}

/// The loss and gradients of the whole batch, one op at a time.
Reference blockReference(const Params &p, const rt::Batch &batch) {
  const std::vector<int32_t> &ids = batch.at("ids").i32;
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  const int64_t tokens = kBatch * kSeq;
  const double eps = 1e-5; // layer_norm's default
  auto attention = [&](const Vec &x) {
    return ref::attentionForward(x, p.at("attn.qkv"), p.at("attn.out"), kBatch,
                                 kSeq, kWidth, kHeads, /*causal=*/true,
                                 p.at("attn.bqkv"), p.at("attn.bo"));
  };
  // Forward.
  Vec e = ref::embeddingForward(ids, p.at("embed.tokens"), kVocab, kWidth);
  Vec ln = ref::layerNormForward(e, p.at("attn.ln.gamma"), p.at("attn.ln.beta"),
                                 tokens, kWidth, eps)
               .y;
  Vec r = ref::addForward(e, attention(ln).y);
  Vec u = ref::denseForward(r, p.at("mlp.w1"), p.at("mlp.b1"), tokens, kWidth,
                            kHidden);
  Vec v = ref::geluErfForward(u);
  Vec z = ref::denseForward(v, p.at("mlp.w2"), Vec(kWidth, 0.0), tokens,
                            kHidden, kWidth);
  Vec m = ref::addForward(r, z);
  Vec logits = ref::denseForward(m, p.at("head.w"), Vec(kVocab, 0.0), tokens,
                                 kWidth, kVocab);
  Reference out;
  out.loss = ref::softmaxCrossEntropyForward(logits, labels, tokens, kVocab);
  // Backward.
  Vec dlogits =
      ref::softmaxCrossEntropyBackward(logits, labels, 1.0, tokens, kVocab);
  auto gHead =
      ref::denseBackward(dlogits, m, p.at("head.w"), tokens, kWidth, kVocab);
  const Vec &dm = gHead.dx; // = dz, and part of dr
  auto gW2 = ref::denseBackward(dm, v, p.at("mlp.w2"), tokens, kHidden, kWidth);
  Vec du = ref::geluErfBackward(u, gW2.dx);
  auto gW1 = ref::denseBackward(du, r, p.at("mlp.w1"), tokens, kWidth, kHidden);
  Vec dr = ref::addForward(dm, gW1.dx);
  auto gAtt = ref::attentionBackward(
      dr, ln, p.at("attn.qkv"), p.at("attn.out"), kBatch, kSeq, kWidth, kHeads,
      /*causal=*/true, p.at("attn.bqkv"), p.at("attn.bo"));
  auto gLn = ref::layerNormBackward(gAtt.dx, e, p.at("attn.ln.gamma"), tokens,
                                    kWidth, eps);
  Vec de = ref::addForward(dr, gLn.dx);
  out.grads = {
      {"embed.tokens", ref::embeddingBackward(ids, de, kVocab, kWidth)},
      {"attn.ln.gamma", gLn.dgamma},
      {"attn.ln.beta", gLn.dbeta},
      {"attn.qkv", gAtt.dwqkv},
      {"attn.out", gAtt.dwo},
      {"attn.bqkv", gAtt.dbqkv},
      {"attn.bo", gAtt.dbo},
      {"mlp.w1", gW1.dw},
      {"mlp.b1", gW1.db},
      {"mlp.w2", gW2.dw},
      {"head.w", gHead.dw}};
  return out;
}

using SweepParam = std::tuple<unsigned, unsigned, gpipe::RematPolicy>;

class CompiledBiasedBlock : public ::testing::TestWithParam<SweepParam> {};

TEST_P(CompiledBiasedBlock, MatchesWholeBatchReference) {
  auto [k, m, remat] = GetParam();
  Compiled compiled = compile(kModel, k, m, remat);
  ASSERT_TRUE(compiled.error.empty()) << compiled.error;
  ASSERT_EQ(compiled.bundle.stages.size(), k);
  rt::ExecutorConfig config;
  config.seed = 42;
  auto executor = makeExecutor(std::move(compiled.bundle), config);
  ASSERT_TRUE(executor);
  Params initial = currentParams(*executor);
  rt::Batch batch = makeBatch(5);
  rt::StepResult step = executor->trainStep(batch);
  ASSERT_TRUE(step.ok()) << step.error;
  Reference expected = blockReference(initial, batch);
  EXPECT_NEAR(step.loss, expected.loss, 1e-5 * std::fabs(expected.loss));
  ASSERT_EQ(expected.grads.size(), executor->bundle().params.size());
  for (const auto &[name, grad] : expected.grads) {
    const std::vector<float> *actual = executor->gradient(name);
    ASSERT_TRUE(actual) << "no parameter " << name << " in the bundle";
    EXPECT_TRUE(allClose(*actual, grad, 1e-5, 4e-5)) << "gradient " << name;
  }
}

std::string sweepName(const ::testing::TestParamInfo<SweepParam> &info) {
  auto [k, m, remat] = info.param;
  return "K" + std::to_string(k) + "_M" + std::to_string(m) + "_" +
         rematName(remat);
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, CompiledBiasedBlock,
    ::testing::Combine(::testing::Values(1u, 2u, 3u),
                       ::testing::Values(1u, 2u, 3u),
                       ::testing::Values(gpipe::RematPolicy::None,
                                         gpipe::RematPolicy::Full,
                                         gpipe::RematPolicy::ExceptLast,
                                         gpipe::RematPolicy::Selective)),
    sweepName);

/// Losses and final parameters of `steps` Adam steps at K stages, M = 2.
std::pair<std::vector<double>, Params> train(unsigned k, int steps) {
  Compiled compiled = compile(kModel, k, 2, gpipe::RematPolicy::Full);
  EXPECT_TRUE(compiled.error.empty()) << compiled.error;
  rt::ExecutorConfig config;
  config.optimizer.kind = rt::OptimizerKind::Adam;
  config.optimizer.learningRate = 0.01f;
  config.seed = 3;
  auto executor = makeExecutor(std::move(compiled.bundle), config);
  std::vector<double> losses;
  if (!executor)
    return {losses, {}};
  for (int s = 0; s < steps; ++s) {
    rt::StepResult step = executor->trainStep(makeBatch(100 + s % 3));
    EXPECT_TRUE(step.ok()) << step.error;
    losses.push_back(step.loss);
  }
  return {losses, currentParams(*executor)};
}

// Ten Adam steps: the two-stage pipeline gives the single stage's losses and
// parameters bit for bit (same micro-batches, same kernels), and learns.
TEST(CompiledBiasedBlockTraining, TwoStagesMatchOneBitForBit) {
  auto [single, singleParams] = train(1, 10);
  auto [piped, pipedParams] = train(2, 10);
  ASSERT_EQ(single.size(), 10u);
  EXPECT_EQ(piped, single);
  EXPECT_LT(single.back(), single.front());
  ASSERT_EQ(pipedParams.size(), singleParams.size());
  for (const auto &[name, values] : singleParams) {
    const Vec &other = pipedParams.at(name);
    ASSERT_EQ(values.size(), other.size()) << name;
    EXPECT_EQ(std::memcmp(values.data(), other.data(),
                          values.size() * sizeof(double)),
              0)
        << name;
  }
}

} // namespace
