//===- NcclExecutorTest.cpp - One process per GPU, checked ----------------===//
//
// Runs under `mpirun -np 2` (ctest label "gpu"); each rank skips without a
// GPU of its own (NCCL refuses two ranks of a communicator on one GPU), so
// it needs a machine with two GPUs to run at all. A pipeline of 2 ranks over
// NCCL gives the losses and parameters of the same pipeline in one process
// on the same 2 GPUs, to the bit: the same kernels, and transfers that copy
// bytes.
//
//===----------------------------------------------------------------------===//

#include "../../tests/TestBundles.h"
#include "../../tests/TestModels.h"
#include "MpiTestMain.h"

#include "gpipe/cuda/CudaBackend.h"
#include "gpipe/mpi/NcclTransport.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>

using namespace gpipe;
using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

mpi::MpiSession *session = nullptr;

std::unique_ptr<device::DeviceExecutor> onGpus(bool transformer,
                                               bool overNccl) {
  device::DeviceExecutorConfig config;
  config.optimizer.kind = OptimizerKind::Adam;
  config.optimizer.learningRate = 0.01f;
  config.seed = 5;
  if (overNccl)
    config.transport = mpi::ncclTransport(*session, {});
  Bundle bundle = transformer ? buildBundle(residualGraph(12), residualSplit(2),
                                            4, RematPolicy::Full)
                              : buildBundle(mlpGraph(12), mlpSplit(2), 4,
                                            RematPolicy::Full);
  cuda::CudaBackendOptions options;
  options.numDevices = 2;
  options.allowSharing = false;
  std::string error;
  auto backend = cuda::createCudaBackend(options, error);
  EXPECT_TRUE(backend) << error;
  if (!backend)
    return nullptr;
  auto executor = device::DeviceExecutor::create(
      std::move(bundle), std::move(backend), config, error);
  EXPECT_TRUE(executor) << error;
  return executor;
}

class NcclPipeline : public ::testing::TestWithParam<bool> {};

TEST_P(NcclPipeline, RanksGiveTheOneProcessBits) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 2)
    GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  ASSERT_EQ(session->size(), 2);
  const bool transformer = GetParam();
  auto ranks = onGpus(transformer, true);
  auto one = onGpus(transformer, false);
  ASSERT_TRUE(ranks && one);
  for (int s = 0; s < 3; ++s) {
    Batch batch =
        transformer ? residualBatch(12, 10 + s) : mlpBatch(12, 10 + s);
    StepResult a = ranks->trainStep(batch), b = one->trainStep(batch);
    ASSERT_TRUE(a.ok() && b.ok()) << a.error << b.error;
    EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof a.loss), 0)
        << "step " << s << ": " << a.loss << " vs " << b.loss;
  }
  for (const ParamSpec &spec : one->bundle().params) {
    std::vector<float> a, b;
    ASSERT_EQ(ranks->parameter(spec.name, a), "");
    ASSERT_EQ(one->parameter(spec.name, b), "");
    EXPECT_EQ(a, b) << spec.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, NcclPipeline, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return info.param ? "transformer" : "mlp";
                         });

} // namespace

int main(int argc, char **argv) {
  return mpi::testing::runTestsUnderMpi(argc, argv, session);
}
