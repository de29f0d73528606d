//===- PipelineInvarianceTest.cpp - K changes nothing, to the bit ---------===//
//
// GPipe's promise, checked exactly: for the same bundle source, micro-batch
// count, seed and data, splitting the model over K = 1, 2 or 4 devices gives
// bit-identical losses and parameters after several Adam steps, for every
// remat policy and schedule, on the device executor over CpuBackend's
// threads. Each micro-batch runs the same
// kernels on the same values whichever device holds its layers, and a
// schedule accumulates gradients over micro-batches in the same order at
// every K (GPipe from the last micro-batch, 1F1B from the first; across
// schedules the sums differ in rounding only, which ExecutorTest's sweeps
// check against the reference). Interleaved 1F1B, whose devices run several
// stages each, also accumulates from the first micro-batch: it gives 1F1B's
// bits on one device, for every V, M and remat policy.
//
//===----------------------------------------------------------------------===//

#include "TestBundles.h"
#include "TestModels.h"

#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

constexpr int64_t kBatch = 12;
constexpr unsigned kMicrobatches = 4;
constexpr int kSteps = 3;

/// Per step the loss, then every parameter.
struct Trajectory {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> params;
};

using gpipe::schedule::ScheduleKind;

/// The bundle of the MLP or the Transformer split at `firstLayers` (k
/// stages: mlpSplit / residualSplit when empty), scheduled by `kind` on
/// stages / virtualStages devices.
Bundle bundleFor(bool transformer, unsigned k, RematPolicy remat,
                 ScheduleKind kind, unsigned microbatches = kMicrobatches,
                 std::vector<int> firstLayers = {},
                 unsigned virtualStages = 1) {
  if (firstLayers.empty())
    firstLayers = transformer ? residualSplit(k) : mlpSplit(k);
  return buildBundle(transformer ? residualGraph(kBatch) : mlpGraph(kBatch),
                     firstLayers, microbatches, remat, kind, virtualStages);
}

Batch batchFor(bool transformer, uint64_t seed) {
  return transformer ? residualBatch(kBatch, seed) : mlpBatch(kBatch, seed);
}

OptimizerConfig adam() {
  OptimizerConfig config;
  config.kind = OptimizerKind::Adam;
  config.learningRate = 0.01f;
  return config;
}

/// Three steps on `executor`, then its parameters; `read` copies one.
template <class Executor, class Read>
Trajectory trajectory(Executor *executor, bool transformer, Read read) {
  Trajectory out;
  if (!executor)
    return out;
  for (int s = 0; s < kSteps; ++s) {
    StepResult step = executor->trainStep(batchFor(transformer, 10 + s));
    EXPECT_TRUE(step.ok()) << step.error;
    out.losses.push_back(step.loss);
  }
  for (const ParamSpec &spec : executor->bundle().params)
    read(*executor, spec.name, out.params[spec.name]);
  return out;
}

Trajectory onInterpreter(bool transformer, Bundle bundle) {
  ExecutorConfig config;
  config.optimizer = adam();
  config.seed = 5;
  config.recordTimeline = false;
  std::string error;
  auto executor = PipelineExecutor::create(std::move(bundle), config, error);
  EXPECT_TRUE(executor) << error;
  return trajectory(
      executor.get(), transformer,
      [](PipelineExecutor &e, const std::string &name,
         std::vector<float> &values) { values = *e.parameter(name); });
}

Trajectory onCpuThreads(bool transformer, Bundle bundle) {
  device::DeviceExecutorConfig config;
  config.optimizer = adam();
  config.seed = 5;
  std::string error;
  const unsigned devices = bundle.numDevices();
  auto executor = device::DeviceExecutor::create(
      std::move(bundle), std::make_unique<device::CpuBackend>(devices), config,
      error);
  EXPECT_TRUE(executor) << error;
  return trajectory(executor.get(), transformer,
                    [](device::DeviceExecutor &e, const std::string &name,
                       std::vector<float> &values) {
                      EXPECT_EQ(e.parameter(name, values), "");
                    });
}

void expectBitwiseEqual(const Trajectory &actual, const Trajectory &expected,
                        unsigned k) {
  ASSERT_EQ(actual.losses.size(), expected.losses.size());
  for (size_t s = 0; s < expected.losses.size(); ++s)
    EXPECT_EQ(
        std::memcmp(&actual.losses[s], &expected.losses[s], sizeof(double)), 0)
        << "K=" << k << ", step " << s << ": loss " << actual.losses[s]
        << " vs " << expected.losses[s];
  ASSERT_EQ(actual.params.size(), expected.params.size());
  for (const auto &[name, values] : expected.params) {
    const std::vector<float> &other = actual.params.at(name);
    ASSERT_EQ(other.size(), values.size()) << name;
    EXPECT_EQ(
        std::memcmp(other.data(), values.data(), values.size() * sizeof(float)),
        0)
        << "K=" << k << ": parameter " << name << " differs";
  }
}

using Param = std::tuple<bool, RematPolicy, bool, ScheduleKind>;

std::string paramName(const ::testing::TestParamInfo<Param> &info) {
  bool transformer = std::get<0>(info.param), threads = std::get<2>(info.param);
  RematPolicy remat = std::get<1>(info.param);
  const char *policy = remat == RematPolicy::None   ? "none"
                       : remat == RematPolicy::Full ? "full"
                                                    : "exceptlast";
  ScheduleKind kind = std::get<3>(info.param);
  return std::string(transformer ? "transformer" : "mlp") + "_" + policy +
         (threads ? "_cputhreads" : "_interpreter") +
         (kind == ScheduleKind::GPipe      ? "_gpipe"
          : kind == ScheduleKind::OneFOneB ? "_onefoneb"
                                           : "_zbh1");
}

class PipelineInvariance : public ::testing::TestWithParam<Param> {};

TEST_P(PipelineInvariance, LossesAndParametersAreBitwiseEqualForEveryK) {
  auto [transformer, remat, threads, kind] = GetParam();
  auto run = threads ? onCpuThreads : onInterpreter;
  Trajectory single = run(transformer, bundleFor(transformer, 1, remat, kind));
  ASSERT_EQ(single.losses.size(), size_t(kSteps));
  for (unsigned k : {2u, 4u})
    expectBitwiseEqual(run(transformer, bundleFor(transformer, k, remat, kind)),
                       single, k);
}

INSTANTIATE_TEST_SUITE_P(
    MlpAndTransformer, PipelineInvariance,
    ::testing::Combine(::testing::Bool(),
                       ::testing::Values(RematPolicy::None, RematPolicy::Full,
                                         RematPolicy::ExceptLast),
                       ::testing::Bool(),
                       ::testing::Values(ScheduleKind::GPipe,
                                         ScheduleKind::OneFOneB,
                                         ScheduleKind::ZeroBubbleH1)),
    paramName);

using InterleavedParam = std::tuple<bool, RematPolicy, bool>;

class InterleavedInvariance
    : public ::testing::TestWithParam<InterleavedParam> {};

TEST_P(InterleavedInvariance, GivesOneFOneBsBitsOnOneDevice) {
  auto [transformer, remat, threads] = GetParam();
  auto run = threads ? onCpuThreads : onInterpreter;
  struct Split {
    std::vector<int> firstLayers;
    unsigned virtualStages;
  };
  // K = 2 devices with V = 2 (both models) and V = 3, K = 3 with V = 2 (the
  // Transformer's seven layers); the skip value crosses stages that share a
  // device.
  std::vector<Split> splits = transformer
                                  ? std::vector<Split>{{{0, 2, 3, 5}, 2},
                                                       {{0, 1, 2, 3, 4, 5}, 3},
                                                       {{0, 1, 2, 3, 4, 5}, 2}}
                                  : std::vector<Split>{{{0, 1, 2, 3}, 2}};
  // M a multiple of K, not one, and fewer than K.
  for (unsigned m : {4u, 3u, 1u}) {
    Trajectory single = run(transformer, bundleFor(transformer, 1, remat,
                                                   ScheduleKind::OneFOneB, m));
    for (const Split &split : splits) {
      unsigned stages = split.firstLayers.size();
      SCOPED_TRACE("M=" + std::to_string(m) + ", " + std::to_string(stages) +
                   " stages on " +
                   std::to_string(stages / split.virtualStages) + " devices");
      Bundle bundle =
          bundleFor(transformer, stages, remat, ScheduleKind::Interleaved, m,
                    split.firstLayers, split.virtualStages);
      ASSERT_EQ(bundle.numDevices(), stages / split.virtualStages);
      expectBitwiseEqual(run(transformer, std::move(bundle)), single,
                         stages / split.virtualStages);
    }
  }
}

std::string
interleavedName(const ::testing::TestParamInfo<InterleavedParam> &info) {
  return paramName(
      {std::tuple_cat(info.param, std::make_tuple(ScheduleKind::OneFOneB)),
       info.index});
}

INSTANTIATE_TEST_SUITE_P(
    MlpAndTransformer, InterleavedInvariance,
    ::testing::Combine(::testing::Bool(),
                       ::testing::Values(RematPolicy::None, RematPolicy::Full,
                                         RematPolicy::ExceptLast),
                       ::testing::Bool()),
    interleavedName);

} // namespace
