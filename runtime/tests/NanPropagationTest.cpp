//===- NanPropagationTest.cpp - A NaN never becomes a finite result -------===//
//
// A diverged run must not report a normal-looking loss. The CPU
// kernels get NaN (and infinities where PyTorch defines what they give) and
// must return what PyTorch's definitions give:
//   - relu(NaN) = NaN; relu's backward, threshold_backward(dy, x, 0) =
//     x <= 0 ? 0 : dy, passes dy where x is NaN;
//   - dropout is x * mask / (1 - rate): a dropped NaN or inf gives NaN;
//   - a softmax, log-partition or cross-entropy row holding a NaN (or +inf:
//     exp(inf - inf)) is NaN throughout, and so is the loss;
//   - gelu, tanh, layer norm, mse: NaN in, NaN out.
// KernelNaN.* also runs on four lanes (GPIPE_CPU_NO_AVX2, CMakeLists.txt).
// CApiNaN.*: a ReLU model evaluated and trained through the C API on
// all-NaN inputs gives a NaN loss, or the guard's GPIPE_ERROR_NON_FINITE.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"
#include "gpipe/runtime/gpipe_runtime.h"

#include "CApiSessionSupport.h"
#include "NanAssertions.h"
#include "RandomData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace cpu = gpipe::runtime::cpu;
namespace capi = gpipe::runtime::testing::capi;
using Floats = std::vector<float>;
using gpipe::testing::nanWhere;
using gpipe::testing::randomFloats;
using gpipe::testing::sameValues;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Both lane paths' vector bodies and tails.
const int64_t kCounts[] = {1, 3, 4, 5, 8, 9, 15, 17, 1001};

/// Values in [-2, 2] with NaN at every fifth element and, with `infinities`,
/// +inf and -inf at others.
Floats withNonFinite(std::mt19937_64 &rng, int64_t n, bool infinities) {
  Floats x = randomFloats(rng, n, -2.0f, 2.0f);
  for (int64_t i = 0; i < n; ++i) {
    if (i % 5 == 1 || n == 1)
      x[i] = kNaN;
    else if (infinities && i % 7 == 3)
      x[i] = kInf;
    else if (infinities && i % 7 == 5)
      x[i] = -kInf;
  }
  return x;
}

} // namespace

//===-- element-wise ------------------------------------------------------===//

TEST(KernelNaN, Relu) {
  std::mt19937_64 rng(4201);
  for (int64_t n : kCounts) {
    SCOPED_TRACE(n);
    Floats x = withNonFinite(rng, n, true), dy = randomFloats(rng, n);
    Floats y(n), dx(n), yTorch(n), dxTorch(n);
    for (int64_t i = 0; i < n; ++i) {
      yTorch[i] = std::isnan(x[i]) ? x[i] : std::max(x[i], 0.0f);
      dxTorch[i] = yTorch[i] <= 0 ? 0.0f : dy[i];
    }
    cpu::reluForward(x.data(), y.data(), n);
    cpu::reluBackward(x.data(), dy.data(), dx.data(), n);
    EXPECT_TRUE(sameValues(y, yTorch));
    EXPECT_TRUE(sameValues(dx, dxTorch));
  }
}

// gelu (both), tanh and their gradients: NaN exactly where x is NaN (the
// vector exp's clamps must not catch it).
TEST(KernelNaN, SmoothActivations) {
  std::mt19937_64 rng(4202);
  for (int64_t n : kCounts) {
    SCOPED_TRACE(n);
    Floats x = withNonFinite(rng, n, false), dy = randomFloats(rng, n);
    auto isNaN = [&](size_t i) { return std::isnan(x[i]); };
    Floats y(n), dx(n);
    cpu::geluForward(x.data(), y.data(), n);
    EXPECT_TRUE(nanWhere(y, isNaN)) << "gelu";
    cpu::geluBackward(x.data(), dy.data(), dx.data(), n);
    EXPECT_TRUE(nanWhere(dx, isNaN)) << "gelu grad";
    cpu::geluErfForward(x.data(), y.data(), n);
    EXPECT_TRUE(nanWhere(y, isNaN)) << "gelu_erf";
    cpu::geluErfBackward(x.data(), dy.data(), dx.data(), n);
    EXPECT_TRUE(nanWhere(dx, isNaN)) << "gelu_erf grad";
    cpu::tanhForward(x.data(), y.data(), n);
    EXPECT_TRUE(nanWhere(y, isNaN)) << "tanh";
    cpu::tanhBackward(y.data(), dy.data(), dx.data(), n);
    EXPECT_TRUE(nanWhere(dx, isNaN)) << "tanh grad";
  }
}

// PyTorch's dropout multiplies by the mask: x * 0 is NaN for a NaN or inf x.
TEST(KernelNaN, Dropout) {
  std::mt19937_64 rng(4203);
  const int64_t rows = 3;
  for (int64_t cols : kCounts)
    for (float rate : {0.0f, 0.5f, 1.0f}) {
      SCOPED_TRACE(std::to_string(cols) + " rate " + std::to_string(rate));
      const int64_t n = rows * cols;
      Floats x = withNonFinite(rng, n, true), dy = withNonFinite(rng, n, true);
      Floats y(n), dx(n), yTorch(n), dxTorch(n);
      std::vector<uint8_t> mask(n);
      cpu::dropoutForward(x.data(), y.data(), mask.data(), rows, cols, rate, 42,
                          7, 0);
      cpu::dropoutBackward(mask.data(), dy.data(), dx.data(), n, rate);
      const float keepScale = rate < 1 ? 1.0f / (1.0f - rate) : 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        yTorch[i] = mask[i] ? x[i] * keepScale : x[i] * 0.0f;
        dxTorch[i] = mask[i] ? dy[i] * keepScale : dy[i] * 0.0f;
      }
      EXPECT_TRUE(sameValues(y, yTorch));
      EXPECT_TRUE(sameValues(dx, dxTorch));
    }
}

//===-- rows --------------------------------------------------------------===//

// Row 1 holds a NaN, row 2 a +inf, row 3 is all NaN: each is NaN throughout;
// rows 0 and 4 stay finite.
TEST(KernelNaN, SoftmaxRows) {
  std::mt19937_64 rng(4204);
  const int64_t rows = 5;
  for (int64_t cols : {1, 5, 8, 13, 97}) {
    SCOPED_TRACE(cols);
    Floats x = randomFloats(rng, rows * cols, -3.0f, 3.0f);
    x[1 * cols + cols / 2] = kNaN;
    x[2 * cols + cols - 1] = kInf;
    for (int64_t j = 0; j < cols; ++j)
      x[3 * cols + j] = kNaN;
    auto badRow = [&](size_t i) {
      int64_t r = int64_t(i) / cols;
      return r >= 1 && r <= 3;
    };
    Floats y(rows * cols), dx(rows * cols);
    cpu::softmaxForward(x.data(), y.data(), rows, cols);
    EXPECT_TRUE(nanWhere(y, badRow));
    Floats dy = randomFloats(rng, rows * cols);
    cpu::softmaxBackward(y.data(), dy.data(), dx.data(), rows, cols);
    EXPECT_TRUE(nanWhere(dx, badRow));

    // Cross-entropy: the loss is NaN, whatever the label.
    std::vector<int32_t> labels(rows, 0);
    Floats probs(rows * cols), dlogits(rows * cols);
    float loss = cpu::softmaxCrossEntropyForward(
        x.data(), labels.data(), probs.data(), rows, cols, nullptr);
    EXPECT_TRUE(std::isnan(loss)) << loss;
    EXPECT_TRUE(nanWhere(probs, badRow));
    cpu::softmaxCrossEntropyBackward(probs.data(), labels.data(), 1.0f,
                                     dlogits.data(), rows, cols);
    EXPECT_TRUE(nanWhere(dlogits, badRow));
  }
}

// One NaN token: every query of its sequence sees its key (not causal), so
// the whole sequence's output is NaN; the other sequence stays finite.
TEST(KernelNaN, Attention) {
  std::mt19937_64 rng(4205);
  const int64_t batch = 2, seq = 9, width = 8, heads = 2;
  const int64_t tokens = batch * seq;
  Floats x = randomFloats(rng, tokens * width),
         wqkv = randomFloats(rng, width * 3 * width),
         wo = randomFloats(rng, width * width);
  x[4 * width + 3] = kNaN; // token 4 of sequence 0
  Floats y(tokens * width), qkv(tokens * 3 * width),
      lse(batch * heads * seq), context(tokens * width);
  cpu::attentionForward(x.data(), wqkv.data(), wo.data(), nullptr, nullptr,
                        y.data(), qkv.data(), lse.data(), context.data(),
                        batch, seq, width, heads, false);
  EXPECT_TRUE(nanWhere(y, [&](size_t i) { return int64_t(i) < seq * width; }));
  EXPECT_TRUE(
      nanWhere(lse, [&](size_t i) { return int64_t(i) < heads * seq; }));
}

TEST(KernelNaN, LayerNormAndMse) {
  std::mt19937_64 rng(4206);
  const int64_t rows = 3, cols = 13;
  Floats x = randomFloats(rng, rows * cols), gamma = randomFloats(rng, cols),
         beta = randomFloats(rng, cols);
  x[cols + 5] = kNaN;
  Floats y(rows * cols), mean(rows), rstd(rows);
  cpu::layerNormForward(x.data(), gamma.data(), beta.data(), y.data(),
                        mean.data(), rstd.data(), rows, cols, 1e-5f);
  EXPECT_TRUE(nanWhere(y, [&](size_t i) { return int64_t(i) / cols == 1; }));
  Floats target = randomFloats(rng, rows * cols);
  EXPECT_TRUE(
      std::isnan(cpu::mseForward(x.data(), target.data(), rows * cols)));
}

//===-- end to end: the C API ---------------------------------------------===//

namespace {

/// The C API tests' MLP (dense, relu, dropout, dense, tanh, dense,
/// cross-entropy) on `device`, with the guard on or off.
gpipe_session_t *nanSession(gpipe_device_t device, int checkFinite) {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.device = device;
  options.check_finite = checkFinite;
  return capi::createSession(&options);
}

capi::Data allNaN() {
  capi::Data data = capi::makeData(capi::kBatch, 5);
  for (float &v : data.x)
    v = kNaN;
  return data;
}

} // namespace

// A relu that turned NaNs into zeros would let evaluation report a finite
// loss.
TEST(CApiNaN, EvaluateOfNaNInputsIsNaN) {
  for (gpipe_device_t device :
       {GPIPE_DEVICE_CPU, GPIPE_DEVICE_HOST_EMULATION}) {
    SCOPED_TRACE(int(device));
    const capi::Data data = allNaN();
    std::vector<gpipe_input_t> inputs = data.inputs();
    Floats prediction(capi::kBatch * capi::kClasses, 0.0f);

    gpipe_session_t *session = nanSession(device, 0);
    ASSERT_NE(session, nullptr) << gpipe_last_error();
    double loss = 0;
    EXPECT_EQ(gpipe_session_evaluate(session, capi::kBatch, inputs.data(),
                                     inputs.size(), prediction.size(),
                                     prediction.data(), &loss),
              GPIPE_OK)
        << gpipe_last_error();
    EXPECT_TRUE(std::isnan(loss)) << loss;
    EXPECT_TRUE(nanWhere(prediction, [](size_t) { return true; }));
    gpipe_session_destroy(session);

    // With the guard: refused, or at least never a finite loss.
    session = nanSession(device, 1);
    ASSERT_NE(session, nullptr) << gpipe_last_error();
    loss = 0;
    gpipe_status_t status = gpipe_session_evaluate(
        session, capi::kBatch, inputs.data(), inputs.size(), 0, nullptr, &loss);
    if (status != GPIPE_ERROR_NON_FINITE) {
      EXPECT_EQ(status, GPIPE_OK) << gpipe_last_error();
      EXPECT_TRUE(std::isnan(loss)) << loss;
    }
    gpipe_session_destroy(session);
  }
}

// A training step's loss is NaN too (relu, then dropout), so the guard stops
// the step.
TEST(CApiNaN, TrainStepOfNaNInputsIsNaN) {
  for (gpipe_device_t device :
       {GPIPE_DEVICE_CPU, GPIPE_DEVICE_HOST_EMULATION}) {
    SCOPED_TRACE(int(device));
    const capi::Data data = allNaN();
    std::vector<gpipe_input_t> inputs = data.inputs();

    gpipe_session_t *session = nanSession(device, 0);
    ASSERT_NE(session, nullptr) << gpipe_last_error();
    double loss = 0;
    EXPECT_EQ(
        gpipe_session_train_step(session, inputs.data(), inputs.size(), &loss),
        GPIPE_OK)
        << gpipe_last_error();
    EXPECT_TRUE(std::isnan(loss)) << loss;
    gpipe_session_destroy(session);

    session = nanSession(device, 1);
    ASSERT_NE(session, nullptr) << gpipe_last_error();
    EXPECT_EQ(
        gpipe_session_train_step(session, inputs.data(), inputs.size(), &loss),
        GPIPE_ERROR_NON_FINITE);
    gpipe_session_destroy(session);
  }
}
