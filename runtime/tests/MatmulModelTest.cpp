//===- MatmulModelTest.cpp - Models of matmul ops, run by the executors ---===//
//
// The models of MatmulModelSupport.h on the CPU backend (three threads) and
// the host emulation: the loss against the model in double, the gradients
// of w and v against central differences of it (the backward's matmuls,
// transposes and the contracted batch, summed over micro-batches of any
// rows), and the predictions of batches split into 1, 2 or 3 micro-batches
// with the same bits.
//
//===----------------------------------------------------------------------===//

#include "MatmulModelSupport.h"

#include "AllClose.h"
#include "RandomData.h"

#include "gpipe/runtime/exec/Engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;
using namespace gpipe::runtime::testing::matmulmodel;
using gpipe::testing::allClose;

namespace {

Batch matmulBatch(bool head, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<int64_t> target = head ? std::vector<int64_t>{kBatch, 2}
                                           : std::vector<int64_t>{kBatch, 4, 3};
  return {{"x", HostTensor::floats({kBatch, 4, 5},
                                   gpipe::testing::randomFloats(rng, 120))},
          {"t", HostTensor::floats(target, gpipe::testing::randomFloats(
                                               rng, head ? 12 : 72))}};
}

RefTensor tensorOf(const std::vector<int64_t> &shape,
                   const std::vector<float> &values) {
  return {shape, std::vector<double>(values.begin(), values.end())};
}

std::unique_ptr<Engine> engineFor(Bundle bundle, DeviceKind device,
                                  unsigned threads = 3) {
  EngineOptions options;
  options.device = device;
  options.seed = 11;
  options.cpuThreading.threadsPerDevice = threads;
  StatusOr<std::unique_ptr<Engine>> engine =
      createEngine(std::move(bundle), options);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  return engine.ok() ? std::move(*engine) : nullptr;
}

/// d loss / d `theta` by central differences of the model in double.
std::vector<double> numericGradient(RefTensor &theta,
                                    const std::function<double()> &loss) {
  const double step = 1e-6;
  std::vector<double> grad(theta.data.size());
  for (size_t i = 0; i < grad.size(); ++i) {
    const double saved = theta.data[i];
    theta.data[i] = saved + step;
    const double plus = loss();
    theta.data[i] = saved - step;
    const double minus = loss();
    theta.data[i] = saved;
    grad[i] = (plus - minus) / (2 * step);
  }
  return grad;
}

class MatmulModel : public ::testing::TestWithParam<DeviceKind> {};

// One step: the loss as computed in double, the gradients of w (batched
// matmuls, transposes, a per-example product summed over the batch) and v
// (the batch contracted by a matmul in the backward) as its central
// differences, whether the batch runs whole or in micro-batches of 3 + 3
// or 2 + 4 rows.
TEST_P(MatmulModel, LossAndGradientsMatchTheModelInDouble) {
  for (bool head : {false, true})
    for (std::vector<int64_t> rows :
         {std::vector<int64_t>{6}, std::vector<int64_t>{3, 3},
          std::vector<int64_t>{2, 4}}) {
      SCOPED_TRACE(::testing::Message()
                   << (head ? "with" : "without") << " the head, "
                   << rows.size() << " micro-batches, the first of " << rows[0]
                   << " rows");
      std::unique_ptr<Engine> engine =
          engineFor(matmulModelBundle(rows, head), GetParam());
      ASSERT_TRUE(engine);
      const Batch batch = matmulBatch(head, 5);
      std::vector<float> w, v;
      ASSERT_TRUE(engine->parameter("w", w).ok());
      if (head) {
        ASSERT_TRUE(engine->parameter("v", v).ok());
      }
      const RefTensor x = tensorOf({kBatch, 4, 5}, batch.at("x").f32);
      const RefTensor t = tensorOf(batch.at("t").shape, batch.at("t").f32);
      RefTensor wd = tensorOf({1, 5, 3}, w), vd = tensorOf({12, 2}, v);
      auto loss = [&] {
        return forwardInDouble(x, t, wd, head ? &vd : nullptr).loss;
      };
      const double expected = loss();

      StepResult step = engine->trainStep(batch);
      ASSERT_TRUE(step.ok()) << step.error;
      EXPECT_NEAR(step.loss, expected, 1e-5 * std::fabs(expected));
      std::vector<float> dw, dv;
      ASSERT_TRUE(engine->gradient("w", dw).ok());
      EXPECT_TRUE(allClose(dw, numericGradient(wd, loss), 1e-4, 1e-5)) << "dw";
      if (head) {
        ASSERT_TRUE(engine->gradient("v", dv).ok());
        EXPECT_TRUE(allClose(dv, numericGradient(vd, loss), 1e-4, 1e-5))
            << "dv";
      }
    }
}

// Every matrix of y is one GEMM of the same size in every micro-batch, so
// the predictions of a batch evaluated in chunks of 6, 3 or 2 rows (the
// first micro-batch's) have the same bits, and match the model in double.
TEST_P(MatmulModel, MicroBatchesGiveTheSameBits) {
  const Batch batch = matmulBatch(false, 9);
  std::vector<float> first;
  for (std::vector<int64_t> rows :
       {std::vector<int64_t>{6}, std::vector<int64_t>{3, 3},
        std::vector<int64_t>{2, 4}}) {
    SCOPED_TRACE(::testing::Message()
                 << "micro-batches of " << rows[0] << " rows first");
    std::unique_ptr<Engine> engine =
        engineFor(matmulModelBundle(rows, false), GetParam());
    ASSERT_TRUE(engine);
    EvalResult eval = engine->evaluate(batch, kBatch);
    ASSERT_TRUE(eval.ok()) << eval.error;
    ASSERT_EQ(eval.prediction.shape, (std::vector<int64_t>{kBatch, 4, 3}));
    const std::vector<float> &y = eval.prediction.f32;
    if (first.empty()) {
      first = y;
      std::vector<float> w;
      ASSERT_TRUE(engine->parameter("w", w).ok());
      const Forward expected =
          forwardInDouble(tensorOf({kBatch, 4, 5}, batch.at("x").f32),
                          tensorOf({kBatch, 4, 3}, batch.at("t").f32),
                          tensorOf({1, 5, 3}, w), nullptr);
      EXPECT_TRUE(allClose(y, expected.prediction.data, 1e-5, 1e-5));
      continue;
    }
    ASSERT_EQ(y.size(), first.size());
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(std::memcmp(&y[i], &first[i], 4), 0)
          << "element " << i << ": " << y[i] << " against " << first[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, MatmulModel,
                         ::testing::Values(DeviceKind::Cpu,
                                           DeviceKind::HostEmulation),
                         [](const ::testing::TestParamInfo<DeviceKind> &info) {
                           return info.param == DeviceKind::Cpu
                                      ? "Cpu"
                                      : "HostEmulation";
                         });

// The CPU backend's threads change no bit of the predictions, and neither
// does the host emulation's composed matmul.
TEST(MatmulModelBackends, ThreadsAndBackendsGiveTheSameBits) {
  const Batch batch = matmulBatch(false, 13);
  std::vector<std::vector<float>> predictions;
  for (auto [device, threads] :
       {std::pair{DeviceKind::Cpu, 1u}, std::pair{DeviceKind::Cpu, 3u},
        std::pair{DeviceKind::HostEmulation, 1u}}) {
    std::unique_ptr<Engine> engine =
        engineFor(matmulModelBundle({3, 3}, false), device, threads);
    ASSERT_TRUE(engine);
    EvalResult eval = engine->evaluate(batch, kBatch);
    ASSERT_TRUE(eval.ok()) << eval.error;
    predictions.push_back(eval.prediction.f32);
  }
  for (size_t k = 1; k < predictions.size(); ++k)
    EXPECT_EQ(std::memcmp(predictions[k].data(), predictions[0].data(),
                          predictions[0].size() * 4),
              0)
        << "run " << k;
}

} // namespace
