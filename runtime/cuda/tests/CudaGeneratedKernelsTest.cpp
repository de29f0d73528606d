//===- CudaGeneratedKernelsTest.cpp - The bundle's PTX kernels on a GPU ---===//
//
// The bundle's generated kernels on the CUDA backend: code.cuda's PTX loaded
// with the driver API (cuModuleLoadData) and launched with cuLaunchKernel
// (PtxKernels.h's ABI), against the CPU backend running the same kernels'
// x86-64 code. The bundle (Inputs/broadcast-ptx.json, made by
// Inputs/regenerate.sh) is test/Target/bundle-broadcast.mlir's model on 2
// stages and 2 micro-batches: a position table broadcast over the batch,
// RMSNorm's mean over the features, a max over the positions, a sum over the
// features, and their gradients (dimension 0 reduced for the parameters):
// 15 kernels, element-wise, broadcasting and reducing (one a row kernel). Inputs/slices-ptx.json
// is gpipe-differentiate-slice-concat.mlir's model: slices with offsets and
// steps, a concat and their gradients (windowed reads and writes);
// Inputs/rows-ptx.json bundle-row-kernels.mlir's (row kernels, their leading
// sums over each row's columns); Inputs/gather-ptx.json
// gpipe-differentiate-gather.mlir's (gathers and their scatter-adds, i32
// indices fed as an input).
//
// Tolerance: rtol 1e-5, atol 1e-6. The GPU sums a reduced dimension
// sequentially in row-major order; the CPU's vector code adds tiles as a
// tree, so the two may differ in the last bits.
// Every test skips without a GPU (ctest label "gpu").
//
//===----------------------------------------------------------------------===//

#include "gpipe/cuda/CudaBackend.h"
#include "gpipe/cuda/CudaDevices.h"
#include "gpipe/runtime/backends/GeneratedCode.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/kernels/GeneratedCall.h"

#include "AllClose.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-6;

Bundle inputBundle(const std::string &file) {
  StatusOr<Bundle> bundle = loadBundle(GPIPE_CUDA_TEST_INPUTS "/" + file);
  EXPECT_TRUE(bundle.ok()) << file << ": " << bundle.status().message();
  return bundle.ok() ? *bundle : Bundle();
}

Bundle broadcastBundle() { return inputBundle("broadcast-ptx.json"); }

std::unique_ptr<DeviceBackend> oneGpuBackend(unsigned devices,
                                             std::string &error) {
  gpipe::cuda::CudaBackendOptions options;
  options.numDevices = devices;
  options.maxGpus = 1; // every pipeline device on one GPU
  return gpipe::cuda::createCudaBackend(options, error);
}

std::vector<float> randomFloats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float &v : values)
    v = normal(rng);
  return values;
}

OptimizerConfig plainSgd() {
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  sgd.learningRate = 0.05f;
  return sgd;
}

TEST(CudaGeneratedKernels, TheBundleCarriesPtxForEveryKernel) {
  // No GPU needed: the committed bundle is what the GPU tests run.
  Bundle bundle = broadcastBundle();
  ASSERT_EQ(bundle.code.kernels.size(), 15u);
  ASSERT_TRUE(bundle.code.cuda.has_value());
  EXPECT_EQ(bundle.code.cuda->arch, "sm_90");
  bool reduces = false, broadcasts = false;
  for (const GeneratedKernelSpec &kernel : bundle.code.kernels) {
    EXPECT_TRUE(ptxHasEntry(bundle.code.cuda->ptx, kernel.symbol))
        << kernel.symbol;
    reduces |= kernel.reduces();
    for (const std::vector<unsigned> &dims : kernel.inputDims)
      broadcasts |= dims.size() < kernel.outputDims.size();
  }
  EXPECT_TRUE(reduces);
  EXPECT_TRUE(broadcasts);
}

/// The slices bundle's kernels read and write windows (offsets, steps,
/// extents) and concatenate; every one has its PTX entry.
TEST(CudaGeneratedKernels, TheSlicesBundleHasWindowedKernels) {
  Bundle bundle = inputBundle("slices-ptx.json");
  ASSERT_TRUE(bundle.code.cuda.has_value());
  bool readsWindow = false, writesWindow = false, concatenates = false;
  for (const GeneratedKernelSpec &kernel : bundle.code.kernels) {
    EXPECT_TRUE(ptxHasEntry(bundle.code.cuda->ptx, kernel.symbol))
        << kernel.symbol;
    if (kernel.extents.empty())
      continue;
    for (size_t m = 0; m + 1 < kernel.extents.size(); ++m)
      for (int64_t e : kernel.extents[m])
        readsWindow |= e >= 0;
    for (int64_t e : kernel.extents.back())
      writesWindow |= e >= 0;
    concatenates |= kernel.ops.find("concat") != std::string::npos;
  }
  EXPECT_TRUE(readsWindow);
  EXPECT_TRUE(writesWindow);
  EXPECT_TRUE(concatenates);
}

/// The rows bundle leads kernels with row reductions, the gather bundle
/// gathers and scatters; every kernel has its PTX entry.
TEST(CudaGeneratedKernels, TheRowsAndGatherBundlesHaveTheirKernels) {
  for (const char *name : {"rows-ptx.json", "gather-ptx.json"}) {
    SCOPED_TRACE(name);
    Bundle bundle = inputBundle(name);
    ASSERT_TRUE(bundle.code.cuda.has_value());
    std::string all;
    for (const GeneratedKernelSpec &kernel : bundle.code.kernels) {
      EXPECT_TRUE(ptxHasEntry(bundle.code.cuda->ptx, kernel.symbol))
          << kernel.symbol;
      all += kernel.ops + "\n";
    }
    if (std::string(name) == "rows-ptx.json")
      EXPECT_NE(all.find(" rows 1:"), std::string::npos) << all;
    else
      EXPECT_TRUE(all.find("gather[") != std::string::npos &&
                  all.find("gather_grad[") != std::string::npos)
          << all;
  }
}

/// Three SGD steps, each from the CPU's parameters: the loss and every
/// gradient as the CPU backend computes them, for each committed bundle.
class CudaGeneratedBundles : public ::testing::TestWithParam<const char *> {};

TEST_P(CudaGeneratedBundles, LossAndGradientsMatchTheCpu) {
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why))
    GTEST_SKIP() << "no CUDA device: " << why;
  const Bundle bundle = inputBundle(GetParam());
  ASSERT_FALSE(bundle.code.kernels.empty());

  ExecutorConfig cpuConfig;
  cpuConfig.seed = 42;
  cpuConfig.optimizer = plainSgd();
  std::string error;
  auto cpu = PipelineExecutor::create(bundle, cpuConfig, error);
  ASSERT_TRUE(cpu) << error;
  auto backend = oneGpuBackend(bundle.numDevices(), error);
  ASSERT_TRUE(backend) << error;
  DeviceExecutorConfig config;
  config.seed = 42;
  config.optimizer = plainSgd();
  auto gpu = DeviceExecutor::create(bundle, std::move(backend), config, error);
  ASSERT_TRUE(gpu) << error;

  for (uint64_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    for (const ParamSpec &spec : bundle.params)
      ASSERT_EQ(gpu->setParameter(spec.name, *cpu->parameter(spec.name)), "");
    // Every input: floats, or indices 0, 1, 2, ... below 3 (in range of any
    // axis the bundles gather along).
    Batch batch;
    for (const ModelInputSpec &input : bundle.inputs) {
      int64_t elements = 1;
      for (int64_t d : input.shape)
        elements *= d;
      if (input.type == ElementType::I32) {
        std::vector<int32_t> ids(static_cast<size_t>(elements));
        for (size_t i = 0; i < ids.size(); ++i)
          ids[i] = int32_t((i + step) % 3);
        batch[input.name] = HostTensor::ints(input.shape, std::move(ids));
      } else {
        batch[input.name] = HostTensor::floats(
            input.shape, randomFloats(size_t(elements), step + 7 * batch.size()));
      }
    }
    StepResult expected = cpu->trainStep(batch);
    ASSERT_TRUE(expected.ok()) << expected.error;
    StepResult actual = gpu->trainStep(batch);
    ASSERT_TRUE(actual.ok()) << actual.error;
    ASSERT_TRUE(std::isfinite(expected.loss));
    EXPECT_NEAR(actual.loss, expected.loss,
                kAtol + kRtol * std::fabs(expected.loss));
    for (const ParamSpec &spec : bundle.params) {
      std::vector<float> grad;
      ASSERT_EQ(gpu->gradient(spec.name, grad), "");
      const std::vector<float> &want = *cpu->gradient(spec.name);
      EXPECT_TRUE(gpipe::testing::allClose(
          grad, std::vector<double>(want.begin(), want.end()), kRtol, kAtol))
          << "gradient " << spec.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Inputs, CudaGeneratedBundles,
                         ::testing::Values("broadcast-ptx.json",
                                           "slices-ptx.json", "rows-ptx.json",
                                           "gather-ptx.json"),
                         [](const auto &info) {
                           std::string name = info.param;
                           return name.substr(0, name.find('-'));
                         });

/// Kernel 0 (the broadcast add: in0 [d0, d1] + in1 [d1]) called on the
/// backend directly: in place (the output is in0), and with in1 inside the
/// output's bytes (copied to scratch first, as the CPU copies it), against
/// the CPU's code for the same call.
TEST(CudaGeneratedKernels, InPlaceAndOverlappingInputsAsOnTheCpu) {
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why))
    GTEST_SKIP() << "no CUDA device: " << why;
  const Bundle bundle = broadcastBundle();
  ASSERT_FALSE(bundle.code.kernels.empty());
  const GeneratedKernelSpec &kernel = bundle.code.kernels[0];
  ASSERT_EQ(kernel.inputDims,
            (std::vector<std::vector<unsigned>>{{0, 1}, {1}}));
  std::string error;
  std::unique_ptr<LoadedCode> host =
      LoadedCode::load(bundle.code, hostCpuFeatures(), error);
  ASSERT_TRUE(host) << error;
  auto backend = oneGpuBackend(1, error);
  ASSERT_TRUE(backend) << error;
  ASSERT_EQ(backend->loadGeneratedKernels(bundle.code), "");

  const int64_t rows = 5, cols = 300; // more than one block's threads
  const std::vector<float> start = randomFloats(size_t(rows * cols), 7);
  // in1 at offset `at` of the buffer (within the output: an overlap).
  for (int64_t at : {int64_t(0), cols, int64_t(2 * cols + 3)}) {
    SCOPED_TRACE("in1 at " + std::to_string(at));
    std::vector<float> expected = start;
    GeneratedCall call;
    call.entry = host->entry(0);
    call.kernel = 0;
    call.space = {rows, cols};
    call.inputDims = kernel.inputDims;
    call.outputDims = kernel.outputDims;
    call.extents = kernel.extents;
    call.inputs = {expected.data(), expected.data() + at};
    call.output = expected.data();
    EXPECT_EQ(overlappingInputs(call), (std::vector<size_t>{1}));
    runGeneratedOnHost(call);

    void *device = nullptr;
    ASSERT_EQ(backend->allocate(0, rows * cols * 4, &device), "");
    float *buffer = static_cast<float *>(device);
    const StreamId s = backend->computeStream(0);
    backend->copyToDevice(s, buffer, start.data(), rows * cols * 4);
    call.entry = nullptr;
    call.inputs = {buffer, buffer + at};
    call.output = buffer;
    backend->generated(s, call);
    std::vector<float> actual(size_t(rows * cols));
    backend->copyToHost(s, actual.data(), buffer, rows * cols * 4);
    ASSERT_EQ(backend->synchronize(std::chrono::seconds(30)), "");
    EXPECT_TRUE(gpipe::testing::allClose(
        actual, std::vector<double>(expected.begin(), expected.end()), kRtol,
        kAtol));
  }
}

TEST(CudaGeneratedKernels, ABundleWithoutCudaCodeIsRefused) {
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why))
    GTEST_SKIP() << "no CUDA device: " << why;
  Bundle bundle = broadcastBundle();
  ASSERT_FALSE(bundle.code.kernels.empty());
  bundle.code.cuda.reset();
  std::string error;
  auto backend = oneGpuBackend(bundle.numDevices(), error);
  ASSERT_TRUE(backend) << error;
  auto gpu = DeviceExecutor::create(bundle, std::move(backend), {}, error);
  EXPECT_FALSE(gpu);
  EXPECT_EQ(error, "the bundle's generated kernels have no CUDA code: "
                   "compile with --gpipe-ptx (gpipe-compile ptx=true), or "
                   "with codegen=none");
}

TEST(CudaGeneratedKernels, PtxTheDriverRefusesIsReportedWithTheJitLog) {
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why))
    GTEST_SKIP() << "no CUDA device: " << why;
  Bundle bundle = broadcastBundle();
  ASSERT_TRUE(bundle.code.cuda.has_value());
  bundle.code.cuda->ptx += "\n.visible .entry broken(\n{\n\tnot_an_op;\n}\n";
  std::string error;
  auto backend = oneGpuBackend(bundle.numDevices(), error);
  ASSERT_TRUE(backend) << error;
  auto gpu = DeviceExecutor::create(bundle, std::move(backend), {}, error);
  EXPECT_FALSE(gpu);
  EXPECT_NE(error.find("cuModuleLoadData of the generated kernels' PTX"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("device 0 (GPU 0)"), std::string::npos) << error;
}

} // namespace
