//===- DeviceExecutorCompiledTest.cpp - Compiled examples on the device ---===//
//
// The example models as the compiler emits them (gpipe-compile, the bundle
// writer and reader), run by the device executor on the host emulation of the
// device backend (the GPU's kernel bodies, randomly interleaved streams) and
// by the CPU executor: the same losses, gradients and parameters after two
// SGD steps, at K = 1, 2, 4. The device executor's arena is also compared
// with the compiler's memory plan.
//
//===----------------------------------------------------------------------===//

#include "CompiledSupport.h"

#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/runtime/backends/host/HostBackend.h"

#include "AllClose.h"

#include <cmath>
#include <tuple>

namespace rt = gpipe::runtime;
namespace dev = gpipe::runtime::device;

namespace {

using Param = std::tuple<const char *, unsigned, gpipe::RematPolicy>;

class CompiledOnDevice : public ::testing::TestWithParam<Param> {};

TEST_P(CompiledOnDevice, MatchesTheCpuExecutor) {
  auto [model, k, remat] = GetParam();
  gpipe::testing::Compiled compiled =
      gpipe::testing::compile(gpipe::testing::readExample(model), k, 4, remat);
  ASSERT_TRUE(compiled.error.empty()) << compiled.error;
  const rt::Bundle &bundle = compiled.bundle;
  // SGD: a parameter's error is the learning rate times its gradient's.
  // (Adam's step is sign-like, so a gradient at rounding level would move a
  // parameter by up to the learning rate either way.)
  rt::OptimizerConfig sgd;
  sgd.kind = rt::OptimizerKind::Sgd;
  sgd.learningRate = 0.05f;

  rt::ExecutorConfig cpuConfig;
  cpuConfig.optimizer = sgd;
  cpuConfig.seed = 5;
  // Both sides multiply with the BLAS, so that only the programs differ.
  // (With the packed kernel's rounding, one MLP unit whose input is within
  // rounding of ReLU's kink flips at step 2 and moves its column's gradient
  // by 1e-6; the kernel is checked against a double product on its own, in
  // PackedGemmTest.)
  cpuConfig.threading.packWeights = false;
  std::string error;
  auto cpu = rt::PipelineExecutor::create(bundle, cpuConfig, error);
  ASSERT_TRUE(cpu) << error;
  dev::DeviceExecutorConfig config;
  config.optimizer = sgd;
  config.seed = 5;
  auto device = dev::DeviceExecutor::create(
      bundle, std::make_unique<dev::HostBackend>(k, 11), config, error);
  ASSERT_TRUE(device) << error;

  for (unsigned step = 1; step <= 2; ++step) {
    rt::Batch batch = gpipe::testing::randomBatch(bundle, step);
    rt::StepResult expected = cpu->trainStep(batch);
    rt::StepResult actual = device->trainStep(batch);
    ASSERT_TRUE(expected.ok()) << expected.error;
    ASSERT_TRUE(actual.ok()) << actual.error;
    EXPECT_NEAR(actual.loss, expected.loss, 1e-5 * std::fabs(expected.loss));
    for (const rt::ParamSpec &spec : bundle.params) {
      std::vector<float> grad;
      ASSERT_EQ(device->gradient(spec.name, grad), "");
      const std::vector<float> &want = *cpu->gradient(spec.name);
      EXPECT_TRUE(gpipe::testing::allClose(
          grad, std::vector<double>(want.begin(), want.end()), 1e-5, 1e-6))
          << "gradient " << spec.name << ", step " << step;
    }
  }
  for (const rt::ParamSpec &spec : bundle.params) {
    std::vector<float> value;
    ASSERT_EQ(device->parameter(spec.name, value), "");
    const std::vector<float> &want = *cpu->parameter(spec.name);
    EXPECT_TRUE(gpipe::testing::allClose(
        value, std::vector<double>(want.begin(), want.end()), 1e-5, 1e-6))
        << "parameter " << spec.name;
  }
  ASSERT_EQ(bundle.memoryPlan.devices.size(), k);
  // With the plan's optimizer state (its slots per parameter), the device
  // needs at most 6% more than the plan: its arena is the plan's, and only
  // its resident tensors are 256-byte aligned.
  rt::OptimizerConfig planned;
  planned.kind = bundle.memoryPlan.optimizerSlots == 2 ? rt::OptimizerKind::Adam
                 : bundle.memoryPlan.optimizerSlots == 1
                     ? rt::OptimizerKind::Momentum
                     : rt::OptimizerKind::Sgd;
  config.optimizer = planned;
  auto sized = dev::DeviceExecutor::create(
      bundle, std::make_unique<dev::HostBackend>(k, 11), config, error);
  ASSERT_TRUE(sized) << error;
  for (unsigned d = 0; d < k; ++d) {
    const dev::DeviceMemoryLayout &layout = sized->memory()[d];
    EXPECT_LE(double(layout.residentBytes + layout.arenaBytes),
              1.06 * double(layout.plannedArenaBytes))
        << "device " << d;
    EXPECT_EQ(layout.plannedArenaBytes,
              bundle.memoryPlan.devices[d].arenaBytes);
    // The arena is the compiler's, byte for byte: the device places every
    // buffer where the plan put it.
    EXPECT_EQ(layout.arenaBytes, bundle.memoryPlan.devices[d].arenaBytes -
                                     bundle.memoryPlan.devices[d].residentBytes)
        << "device " << d;
    RecordProperty("device" + std::to_string(d) + "_arena",
                   std::to_string(layout.arenaBytes));
    RecordProperty("device" + std::to_string(d) + "_resident",
                   std::to_string(layout.residentBytes));
    RecordProperty("device" + std::to_string(d) + "_planned_arena",
                   std::to_string(layout.plannedArenaBytes));
  }
}

/// The transformer example at K=2, compiled with its placement.
rt::Bundle placedTransformer() {
  gpipe::testing::Compiled compiled = gpipe::testing::compile(
      gpipe::testing::readExample("transformer/transformer.mlir"), 2, 4,
      gpipe::RematPolicy::Full);
  EXPECT_TRUE(compiled.error.empty()) << compiled.error;
  EXPECT_FALSE(compiled.bundle.memoryPlan.devices.at(0).buffers.empty());
  return compiled.bundle;
}

std::string createError(const rt::Bundle &bundle) {
  std::string error;
  auto executor = dev::DeviceExecutor::create(
      bundle, std::make_unique<dev::HostBackend>(2, 1), {}, error);
  return executor ? "" : error;
}

// The runtime verifies the compiler's placement instead of trusting it: two
// live buffers moved onto the same bytes, and a buffer whose size is not what
// the program defines, are refused with where they are.
TEST(CompilerPlacement, OverlapsAndWrongSizesAreRefused) {
  rt::Bundle overlapping = placedTransformer();
  std::vector<rt::PlacedBuffer> &buffers =
      overlapping.memoryPlan.devices[0].buffers;
  // The first pair of buffers live at once at different offsets.
  size_t a = 0, b = 0;
  for (size_t i = 0; i < buffers.size() && !b; ++i)
    for (size_t j = i + 1; j < buffers.size() && !b; ++j)
      if (buffers[i].start < buffers[j].end &&
          buffers[j].start < buffers[i].end && buffers[i].bytes > 0 &&
          buffers[j].bytes > 0 && buffers[i].offset != buffers[j].offset &&
          buffers[j].bytes <= buffers[i].bytes)
        a = i, b = j;
  ASSERT_NE(b, 0u);
  buffers[b].offset = buffers[a].offset;
  std::string error = createError(overlapping);
  EXPECT_NE(error.find("device 0: buffers "), std::string::npos) << error;
  EXPECT_NE(error.find("share bytes"), std::string::npos) << error;
  EXPECT_NE(error.find("while both live"), std::string::npos) << error;

  rt::Bundle resized = placedTransformer();
  resized.memoryPlan.devices[1].buffers[2].bytes += 4;
  std::string resizedError = createError(resized);
  EXPECT_EQ(resizedError.rfind("device 1: instruction ", 0), 0u)
      << resizedError;
  EXPECT_NE(resizedError.find(
                "but the compiler's placement gives it " +
                std::to_string(resized.memoryPlan.devices[1].buffers[2].bytes)),
            std::string::npos)
      << resizedError;

  // The executor has no placement of its own to fall back on.
  rt::Bundle truncated = placedTransformer();
  truncated.memoryPlan.devices[0].buffers.resize(3);
  EXPECT_NE(createError(truncated).find("has no buffer for it"),
            std::string::npos)
      << createError(truncated);
}

std::string paramName(const ::testing::TestParamInfo<Param> &info) {
  auto [model, k, remat] = info.param;
  std::string name = std::string(model).substr(0, std::string(model).find('/'));
  return name + "_K" + std::to_string(k) + "_" +
         gpipe::testing::rematName(remat);
}

INSTANTIATE_TEST_SUITE_P(
    Examples, CompiledOnDevice,
    ::testing::Combine(::testing::Values("mlp/mlp.mlir",
                                         "transformer/transformer.mlir"),
                       ::testing::Values(1u, 2u, 4u),
                       ::testing::Values(gpipe::RematPolicy::Full,
                                         gpipe::RematPolicy::ExceptLast,
                                         gpipe::RematPolicy::Selective)),
    paramName);

} // namespace
