//===- NonFiniteGuardTest.cpp - The optimizer step's non-finite guard -----===//
//
// OptimizerConfig::checkFinite on a two-stage linear model with an MSE loss,
// y = x w + b, loss = mean (y - t)^2, whose values are chosen so that one
// quantity at a time stops being finite: the loss (a nan input), a gradient
// with a finite loss (dw = x dy overflows where the loss does not), a
// parameter after the update (weight decay that overflows). Each step fails
// with the message that names the step, the stage and the tensor, on CpuBackend
// (deciding on its devices, DeviceGating.h, or on the host) and on the host
// emulation; before the update, parameters stay as they were. A clipped step
// matches the update computed here.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/runtime/backends/host/HostBackend.h"

#include "TestBundles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using gpipe::runtime::testing::buildBundle;
using gpipe::runtime::testing::ModelGraph;

namespace {

constexpr int64_t kRows = 4;

/// x [4, 1] -> dense (w [1, 1], b [1]) in stage 0, MSE against t [4, 1] in
/// stage 1; `microbatches` micro-batches.
Bundle linearBundle(unsigned microbatches) {
  ModelGraph g(kRows);
  int x = g.input("x", {kRows, 1});
  int t = g.input("target", {kRows, 1});
  int w = g.param("w", {1, 1}, InitKind::GlorotUniform);
  int b = g.param("b", {1}, InitKind::Zeros);
  int y = g.dense(x, w, b);
  g.nextLayer();
  g.mse(y, t);
  return buildBundle(g, {0, 1}, microbatches, RematPolicy::None);
}

Batch batchOf(std::vector<float> x) {
  return {{"x", HostTensor::floats({kRows, 1}, std::move(x))},
          {"target", HostTensor::floats({kRows, 1}, {0, 0, 0, 0})}};
}

enum class Backend { Cpu, CpuDecidingOnTheHost, HostEmulation };

/// On `kind`, w = 0.1 and b = 0.
std::unique_ptr<DeviceExecutor>
makeExecutor(Backend kind, unsigned microbatches, OptimizerConfig optimizer) {
  DeviceExecutorConfig config;
  config.optimizer = optimizer;
  std::unique_ptr<DeviceBackend> backend;
  if (kind == Backend::HostEmulation) {
    backend = std::make_unique<HostBackend>(2, 7);
  } else {
    CpuThreading threading;
    threading.decideOnDevices = kind == Backend::Cpu;
    backend = std::make_unique<CpuBackend>(2, threading);
    EXPECT_EQ(backend->gating() != nullptr, kind == Backend::Cpu);
  }
  std::string error;
  auto executor = DeviceExecutor::create(linearBundle(microbatches),
                                         std::move(backend), config, error);
  EXPECT_TRUE(executor) << error;
  if (executor) {
    EXPECT_EQ(executor->setParameter("w", {0.1f}), "");
    EXPECT_EQ(executor->setParameter("b", {0.0f}), "");
  }
  return executor;
}

OptimizerConfig guarded() {
  OptimizerConfig config;
  config.kind = OptimizerKind::Sgd;
  config.learningRate = 0.01f;
  config.checkFinite = true;
  return config;
}

float valueOf(DeviceExecutor &executor, const std::string &name) {
  std::vector<float> values;
  EXPECT_EQ(executor.parameter(name, values), "");
  return values.empty() ? std::nanf("") : values[0];
}

class NonFiniteGuard : public ::testing::TestWithParam<Backend> {};

} // namespace

// A finite step passes and reports the gradient norm: with x = (1, 2, 3, 4),
// t = 0, y = 0.1 x, dy = 2 y / 4; dw = sum x dy = 0.05 * 30 = 1.5,
// db = sum dy = 0.05 * 10 = 0.5, norm sqrt(1.5^2 + 0.5^2).
TEST_P(NonFiniteGuard, AFiniteStepReportsTheGradientNorm) {
  auto executor = makeExecutor(GetParam(), 2, guarded());
  ASSERT_TRUE(executor);
  StepResult result = executor->trainStep(batchOf({1, 2, 3, 4}));
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_FALSE(result.nonFinite);
  ASSERT_TRUE(result.gradientNorm.has_value());
  EXPECT_NEAR(*result.gradientNorm, std::sqrt(1.5 * 1.5 + 0.5 * 0.5), 1e-6);
}

// Clipped at 1: w and b step by lr g / (norm + 1e-6) with the norm above.
TEST_P(NonFiniteGuard, AClippedStepMatchesTheReference) {
  OptimizerConfig config = guarded();
  config.clipGradNorm = 1.0f;
  auto executor = makeExecutor(GetParam(), 2, config);
  ASSERT_TRUE(executor);
  StepResult result = executor->trainStep(batchOf({1, 2, 3, 4}));
  ASSERT_TRUE(result.ok()) << result.error;
  const double norm = std::sqrt(1.5 * 1.5 + 0.5 * 0.5);
  EXPECT_NEAR(*result.gradientNorm, norm, 1e-6);
  const double scale = 1.0 / (norm + 1e-6);
  EXPECT_NEAR(valueOf(*executor, "w"), 0.1 - 0.01 * 1.5 * scale, 1e-7);
  EXPECT_NEAR(valueOf(*executor, "b"), -0.01 * 0.5 * scale, 1e-7);
}

TEST_P(NonFiniteGuard, ANanLossStopsBeforeTheUpdate) {
  auto executor = makeExecutor(GetParam(), 2, guarded());
  ASSERT_TRUE(executor);
  // Row 2 is micro-batch 1's first row.
  StepResult result = executor->trainStep(batchOf({1, 2, std::nanf(""), 4}));
  EXPECT_TRUE(result.nonFinite);
  EXPECT_EQ(result.error,
            "step 1: the loss of micro-batch 1 is nan (stage 1 on device 1); "
            "the step stopped before the update, the parameters are "
            "unchanged");
  EXPECT_EQ(valueOf(*executor, "w"), 0.1f);
  EXPECT_EQ(executor->stepsDone(), 0);
}

// x = 1e20 in row 0: y = 1e19, loss = (1e19)^2 / 4 = 2.5e37 is finite, but
// dw = x dy = 1e20 * 2e19 / 4 = 5e38 is not.
TEST_P(NonFiniteGuard, AnInfiniteGradientWithAFiniteLossStops) {
  auto executor = makeExecutor(GetParam(), 1, guarded());
  ASSERT_TRUE(executor);
  StepResult result = executor->trainStep(batchOf({1e20f, 0, 0, 0}));
  EXPECT_TRUE(result.nonFinite);
  EXPECT_EQ(result.error,
            "step 1: the gradient of parameter 'w' is inf (stage 0 on device "
            "0); the step stopped before the update, the parameters are "
            "unchanged");
  EXPECT_EQ(valueOf(*executor, "w"), 0.1f);
  // Without the guard the same step goes through and wrecks w.
  OptimizerConfig unguarded = guarded();
  unguarded.checkFinite = false;
  auto silent = makeExecutor(GetParam(), 1, unguarded);
  ASSERT_TRUE(silent);
  StepResult applied = silent->trainStep(batchOf({1e20f, 0, 0, 0}));
  EXPECT_TRUE(applied.ok()) << applied.error;
  EXPECT_FALSE(applied.gradientNorm.has_value()); // not measured
  EXPECT_FALSE(std::isfinite(valueOf(*silent, "w")));
}

// lr (g + wd w) = 1e10 (0.05 * 10 + 1e30 * 0.1) = 1e39 overflows: w is
// -inf after the update; b (0) stays finite.
TEST_P(NonFiniteGuard, AParameterThatOverflowsInTheUpdateStops) {
  OptimizerConfig config = guarded();
  config.learningRate = 1e10f;
  config.weightDecay = 1e30f;
  auto executor = makeExecutor(GetParam(), 2, config);
  ASSERT_TRUE(executor);
  StepResult result = executor->trainStep(batchOf({1, 2, 3, 4}));
  EXPECT_TRUE(result.nonFinite);
  EXPECT_EQ(result.error, "step 1: parameter 'w' is inf after the update "
                          "(stage 0 on device 0)");
}

TEST(NonFiniteGuardConfig, RefusesAnOptimizerThatCannotTrain) {
  OptimizerConfig config;
  config.kind = OptimizerKind::Adam;
  config.weightDecay = 0.1f;
  DeviceExecutorConfig executorConfig;
  executorConfig.optimizer = config;
  std::string error;
  auto executor = DeviceExecutor::create(
      linearBundle(1), std::make_unique<CpuBackend>(2), executorConfig, error);
  EXPECT_FALSE(executor);
  EXPECT_EQ(error, "weight decay applies to sgd and momentum (L2 added to "
                   "the gradient) and to adamw (decoupled), not to adam: use "
                   "adamw");
}

INSTANTIATE_TEST_SUITE_P(Backends, NonFiniteGuard,
                         ::testing::Values(Backend::Cpu,
                                           Backend::CpuDecidingOnTheHost,
                                           Backend::HostEmulation),
                         [](const ::testing::TestParamInfo<Backend> &info) {
                           return info.param == Backend::Cpu ? "Cpu"
                                  : info.param == Backend::CpuDecidingOnTheHost
                                      ? "CpuDecidingOnTheHost"
                                      : "HostEmulation";
                         });
