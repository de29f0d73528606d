//===- CudaExecutorTest.cpp - The pipeline on a GPU against the CPU -------===//
//
// Gradient equivalence of the CUDA backend: the device executor on
// CudaBackend with all K pipeline devices on one GPU, against the CPU
// executor (checked in its own tests against a double-precision reference),
// for the MLP and the Transformer block of TestModels.h at K = 1, 2, 4, under
// every remat policy, in each GEMM precision (and two GPU runs against each
// other, bit for bit; clipping and the guard). Three SGD steps: each step's
// loss and gradients, then the parameters. SGD, not Adam: Adam's first steps
// move a parameter by about lr * sign(g), so a gradient near 0 whose sign
// TF32 or bf16 rounding flips would move it by 2 lr, far past the tolerance;
// SGD moves it by lr times the gradient's (checked) error.
//
// Tolerances per precision (allClose: |a - b| <= atol + rtol |b|):
//   F32  rtol 1e-4, atol 1e-5  (fp32 everywhere; cuBLAS's and the kernels'
//                               summation order and fused multiply-adds)
//   TF32 rtol 2e-2, atol 2e-3  (10-bit mantissa inputs to every GEMM)
//   BF16 rtol 5e-2, atol 5e-3  (8-bit mantissa inputs, fp32 accumulation)
// Every test skips without a GPU (ctest label "gpu").
//
//===----------------------------------------------------------------------===//

#include "gpipe/cuda/CudaBackend.h"
#include "gpipe/cuda/CudaDevices.h"
#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"

#include "AllClose.h"
#include "OpProfileSupport.h"
#include "TestBundles.h"
#include "TestModels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;
using gpipe::cuda::GemmPrecision;

namespace {

constexpr int64_t kBatch = 10;

struct Tolerance {
  double rtol, atol;
};

Tolerance toleranceOf(GemmPrecision precision) {
  switch (precision) {
  case GemmPrecision::F32:
    return {1e-4, 1e-5};
  case GemmPrecision::TF32:
    return {2e-2, 2e-3};
  case GemmPrecision::BF16:
    return {5e-2, 5e-3};
  }
  return {0, 0};
}

using Param = std::tuple<bool, unsigned, RematPolicy, GemmPrecision>;

std::string paramName(const ::testing::TestParamInfo<Param> &info) {
  auto [transformer, k, remat, precision] = info.param;
  const char *policy = remat == RematPolicy::None   ? "none"
                       : remat == RematPolicy::Full ? "full"
                                                    : "exceptlast";
  return std::string(transformer ? "transformer" : "mlp") + "_K" +
         std::to_string(k) + "_" + policy + "_" +
         gpipe::cuda::gemmPrecisionName(precision);
}

/// The device executor of `bundle` on one GPU (all its pipeline devices
/// there), or null with `error`.
std::unique_ptr<DeviceExecutor> gpuExecutor(const Bundle &bundle,
                                            GemmPrecision precision,
                                            const DeviceExecutorConfig &config,
                                            std::string &error) {
  gpipe::cuda::CudaBackendOptions options;
  options.numDevices = bundle.numDevices();
  options.maxGpus = 1; // K pipeline devices on one GPU
  options.precision = precision;
  auto backend = gpipe::cuda::createCudaBackend(options, error);
  if (!backend)
    return nullptr;
  return DeviceExecutor::create(bundle, std::move(backend), config, error);
}

class CudaVersusCpu : public ::testing::TestWithParam<Param> {};

/// Three SGD steps of `bundle` on its devices, all on one GPU, against the
/// CPU executor, each from the CPU's parameters: losses, gradients and the
/// updated parameters within `precision`'s tolerance.
OptimizerConfig plainSgd() {
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  sgd.learningRate = 0.05f;
  return sgd;
}

/// The CPU executor and the GPU one of `bundle`, with the same seed and
/// optimizer; `error` says why one is missing.
struct CpuAndGpu {
  std::unique_ptr<PipelineExecutor> cpu;
  std::unique_ptr<DeviceExecutor> gpu;
  std::string error;
};
CpuAndGpu executorsOf(const Bundle &bundle, GemmPrecision precision,
                      const OptimizerConfig &optimizer) {
  CpuAndGpu both;
  ExecutorConfig cpuConfig;
  cpuConfig.seed = 42;
  cpuConfig.optimizer = optimizer;
  both.cpu = PipelineExecutor::create(bundle, cpuConfig, both.error);
  if (!both.cpu)
    return both;
  DeviceExecutorConfig config;
  config.seed = 42;
  config.optimizer = optimizer;
  both.gpu = gpuExecutor(bundle, precision, config, both.error);
  return both;
}

void expectCudaMatchesCpu(const Bundle &bundle,
                          Batch (*batchOf)(int64_t, uint64_t),
                          GemmPrecision precision,
                          const OptimizerConfig &sgd = plainSgd()) {
  const Tolerance tol = toleranceOf(precision);
  CpuAndGpu executors = executorsOf(bundle, precision, sgd);
  ASSERT_TRUE(executors.cpu && executors.gpu) << executors.error;
  PipelineExecutor *cpu = executors.cpu.get();
  DeviceExecutor *gpu = executors.gpu.get();

  for (uint64_t step = 1; step <= 3; ++step) {
    // Each step starts from the CPU's parameters, so every step compares the
    // same function at the same point: otherwise rounding differences of
    // earlier updates compound, and batch norm's cancelling gradients
    // amplify them past any elementwise f32 tolerance (seen on an H100).
    for (const ParamSpec &spec : bundle.params)
      ASSERT_EQ(gpu->setParameter(spec.name, *cpu->parameter(spec.name)), "");
    Batch batch = batchOf(kBatch, 100 + step);
    StepResult expected = cpu->trainStep(batch);
    ASSERT_TRUE(expected.ok()) << expected.error;
    StepResult actual = gpu->trainStep(batch);
    ASSERT_TRUE(actual.ok()) << actual.error;
    EXPECT_NEAR(actual.loss, expected.loss,
                tol.atol + tol.rtol * std::fabs(expected.loss))
        << "step " << step;
    ASSERT_EQ(actual.gradientNorm.has_value(),
              expected.gradientNorm.has_value());
    if (expected.gradientNorm) {
      EXPECT_NEAR(*actual.gradientNorm, *expected.gradientNorm,
                  tol.atol + tol.rtol * *expected.gradientNorm)
          << "gradient norm, step " << step;
    }
    for (const ParamSpec &spec : bundle.params) {
      std::vector<float> grad;
      ASSERT_EQ(gpu->gradient(spec.name, grad), "");
      const std::vector<float> &want = *cpu->gradient(spec.name);
      EXPECT_TRUE(gpipe::testing::allClose(
          grad, std::vector<double>(want.begin(), want.end()), tol.rtol,
          tol.atol))
          << "gradient " << spec.name << ", step " << step;
    }
  }
  for (const ParamSpec &spec : bundle.params) {
    std::vector<float> value;
    ASSERT_EQ(gpu->parameter(spec.name, value), "");
    const std::vector<float> &want = *cpu->parameter(spec.name);
    EXPECT_TRUE(gpipe::testing::allClose(
        value, std::vector<double>(want.begin(), want.end()), tol.rtol,
        tol.atol))
        << "parameter " << spec.name;
  }
}

TEST_P(CudaVersusCpu, SameLossesGradientsAndParameters) {
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why))
    GTEST_SKIP() << "no CUDA device: " << why;
  auto [transformer, k, remat, precision] = GetParam();
  const unsigned m = 4;
  Bundle bundle =
      transformer
          ? buildBundle(residualGraph(kBatch), residualSplit(k), m, remat)
          : buildBundle(mlpGraph(kBatch), mlpSplit(k), m, remat);
  expectCudaMatchesCpu(bundle, transformer ? residualBatch : mlpBatch,
                       precision);
}

/// The Transformer block as PyTorch writes it (biased attention
/// projections, the exact GELU fused with its dense) on the GPU, against the
/// CPU executor: the composed attention's bias kernels and the gelu_erf
/// functors as nvcc compiles them.
TEST(CudaPyTorchBlock, SameLossesGradientsAndParametersAsTheCpu) {
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why))
    GTEST_SKIP() << "no CUDA device: " << why;
  for (unsigned k : {1u, 2u, 4u})
    for (RematPolicy remat : {RematPolicy::None, RematPolicy::Full}) {
      SCOPED_TRACE("K " + std::to_string(k) + ", remat " +
                   std::to_string(int(remat)));
      expectCudaMatchesCpu(
          buildBundle(residualGraph(kBatch, true), residualSplit(k), 4, remat),
          residualBatch, GemmPrecision::F32);
    }
}

/// Interleaved 1F1B (2 devices running 2 stages each) on the GPU, against
/// the CPU executor.
TEST(CudaInterleaved, SameLossesGradientsAndParametersAsTheCpu) {
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why))
    GTEST_SKIP() << "no CUDA device: " << why;
  for (bool transformer : {false, true})
    for (RematPolicy remat :
         {RematPolicy::None, RematPolicy::Full, RematPolicy::ExceptLast}) {
      SCOPED_TRACE(std::string(transformer ? "transformer" : "mlp") +
                   " remat " + std::to_string(int(remat)));
      Bundle bundle =
          buildBundle(transformer ? residualGraph(kBatch) : mlpGraph(kBatch),
                      transformer ? std::vector<int>{0, 2, 3, 5}
                                  : std::vector<int>{0, 1, 2, 3},
                      4, remat, gpipe::schedule::ScheduleKind::Interleaved, 2);
      expectCudaMatchesCpu(bundle, transformer ? residualBatch : mlpBatch,
                           GemmPrecision::F32);
    }
}

/// The ops over images (convolutions with strides, padding and groups, both
/// pools, global pooling, flatten) and batch norm (micro-batch statistics,
/// running statistics updated once per step) on the GPU, against the CPU
/// executor, with and without rematerialisation.
TEST(CudaImageModels, SameLossesGradientsAndParametersAsTheCpu) {
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why))
    GTEST_SKIP() << "no CUDA device: " << why;
  for (RematPolicy remat : {RematPolicy::None, RematPolicy::Full}) {
    SCOPED_TRACE("remat " + std::to_string(int(remat)));
    expectCudaMatchesCpu(buildBundle(convGraph(kBatch), convSplit(2), 3, remat),
                         convBatch, GemmPrecision::F32);
    expectCudaMatchesCpu(buildBundle(batchNormGraph(kBatch), {0, 1}, 3, remat),
                         batchNormBatch, GemmPrecision::F32);
  }
}

/// Clipping and the non-finite guard on the GPU: each gradient's partial
/// sums of squares (kernels::SquaresPartial as nvcc compiles it), the norm
/// across K devices, the clipped update, and a nan input stopped with the
/// CPU's message (its gradient is the first nan: ReLU maps a nan to 0 in the
/// forward) and the parameters unchanged.
TEST(CudaGradientStatistics, ClippedGuardedStepsMatchTheCpu) {
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why))
    GTEST_SKIP() << "no CUDA device: " << why;
  OptimizerConfig clipped = plainSgd();
  clipped.clipGradNorm = 0.01f; // below the MLP's norm: the factor applies
  clipped.checkFinite = true;
  for (unsigned k : {1u, 2u, 4u}) {
    SCOPED_TRACE("K " + std::to_string(k));
    Bundle bundle =
        buildBundle(mlpGraph(kBatch), mlpSplit(k), 4, RematPolicy::None);
    expectCudaMatchesCpu(bundle, mlpBatch, GemmPrecision::F32, clipped);

    CpuAndGpu executors = executorsOf(bundle, GemmPrecision::F32, clipped);
    ASSERT_TRUE(executors.cpu && executors.gpu) << executors.error;
    PipelineExecutor *cpu = executors.cpu.get();
    DeviceExecutor *gpu = executors.gpu.get();
    for (const ParamSpec &spec : bundle.params)
      ASSERT_EQ(gpu->setParameter(spec.name, *cpu->parameter(spec.name)), "");
    Batch batch = mlpBatch(kBatch, 7);
    batch.at("x").f32[0] = std::nanf("");
    StepResult expected = cpu->trainStep(batch);
    EXPECT_TRUE(expected.nonFinite) << expected.error;
    StepResult actual = gpu->trainStep(batch);
    EXPECT_TRUE(actual.nonFinite);
    EXPECT_EQ(actual.error, expected.error);
    for (const ParamSpec &spec : bundle.params) {
      std::vector<float> value;
      ASSERT_EQ(gpu->parameter(spec.name, value), "");
      EXPECT_EQ(value, *cpu->parameter(spec.name)) << spec.name;
    }
  }
}

/// Per-op profiling on the GPU: every op marked on its device's stream
/// (host callbacks), counted and timed per kind as on the CPU.
TEST(CudaOpProfile, CountsEveryForwardOpOfEachDevice) {
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why))
    GTEST_SKIP() << "no CUDA device: " << why;
  const unsigned m = 3;
  Bundle bundle =
      buildBundle(mlpGraph(kBatch), mlpSplit(2), m, RematPolicy::Full);
  DeviceExecutorConfig config;
  config.seed = 1;
  config.profileOps = true;
  std::string error;
  auto gpu = gpuExecutor(bundle, GemmPrecision::F32, config, error);
  ASSERT_TRUE(gpu) << error;
  for (uint64_t step = 1; step <= 2; ++step)
    ASSERT_TRUE(gpu->trainStep(mlpBatch(kBatch, step)).ok());
  expectEveryForwardOpCounted(bundle, gpu->timeline(), m);
}

/// Two runs of one bundle and seed on the GPU give the same bits, in every
/// GEMM precision: the row reductions combine a warp's lanes in a fixed
/// order, column sums and embeddingGrad add rows in order (no atomics), and
/// each device's cuBLAS handle has one stream.
TEST(CudaDeterminism, TwoRunsGiveTheSameBits) {
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why))
    GTEST_SKIP() << "no CUDA device: " << why;
  for (GemmPrecision precision :
       {GemmPrecision::F32, GemmPrecision::TF32, GemmPrecision::BF16}) {
    for (bool transformer : {false, true}) {
      SCOPED_TRACE(std::string(transformer ? "transformer " : "mlp ") +
                   gpipe::cuda::gemmPrecisionName(precision));
      Bundle bundle = transformer
                          ? buildBundle(residualGraph(kBatch), residualSplit(2),
                                        4, RematPolicy::Full)
                          : buildBundle(mlpGraph(kBatch), mlpSplit(2), 4,
                                        RematPolicy::Full);
      std::vector<double> losses[2];
      std::vector<std::vector<float>> params[2];
      for (int run = 0; run < 2; ++run) {
        DeviceExecutorConfig config;
        config.seed = 42;
        config.optimizer.kind = OptimizerKind::Adam;
        config.optimizer.learningRate = 0.01f;
        std::string error;
        auto gpu = gpuExecutor(bundle, precision, config, error);
        ASSERT_TRUE(gpu) << error;
        for (uint64_t step = 1; step <= 3; ++step) {
          StepResult result =
              gpu->trainStep(transformer ? residualBatch(kBatch, 100 + step)
                                         : mlpBatch(kBatch, 100 + step));
          ASSERT_TRUE(result.ok()) << result.error;
          losses[run].push_back(result.loss);
        }
        for (const ParamSpec &spec : bundle.params) {
          params[run].emplace_back();
          ASSERT_EQ(gpu->parameter(spec.name, params[run].back()), "");
        }
      }
      EXPECT_EQ(losses[0], losses[1]);
      EXPECT_EQ(params[0], params[1]);
    }
  }
}

/// The bundle's precision (gpipe-compile precision=) replaces the backend
/// options': each run gives the bits of the backend created with that
/// precision, through the bf16 parameter copies too (M = 4).
TEST(CudaPrecision, TheBundlesPrecisionReplacesTheOptions) {
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why))
    GTEST_SKIP() << "no CUDA device: " << why;
  const Bundle plain =
      buildBundle(mlpGraph(kBatch), mlpSplit(2), 4, RematPolicy::Full);
  auto run = [&](const Bundle &bundle, GemmPrecision options) {
    DeviceExecutorConfig config;
    config.seed = 42;
    std::string error;
    auto gpu = gpuExecutor(bundle, options, config, error);
    EXPECT_TRUE(gpu) << error;
    std::vector<double> losses;
    for (uint64_t step = 1; gpu && step <= 3; ++step) {
      StepResult result = gpu->trainStep(mlpBatch(kBatch, 100 + step));
      EXPECT_TRUE(result.ok()) << result.error;
      losses.push_back(result.loss);
    }
    return losses;
  };
  using gpipe::runtime::Precision;
  for (auto [precision, gemm] :
       {std::pair{Precision::F32, GemmPrecision::F32},
        std::pair{Precision::TF32, GemmPrecision::TF32},
        std::pair{Precision::BF16, GemmPrecision::BF16}}) {
    SCOPED_TRACE(gpipe::runtime::precisionName(precision));
    Bundle decided = plain;
    decided.precision = precision;
    const GemmPrecision other =
        gemm == GemmPrecision::F32 ? GemmPrecision::BF16 : GemmPrecision::F32;
    EXPECT_EQ(run(decided, other), run(plain, gemm));
  }
}

INSTANTIATE_TEST_SUITE_P(
    OneGpu, CudaVersusCpu,
    ::testing::Combine(::testing::Values(false, true),
                       ::testing::Values(1u, 2u, 4u),
                       ::testing::Values(RematPolicy::None, RematPolicy::Full,
                                         RematPolicy::ExceptLast),
                       ::testing::Values(GemmPrecision::F32,
                                         GemmPrecision::TF32,
                                         GemmPrecision::BF16)),
    paramName);

} // namespace
