//===- CpuKernelsTest.cpp - CPU kernels against an independent reference --===//
//
// Three layers of checks:
//   1. ReferenceGradient.*: the plain-loop double-precision reference
//      (ReferenceOps.h) has analytic backwards that match central finite
//      differences of its forwards, for every input and parameter.
//   2. KernelForward.* / KernelBackward.*: the f32 kernels match the reference
//      within a tolerance stated per op, including the accumulate (+=)
//      semantics of parameter gradients, the overwrite semantics of input
//      gradients and null input-gradient pointers.
//      KernelElementWise.*, KernelEmbedding.*, KernelLoss.* likewise, the last
//      with the loss scale of micro-batches.
//   3. Dropout.*, Errors.*: mask properties (determinism, micro-batch split
//      invariance, statistics) and the reporting of bad ids and labels.
//
// All randomness comes from std::mt19937_64 with fixed seeds.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/CpuKernels.h"
#include "ReferenceOps.h"
#include "gpipe/runtime/device/DropoutHash.h"

#include "FiniteDifferences.h"
#include "RandomData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace ref = gpipe::reference;
namespace cpu = gpipe::runtime::cpu;
using ref::Vec;
using Floats = std::vector<float>;
using Mask = std::vector<uint8_t>;
using Ids = std::vector<int32_t>;

namespace {

//===-- helpers -----------------------------------------------------------===//

// Values at the edges of the usual input range: 0, tiny, large, saturating.
const Floats kSpecialValues = {0.0f,   1e-4f, -1e-4f, 3.0f,   -3.0f,  10.0f,
                               -10.0f, 30.0f, -30.0f, 100.0f, -100.0f};

using gpipe::testing::dot;
using gpipe::testing::matchesFiniteDifferences;
using gpipe::testing::randomFloats;
using gpipe::testing::randomIds;
using gpipe::testing::randomVec;

Mask randomMask(std::mt19937_64 &rng, size_t n, double keep) {
  std::bernoulli_distribution dist(keep);
  Mask m(n);
  for (uint8_t &e : m)
    e = dist(rng) ? 1 : 0;
  return m;
}

Vec toDouble(const Floats &v) { return Vec(v.begin(), v.end()); }

// Every element of `actual` is within atol + rtol * |expected| of `expected`;
// the message names the first offending index and how many offend.
::testing::AssertionResult allClose(const float *actual, const Vec &expected,
                                    double rtol, double atol) {
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    double error = std::abs(static_cast<double>(actual[i]) - expected[i]);
    bool ok = error <= atol + rtol * std::abs(expected[i]);
    if (!ok || std::isnan(actual[i])) {
      if (bad++ == 0)
        first = i;
    }
    worst = std::max(worst, error);
  }
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << expected.size() << " elements differ (rtol "
         << rtol << ", atol " << atol << "); first at [" << first
         << "]: actual " << actual[first] << ", expected " << expected[first]
         << "; max abs error " << worst;
}

::testing::AssertionResult allClose(const Floats &actual, const Vec &expected,
                                    double rtol, double atol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != " << expected.size();
  return allClose(actual.data(), expected, rtol, atol);
}

// after - before, in double: what a kernel added to an accumulated gradient.
Vec added(const Floats &after, const Floats &before) {
  Vec d(after.size());
  for (size_t i = 0; i < after.size(); ++i)
    d[i] = static_cast<double>(after[i]) - static_cast<double>(before[i]);
  return d;
}

::testing::AssertionResult allClose(const Vec &actual, const Vec &expected,
                                    double rtol, double atol) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    if (!(std::abs(actual[i] - expected[i]) <=
          atol + rtol * std::abs(expected[i])) &&
        bad++ == 0)
      first = i;
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << expected.size() << " elements differ (rtol "
         << rtol << ", atol " << atol << "); first at [" << first
         << "]: actual " << actual[first] << ", expected " << expected[first];
}

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

//===----------------------------------------------------------------------===//
// 2. Kernels (f32) against the reference (f64 on the same inputs).
//===----------------------------------------------------------------------===//

namespace {

// Kernels see OpenBLAS limited to one thread, as on a pipeline device.
class SingleThreadedBlas : public ::testing::Environment {
public:
  void SetUp() override { cpu::useSingleThreadedBlas(); }
};
const auto *const kBlasEnvironment =
    ::testing::AddGlobalTestEnvironment(new SingleThreadedBlas);

// A value no correct kernel leaves in an overwritten output.
constexpr float kGarbage = 777.0f;

std::string shapeName(std::initializer_list<int64_t> dims) {
  std::ostringstream os;
  const char *sep = "";
  for (int64_t d : dims) {
    os << sep << d;
    sep = "x";
  }
  return os.str();
}

struct DenseShape {
  int64_t rows, in, out;
};
const DenseShape kDenseShapes[] = {
    {3, 5, 4}, {64, 96, 48}, {1, 7, 1}, {5, 1, 3}};

struct AttentionShape {
  int64_t batch, seq, width, heads;
};
// Includes long sequences (130, 300) so that kernels working on blocks of
// the score matrix are checked across block boundaries.
const AttentionShape kAttentionShapes[] = {{2, 4, 8, 2},   {1, 5, 12, 3},
                                           {3, 16, 32, 4}, {1, 1, 4, 1},
                                           {2, 130, 8, 2}, {1, 300, 16, 2}};

} // namespace

//===-- dense ------------------------------------------------------------===//

// dense forward = x w + b within rtol 1e-5, atol 1e-5 (inner dims up to 96).
TEST(KernelForward, Dense) {
  std::mt19937_64 rng(201);
  for (DenseShape s : kDenseShapes) {
    SCOPED_TRACE(shapeName({s.rows, s.in, s.out}));
    Floats x = randomFloats(rng, s.rows * s.in),
           w = randomFloats(rng, s.in * s.out), b = randomFloats(rng, s.out);
    Floats y(s.rows * s.out, kGarbage);
    cpu::denseForward(x.data(), w.data(), b.data(), y.data(), s.rows, s.in,
                      s.out);
    EXPECT_TRUE(allClose(y,
                         ref::denseForward(toDouble(x), toDouble(w),
                                           toDouble(b), s.rows, s.in, s.out),
                         1e-5, 1e-5));
  }
}

// dense backward: dx overwritten, dw and db accumulated onto random values,
// all within rtol 1e-5, atol 1e-5.
TEST(KernelBackward, Dense) {
  std::mt19937_64 rng(202);
  for (DenseShape s : kDenseShapes) {
    SCOPED_TRACE(shapeName({s.rows, s.in, s.out}));
    Floats x = randomFloats(rng, s.rows * s.in),
           w = randomFloats(rng, s.in * s.out),
           dy = randomFloats(rng, s.rows * s.out);
    Floats dx(s.rows * s.in, kGarbage);
    Floats dw0 = randomFloats(rng, s.in * s.out), dw = dw0;
    Floats db0 = randomFloats(rng, s.out), db = db0;
    cpu::denseBackward(dy.data(), x.data(), w.data(), dx.data(), dw.data(),
                       db.data(), s.rows, s.in, s.out);
    ref::DenseGrads g = ref::denseBackward(toDouble(dy), toDouble(x),
                                           toDouble(w), s.rows, s.in, s.out);
    EXPECT_TRUE(allClose(dx, g.dx, 1e-5, 1e-5));
    EXPECT_TRUE(allClose(added(dw, dw0), g.dw, 1e-5, 1e-5));
    EXPECT_TRUE(allClose(added(db, db0), g.db, 1e-5, 1e-5));
  }
}

// dense backward with null dx and/or db skips them and still accumulates the
// others correctly.
TEST(KernelBackward, DenseNullInputGradients) {
  std::mt19937_64 rng(203);
  const int64_t rows = 6, in = 5, out = 4;
  Floats x = randomFloats(rng, rows * in), w = randomFloats(rng, in * out),
         dy = randomFloats(rng, rows * out);
  ref::DenseGrads g =
      ref::denseBackward(toDouble(dy), toDouble(x), toDouble(w), rows, in, out);
  for (int variant = 0; variant < 3; ++variant) {
    bool withDx = variant == 1, withDb = variant == 2;
    SCOPED_TRACE(variant);
    Floats dx(rows * in, kGarbage), dw(in * out, 0.0f), db(out, 0.0f);
    cpu::denseBackward(dy.data(), x.data(), w.data(),
                       withDx ? dx.data() : nullptr, dw.data(),
                       withDb ? db.data() : nullptr, rows, in, out);
    EXPECT_TRUE(allClose(dw, g.dw, 1e-5, 1e-5));
    EXPECT_TRUE(
        allClose(dx, withDx ? g.dx : Vec(rows * in, kGarbage), 1e-5, 1e-5));
    EXPECT_TRUE(allClose(db, withDb ? g.db : Vec(out, 0.0), 1e-5, 1e-5));
  }
}

// dw and db accumulated over micro-batches rows [0,3) and [3,8) equal the
// reference gradients of the whole batch of 8 rows.
TEST(KernelBackward, DenseAccumulatesOverMicroBatches) {
  std::mt19937_64 rng(204);
  const int64_t rows = 8, in = 6, out = 5, split = 3;
  Floats x = randomFloats(rng, rows * in), w = randomFloats(rng, in * out),
         dy = randomFloats(rng, rows * out);
  Floats dx(rows * in), dw(in * out, 0.0f), db(out, 0.0f);
  cpu::denseBackward(dy.data(), x.data(), w.data(), dx.data(), dw.data(),
                     db.data(), split, in, out);
  cpu::denseBackward(dy.data() + split * out, x.data() + split * in, w.data(),
                     dx.data() + split * in, dw.data(), db.data(), rows - split,
                     in, out);
  ref::DenseGrads g =
      ref::denseBackward(toDouble(dy), toDouble(x), toDouble(w), rows, in, out);
  EXPECT_TRUE(allClose(dw, g.dw, 1e-5, 1e-5));
  EXPECT_TRUE(allClose(db, g.db, 1e-5, 1e-5));
  EXPECT_TRUE(allClose(dx, g.dx, 1e-5, 1e-5));
}

//===-- element-wise -----------------------------------------------------===//

const int64_t kElementCounts[] = {15, 1001};

// relu forward and backward are exact (selection, no arithmetic); dx is
// overwritten.
TEST(KernelElementWise, Relu) {
  std::mt19937_64 rng(211);
  for (int64_t n : kElementCounts) {
    SCOPED_TRACE(n);
    Floats x = randomFloats(rng, n), dy = randomFloats(rng, n);
    Floats y(n, kGarbage), dx(n, kGarbage);
    cpu::reluForward(x.data(), y.data(), n);
    cpu::reluBackward(x.data(), dy.data(), dx.data(), n);
    EXPECT_TRUE(allClose(y, ref::reluForward(toDouble(x)), 0, 0));
    EXPECT_TRUE(
        allClose(dx, ref::reluBackward(toDouble(x), toDouble(dy)), 0, 0));
  }
}

// gelu (tanh approximation) forward and backward on [-5, 5] and at 0, +-1e-4,
// +-3, +-10, +-30, +-100, within rtol 1e-5, atol 1e-6; dx is overwritten.
TEST(KernelElementWise, Gelu) {
  std::mt19937_64 rng(212);
  for (int64_t n : kElementCounts) {
    SCOPED_TRACE(n);
    Floats x = randomFloats(rng, n, -5.0f, 5.0f), dy = randomFloats(rng, n);
    std::copy(kSpecialValues.begin(), kSpecialValues.end(), x.begin());
    Floats y(n, kGarbage), dx(n, kGarbage);
    cpu::geluForward(x.data(), y.data(), n);
    cpu::geluBackward(x.data(), dy.data(), dx.data(), n);
    EXPECT_TRUE(allClose(y, ref::geluForward(toDouble(x)), 1e-5, 1e-6));
    EXPECT_TRUE(
        allClose(dx, ref::geluBackward(toDouble(x), toDouble(dy)), 1e-5, 1e-6));
  }
}

// tanh forward, and backward from the kernel's own y, on [-4, 4] and at the
// special values above, within rtol 1e-5, atol 1e-6; dx is overwritten.
TEST(KernelElementWise, Tanh) {
  std::mt19937_64 rng(213);
  for (int64_t n : kElementCounts) {
    SCOPED_TRACE(n);
    Floats x = randomFloats(rng, n, -4.0f, 4.0f), dy = randomFloats(rng, n);
    std::copy(kSpecialValues.begin(), kSpecialValues.end(), x.begin());
    Floats y(n, kGarbage), dx(n, kGarbage);
    cpu::tanhForward(x.data(), y.data(), n);
    cpu::tanhBackward(y.data(), dy.data(), dx.data(), n);
    EXPECT_TRUE(allClose(y, ref::tanhForward(toDouble(x)), 1e-5, 1e-6));
    EXPECT_TRUE(
        allClose(dx, ref::tanhBackward(toDouble(x), toDouble(dy)), 1e-5, 1e-6));
  }
}

// add forward is the correctly rounded sum (rtol 1e-7).
TEST(KernelElementWise, Add) {
  std::mt19937_64 rng(214);
  for (int64_t n : kElementCounts) {
    SCOPED_TRACE(n);
    Floats a = randomFloats(rng, n), b = randomFloats(rng, n);
    Floats y(n, kGarbage);
    cpu::addForward(a.data(), b.data(), y.data(), n);
    EXPECT_TRUE(
        allClose(y, ref::addForward(toDouble(a), toDouble(b)), 1e-7, 0));
  }
}

//===-- softmax ----------------------------------------------------------===//

// softmax forward within rtol 1e-5, atol 1e-7, including logits shifted by
// +-1000 (no overflow: the max is subtracted).
TEST(KernelForward, Softmax) {
  std::mt19937_64 rng(221);
  struct Case {
    int64_t rows, cols;
    float shift;
  };
  for (Case c : {Case{3, 5, 0}, Case{64, 97, 0}, Case{4, 1, 0},
                 Case{3, 5, 1000}, Case{3, 5, -1000}}) {
    SCOPED_TRACE(shapeName({c.rows, c.cols, (int64_t)c.shift}));
    Floats x = randomFloats(rng, c.rows * c.cols, -3.0f, 3.0f);
    for (float &v : x)
      v += c.shift;
    Floats y(c.rows * c.cols, kGarbage);
    cpu::softmaxForward(x.data(), y.data(), c.rows, c.cols);
    EXPECT_TRUE(allClose(y, ref::softmaxForward(toDouble(x), c.rows, c.cols),
                         1e-5, 1e-7));
  }
}

// softmax backward from the kernel's own y within rtol 1e-5, atol 1e-6; dx is
// overwritten.
TEST(KernelBackward, Softmax) {
  std::mt19937_64 rng(222);
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{3, 5}, {64, 97}, {4, 1}}) {
    SCOPED_TRACE(shapeName({rows, cols}));
    Floats x = randomFloats(rng, rows * cols, -3.0f, 3.0f),
           dy = randomFloats(rng, rows * cols);
    Floats y(rows * cols), dx(rows * cols, kGarbage);
    cpu::softmaxForward(x.data(), y.data(), rows, cols);
    cpu::softmaxBackward(y.data(), dy.data(), dx.data(), rows, cols);
    EXPECT_TRUE(allClose(
        dx, ref::softmaxBackward(toDouble(x), toDouble(dy), rows, cols), 1e-5,
        1e-6));
  }
}

//===-- layer norm -------------------------------------------------------===//

namespace {
struct LayerNormCase {
  int64_t rows, cols;
  float offset; // added to every x: a mean far from 0
};
const LayerNormCase kLayerNormCases[] = {
    {3, 5, 0}, {64, 96, 0}, {2, 2, 0}, {8, 33, 10}};
} // namespace

// layer norm forward: y, saved mean and rstd within rtol 1e-5, atol 1e-5
// (eps 1e-5; one case with a mean of 10).
TEST(KernelForward, LayerNorm) {
  std::mt19937_64 rng(231);
  const float eps = 1e-5f;
  for (LayerNormCase c : kLayerNormCases) {
    SCOPED_TRACE(shapeName({c.rows, c.cols, (int64_t)c.offset}));
    Floats x = randomFloats(rng, c.rows * c.cols);
    for (float &v : x)
      v += c.offset;
    Floats gamma = randomFloats(rng, c.cols, 0.5f, 1.5f),
           beta = randomFloats(rng, c.cols);
    Floats y(c.rows * c.cols, kGarbage), mean(c.rows, kGarbage),
        rstd(c.rows, kGarbage);
    cpu::layerNormForward(x.data(), gamma.data(), beta.data(), y.data(),
                          mean.data(), rstd.data(), c.rows, c.cols, eps);
    ref::LayerNormResult r =
        ref::layerNormForward(toDouble(x), toDouble(gamma), toDouble(beta),
                              c.rows, c.cols, static_cast<double>(eps));
    EXPECT_TRUE(allClose(y, r.y, 1e-5, 1e-5));
    EXPECT_TRUE(allClose(mean, r.mean, 1e-5, 1e-5));
    EXPECT_TRUE(allClose(rstd, r.rstd, 1e-5, 1e-5));
  }
}

// layer norm backward from the kernel's saved mean/rstd: dx overwritten,
// dgamma/dbeta accumulated onto random values, within rtol 1e-4, atol 1e-5.
TEST(KernelBackward, LayerNorm) {
  std::mt19937_64 rng(232);
  const float eps = 1e-5f;
  for (LayerNormCase c : kLayerNormCases) {
    SCOPED_TRACE(shapeName({c.rows, c.cols, (int64_t)c.offset}));
    Floats x = randomFloats(rng, c.rows * c.cols);
    for (float &v : x)
      v += c.offset;
    Floats gamma = randomFloats(rng, c.cols, 0.5f, 1.5f),
           beta = randomFloats(rng, c.cols),
           dy = randomFloats(rng, c.rows * c.cols);
    Floats y(c.rows * c.cols), mean(c.rows), rstd(c.rows);
    cpu::layerNormForward(x.data(), gamma.data(), beta.data(), y.data(),
                          mean.data(), rstd.data(), c.rows, c.cols, eps);
    Floats dx(c.rows * c.cols, kGarbage);
    Floats dgamma0 = randomFloats(rng, c.cols), dgamma = dgamma0;
    Floats dbeta0 = randomFloats(rng, c.cols), dbeta = dbeta0;
    cpu::layerNormBackward(dy.data(), x.data(), gamma.data(), mean.data(),
                           rstd.data(), dx.data(), dgamma.data(), dbeta.data(),
                           c.rows, c.cols);
    ref::LayerNormGrads g =
        ref::layerNormBackward(toDouble(dy), toDouble(x), toDouble(gamma),
                               c.rows, c.cols, static_cast<double>(eps));
    EXPECT_TRUE(allClose(dx, g.dx, 1e-4, 1e-5));
    EXPECT_TRUE(allClose(added(dgamma, dgamma0), g.dgamma, 1e-4, 1e-5));
    EXPECT_TRUE(allClose(added(dbeta, dbeta0), g.dbeta, 1e-4, 1e-5));
  }
}

// layer norm backward with a null dx still accumulates dgamma and dbeta.
TEST(KernelBackward, LayerNormNullDx) {
  std::mt19937_64 rng(233);
  const int64_t rows = 4, cols = 6;
  const float eps = 1e-5f;
  Floats x = randomFloats(rng, rows * cols),
         gamma = randomFloats(rng, cols, 0.5f, 1.5f),
         beta = randomFloats(rng, cols), dy = randomFloats(rng, rows * cols);
  Floats y(rows * cols), mean(rows), rstd(rows);
  cpu::layerNormForward(x.data(), gamma.data(), beta.data(), y.data(),
                        mean.data(), rstd.data(), rows, cols, eps);
  Floats dgamma(cols, 0.0f), dbeta(cols, 0.0f);
  cpu::layerNormBackward(dy.data(), x.data(), gamma.data(), mean.data(),
                         rstd.data(), nullptr, dgamma.data(), dbeta.data(),
                         rows, cols);
  ref::LayerNormGrads g = ref::layerNormBackward(
      toDouble(dy), toDouble(x), toDouble(gamma), rows, cols, eps);
  EXPECT_TRUE(allClose(dgamma, g.dgamma, 1e-4, 1e-5));
  EXPECT_TRUE(allClose(dbeta, g.dbeta, 1e-4, 1e-5));
}

//===-- embedding --------------------------------------------------------===//

// embedding forward copies table rows exactly and reports -1 for valid ids;
// backward accumulates dy rows per (repeated) id onto random values within
// rtol 1e-6, atol 1e-6.
TEST(KernelEmbedding, ForwardAndBackward) {
  std::mt19937_64 rng(241);
  struct Case {
    Ids ids;
    int64_t vocab, width;
  };
  std::vector<Case> cases = {{{2, 0, 2, 3, 2, 0, 6}, 7, 5},
                             {randomIds(rng, 200, 50), 50, 64}};
  for (const Case &c : cases) {
    SCOPED_TRACE(shapeName({(int64_t)c.ids.size(), c.vocab, c.width}));
    int64_t n = c.ids.size();
    Floats table = randomFloats(rng, c.vocab * c.width),
           dy = randomFloats(rng, n * c.width);
    Floats y(n * c.width, kGarbage);
    EXPECT_EQ(cpu::embeddingForward(c.ids.data(), table.data(), y.data(), n,
                                    c.vocab, c.width),
              -1);
    EXPECT_TRUE(allClose(
        y, ref::embeddingForward(c.ids, toDouble(table), c.vocab, c.width), 0,
        0));
    Floats dtable0 = randomFloats(rng, c.vocab * c.width), dtable = dtable0;
    cpu::embeddingBackward(c.ids.data(), dy.data(), dtable.data(), n, c.width);
    EXPECT_TRUE(
        allClose(added(dtable, dtable0),
                 ref::embeddingBackward(c.ids, toDouble(dy), c.vocab, c.width),
                 1e-6, 1e-6));
  }
}

//===-- attention --------------------------------------------------------===//

// attention forward, causal and not: y and the saved qkv, probs (0 where
// masked) and context within rtol 1e-4, atol 1e-5.
TEST(KernelForward, Attention) {
  std::mt19937_64 rng(251);
  for (AttentionShape s : kAttentionShapes)
    for (bool causal : {false, true}) {
      SCOPED_TRACE(shapeName({s.batch, s.seq, s.width, s.heads, causal}));
      int64_t tokens = s.batch * s.seq;
      Floats x = randomFloats(rng, tokens * s.width),
             wqkv = randomFloats(rng, s.width * 3 * s.width),
             wo = randomFloats(rng, s.width * s.width);
      Floats y(tokens * s.width, kGarbage), qkv(tokens * 3 * s.width, kGarbage),
          probs(s.batch * s.heads * s.seq * s.seq, kGarbage),
          context(tokens * s.width, kGarbage);
      cpu::attentionForward(x.data(), wqkv.data(), wo.data(), nullptr, nullptr,
                            y.data(), qkv.data(), probs.data(), context.data(),
                            s.batch, s.seq, s.width, s.heads, causal);
      ref::AttentionResult r =
          ref::attentionForward(toDouble(x), toDouble(wqkv), toDouble(wo),
                                s.batch, s.seq, s.width, s.heads, causal);
      EXPECT_TRUE(allClose(y, r.y, 1e-4, 1e-5));
      EXPECT_TRUE(allClose(qkv, r.qkv, 1e-4, 1e-5));
      EXPECT_TRUE(allClose(probs, r.probs, 1e-4, 1e-5));
      EXPECT_TRUE(allClose(context, r.context, 1e-4, 1e-5));
    }
}

// attention backward from the kernel's saved buffers, causal and not: dx
// overwritten, dwqkv and dwo accumulated onto random values, scratch filled
// with garbage beforehand; within rtol 1e-4, atol 1e-4.
TEST(KernelBackward, Attention) {
  std::mt19937_64 rng(252);
  for (AttentionShape s : kAttentionShapes)
    for (bool causal : {false, true}) {
      SCOPED_TRACE(shapeName({s.batch, s.seq, s.width, s.heads, causal}));
      int64_t tokens = s.batch * s.seq;
      Floats x = randomFloats(rng, tokens * s.width),
             wqkv = randomFloats(rng, s.width * 3 * s.width),
             wo = randomFloats(rng, s.width * s.width),
             dy = randomFloats(rng, tokens * s.width);
      Floats y(tokens * s.width), qkv(tokens * 3 * s.width),
          probs(s.batch * s.heads * s.seq * s.seq), context(tokens * s.width);
      cpu::attentionForward(x.data(), wqkv.data(), wo.data(), nullptr, nullptr,
                            y.data(), qkv.data(), probs.data(), context.data(),
                            s.batch, s.seq, s.width, s.heads, causal);
      Floats dx(tokens * s.width, kGarbage);
      Floats dwqkv0 = randomFloats(rng, wqkv.size()), dwqkv = dwqkv0;
      Floats dwo0 = randomFloats(rng, wo.size()), dwo = dwo0;
      Floats scratch(4 * tokens * s.width, kGarbage);
      cpu::attentionBackward(
          dy.data(), x.data(), wqkv.data(), wo.data(), qkv.data(), probs.data(),
          context.data(), dx.data(), dwqkv.data(), dwo.data(), nullptr, nullptr,
          scratch.data(), s.batch, s.seq, s.width, s.heads, causal);
      ref::AttentionGrads g = ref::attentionBackward(
          toDouble(dy), toDouble(x), toDouble(wqkv), toDouble(wo), s.batch,
          s.seq, s.width, s.heads, causal);
      EXPECT_TRUE(allClose(dx, g.dx, 1e-4, 1e-4));
      EXPECT_TRUE(allClose(added(dwqkv, dwqkv0), g.dwqkv, 1e-4, 1e-4));
      EXPECT_TRUE(allClose(added(dwo, dwo0), g.dwo, 1e-4, 1e-4));
    }
}

// attention backward with a null dx still accumulates dwqkv and dwo.
TEST(KernelBackward, AttentionNullDx) {
  std::mt19937_64 rng(253);
  const AttentionShape s{2, 4, 8, 2};
  const bool causal = true;
  int64_t tokens = s.batch * s.seq;
  Floats x = randomFloats(rng, tokens * s.width),
         wqkv = randomFloats(rng, s.width * 3 * s.width),
         wo = randomFloats(rng, s.width * s.width),
         dy = randomFloats(rng, tokens * s.width);
  Floats y(tokens * s.width), qkv(tokens * 3 * s.width),
      probs(s.batch * s.heads * s.seq * s.seq), context(tokens * s.width);
  cpu::attentionForward(x.data(), wqkv.data(), wo.data(), nullptr, nullptr,
                        y.data(), qkv.data(), probs.data(), context.data(),
                        s.batch, s.seq, s.width, s.heads, causal);
  Floats dwqkv(wqkv.size(), 0.0f), dwo(wo.size(), 0.0f);
  Floats scratch(4 * tokens * s.width, kGarbage);
  cpu::attentionBackward(
      dy.data(), x.data(), wqkv.data(), wo.data(), qkv.data(), probs.data(),
      context.data(), nullptr, dwqkv.data(), dwo.data(), nullptr, nullptr,
      scratch.data(), s.batch, s.seq, s.width, s.heads, causal);
  ref::AttentionGrads g = ref::attentionBackward(
      toDouble(dy), toDouble(x), toDouble(wqkv), toDouble(wo), s.batch, s.seq,
      s.width, s.heads, causal);
  EXPECT_TRUE(allClose(dwqkv, g.dwqkv, 1e-4, 1e-4));
  EXPECT_TRUE(allClose(dwo, g.dwo, 1e-4, 1e-4));
}

//===-- losses -----------------------------------------------------------===//

// softmax cross-entropy forward: loss within rtol 1e-5 and saved probs within
// rtol 1e-5, atol 1e-8 (also with logits shifted by 1000); badLabel -1.
TEST(KernelForward, SoftmaxCrossEntropy) {
  std::mt19937_64 rng(261);
  struct Case {
    int64_t rows, classes;
    float shift;
  };
  for (Case c : {Case{3, 5, 0}, Case{64, 1000, 0}, Case{4, 7, 1000}}) {
    SCOPED_TRACE(shapeName({c.rows, c.classes, (int64_t)c.shift}));
    Floats logits = randomFloats(rng, c.rows * c.classes, -3.0f, 3.0f);
    for (float &v : logits)
      v += c.shift;
    Ids labels = randomIds(rng, c.rows, c.classes);
    Floats probs(c.rows * c.classes, kGarbage);
    int64_t badLabel = 12345;
    float loss = cpu::softmaxCrossEntropyForward(logits.data(), labels.data(),
                                                 probs.data(), c.rows,
                                                 c.classes, &badLabel);
    EXPECT_EQ(badLabel, -1);
    double expected = ref::softmaxCrossEntropyForward(toDouble(logits), labels,
                                                      c.rows, c.classes);
    EXPECT_NEAR(loss, expected, 1e-5 * std::abs(expected));
    EXPECT_TRUE(allClose(
        probs, ref::softmaxForward(toDouble(logits), c.rows, c.classes), 1e-5,
        1e-8));
  }
}

// softmax cross-entropy backward from the kernel's probs with scale 3/8:
// dlogits overwritten, within rtol 1e-5, atol 1e-8.
TEST(KernelBackward, SoftmaxCrossEntropy) {
  std::mt19937_64 rng(262);
  const float scale = 3.0f / 8.0f;
  for (auto [rows, classes] : {std::pair<int64_t, int64_t>{3, 5}, {64, 1000}}) {
    SCOPED_TRACE(shapeName({rows, classes}));
    Floats logits = randomFloats(rng, rows * classes, -3.0f, 3.0f);
    Ids labels = randomIds(rng, rows, classes);
    Floats probs(rows * classes), dlogits(rows * classes, kGarbage);
    int64_t badLabel;
    cpu::softmaxCrossEntropyForward(logits.data(), labels.data(), probs.data(),
                                    rows, classes, &badLabel);
    cpu::softmaxCrossEntropyBackward(probs.data(), labels.data(), scale,
                                     dlogits.data(), rows, classes);
    EXPECT_TRUE(allClose(dlogits,
                         ref::softmaxCrossEntropyBackward(
                             toDouble(logits), labels, scale, rows, classes),
                         1e-5, 1e-8));
  }
}

// Micro-batch m of N rows with scale rows_m / N: each row's dlogits sums to 0
// and matches the reference; the micro-batch gradients of rows [0,3) and
// [3,8) equal the full-batch (scale 1) gradient of 8 rows.
TEST(KernelLoss, CrossEntropyScaleOverMicroBatches) {
  std::mt19937_64 rng(263);
  const int64_t rows = 8, classes = 6, split = 3;
  Floats logits = randomFloats(rng, rows * classes, -3.0f, 3.0f);
  Ids labels = randomIds(rng, rows, classes);
  Floats dlogits(rows * classes, kGarbage);
  for (auto [begin, end] :
       {std::pair<int64_t, int64_t>{0, split}, {split, rows}}) {
    int64_t m = end - begin;
    float scale = static_cast<float>(m) / rows;
    Floats probs(m * classes);
    int64_t badLabel;
    cpu::softmaxCrossEntropyForward(logits.data() + begin * classes,
                                    labels.data() + begin, probs.data(), m,
                                    classes, &badLabel);
    cpu::softmaxCrossEntropyBackward(probs.data(), labels.data() + begin, scale,
                                     dlogits.data() + begin * classes, m,
                                     classes);
    Floats part(logits.begin() + begin * classes,
                logits.begin() + end * classes);
    Ids partLabels(labels.begin() + begin, labels.begin() + end);
    EXPECT_TRUE(allClose(dlogits.data() + begin * classes,
                         ref::softmaxCrossEntropyBackward(
                             toDouble(part), partLabels, scale, m, classes),
                         1e-5, 1e-8));
  }
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += dlogits[r * classes + c];
    EXPECT_NEAR(sum, 0.0, 1e-7) << "row " << r;
  }
  EXPECT_TRUE(allClose(dlogits,
                       ref::softmaxCrossEntropyBackward(
                           toDouble(logits), labels, 1.0, rows, classes),
                       1e-5, 1e-8));
}

// MSE forward within rtol 1e-5; backward with scale 3/8 overwrites
// dprediction, within rtol 1e-6, atol 1e-8.
TEST(KernelLoss, Mse) {
  std::mt19937_64 rng(264);
  const float scale = 3.0f / 8.0f;
  for (int64_t n : kElementCounts) {
    SCOPED_TRACE(n);
    Floats prediction = randomFloats(rng, n), target = randomFloats(rng, n);
    float loss = cpu::mseForward(prediction.data(), target.data(), n);
    double expected = ref::mseForward(toDouble(prediction), toDouble(target));
    EXPECT_NEAR(loss, expected, 1e-5 * expected);
    Floats d(n, kGarbage);
    cpu::mseBackward(prediction.data(), target.data(), scale, d.data(), n);
    EXPECT_TRUE(allClose(
        d, ref::mseBackward(toDouble(prediction), toDouble(target), scale),
        1e-6, 1e-8));
  }
}

//===----------------------------------------------------------------------===//
// 3. Dropout masks and error reporting.
//===----------------------------------------------------------------------===//

namespace {
struct DropoutRun {
  Floats y;
  Mask mask;
};
DropoutRun runDropout(const Floats &x, int64_t rows, int64_t cols, float rate,
                      uint64_t seed, uint64_t step, int64_t rowOffset) {
  DropoutRun run{Floats(rows * cols, kGarbage), Mask(rows * cols, 77)};
  cpu::dropoutForward(x.data(), run.y.data(), run.mask.data(), rows, cols, rate,
                      seed, step, rowOffset);
  return run;
}
double fractionEqual(const Mask &a, const Mask &b) {
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i)
    same += a[i] == b[i];
  return static_cast<double>(same) / a.size();
}
} // namespace

// Rate 0 keeps every element and y == x exactly.
TEST(Dropout, RateZeroIsIdentity) {
  std::mt19937_64 rng(301);
  Floats x = randomFloats(rng, 7 * 13);
  DropoutRun run = runDropout(x, 7, 13, 0.0f, 42, 3, 0);
  EXPECT_EQ(run.mask, Mask(x.size(), 1));
  EXPECT_EQ(run.y, x);
}

// Rate 0.3 over 100k elements drops a fraction within 0.01 of 0.3; the mask
// holds only 0 and 1; kept values are x / (1 - rate) (rtol 1e-6), dropped
// ones 0; y matches the reference given the mask.
TEST(Dropout, DropFractionAndScaling) {
  std::mt19937_64 rng(302);
  const int64_t rows = 100, cols = 1000;
  const float rate = 0.3f;
  Floats x = randomFloats(rng, rows * cols);
  DropoutRun run = runDropout(x, rows, cols, rate, 1234, 0, 0);
  size_t dropped = 0;
  for (uint8_t m : run.mask) {
    ASSERT_TRUE(m == 0 || m == 1) << int(m);
    dropped += m == 0;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / x.size(), 0.3, 0.01);
  EXPECT_TRUE(allClose(run.y, ref::dropoutForward(toDouble(x), run.mask, rate),
                       1e-6, 0));
}

// Element decisions look independent: neighbouring rows, neighbouring columns
// and two steps agree on about 0.7^2 + 0.3^2 = 0.58 of the elements (within
// 0.02), not on all of them.
TEST(Dropout, NeighboursAreUncorrelated) {
  const int64_t rows = 200, cols = 500;
  Floats x(rows * cols, 1.0f);
  Mask mask = runDropout(x, rows, cols, 0.3f, 99, 5, 0).mask;
  Mask up(mask.begin(), mask.end() - cols),
      down(mask.begin() + cols, mask.end());
  EXPECT_NEAR(fractionEqual(up, down), 0.58, 0.02);
  Mask left, right;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c + 1 < cols; ++c) {
      left.push_back(mask[r * cols + c]);
      right.push_back(mask[r * cols + c + 1]);
    }
  EXPECT_NEAR(fractionEqual(left, right), 0.58, 0.02);
  Mask nextStep = runDropout(x, rows, cols, 0.3f, 99, 6, 0).mask;
  EXPECT_NEAR(fractionEqual(mask, nextStep), 0.58, 0.02);
}

// Micro-batch split invariance: the mask (and y) of rows [0,8) at rowOffset 0
// is the concatenation of rows [0,3) at rowOffset 0 and rows [3,8) at
// rowOffset 3.
TEST(Dropout, MaskIsInvariantToMicroBatchSplit) {
  std::mt19937_64 rng(304);
  const int64_t rows = 8, cols = 37, split = 3;
  const float rate = 0.4f;
  Floats x = randomFloats(rng, rows * cols);
  DropoutRun whole = runDropout(x, rows, cols, rate, 7, 11, 0);
  Floats top(x.begin(), x.begin() + split * cols),
      bottom(x.begin() + split * cols, x.end());
  DropoutRun first = runDropout(top, split, cols, rate, 7, 11, 0);
  DropoutRun second =
      runDropout(bottom, rows - split, cols, rate, 7, 11, split);
  Mask joined = first.mask;
  joined.insert(joined.end(), second.mask.begin(), second.mask.end());
  Floats joinedY = first.y;
  joinedY.insert(joinedY.end(), second.y.begin(), second.y.end());
  EXPECT_EQ(joined, whole.mask);
  EXPECT_EQ(joinedY, whole.y);
}

// The mask is DropoutHash.h's, element for element: kept iff
// dropoutUniform(row key, col) >= rate, computed here in floats as the hash
// defines it. Besides ordinary rates, each column's own boundary: at rate
// u / 2^24 (u its hash's top 24 bits) it is kept, at (u + 0.5) / 2^24 dropped
// and at (u - 0.5) / 2^24 kept, in every lane of the kernel's vectors.
TEST(Dropout, MaskIsTheHashsDefinition) {
  using gpipe::runtime::device::dropoutRowKey;
  using gpipe::runtime::device::dropoutUniform;
  const uint64_t seed = 17, step = 4;
  const int64_t rowOffset = 5;
  auto expected = [&](int64_t rows, int64_t cols, float rate) {
    Mask mask(rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        mask[r * cols + c] =
            dropoutUniform(dropoutRowKey(seed, step, rowOffset + r), c) >= rate;
    return mask;
  };
  std::vector<float> rates = {0.1f, 0.3f, 0.5f, 1e-7f, 0.99999994f};
  const int64_t boundaryCols = 19;
  const uint64_t key0 = dropoutRowKey(seed, step, rowOffset);
  for (int64_t c = 0; c < boundaryCols; ++c) {
    float u = dropoutUniform(key0, c) * 16777216.0f;
    rates.push_back(u / 16777216.0f);
    if (u < 8388608.0f && u >= 1.0f) { // u +- 0.5 is a float below 2^23
      rates.push_back((u + 0.5f) / 16777216.0f);
      rates.push_back((u - 0.5f) / 16777216.0f);
    }
  }
  std::mt19937_64 rng(307);
  for (float rate : rates)
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, boundaryCols},
                              {3, 1},
                              {2, 8},
                              {4, 37},
                              {2, 64}}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) +
                   " rate " + std::to_string(rate));
      Floats x = randomFloats(rng, rows * cols);
      DropoutRun run = runDropout(x, rows, cols, rate, seed, step, rowOffset);
      ASSERT_EQ(run.mask, expected(rows, cols, rate));
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(run.y[i], run.mask[i] ? x[i] * (1.0f / (1.0f - rate)) : 0.0f);
    }
}

// The decision of (row, col) does not depend on the number of columns: the
// first 10 columns of a 4x25 mask equal the 4x10 mask.
TEST(Dropout, MaskDependsOnColumnNotOnWidth) {
  Floats wide(4 * 25, 1.0f), narrow(4 * 10, 1.0f);
  Mask wideMask = runDropout(wide, 4, 25, 0.5f, 3, 1, 2).mask;
  Mask narrowMask = runDropout(narrow, 4, 10, 0.5f, 3, 1, 2).mask;
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 10; ++c)
      EXPECT_EQ(wideMask[r * 25 + c], narrowMask[r * 10 + c]) << r << "," << c;
}

// Same inputs give the same mask and y (recomputation reproduces them); a
// different step or a different seed gives a different mask.
TEST(Dropout, DeterministicPerSeedAndStep) {
  std::mt19937_64 rng(305);
  const int64_t rows = 16, cols = 64;
  Floats x = randomFloats(rng, rows * cols);
  DropoutRun a = runDropout(x, rows, cols, 0.3f, 1, 1, 0);
  DropoutRun b = runDropout(x, rows, cols, 0.3f, 1, 1, 0);
  EXPECT_EQ(a.mask, b.mask);
  EXPECT_EQ(a.y, b.y);
  Mask otherStep = runDropout(x, rows, cols, 0.3f, 1, 2, 0).mask;
  Mask otherSeed = runDropout(x, rows, cols, 0.3f, 2, 1, 0).mask;
  // Independent masks agree on about 58% of elements.
  EXPECT_LT(fractionEqual(a.mask, otherStep), 0.75);
  EXPECT_LT(fractionEqual(a.mask, otherSeed), 0.75);
}

// dropout backward matches the reference given the mask (rtol 1e-6) and
// overwrites dx.
TEST(Dropout, Backward) {
  std::mt19937_64 rng(306);
  for (float rate : {0.0f, 0.3f, 0.9f}) {
    SCOPED_TRACE(rate);
    const int64_t n = 1001;
    Mask mask = randomMask(rng, n, 1.0 - rate);
    Floats dy = randomFloats(rng, n), dx(n, kGarbage);
    cpu::dropoutBackward(mask.data(), dy.data(), dx.data(), n, rate);
    EXPECT_TRUE(
        allClose(dx, ref::dropoutBackward(mask, toDouble(dy), rate), 1e-6, 0));
  }
}

// embedding reports the index of the first out-of-range id (too large or
// negative) and writes no row past it.
TEST(Errors, EmbeddingOutOfRangeId) {
  std::mt19937_64 rng(311);
  const int64_t vocab = 5, width = 3;
  Floats table = randomFloats(rng, vocab * width);
  struct Case {
    Ids ids;
    int64_t expected;
  };
  for (const Case &c :
       {Case{{1, 3, 5, 2, 9}, 2}, Case{{-1, 0}, 0}, Case{{0, 4, 4, -7}, 3}}) {
    int64_t n = c.ids.size();
    Floats y(n * width, kGarbage);
    EXPECT_EQ(cpu::embeddingForward(c.ids.data(), table.data(), y.data(), n,
                                    vocab, width),
              c.expected);
    for (int64_t i = (c.expected + 1) * width; i < n * width; ++i)
      EXPECT_EQ(y[i], kGarbage) << i;
  }
}

// cross-entropy reports the index of the first label outside [0, classes)
// through badLabel, and -1 for valid labels.
TEST(Errors, CrossEntropyBadLabel) {
  std::mt19937_64 rng(312);
  const int64_t rows = 4, classes = 5;
  Floats logits = randomFloats(rng, rows * classes);
  struct Case {
    Ids labels;
    int64_t expected;
  };
  for (const Case &c : {Case{{0, 4, 5, 1}, 2}, Case{{-1, 0, 0, 9}, 0},
                        Case{{4, 3, 2, 1}, -1}}) {
    Floats probs(rows * classes);
    int64_t badLabel = 12345;
    cpu::softmaxCrossEntropyForward(logits.data(), c.labels.data(),
                                    probs.data(), rows, classes, &badLabel);
    EXPECT_EQ(badLabel, c.expected);
  }
}
