//===- MpiExecutorTest.cpp - One process per device, checked -------------===//
//
// Runs under `mpirun -np 4` (ctest does): every rank runs every test, and the
// job fails if any rank does. The references run in each rank, in one
// process (every device a thread):
//   - a pipeline of 4 ranks gives the threaded pipeline's losses and
//     parameters to the bit, for the MLP and the Transformer (attention,
//     dropout, a residual across stages) under every remat policy, each rank
//     given only the model inputs its device reads;
//   - 2 data-parallel replicas of a 2-device pipeline, each on half of the
//     mini-batch, give the gradients of one pipeline on the whole mini-batch
//     within f32 summation tolerance, and identical parameters in both
//     replicas.
//
//===----------------------------------------------------------------------===//

#include "../../tests/TestBundles.h"
#include "../../tests/TestModels.h"
#include "MpiTestMain.h"

#include "gpipe/mpi/MpiTransport.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>

using namespace gpipe;
using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

mpi::MpiSession *session = nullptr;

constexpr unsigned kRanks = 4;
constexpr int kSteps = 3;

OptimizerConfig adam() {
  OptimizerConfig config;
  config.kind = OptimizerKind::Adam;
  config.learningRate = 0.01f;
  return config;
}

using gpipe::schedule::ScheduleKind;

/// K devices; interleaved: 2 devices running 2 stages each. A send window
/// of N >= 1: sends posted from the values' own buffers, each awaited where
/// the compiler's placement puts its wait; 0: sends copied as issued.
Bundle bundleFor(bool transformer, int64_t batch, unsigned k,
                 unsigned microbatches, RematPolicy remat,
                 ScheduleKind kind = ScheduleKind::GPipe,
                 unsigned sendWindow = 0) {
  // Interleaving on 4 devices: 8 stages of an 8-layer MLP.
  if (kind == ScheduleKind::Interleaved && k == 4)
    return buildBundle(deepMlpGraph(batch, 8), {0, 1, 2, 3, 4, 5, 6, 7},
                       microbatches, remat, kind, 2, sendWindow);
  if (kind == ScheduleKind::Interleaved)
    return buildBundle(transformer ? residualGraph(batch) : mlpGraph(batch),
                       transformer ? std::vector<int>{0, 2, 3, 5}
                                   : std::vector<int>{0, 1, 2, 3},
                       microbatches, remat, kind, 2, sendWindow);
  return transformer ? buildBundle(residualGraph(batch), residualSplit(k),
                                   microbatches, remat, kind, 1, sendWindow)
                     : buildBundle(mlpGraph(batch), mlpSplit(k), microbatches,
                                   remat, kind, 1, sendWindow);
}

Batch batchFor(bool transformer, int64_t rows, uint64_t seed) {
  return transformer ? residualBatch(rows, seed) : mlpBatch(rows, seed);
}

/// The device executor on K CPU threads; over MPI when `replicas` > 0.
std::unique_ptr<device::DeviceExecutor> executorFor(Bundle bundle,
                                                    unsigned replicas) {
  device::DeviceExecutorConfig config;
  config.optimizer = adam();
  config.seed = 5;
  if (replicas > 0) {
    mpi::MpiTransportOptions options;
    options.peerTimeout = std::chrono::milliseconds(30000);
    options.replicas = replicas;
    config.transport = mpi::mpiTransport(*session, options);
  }
  const unsigned k = bundle.numDevices();
  std::string error;
  auto executor = device::DeviceExecutor::create(
      std::move(bundle), std::make_unique<device::CpuBackend>(k), config,
      error);
  EXPECT_TRUE(executor) << error;
  return executor;
}

struct Trajectory {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> params, firstGradients;
};

/// kSteps steps on batches of `rows` rows, each without the inputs that
/// this process's devices do not read; the gradients of the first.
Trajectory train(device::DeviceExecutor &executor, bool transformer,
                 int64_t rows) {
  Trajectory out;
  for (int s = 0; s < kSteps; ++s) {
    Batch batch = batchFor(transformer, rows, 10 + s);
    for (const ModelInputSpec &input : executor.bundle().inputs)
      if (!executor.usesInput(input.name))
        batch.erase(input.name);
    StepResult step = executor.trainStep(batch);
    EXPECT_TRUE(step.ok()) << step.error;
    out.losses.push_back(step.loss);
    if (s == 0) {
      for (const ParamSpec &spec : executor.bundle().params)
        EXPECT_EQ(executor.gradient(spec.name, out.firstGradients[spec.name]),
                  "");
    }
  }
  for (const ParamSpec &spec : executor.bundle().params)
    EXPECT_EQ(executor.parameter(spec.name, out.params[spec.name]), "");
  return out;
}

/// Model (transformer or MLP), remat, schedule, send window.
using Param = std::tuple<bool, RematPolicy, ScheduleKind, unsigned>;

std::string paramName(const ::testing::TestParamInfo<Param> &info) {
  RematPolicy remat = std::get<1>(info.param);
  return std::string(std::get<0>(info.param) ? "transformer" : "mlp") + "_" +
         (remat == RematPolicy::None   ? "none"
          : remat == RematPolicy::Full ? "full"
                                       : "exceptlast") +
         (std::get<2>(info.param) == ScheduleKind::GPipe      ? "_gpipe"
          : std::get<2>(info.param) == ScheduleKind::OneFOneB ? "_onefoneb"
          : std::get<2>(info.param) == ScheduleKind::Interleaved
              ? "_interleaved"
              : "_zbh1") +
         "_window" + std::to_string(std::get<3>(info.param));
}

class MpiPipeline : public ::testing::TestWithParam<Param> {};
class MpiDataParallel : public ::testing::TestWithParam<Param> {};

/// A pipeline of `k` ranks against the same pipeline on threads: the same
/// losses and parameters, bit for bit.
void expectTheThreadedBits(const Param &param, unsigned k) {
  auto [transformer, remat, kind, window] = param;
  const int64_t batch = 12;
  // 1F1B with M = 6 > K: warm-up, steady state and cool-down all occur.
  const unsigned m = kind == ScheduleKind::GPipe ? 4 : 6;
  auto ranks = executorFor(
      bundleFor(transformer, batch, k, m, remat, kind, window), 1);
  // The threads' sends copy, as issued: what the waits change is only when
  // a buffer may be reused.
  auto threads =
      executorFor(bundleFor(transformer, batch, k, m, remat, kind, 0), 0);
  ASSERT_TRUE(ranks && threads);
  EXPECT_TRUE(ranks->transport().spansProcesses());
  // The first device reads the features, the last the labels.
  const std::string features = transformer ? "ids" : "x";
  EXPECT_EQ(ranks->usesInput(features), session->rank() == 0);
  EXPECT_TRUE(threads->usesInput(features));
  Trajectory actual = train(*ranks, transformer, batch);
  Trajectory expected = train(*threads, transformer, batch);
  ASSERT_EQ(actual.losses.size(), expected.losses.size());
  for (size_t s = 0; s < expected.losses.size(); ++s)
    EXPECT_EQ(std::memcmp(&actual.losses[s], &expected.losses[s], 8), 0)
        << "step " << s << ": " << actual.losses[s] << " vs "
        << expected.losses[s];
  for (const auto &[name, values] : expected.params)
    EXPECT_EQ(actual.params[name], values) << name;
}

// Every schedule: MPI's sends complete in the background, from a staging
// copy (no window) or from the value's own buffer up to its placed wait, and
// its receives block: the semantics under which the runtime proves the
// programs cannot deadlock.
TEST_P(MpiPipeline, RanksGiveTheThreadedBits) {
  ASSERT_EQ(session->size(), int(kRanks));
  expectTheThreadedBits(GetParam(), kRanks);
}

// The same on 2 ranks (ctest's MpiExecutorTwoRanks, `mpirun -np 2`), where
// interleaving fits one pipeline: 2 devices running 2 stages each, a rank
// sending to the same peer over two stage boundaries.
class MpiPipelineOfTwo : public ::testing::TestWithParam<Param> {};
TEST_P(MpiPipelineOfTwo, RanksGiveTheThreadedBits) {
  if (session->size() != 2)
    GTEST_SKIP() << "runs under mpirun -np 2";
  expectTheThreadedBits(GetParam(), 2);
}

TEST_P(MpiDataParallel, GradientsMatchOnePipelineOnTheWholeBatch) {
  ASSERT_EQ(session->size(), int(kRanks));
  auto [transformer, remat, kind, window] = GetParam();
  // Two replicas of 2 devices, each 2 micro-batches of 3 rows, against one
  // pipeline of 2 devices with 4 micro-batches of 3 rows: the same
  // micro-batches. Interleaved, each device runs 2 stages: a rank sends to
  // the same peer over two stage boundaries.
  const unsigned replicas = 2, k = kRanks / replicas;
  const int64_t whole = 12;
  auto parallel = executorFor(
      bundleFor(transformer, whole / replicas, k, 2, remat, kind, window),
      replicas);
  auto one = executorFor(bundleFor(transformer, whole, k, 4, remat, kind), 0);
  ASSERT_TRUE(parallel && one);
  EXPECT_EQ(parallel->transport().replicas(), replicas);
  Trajectory actual = train(*parallel, transformer, whole);
  Trajectory expected = train(*one, transformer, whole);
  for (size_t s = 0; s < expected.losses.size(); ++s)
    EXPECT_NEAR(actual.losses[s], expected.losses[s],
                1e-5 * std::fabs(expected.losses[s]))
        << "step " << s;
  for (const auto &[name, gradient] : expected.firstGradients) {
    const std::vector<float> &mean = actual.firstGradients[name];
    ASSERT_EQ(mean.size(), gradient.size()) << name;
    float scale = 0;
    for (float g : gradient)
      scale = std::max(scale, std::fabs(g));
    for (size_t i = 0; i < gradient.size(); ++i)
      ASSERT_NEAR(mean[i], gradient[i], 1e-5f * scale + 1e-7f)
          << "the gradient of " << name << " at " << i;
  }
  // Every replica holds the same bits: compare with replica 0's.
  for (auto &[name, values] : actual.params) {
    std::vector<float> first = values;
    MPI_Bcast(first.data(), int(first.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(first, values) << name << " differs from replica 0's";
  }
}

const auto kModels = ::testing::Bool();
const auto kRemats = ::testing::Values(RematPolicy::None, RematPolicy::Full,
                                       RematPolicy::ExceptLast);
// No window (staging copies), the tightest window and gpipe-compile's.
const auto kWindows = ::testing::Values(0u, 1u, 2u);
INSTANTIATE_TEST_SUITE_P(
    Models, MpiPipeline,
    ::testing::Combine(kModels, kRemats,
                       ::testing::Values(ScheduleKind::GPipe,
                                         ScheduleKind::OneFOneB,
                                         ScheduleKind::ZeroBubbleH1),
                       kWindows),
    paramName);
const auto kEverySchedule = ::testing::Combine(
    kModels, kRemats,
    ::testing::Values(ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                      ScheduleKind::ZeroBubbleH1, ScheduleKind::Interleaved),
    kWindows);
INSTANTIATE_TEST_SUITE_P(Models, MpiPipelineOfTwo, kEverySchedule, paramName);
// Interleaving on 4 ranks as one pipeline: the 8-layer MLP in 8 stages.
INSTANTIATE_TEST_SUITE_P(
    DeepMlp, MpiPipeline,
    ::testing::Combine(::testing::Values(false), kRemats,
                       ::testing::Values(ScheduleKind::Interleaved), kWindows),
    paramName);
// Interleaving on 2 x 2 ranks: 4 ranks as one pipeline would need 8 stages.
INSTANTIATE_TEST_SUITE_P(Models, MpiDataParallel, kEverySchedule, paramName);

TEST(MpiTransport, RefusesAJobOfTheWrongSize) {
  std::string error;
  device::DeviceExecutorConfig config;
  mpi::MpiTransportOptions options;
  options.replicas = 3;
  config.transport = mpi::mpiTransport(*session, options);
  auto executor = device::DeviceExecutor::create(
      bundleFor(false, 12, 2, 2, RematPolicy::Full),
      std::make_unique<device::CpuBackend>(2), config, error);
  EXPECT_FALSE(executor);
  EXPECT_EQ(error, "the MPI job has 4 processes, but 3 replicas of a 2-device "
                   "pipeline need 6: start one process per device (mpirun "
                   "-np 6)");
}

} // namespace

int main(int argc, char **argv) {
  return mpi::testing::runTestsUnderMpi(argc, argv, session);
}
