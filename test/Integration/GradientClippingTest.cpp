//===- GradientClippingTest.cpp - Clipping by the global norm, pipelined --===//
//
// The example MLP compiled at K = 1, 2 and 4 (gpipe-compile, the bundle
// writer and reader) and trained one SGD step with --clip-grad-norm: the
// gradients live on K devices, so the norm the executor reduces across them
// must be the single-device norm. Checked three ways: against the norm this
// test computes in double from the gradients it reads back; against K = 1's
// norm; and the clipped parameters, against p - lr min(1, c / (norm + 1e-6)) g
// computed here and against K = 1's parameters. The host emulation of the
// device backend (the GPU's kernel bodies) reports the same norm.
//
//===----------------------------------------------------------------------===//

#include "CompiledSupport.h"

#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/runtime/backends/host/HostBackend.h"

#include <cmath>

namespace rt = gpipe::runtime;
namespace dev = gpipe::runtime::device;

namespace {

constexpr float kLearningRate = 0.1f;
/// Below the MLP's first gradient norm (0.7227 with this seed and batch):
/// the clipping is active.
constexpr float kMaxNorm = 0.25f;

rt::OptimizerConfig clippedSgd() {
  rt::OptimizerConfig sgd;
  sgd.kind = rt::OptimizerKind::Sgd;
  sgd.learningRate = kLearningRate;
  sgd.clipGradNorm = kMaxNorm;
  return sgd;
}

struct OneStep {
  double norm = 0;       ///< the executor's
  double recomputed = 0; ///< this test's, from the gradients read back
  gpipe::testing::Params before, after, grads;
};

OneStep stepAt(unsigned k) {
  OneStep out;
  gpipe::testing::Compiled compiled =
      gpipe::testing::compile(gpipe::testing::readExample("mlp/mlp.mlir"), k, 4,
                              gpipe::RematPolicy::Full);
  EXPECT_TRUE(compiled.error.empty()) << compiled.error;
  rt::ExecutorConfig config;
  config.optimizer = clippedSgd();
  config.seed = 3;
  auto executor = gpipe::testing::makeExecutor(compiled.bundle, config);
  if (!executor)
    return out;
  out.before = gpipe::testing::currentParams(*executor);
  rt::StepResult result =
      executor->trainStep(gpipe::testing::randomBatch(compiled.bundle, 7));
  EXPECT_TRUE(result.ok()) << result.error;
  EXPECT_TRUE(result.gradientNorm.has_value());
  out.norm = result.gradientNorm.value_or(-1);
  out.after = gpipe::testing::currentParams(*executor);
  double sum = 0;
  for (const rt::ParamSpec &spec : compiled.bundle.params) {
    out.grads[spec.name] =
        gpipe::testing::toVec(*executor->gradient(spec.name));
    for (double g : out.grads[spec.name])
      sum += g * g;
  }
  out.recomputed = std::sqrt(sum);
  return out;
}

} // namespace

TEST(GradientClipping, GlobalNormSpansEveryStage) {
  OneStep single = stepAt(1);
  ASSERT_GT(single.recomputed, 2 * kMaxNorm) << "the clipping must be active";
  for (unsigned k : {1u, 2u, 4u}) {
    SCOPED_TRACE("K = " + std::to_string(k));
    OneStep piped = k == 1 ? single : stepAt(k);
    // The executor's norm is that of the gradients it holds...
    EXPECT_NEAR(piped.norm, piped.recomputed, 1e-9 * piped.recomputed);
    // ... and the single device's, within f32 rounding; in fact bit for bit:
    // the gradients are (PipelineInvarianceTest), and the executor adds the
    // parameters' sums in the bundle's order whatever device holds them.
    EXPECT_NEAR(piped.norm, single.norm, 1e-6 * single.norm);
    EXPECT_EQ(piped.norm, single.norm);
    const double scale = std::min(1.0, kMaxNorm / (piped.recomputed + 1e-6));
    for (const auto &[name, grad] : piped.grads) {
      const std::vector<double> &before = piped.before.at(name);
      const std::vector<double> &after = piped.after.at(name);
      const std::vector<double> &reference = single.after.at(name);
      ASSERT_EQ(after.size(), grad.size());
      for (size_t i = 0; i < grad.size(); ++i) {
        double expected = before[i] - double(kLearningRate) * scale * grad[i];
        ASSERT_NEAR(after[i], expected, 1e-6 * (1 + std::fabs(expected)))
            << name << "[" << i << "]";
        ASSERT_NEAR(after[i], reference[i], 1e-6 * (1 + std::fabs(expected)))
            << name << "[" << i << "] against K = 1";
      }
    }
  }
}

// The device executor on the host emulation (the GPU's sumOfSquares and
// optimizer bodies, streams interleaved at random) reduces the same norm.
TEST(GradientClipping, HostEmulationMatchesTheCpuExecutor) {
  OneStep cpu = stepAt(2);
  gpipe::testing::Compiled compiled =
      gpipe::testing::compile(gpipe::testing::readExample("mlp/mlp.mlir"), 2, 4,
                              gpipe::RematPolicy::Full);
  ASSERT_TRUE(compiled.error.empty()) << compiled.error;
  dev::DeviceExecutorConfig config;
  config.optimizer = clippedSgd();
  config.seed = 3;
  std::string error;
  auto device = dev::DeviceExecutor::create(
      compiled.bundle, std::make_unique<dev::HostBackend>(2, 5), config, error);
  ASSERT_TRUE(device) << error;
  rt::StepResult result =
      device->trainStep(gpipe::testing::randomBatch(compiled.bundle, 7));
  ASSERT_TRUE(result.ok()) << result.error;
  ASSERT_TRUE(result.gradientNorm.has_value());
  EXPECT_NEAR(*result.gradientNorm, cpu.norm, 1e-5 * cpu.norm);
  for (const rt::ParamSpec &spec : compiled.bundle.params) {
    std::vector<float> value;
    ASSERT_EQ(device->parameter(spec.name, value), "");
    const std::vector<double> &want = cpu.after.at(spec.name);
    for (size_t i = 0; i < value.size(); ++i)
      ASSERT_NEAR(value[i], want[i], 1e-6 * (1 + std::fabs(want[i])))
          << spec.name << "[" << i << "]";
  }
}
