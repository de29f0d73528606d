//===- CpuKernelsReferenceTest.cpp - Reference gradients ------------------===//
//
// ReferenceGradient.*: the plain-loop double-precision reference
// (ReferenceOps.h), which the CPU kernel tests check the kernels against, has
// analytic backwards that match central finite differences of its forwards,
// for every input and parameter, and forwards that match hand-computed values.
//
// All randomness comes from std::mt19937_64 with fixed seeds.
//
//===----------------------------------------------------------------------===//

#include "ReferenceOps.h"

#include "CpuKernelsSupport.h"
#include "FiniteDifferences.h"
#include "RandomData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace ref = gpipe::reference;
using ref::Vec;
using Floats = std::vector<float>;
using Mask = std::vector<uint8_t>;
using Ids = std::vector<int32_t>;
using namespace gpipe::testing::cpukernels;

namespace {

using gpipe::testing::dot;
using gpipe::testing::matchesFiniteDifferences;
using gpipe::testing::randomVec;

} // namespace

//===----------------------------------------------------------------------===//
// 1. Reference analytic backward vs central finite differences of the
//    reference forward. Objective: sum(r * f(theta)) for a random r.
//===----------------------------------------------------------------------===//

// Dense: dx, dw, db are the gradients of sum(r * (x w + b)).
TEST(ReferenceGradient, Dense) {
  std::mt19937_64 rng(101);
  const int64_t rows = 3, in = 5, out = 4;
  Vec x = randomVec(rng, rows * in), w = randomVec(rng, in * out),
      b = randomVec(rng, out), r = randomVec(rng, rows * out);
  auto f = [&] { return dot(r, ref::denseForward(x, w, b, rows, in, out)); };
  ref::DenseGrads g = ref::denseBackward(r, x, w, rows, in, out);
  EXPECT_TRUE(matchesFiniteDifferences(x, f, g.dx));
  EXPECT_TRUE(matchesFiniteDifferences(w, f, g.dw));
  EXPECT_TRUE(matchesFiniteDifferences(b, f, g.db));
}

// ReLU: dx is the gradient of sum(r * relu(x)) away from the kink.
TEST(ReferenceGradient, Relu) {
  std::mt19937_64 rng(102);
  Vec x = randomVec(rng, 15), r = randomVec(rng, 15);
  for (double &v : x) // keep clear of 0 by more than the step
    if (std::abs(v) < 1e-3)
      v = 0.5;
  auto f = [&] { return dot(r, ref::reluForward(x)); };
  EXPECT_TRUE(matchesFiniteDifferences(x, f, ref::reluBackward(x, r)));
}

// GELU (tanh approximation): dx is the gradient of sum(r * gelu(x)), tails
// included.
TEST(ReferenceGradient, Gelu) {
  std::mt19937_64 rng(103);
  Vec x = randomVec(rng, 15, -4.0, 4.0), r = randomVec(rng, 15);
  auto f = [&] { return dot(r, ref::geluForward(x)); };
  EXPECT_TRUE(matchesFiniteDifferences(x, f, ref::geluBackward(x, r)));
}

// tanh: dx is the gradient of sum(r * tanh(x)).
TEST(ReferenceGradient, Tanh) {
  std::mt19937_64 rng(104);
  Vec x = randomVec(rng, 15, -3.0, 3.0), r = randomVec(rng, 15);
  auto f = [&] { return dot(r, ref::tanhForward(x)); };
  EXPECT_TRUE(matchesFiniteDifferences(x, f, ref::tanhBackward(x, r)));
}

// add: da and db are the gradients of sum(r * (a + b)).
TEST(ReferenceGradient, Add) {
  std::mt19937_64 rng(105);
  Vec a = randomVec(rng, 15), b = randomVec(rng, 15), r = randomVec(rng, 15);
  auto f = [&] { return dot(r, ref::addForward(a, b)); };
  ref::AddGrads g = ref::addBackward(r);
  EXPECT_TRUE(matchesFiniteDifferences(a, f, g.da));
  EXPECT_TRUE(matchesFiniteDifferences(b, f, g.db));
}

// softmax: dx is the gradient of sum(r * softmax(x)) row by row.
TEST(ReferenceGradient, Softmax) {
  std::mt19937_64 rng(106);
  const int64_t rows = 3, cols = 5;
  Vec x = randomVec(rng, rows * cols, -2.0, 2.0),
      r = randomVec(rng, rows * cols);
  auto f = [&] { return dot(r, ref::softmaxForward(x, rows, cols)); };
  EXPECT_TRUE(
      matchesFiniteDifferences(x, f, ref::softmaxBackward(x, r, rows, cols)));
}

// layer norm (eps 1e-5): dx, dgamma, dbeta are the gradients of
// sum(r * layer_norm(x)).
TEST(ReferenceGradient, LayerNorm) {
  std::mt19937_64 rng(107);
  const int64_t rows = 3, cols = 5;
  const double eps = 1e-5;
  Vec x = randomVec(rng, rows * cols), gamma = randomVec(rng, cols, 0.5, 1.5),
      beta = randomVec(rng, cols), r = randomVec(rng, rows * cols);
  auto f = [&] {
    return dot(r, ref::layerNormForward(x, gamma, beta, rows, cols, eps).y);
  };
  ref::LayerNormGrads g = ref::layerNormBackward(r, x, gamma, rows, cols, eps);
  EXPECT_TRUE(matchesFiniteDifferences(x, f, g.dx));
  EXPECT_TRUE(matchesFiniteDifferences(gamma, f, g.dgamma));
  EXPECT_TRUE(matchesFiniteDifferences(beta, f, g.dbeta));
}

// embedding: dtable is the gradient of sum(r * table[ids]) with repeated ids
// (rows of r add up per id; unused ids get 0).
TEST(ReferenceGradient, Embedding) {
  std::mt19937_64 rng(108);
  const int64_t vocab = 5, width = 4;
  Ids ids = {2, 0, 2, 3, 2, 0};
  Vec table = randomVec(rng, vocab * width),
      r = randomVec(rng, ids.size() * width);
  auto f = [&] {
    return dot(r, ref::embeddingForward(ids, table, vocab, width));
  };
  EXPECT_TRUE(matchesFiniteDifferences(
      table, f, ref::embeddingBackward(ids, r, vocab, width)));
}

// multi-head attention (b 2, s 4, d 8, 2 heads), causal and not: dx, dwqkv,
// dwo are the gradients of sum(r * attention(x)).
TEST(ReferenceGradient, Attention) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "non-causal");
    std::mt19937_64 rng(causal ? 110 : 109);
    const int64_t batch = 2, seq = 4, width = 8, heads = 2;
    Vec x = randomVec(rng, batch * seq * width),
        wqkv = randomVec(rng, width * 3 * width),
        wo = randomVec(rng, width * width),
        r = randomVec(rng, batch * seq * width);
    auto f = [&] {
      return dot(r, ref::attentionForward(x, wqkv, wo, batch, seq, width, heads,
                                          causal)
                        .y);
    };
    ref::AttentionGrads g = ref::attentionBackward(r, x, wqkv, wo, batch, seq,
                                                   width, heads, causal);
    EXPECT_TRUE(matchesFiniteDifferences(x, f, g.dx));
    EXPECT_TRUE(matchesFiniteDifferences(wqkv, f, g.dwqkv));
    EXPECT_TRUE(matchesFiniteDifferences(wo, f, g.dwo));
  }
}

// Causal attention: output position i does not depend on inputs at j > i
// (the finite-difference check above cannot tell a leak from a right answer
// if forward and backward leak alike).
TEST(ReferenceGradient, CausalAttentionIgnoresTheFuture) {
  std::mt19937_64 rng(111);
  const int64_t batch = 1, seq = 4, width = 8, heads = 2;
  Vec x = randomVec(rng, seq * width), wqkv = randomVec(rng, width * 3 * width),
      wo = randomVec(rng, width * width);
  Vec y0 = ref::attentionForward(x, wqkv, wo, batch, seq, width, heads, true).y;
  for (int64_t c = 0; c < width; ++c)
    x[(seq - 1) * width + c] += 1.0; // change the last position only
  Vec y1 = ref::attentionForward(x, wqkv, wo, batch, seq, width, heads, true).y;
  for (int64_t i = 0; i < (seq - 1) * width; ++i)
    EXPECT_EQ(y0[i], y1[i]) << i;
  EXPECT_NE(y0[(seq - 1) * width], y1[(seq - 1) * width]);
}

// dropout (rate 0.3) given a mask: dx is the gradient of sum(r * dropout(x)).
TEST(ReferenceGradient, Dropout) {
  std::mt19937_64 rng(112);
  const double rate = 0.3;
  Vec x = randomVec(rng, 15), r = randomVec(rng, 15);
  Mask mask = randomMask(rng, 15, 1.0 - rate);
  auto f = [&] { return dot(r, ref::dropoutForward(x, mask, rate)); };
  EXPECT_TRUE(
      matchesFiniteDifferences(x, f, ref::dropoutBackward(mask, r, rate)));
}

// softmax cross-entropy (mean over rows) with scale 3/8: dlogits is the
// gradient of scale * loss.
TEST(ReferenceGradient, SoftmaxCrossEntropy) {
  std::mt19937_64 rng(113);
  const int64_t rows = 4, classes = 5;
  const double scale = 3.0 / 8.0;
  Vec logits = randomVec(rng, rows * classes, -2.0, 2.0);
  Ids labels = {4, 0, 2, 2};
  auto f = [&] {
    return scale *
           ref::softmaxCrossEntropyForward(logits, labels, rows, classes);
  };
  EXPECT_TRUE(matchesFiniteDifferences(
      logits, f,
      ref::softmaxCrossEntropyBackward(logits, labels, scale, rows, classes)));
}

// MSE (mean) with scale 3/8: dprediction is the gradient of scale * loss.
TEST(ReferenceGradient, Mse) {
  std::mt19937_64 rng(114);
  const double scale = 3.0 / 8.0;
  Vec prediction = randomVec(rng, 15), target = randomVec(rng, 15);
  auto f = [&] { return scale * ref::mseForward(prediction, target); };
  EXPECT_TRUE(matchesFiniteDifferences(
      prediction, f, ref::mseBackward(prediction, target, scale)));
}

// The reference forwards agree with values computed by hand, so that a
// reference wrong in the forward and consistently in the backward is caught.
TEST(ReferenceGradient, ForwardsMatchHandComputedValues) {
  // gelu(1) = 0.5 (1 + tanh(sqrt(2/pi) * 1.044715)) = 0.8411919906082768.
  EXPECT_NEAR(ref::geluForward({1.0})[0], 0.8411919906082768, 1e-15);
  // softmax([0, ln 3]) = [1/4, 3/4].
  Vec s = ref::softmaxForward({0.0, std::log(3.0)}, 1, 2);
  EXPECT_NEAR(s[0], 0.25, 1e-15);
  EXPECT_NEAR(s[1], 0.75, 1e-15);
  // layer_norm([1, 3]) with eps 0 = [-1, 1].
  Vec ln =
      ref::layerNormForward({1.0, 3.0}, {1.0, 1.0}, {0.0, 0.0}, 1, 2, 0.0).y;
  EXPECT_NEAR(ln[0], -1.0, 1e-15);
  EXPECT_NEAR(ln[1], 1.0, 1e-15);
  // cross-entropy of uniform logits over 4 classes = ln 4.
  EXPECT_NEAR(ref::softmaxCrossEntropyForward({0, 0, 0, 0}, {1}, 1, 4),
              std::log(4.0), 1e-15);
  // dense [1, 2] * [[1], [10]] + 100 = 121.
  EXPECT_EQ(ref::denseForward({1, 2}, {1, 10}, {100}, 1, 2, 1)[0], 121.0);
  // attention with one position is the value projection then wo:
  // x = [1, 2], wqkv = I | I | [[0, 1], [1, 0]], wo = I -> y = [2, 1].
  Vec y = ref::attentionForward({1, 2}, {1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0},
                                {1, 0, 0, 1}, 1, 1, 2, 1, true)
              .y;
  EXPECT_NEAR(y[0], 2.0, 1e-15);
  EXPECT_NEAR(y[1], 1.0, 1e-15);
  // Two positions, zero query weights: uniform attention over the allowed
  // positions. x = [[1, 0], [0, 1]] (s 2, d 2), v = x, wo = I.
  Vec wqkv = {0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1};
  Vec full =
      ref::attentionForward({1, 0, 0, 1}, wqkv, {1, 0, 0, 1}, 1, 2, 2, 1, false)
          .y;
  for (double v : full)
    EXPECT_NEAR(v, 0.5, 1e-15);
  Vec causal =
      ref::attentionForward({1, 0, 0, 1}, wqkv, {1, 0, 0, 1}, 1, 2, 2, 1, true)
          .y;
  EXPECT_NEAR(causal[0], 1.0, 1e-15);
  EXPECT_NEAR(causal[1], 0.0, 1e-15);
  EXPECT_NEAR(causal[2], 0.5, 1e-15);
  EXPECT_NEAR(causal[3], 0.5, 1e-15);
}
