//===- OptimizersTest.cpp - Tests of the optimizers -----------------------===//
//
// The expected values are computed here in double, straight from the update
// rules, independently of the runtime's float implementation.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/Optimizers.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace gpipe::runtime;

namespace {

const std::vector<double> kInitial = {0.5, -1.25, 2.0, 0.0, -0.1};
/// The gradient at each of the three steps (a fixed sequence, not the
/// gradient of any function, so every step is different).
const std::vector<std::vector<double>> kGrads = {{0.1, -0.2, 0.3, -0.4, 1.5},
                                                 {-0.05, 0.7, 0.25, 0.0, -2.0},
                                                 {0.3, 0.3, -0.6, 0.01, 0.2}};

/// Runs the runtime optimizer over kGrads from kInitial.
std::vector<double> runOptimizer(const OptimizerConfig &config) {
  size_t n = kInitial.size();
  std::vector<float> params(kInitial.begin(), kInitial.end());
  std::vector<std::vector<float>> slots(optimizerSlots(config.kind),
                                        std::vector<float>(n, 0.0f));
  std::vector<float *> slotPointers;
  for (std::vector<float> &slot : slots)
    slotPointers.push_back(slot.data());
  for (size_t t = 0; t < kGrads.size(); ++t) {
    std::vector<float> grads(kGrads[t].begin(), kGrads[t].end());
    applyOptimizer(config, params.data(), grads.data(), slotPointers.data(),
                   static_cast<int64_t>(n), static_cast<int64_t>(t + 1));
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

} // namespace

TEST(Optimizers, Slots) {
  EXPECT_EQ(optimizerSlots(OptimizerKind::Sgd), 0u);
  EXPECT_EQ(optimizerSlots(OptimizerKind::Momentum), 1u);
  EXPECT_EQ(optimizerSlots(OptimizerKind::RmsProp), 2u);
  EXPECT_EQ(optimizerSlots(OptimizerKind::Adam), 2u);
}

TEST(Optimizers, ParseKind) {
  OptimizerKind kind = OptimizerKind::Sgd;
  EXPECT_TRUE(parseOptimizerKind("adam", kind));
  EXPECT_EQ(kind, OptimizerKind::Adam);
  EXPECT_TRUE(parseOptimizerKind("rmsprop", kind));
  EXPECT_EQ(kind, OptimizerKind::RmsProp);
  EXPECT_TRUE(parseOptimizerKind("momentum", kind));
  EXPECT_EQ(kind, OptimizerKind::Momentum);
  EXPECT_TRUE(parseOptimizerKind("sgd", kind));
  EXPECT_EQ(kind, OptimizerKind::Sgd);
  EXPECT_FALSE(parseOptimizerKind("Adam", kind));
  EXPECT_FALSE(parseOptimizerKind("", kind));
  EXPECT_FALSE(parseOptimizerKind("adagrad", kind));
  EXPECT_EQ(kind, OptimizerKind::Sgd);
  EXPECT_STREQ(optimizerKindName(OptimizerKind::RmsProp), "rmsprop");
}

TEST(Optimizers, SgdThreeSteps) {
  OptimizerConfig config;
  config.kind = OptimizerKind::Sgd;
  config.learningRate = 0.1f;
  std::vector<double> p = kInitial;
  for (const std::vector<double> &g : kGrads)
    for (size_t i = 0; i < p.size(); ++i)
      p[i] -= 0.1 * g[i];
  expectClose(runOptimizer(config), p);
}

TEST(Optimizers, MomentumThreeSteps) {
  OptimizerConfig config;
  config.kind = OptimizerKind::Momentum;
  config.learningRate = 0.1f;
  config.momentum = 0.8f;
  std::vector<double> p = kInitial, v(p.size(), 0.0);
  for (const std::vector<double> &g : kGrads) {
    for (size_t i = 0; i < p.size(); ++i) {
      v[i] = 0.8 * v[i] + g[i];
      p[i] -= 0.1 * v[i];
    }
  }
  expectClose(runOptimizer(config), p);
}

TEST(Optimizers, RmsPropThreeSteps) {
  OptimizerConfig config;
  config.kind = OptimizerKind::RmsProp;
  config.learningRate = 0.01f;
  config.decay = 0.9f;
  config.momentum = 0.5f;
  config.epsilon = 1e-6f;
  // The float hyper-parameters as the runtime sees them.
  double decay = 0.9f, momentum = 0.5f, lr = 0.01f, eps = 1e-6f;
  std::vector<double> p = kInitial, ms(p.size(), 0.0), mom(p.size(), 0.0);
  for (const std::vector<double> &g : kGrads) {
    for (size_t i = 0; i < p.size(); ++i) {
      ms[i] = decay * ms[i] + (1 - decay) * g[i] * g[i];
      mom[i] = momentum * mom[i] + lr * g[i] / std::sqrt(ms[i] + eps);
      p[i] -= mom[i];
    }
  }
  expectClose(runOptimizer(config), p);
}

TEST(Optimizers, AdamThreeSteps) {
  OptimizerConfig config;
  config.kind = OptimizerKind::Adam;
  config.learningRate = 0.05f;
  double lr = 0.05f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  std::vector<double> p = kInitial, m(p.size(), 0.0), v(p.size(), 0.0);
  for (size_t t = 1; t <= kGrads.size(); ++t) {
    const std::vector<double> &g = kGrads[t - 1];
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      double mHat = m[i] / (1 - std::pow(b1, t));
      double vHat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * mHat / (std::sqrt(vHat) + eps);
    }
  }
  expectClose(runOptimizer(config), p);
}

TEST(Optimizers, AdamFirstStepMovesByTheLearningRate) {
  // With bias correction, step 1 moves each parameter by lr sign(g) (up to
  // epsilon), whatever the gradient's magnitude.
  OptimizerConfig config;
  config.kind = OptimizerKind::Adam;
  config.learningRate = 0.01f;
  std::vector<float> p = {1.0f, 1.0f, 1.0f}, g = {1e-3f, -5.0f, 200.0f};
  std::vector<float> m(3, 0.0f), v(3, 0.0f);
  float *slots[] = {m.data(), v.data()};
  applyOptimizer(config, p.data(), g.data(), slots, 3, 1);
  EXPECT_NEAR(p[0], 0.99f, 1e-6);
  EXPECT_NEAR(p[1], 1.01f, 1e-6);
  EXPECT_NEAR(p[2], 0.99f, 1e-6);
}

class Convergence : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(Convergence, MinimisesAQuadratic) {
  // f(p) = sum (p - c)^2, gradient 2 (p - c).
  const std::vector<float> target = {1.5f, -2.0f, 0.25f, 3.0f, -0.75f};
  OptimizerConfig config;
  config.kind = GetParam();
  // Adam moves about lr per step whatever the gradient: it needs the largest.
  switch (config.kind) {
  case OptimizerKind::Sgd:
    config.learningRate = 0.1f;
    break;
  case OptimizerKind::Momentum:
    config.learningRate = 0.02f;
    break;
  case OptimizerKind::RmsProp:
    // Normalised steps leave a limit cycle of about lr / 2 around c.
    config.learningRate = 0.005f;
    break;
  case OptimizerKind::Adam:
  case OptimizerKind::AdamW:
    config.learningRate = 0.05f;
    break;
  }
  size_t n = target.size();
  std::vector<float> p(n, 0.0f), g(n);
  std::vector<std::vector<float>> slots(optimizerSlots(config.kind),
                                        std::vector<float>(n, 0.0f));
  std::vector<float *> slotPointers;
  for (std::vector<float> &slot : slots)
    slotPointers.push_back(slot.data());
  for (int64_t step = 1; step <= 300; ++step) {
    for (size_t i = 0; i < n; ++i)
      g[i] = 2.0f * (p[i] - target[i]);
    applyOptimizer(config, p.data(), g.data(), slotPointers.data(),
                   static_cast<int64_t>(n), step);
  }
  for (size_t i = 0; i < n; ++i)
    EXPECT_NEAR(p[i], target[i], 1e-2) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, Convergence,
    ::testing::Values(OptimizerKind::Sgd, OptimizerKind::Momentum,
                      OptimizerKind::RmsProp, OptimizerKind::Adam,
                      OptimizerKind::AdamW),
    [](const ::testing::TestParamInfo<OptimizerKind> &info) {
      return std::string(optimizerKindName(info.param));
    });
