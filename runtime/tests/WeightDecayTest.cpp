//===- WeightDecayTest.cpp - AdamW, L2 weight decay, gradient scaling ----===//
//
// The expected values are computed here in double, straight from the update
// rules (Loshchilov & Hutter's AdamW, PyTorch's L2 weight_decay and
// clip_grad_norm_), independently of the runtime's float implementation.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/Optimizers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace gpipe::runtime;

namespace {

const std::vector<double> kInitial = {0.5, -1.25, 2.0, 0.0, -0.1};
const std::vector<std::vector<double>> kGrads = {{0.1, -0.2, 0.3, -0.4, 1.5},
                                                 {-0.05, 0.7, 0.25, 0.0, -2.0},
                                                 {0.3, 0.3, -0.6, 0.01, 0.2}};

/// Runs the runtime optimizer over the first `steps` of kGrads.
std::vector<double> runOptimizer(const OptimizerConfig &config, size_t steps) {
  size_t n = kInitial.size();
  std::vector<float> params(kInitial.begin(), kInitial.end());
  std::vector<std::vector<float>> slots(optimizerSlots(config.kind),
                                        std::vector<float>(n, 0.0f));
  std::vector<float *> slotPointers;
  for (std::vector<float> &slot : slots)
    slotPointers.push_back(slot.data());
  for (size_t t = 0; t < steps; ++t) {
    std::vector<float> grads(kGrads[t].begin(), kGrads[t].end());
    applyOptimizer(config, params.data(), grads.data(), slotPointers.data(),
                   int64_t(n), int64_t(t + 1));
  }
  return std::vector<double>(params.begin(), params.end());
}

void expectClose(const std::vector<double> &actual,
                 const std::vector<double> &expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 1e-5 * (1 + std::fabs(expected[i])))
        << "element " << i;
}

/// AdamW in double over `steps` steps, each gradient times `scale`.
std::vector<double> adamWReference(double lr, double wd, size_t steps,
                                   double scale = 1.0) {
  const double b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  std::vector<double> p = kInitial, m(p.size(), 0.0), v(p.size(), 0.0);
  for (size_t t = 1; t <= steps; ++t)
    for (size_t i = 0; i < p.size(); ++i) {
      double g = scale * kGrads[t - 1][i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      double mHat = m[i] / (1 - std::pow(b1, double(t)));
      double vHat = v[i] / (1 - std::pow(b2, double(t)));
      p[i] -= lr * (mHat / (std::sqrt(vHat) + eps) + wd * p[i]);
    }
  return p;
}

} // namespace

TEST(WeightDecay, AdamWParsesAndKeepsAdamsSlots) {
  OptimizerKind kind = OptimizerKind::Sgd;
  EXPECT_TRUE(parseOptimizerKind("adamw", kind));
  EXPECT_EQ(kind, OptimizerKind::AdamW);
  EXPECT_STREQ(optimizerKindName(OptimizerKind::AdamW), "adamw");
  EXPECT_EQ(optimizerSlots(OptimizerKind::AdamW), 2u);
}

// One step of AdamW: p - lr (sign(g) + wd p) up to epsilon, from the rule.
TEST(WeightDecay, AdamWOneStep) {
  OptimizerConfig config;
  config.kind = OptimizerKind::AdamW;
  config.learningRate = 0.05f;
  config.weightDecay = 0.1f;
  expectClose(runOptimizer(config, 1), adamWReference(0.05f, 0.1f, 1));
  // At step 1 m_hat / sqrt(v_hat) = sign(g): a closed form besides.
  std::vector<double> closed = kInitial;
  for (size_t i = 0; i < closed.size(); ++i)
    closed[i] -= double(0.05f) *
                 ((kGrads[0][i] > 0 ? 1 : -1) + double(0.1f) * kInitial[i]);
  expectClose(runOptimizer(config, 1), closed);
}

TEST(WeightDecay, AdamWThreeSteps) {
  OptimizerConfig config;
  config.kind = OptimizerKind::AdamW;
  config.learningRate = 0.05f;
  config.weightDecay = 0.01f;
  expectClose(runOptimizer(config, 3), adamWReference(0.05f, 0.01f, 3));
}

// Without decay AdamW is Adam, bit for bit.
TEST(WeightDecay, AdamWWithoutDecayIsAdam) {
  OptimizerConfig adamW, adam;
  adamW.kind = OptimizerKind::AdamW;
  adam.kind = OptimizerKind::Adam;
  adamW.learningRate = adam.learningRate = 0.05f;
  EXPECT_EQ(runOptimizer(adamW, 3), runOptimizer(adam, 3));
}

TEST(WeightDecay, SgdAddsL2ToTheGradient) {
  OptimizerConfig config;
  config.kind = OptimizerKind::Sgd;
  config.learningRate = 0.1f;
  config.weightDecay = 0.2f;
  const double lr = 0.1f, wd = 0.2f;
  std::vector<double> p = kInitial;
  for (const std::vector<double> &g : kGrads)
    for (size_t i = 0; i < p.size(); ++i)
      p[i] -= lr * (g[i] + wd * p[i]);
  expectClose(runOptimizer(config, 3), p);
}

TEST(WeightDecay, MomentumAddsL2ToTheGradient) {
  OptimizerConfig config;
  config.kind = OptimizerKind::Momentum;
  config.learningRate = 0.1f;
  config.momentum = 0.8f;
  config.weightDecay = 0.05f;
  const double lr = 0.1f, mu = 0.8f, wd = 0.05f;
  std::vector<double> p = kInitial, v(p.size(), 0.0);
  for (const std::vector<double> &g : kGrads)
    for (size_t i = 0; i < p.size(); ++i) {
      v[i] = mu * v[i] + g[i] + wd * p[i];
      p[i] -= lr * v[i];
    }
  expectClose(runOptimizer(config, 3), p);
}

// Clipping's factor scales the gradient every rule reads.
TEST(WeightDecay, GradientScaleScalesTheGradient) {
  OptimizerConfig config;
  config.kind = OptimizerKind::AdamW;
  config.learningRate = 0.05f;
  config.weightDecay = 0.01f;
  config.gradientScale = 0.25f;
  expectClose(runOptimizer(config, 3), adamWReference(0.05f, 0.01f, 3, 0.25));
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  sgd.learningRate = 0.1f;
  sgd.weightDecay = 0.2f;
  sgd.gradientScale = 0.5f;
  std::vector<double> p = kInitial;
  for (size_t i = 0; i < p.size(); ++i)
    p[i] -= double(0.1f) * (0.5 * kGrads[0][i] + double(0.2f) * p[i]);
  expectClose(runOptimizer(sgd, 1), p);
}

TEST(WeightDecay, ClipScale) {
  EXPECT_EQ(clipScale(3.0, 0.0f), 1.0f); // no clipping
  EXPECT_EQ(clipScale(0.5, 1.0f), 1.0f); // already within the norm
  EXPECT_FLOAT_EQ(clipScale(4.0, 1.0f), float(1.0 / (4.0 + 1e-6)));
  EXPECT_FLOAT_EQ(clipScale(10.0, 2.5f), float(2.5 / (10.0 + 1e-6)));
  // PyTorch's clip_grad_norm_: an infinite norm scales by 0, a NaN one by NaN
  // (clamp(max_norm / (norm + eps), max=1) keeps the NaN).
  EXPECT_EQ(clipScale(INFINITY, 1.0f), 0.0f);
  EXPECT_TRUE(std::isnan(clipScale(NAN, 1.0f)));
  EXPECT_EQ(clipScale(NAN, 0.0f), 1.0f); // no clipping: the norm is unused
}

TEST(WeightDecay, CheckOptimizerConfigMessages) {
  OptimizerConfig config;
  EXPECT_EQ(checkOptimizerConfig(config), "");
  config.kind = OptimizerKind::Adam;
  config.weightDecay = 0.01f;
  EXPECT_EQ(checkOptimizerConfig(config),
            "weight decay applies to sgd and momentum (L2 added to the "
            "gradient) and to adamw (decoupled), not to adam: use adamw");
  config.kind = OptimizerKind::RmsProp;
  EXPECT_EQ(checkOptimizerConfig(config),
            "weight decay applies to sgd and momentum (L2 added to the "
            "gradient) and to adamw (decoupled), not to rmsprop");
  config.kind = OptimizerKind::AdamW;
  EXPECT_EQ(checkOptimizerConfig(config), "");
  config.weightDecay = -0.5f;
  EXPECT_EQ(checkOptimizerConfig(config),
            "the weight decay must be a finite number >= 0, got -0.5");
  config.weightDecay = NAN;
  EXPECT_EQ(checkOptimizerConfig(config),
            "the weight decay must be a finite number >= 0, got nan");
  config.weightDecay = 0;
  config.clipGradNorm = -1;
  EXPECT_EQ(checkOptimizerConfig(config),
            "the gradient clipping norm must be a finite number >= 0 (0: no "
            "clipping), got -1");
  config.clipGradNorm = INFINITY;
  EXPECT_EQ(checkOptimizerConfig(config),
            "the gradient clipping norm must be a finite number >= 0 (0: no "
            "clipping), got inf");
}
