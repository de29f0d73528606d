//===- GeneratedKernelModelTest.cpp - A model that runs generated kernels -===//
//
// The models of GeneratedKernelsSupport.h, kernel ops in their forward,
// recompute and backward (element-wise, broadcasting and reducing ones, over
// micro-batches of several sizes), trained a step on the CPU backend and on
// the host emulation: their losses and gradients against the same models
// computed here in double. And the refusals where the code cannot run: a
// backend that is not the host's (CUDA), and code that is not an x86-64 shared
// object, through the C API.
//
//===----------------------------------------------------------------------===//

#include "DeviceOnlyBackend.h"
#include "GeneratedKernelsSupport.h"

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/bundle/Initializers.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/runtime/exec/Engine.h"
#include "gpipe/runtime/gpipe_runtime.h"
#include "gpipe/runtime/kernels/KernelsByFunctor.h"

#include <gtest/gtest.h>

#include <elf.h>

#include <cmath>
#include <cstring>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

constexpr int64_t kRows = 8, kWidth = 6;

Batch kernelBatch() {
  std::vector<float> x(kRows * kWidth);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.7 * double(i)) * 1.5;
  std::vector<int32_t> labels(kRows);
  for (int64_t r = 0; r < kRows; ++r)
    labels[r] = int32_t((r * 5 + 1) % kWidth);
  return {{"x", HostTensor::floats({kRows, kWidth}, x)},
          {"labels", HostTensor::ints({kRows}, labels)}};
}

/// The loss and w's gradient of the model on `batch`, in double: what the
/// kernels and ops compute, written out here.
struct Reference {
  double loss = 0;
  std::vector<double> dw;
};

Reference reference(const Batch &batch, const std::vector<float> &w) {
  const std::vector<float> &x = batch.at("x").f32;
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  Reference out;
  out.dw.assign(kWidth * kWidth, 0.0);
  for (int64_t r = 0; r < kRows; ++r) {
    double relu[kWidth], top = -INFINITY, sum = 0;
    for (int64_t j = 0; j < kWidth; ++j) {
      double h = 0;
      for (int64_t i = 0; i < kWidth; ++i)
        h += double(x[r * kWidth + i]) * w[i * kWidth + j];
      relu[j] = std::max(h + x[r * kWidth + j], 0.0); // kernel 0
      top = std::max(top, relu[j]);
    }
    for (double v : relu)
      sum += std::exp(v - top);
    out.loss += (top + std::log(sum) - relu[labels[r]]) / double(kRows);
    for (int64_t j = 0; j < kWidth; ++j) {
      double p = std::exp(relu[j] - top) / sum;
      double dr = (p - (j == labels[r] ? 1.0 : 0.0)) / double(kRows);
      double dh = relu[j] > 0 ? dr : 0.0; // kernel 2
      for (int64_t i = 0; i < kWidth; ++i)
        out.dw[i * kWidth + j] += double(x[r * kWidth + i]) * dh;
    }
  }
  return out;
}

class GeneratedKernelModel : public ::testing::TestWithParam<DeviceKind> {};

TEST_P(GeneratedKernelModel, TrainsAndEvaluatesAsComputedHere) {
  EngineOptions options;
  options.device = GetParam();
  options.seed = 3;
  Bundle bundle = kernelModelBundle(/*microbatches=*/2);
  std::vector<float> w(kWidth * kWidth);
  initializeParameter(InitKind::GlorotUniform, 1.0, {kWidth, kWidth},
                      options.seed, "w", w.data());
  StatusOr<std::unique_ptr<Engine>> engine =
      createEngine(std::move(bundle), options);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  const Batch batch = kernelBatch();
  const Reference expected = reference(batch, w);

  EvalResult eval = (*engine)->evaluate(batch, kRows);
  ASSERT_TRUE(eval.ok()) << eval.error;
  EXPECT_NEAR(eval.loss, expected.loss, 1e-5);

  StepResult step = (*engine)->trainStep(batch);
  ASSERT_TRUE(step.ok()) << step.error;
  EXPECT_NEAR(step.loss, expected.loss, 1e-5);
  std::vector<float> dw;
  ASSERT_TRUE((*engine)->gradient("w", dw).ok());
  ASSERT_EQ(dw.size(), expected.dw.size());
  double largest = 0;
  for (size_t i = 0; i < dw.size(); ++i) {
    EXPECT_NEAR(dw[i], expected.dw[i], 1e-6) << "dw[" << i << "]";
    largest = std::max(largest, std::fabs(expected.dw[i]));
  }
  EXPECT_GT(largest, 1e-3); // the gradient is not all zeros
}

/// The bias model's loss and gradients (w's and b's) on `batch`, in double.
struct BiasReference {
  double loss = 0;
  std::vector<double> dw, db;
};

BiasReference biasReference(const Batch &batch, const std::vector<float> &w,
                            const std::vector<float> &b) {
  const std::vector<float> &x = batch.at("x").f32;
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  BiasReference out;
  out.dw.assign(kWidth * kWidth, 0.0);
  out.db.assign(kWidth, 0.0);
  for (int64_t r = 0; r < kRows; ++r) {
    double relu[kWidth], top = -INFINITY, sum = 0;
    for (int64_t j = 0; j < kWidth; ++j) {
      double h = 0;
      for (int64_t i = 0; i < kWidth; ++i)
        h += double(x[r * kWidth + i]) * w[i * kWidth + j];
      h += b[j];                                      // kernel 3
      relu[j] = std::max(h + x[r * kWidth + j], 0.0); // kernel 0
      top = std::max(top, relu[j]);
    }
    for (double v : relu)
      sum += std::exp(v - top);
    out.loss += (top + std::log(sum) - relu[labels[r]]) / double(kRows);
    for (int64_t j = 0; j < kWidth; ++j) {
      double p = std::exp(relu[j] - top) / sum;
      double dr = (p - (j == labels[r] ? 1.0 : 0.0)) / double(kRows);
      double dh = relu[j] > 0 ? dr : 0.0; // kernel 2
      out.db[j] += dh;                    // kernel 5, over the rows
      for (int64_t i = 0; i < kWidth; ++i)
        out.dw[i * kWidth + j] += double(x[r * kWidth + i]) * dh;
    }
  }
  return out;
}

// A broadcasting kernel in the forward (and recompute) and a reduction over
// the batch in the backward, each batched: every micro-batch, of whatever
// rows, runs its share of the space, and the column sums of the
// micro-batches add up to the batch's.
TEST_P(GeneratedKernelModel, BroadcastsAndReducesOverMicroBatches) {
  const std::vector<std::vector<int64_t>> splits = {
      {8}, {4, 4}, {3, 5}, {1, 2, 2, 3}};
  for (const std::vector<int64_t> &rows : splits) {
    SCOPED_TRACE(::testing::Message() << rows.size() << " micro-batches");
    EngineOptions options;
    options.device = GetParam();
    options.seed = 5;
    options.cpuThreading.threadsPerDevice = 3;
    std::vector<float> w(kWidth * kWidth), b(kWidth);
    initializeParameter(InitKind::GlorotUniform, 1.0, {kWidth, kWidth},
                        options.seed, "w", w.data());
    initializeParameter(InitKind::Uniform, 0.5, {kWidth}, options.seed, "b",
                        b.data());
    StatusOr<std::unique_ptr<Engine>> engine =
        createEngine(biasModelBundle(rows), options);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    const Batch batch = kernelBatch();
    const BiasReference expected = biasReference(batch, w, b);

    EvalResult eval = (*engine)->evaluate(batch, kRows);
    ASSERT_TRUE(eval.ok()) << eval.error;
    EXPECT_NEAR(eval.loss, expected.loss, 1e-5);

    StepResult step = (*engine)->trainStep(batch);
    ASSERT_TRUE(step.ok()) << step.error;
    EXPECT_NEAR(step.loss, expected.loss, 1e-5);
    std::vector<float> dw, db;
    ASSERT_TRUE((*engine)->gradient("w", dw).ok());
    ASSERT_TRUE((*engine)->gradient("b", db).ok());
    ASSERT_EQ(dw.size(), expected.dw.size());
    ASSERT_EQ(db.size(), expected.db.size());
    for (size_t i = 0; i < dw.size(); ++i)
      EXPECT_NEAR(dw[i], expected.dw[i], 1e-6) << "dw[" << i << "]";
    double largest = 0;
    for (size_t j = 0; j < db.size(); ++j) {
      EXPECT_NEAR(db[j], expected.db[j], 1e-6) << "db[" << j << "]";
      largest = std::max(largest, std::fabs(expected.db[j]));
    }
    EXPECT_GT(largest, 1e-3); // the bias gradient is not all zeros
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, GeneratedKernelModel,
                         ::testing::Values(DeviceKind::Cpu,
                                           DeviceKind::HostEmulation),
                         [](const ::testing::TestParamInfo<DeviceKind> &info) {
                           return info.param == DeviceKind::Cpu
                                      ? "Cpu"
                                      : "HostEmulation";
                         });

/// DeviceBackend::loadGeneratedKernels's default: a backend that neither runs
/// host code nor loads kernels of its own (the CUDA backend loads code.cuda).
constexpr const char *kCudaRefusal =
    "this backend cannot run the bundle's generated kernels: compile with "
    "codegen=none";

TEST(GeneratedKernelRefusals, ABackendThatIsNotTheHostsRefusesUpFront) {
  EXPECT_FALSE(DeviceOnlyBackend().runsHostCode());
  std::string error;
  auto executor = device::DeviceExecutor::create(
      kernelModelBundle(), std::make_unique<DeviceOnlyBackend>(), {}, error);
  EXPECT_FALSE(executor);
  EXPECT_EQ(error, kCudaRefusal);

  EngineOptions options;
  options.device = DeviceKind::Cuda;
  options.cudaBackend = [](unsigned, std::string &) {
    return std::make_unique<DeviceOnlyBackend>();
  };
  StatusOr<std::unique_ptr<Engine>> engine =
      createEngine(kernelModelBundle(), options);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().message(), kCudaRefusal);
}

/// gpipe_session_create_from_json of the model's text with `code`; the
/// status, and the message in `error`.
gpipe_status_t createSession(const GeneratedCode &code, std::string &error) {
  Bundle bundle = kernelModelBundle();
  bundle.code = code;
  const std::string text = writeBundle(bundle);
  gpipe_session_t *session = nullptr;
  gpipe_status_t status = gpipe_session_create_from_json(
      text.data(), text.size(), "kernels.json", nullptr, &session);
  error = status == GPIPE_OK ? "" : gpipe_last_error();
  gpipe_session_destroy(session);
  return status;
}

TEST(GeneratedKernelRefusals, TheCApiReportsCodeThatCannotLoad) {
  std::string error;
  EXPECT_EQ(createSession(kernelCode(), error), GPIPE_OK) << error;

  GeneratedCode foreign = kernelCode();
  const uint16_t machine = EM_AARCH64;
  std::memcpy(&foreign.cpu[0].bytes[offsetof(Elf64_Ehdr, e_machine)], &machine,
              sizeof machine);
  EXPECT_EQ(createSession(foreign, error), GPIPE_ERROR_INVALID_BUNDLE);
  EXPECT_EQ(error, "gpipe_session_create_from_json: invalid bundle: the code "
                   "artifact for x86-64 is not an x86-64 ELF shared object "
                   "(built for AArch64)");

  GeneratedCode text = kernelCode();
  text.cpu[0].bytes = "int main() { return 0; }";
  EXPECT_EQ(createSession(text, error), GPIPE_ERROR_INVALID_BUNDLE);
  EXPECT_NE(error.find("(no ELF magic)"), std::string::npos) << error;

  GeneratedCode elsewhere = kernelCode();
  elsewhere.kernels[0].symbol = "gpipe_kernel_0_deadbeef";
  EXPECT_EQ(createSession(elsewhere, error), GPIPE_ERROR_INVALID_BUNDLE);
  EXPECT_NE(error.find("has no kernel 'gpipe_kernel_0_deadbeef'"),
            std::string::npos)
      << error;
}

} // namespace
