//===- DeviceGatingTest.cpp - A step's update decided on the devices ------===//
//
// decideStep's arithmetic against sums computed here, and the CPU backend's
// gated updates in a step: a batch norm's running statistics stay as they
// were when the guard stops the step, as its parameters do (without the
// guard, the same step writes nan into them); a statistic that overflows in
// the update fails the check after it. The guard's messages and the
// clipped update on the devices are NonFiniteGuardTest's.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/DeviceGating.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"

#include "TestBundles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using gpipe::runtime::testing::buildBundle;
using gpipe::runtime::testing::ModelGraph;

namespace {

/// Two parameters' sums of three parts each, (1 + 2 + 3) + (4 + 0 + 5) = 15,
/// and two finite losses.
struct Sums {
  double first[3] = {1, 2, 3};
  double second[3] = {4, 0, 5};
  float losses[2] = {0.5f, 0.25f};
  GateRequest request() {
    GateRequest r;
    r.parts = {first, second};
    r.partsPerParameter = 3;
    r.losses = losses;
    r.numLosses = 2;
    return r;
  }
};

} // namespace

TEST(DecideStep, AddsEveryPartAndScalesByTheClip) {
  Sums sums;
  GateRequest request = sums.request();
  StepGate unclipped = decideStep(request);
  EXPECT_EQ(unclipped.sumOfSquares, 15.0);
  EXPECT_EQ(unclipped.scale, 1.0f);
  EXPECT_EQ(unclipped.apply, 1);
  request.clipGradNorm = 1.0f; // norm sqrt(15) = 3.87 is above it
  StepGate clipped = decideStep(request);
  EXPECT_FLOAT_EQ(clipped.scale, float(1.0 / (std::sqrt(15.0) + 1e-6)));
  request.clipGradNorm = 4.0f; // below it: unscaled
  EXPECT_EQ(decideStep(request).scale, 1.0f);
}

TEST(DecideStep, TheGuardStopsOnANonFiniteLossOrSum) {
  Sums sums;
  GateRequest request = sums.request();
  request.checkFinite = true;
  EXPECT_EQ(decideStep(request).apply, 1);
  sums.losses[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(decideStep(request).apply, 0);
  sums.losses[1] = 0.25f;
  sums.second[2] = std::numeric_limits<double>::infinity();
  EXPECT_EQ(decideStep(request).apply, 0);
  // Without the guard the step goes on.
  request.checkFinite = false;
  EXPECT_EQ(decideStep(request).apply, 1);
}

namespace {

constexpr int64_t kRows = 4;

/// x [4, 2] -> batch norm (running mean and variance) in stage 0, MSE
/// against t in stage 1, one micro-batch.
Bundle batchNormBundle() {
  ModelGraph g(kRows);
  int x = g.input("x", {kRows, 2});
  int t = g.input("target", {kRows, 2});
  int gamma = g.param("gamma", {2}, InitKind::Ones);
  int beta = g.param("beta", {2}, InitKind::Zeros);
  int mean = g.param("mean", {2}, InitKind::Zeros);
  int variance = g.param("variance", {2}, InitKind::Ones);
  int y = g.batchNorm(x, gamma, beta, mean, variance, 0.5f);
  g.nextLayer();
  g.mse(y, t);
  return buildBundle(g, {0, 1}, 1, RematPolicy::None);
}

/// One step of batchNormBundle on `x` (t = 0) on the CPU backend, deciding
/// on its devices or on the host: the running statistic `statistic` after
/// it, the step's error ("" or the message) in *error.
std::vector<float> statisticAfterAStep(bool decideOnDevices, bool checkFinite,
                                       const std::vector<float> &x,
                                       const std::string &statistic,
                                       std::string *error) {
  DeviceExecutorConfig config;
  config.optimizer.kind = OptimizerKind::Sgd;
  config.optimizer.learningRate = 0.1f;
  config.optimizer.checkFinite = checkFinite;
  CpuThreading threading;
  threading.decideOnDevices = decideOnDevices;
  std::string created;
  auto executor = DeviceExecutor::create(
      batchNormBundle(), std::make_unique<CpuBackend>(2, threading), config,
      created);
  EXPECT_TRUE(executor) << created;
  if (!executor)
    return {};
  Batch batch = {
      {"x", HostTensor::floats({kRows, 2}, x)},
      {"target", HostTensor::floats({kRows, 2}, {0, 0, 0, 0, 0, 0, 0, 0})}};
  *error = executor->trainStep(batch).error;
  std::vector<float> values;
  EXPECT_EQ(executor->parameter(statistic, values), "");
  return values;
}

const float kNan = std::numeric_limits<float>::quiet_NaN();

std::vector<float> runningMeanAfterANanStep(bool decideOnDevices,
                                            bool checkFinite,
                                            std::string *error) {
  return statisticAfterAStep(decideOnDevices, checkFinite,
                             {1, 2, 3, 4, kNan, 6, 7, 8}, "mean", error);
}

} // namespace

TEST(DeviceGating, AStoppedStepLeavesTheRunningStatistics) {
  for (bool onDevices : {true, false}) {
    SCOPED_TRACE(onDevices ? "decided on the devices" : "decided on the host");
    std::string error;
    std::vector<float> mean = runningMeanAfterANanStep(onDevices, true, &error);
    EXPECT_EQ(error, "step 1: the loss of micro-batch 0 is nan (stage 1 on "
                     "device 1); the step stopped before the update, the "
                     "parameters are unchanged");
    EXPECT_EQ(mean, std::vector<float>({0.0f, 0.0f}));
  }
  // Unguarded, the same step updates them: channel 0's mean is nan.
  std::string error;
  std::vector<float> mean = runningMeanAfterANanStep(true, false, &error);
  EXPECT_EQ(error, "");
  ASSERT_EQ(mean.size(), 2u);
  EXPECT_TRUE(std::isnan(mean[0]));
  EXPECT_FLOAT_EQ(mean[1], 0.5f * (2 + 4 + 6 + 8) / 4);
}

// Channel 0's squares (1e38 each) overflow the variance: the normalised
// output, the loss and the gradients stay finite, the running variance does
// not. The check after the update names it, whether the update flagged it
// (on the devices) or the host summed its squares.
TEST(DeviceGating, AnOverflowingStatisticFailsTheCheckAfterTheUpdate) {
  for (bool onDevices : {true, false}) {
    SCOPED_TRACE(onDevices ? "decided on the devices" : "decided on the host");
    std::string error;
    std::vector<float> variance = statisticAfterAStep(
        onDevices, true, {1e19f, 1, -1e19f, 2, 1e19f, 3, -1e19f, 4}, "variance",
        &error);
    EXPECT_EQ(error, "step 1: parameter 'variance' is inf after the update "
                     "(stage 0 on device 0)");
    ASSERT_EQ(variance.size(), 2u);
    EXPECT_TRUE(std::isinf(variance[0]));
  }
}
