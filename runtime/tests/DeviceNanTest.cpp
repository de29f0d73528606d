//===- DeviceNanTest.cpp - The device kernels keep a NaN a NaN ------------===//
//
// The functors of DeviceKernels.h, ImageKernels.h and
// BatchNormKernels.h (the code the CUDA backend launches), run on the host
// (ImmediateKernels), given NaN and infinities, against PyTorch's
// definitions:
//   - relu(NaN) = NaN (fmaxf(NaN, 0) would be 0); relu's backward passes dy
//     where x is NaN (threshold_backward: x <= 0 ? 0 : dy); likewise in the
//     dense epilogue (biasActivation);
//   - dropout is x * mask / (1 - rate): a dropped NaN or inf gives NaN;
//   - a softmax or cross-entropy row that sees a NaN or +inf is NaN; a NaN
//     that the causal mask hides changes nothing (masked_fill with -inf);
//   - max_pool2d takes `val > maxval || isnan(val)`: a window holding a NaN
//     gives NaN, and its gradient goes to the window's last NaN;
//   - batch norm's statistics and running statistics of a column holding a
//     NaN are NaN.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"

#include "ImmediateKernels.h"
#include "NanAssertions.h"
#include "RandomData.h"
#include "ReferenceConvOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace cpu = gpipe::runtime::cpu;
namespace ref = gpipe::reference;
using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using Floats = std::vector<float>;
using gpipe::runtime::testing::ImmediateKernels;
using gpipe::runtime::testing::kStream;
using gpipe::testing::nanWhere;
using gpipe::testing::randomFloats;
using gpipe::testing::sameValues;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

/// Values in [-2, 2] with NaN at every fifth element and, with `infinities`,
/// +inf and -inf at others.
Floats withNonFinite(std::mt19937_64 &rng, int64_t n, bool infinities) {
  Floats x = randomFloats(rng, n, -2.0f, 2.0f);
  for (int64_t i = 0; i < n; ++i) {
    if (i % 5 == 1)
      x[i] = kNaN;
    else if (infinities && i % 7 == 3)
      x[i] = kInf;
    else if (infinities && i % 7 == 5)
      x[i] = -kInf;
  }
  return x;
}

} // namespace

TEST(DeviceKernelsNaN, ReluAndTheDenseEpilogue) {
  std::mt19937_64 rng(4211);
  const int64_t rows = 3, cols = 35, n = rows * cols;
  Floats x = withNonFinite(rng, n, true), dy = randomFloats(rng, n);
  Floats yTorch(n), dxTorch(n);
  for (int64_t i = 0; i < n; ++i) {
    yTorch[i] = std::isnan(x[i]) ? x[i] : std::max(x[i], 0.0f);
    dxTorch[i] = yTorch[i] <= 0 ? 0.0f : dy[i];
  }
  ImmediateKernels k;
  Floats y(n), dx(n);
  k.relu(kStream, x.data(), y.data(), n);
  EXPECT_TRUE(sameValues(y, yTorch));
  k.reluGrad(kStream, x.data(), dy.data(), dx.data(), n);
  EXPECT_TRUE(sameValues(dx, dxTorch));

  // h + bias, then relu: a NaN in h or in the bias reaches y.
  Floats bias(cols, 0.0f), h = x;
  bias[2] = kNaN;
  k.biasActivation(kStream, bias.data(), h.data(), y.data(), rows, cols,
                   Activation::Relu);
  for (int64_t i = 0; i < n; ++i)
    if (i % cols == 2)
      yTorch[i] = kNaN;
  EXPECT_TRUE(sameValues(y, yTorch));
}

// gelu (both), tanh, their gradients and their dense epilogues: NaN exactly
// where x is NaN.
TEST(DeviceKernelsNaN, SmoothActivations) {
  std::mt19937_64 rng(4212);
  const int64_t rows = 3, cols = 35, n = rows * cols;
  Floats x = withNonFinite(rng, n, false), dy = randomFloats(rng, n);
  auto isNaN = [&](size_t i) { return std::isnan(x[i]); };
  ImmediateKernels k;
  Floats y(n), dx(n);
  k.gelu(kStream, x.data(), y.data(), n);
  EXPECT_TRUE(nanWhere(y, isNaN)) << "gelu";
  k.geluGrad(kStream, x.data(), dy.data(), dx.data(), n);
  EXPECT_TRUE(nanWhere(dx, isNaN)) << "gelu grad";
  k.geluErf(kStream, x.data(), y.data(), n);
  EXPECT_TRUE(nanWhere(y, isNaN)) << "gelu_erf";
  k.geluErfGrad(kStream, x.data(), dy.data(), dx.data(), n);
  EXPECT_TRUE(nanWhere(dx, isNaN)) << "gelu_erf grad";
  k.tanh(kStream, x.data(), y.data(), n);
  EXPECT_TRUE(nanWhere(y, isNaN)) << "tanh";
  k.tanhGrad(kStream, y.data(), dy.data(), dx.data(), n);
  EXPECT_TRUE(nanWhere(dx, isNaN)) << "tanh grad";
  for (Activation act :
       {Activation::Gelu, Activation::Tanh, Activation::GeluErf}) {
    Floats h = x;
    k.biasActivation(kStream, nullptr, h.data(), y.data(), rows, cols, act);
    EXPECT_TRUE(nanWhere(y, isNaN)) << "epilogue " << int(act);
  }
}

// Dropout multiplies by the mask (x * 0 is NaN for a NaN or inf x), on the
// device as on the CPU, which draws the same mask.
TEST(DeviceKernelsNaN, Dropout) {
  std::mt19937_64 rng(4213);
  const int64_t rows = 4, cols = 37, n = rows * cols;
  for (float rate : {0.0f, 0.5f, 1.0f}) {
    SCOPED_TRACE(rate);
    Floats x = withNonFinite(rng, n, true), dy = withNonFinite(rng, n, true);
    ImmediateKernels k;
    Floats y(n), dx(n), yCpu(n), dxCpu(n), yTorch(n), dxTorch(n);
    std::vector<uint8_t> mask(n), maskCpu(n);
    k.dropout(kStream, x.data(), y.data(), mask.data(), rows, cols, rate, 9, 3,
              0);
    k.dropoutGrad(kStream, mask.data(), dy.data(), dx.data(), n, rate);
    cpu::dropoutForward(x.data(), yCpu.data(), maskCpu.data(), rows, cols, rate,
                        9, 3, 0);
    cpu::dropoutBackward(maskCpu.data(), dy.data(), dxCpu.data(), n, rate);
    EXPECT_EQ(mask, maskCpu);
    const float keepScale = rate < 1 ? 1.0f / (1.0f - rate) : 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      yTorch[i] = mask[i] ? x[i] * keepScale : x[i] * 0.0f;
      dxTorch[i] = mask[i] ? dy[i] * keepScale : dy[i] * 0.0f;
    }
    EXPECT_TRUE(sameValues(y, yTorch));
    EXPECT_TRUE(sameValues(dx, dxTorch));
    EXPECT_TRUE(sameValues(yCpu, yTorch));
    EXPECT_TRUE(sameValues(dxCpu, dxTorch));
  }
}

// Row 1 holds a NaN, row 2 a +inf, row 3 is all NaN; rows 0 and 4 are
// finite. The loss is NaN.
TEST(DeviceKernelsNaN, SoftmaxAndCrossEntropy) {
  std::mt19937_64 rng(4214);
  const int64_t rows = 5;
  for (int64_t cols : {1, 7, 64, 100}) {
    SCOPED_TRACE(cols);
    const int64_t n = rows * cols;
    Floats x = randomFloats(rng, n, -3.0f, 3.0f);
    x[1 * cols + cols / 2] = kNaN;
    x[2 * cols + cols - 1] = kInf;
    for (int64_t j = 0; j < cols; ++j)
      x[3 * cols + j] = kNaN;
    auto badRow = [&](size_t i) {
      int64_t r = int64_t(i) / cols;
      return r >= 1 && r <= 3;
    };
    ImmediateKernels k;
    Floats y(n), dx(n), dy = randomFloats(rng, n);
    k.softmax(kStream, x.data(), y.data(), rows, cols, 0);
    EXPECT_TRUE(nanWhere(y, badRow));
    k.softmaxGrad(kStream, y.data(), dy.data(), dx.data(), rows, cols);
    EXPECT_TRUE(nanWhere(dx, badRow));

    std::vector<int32_t> labels(rows, 0);
    Floats probs(n), loss(1, 0.0f), dlogits(n);
    k.softmaxCrossEntropy(kStream, x.data(), labels.data(), probs.data(),
                          loss.data(), rows, cols);
    EXPECT_TRUE(std::isnan(loss[0])) << loss[0];
    EXPECT_TRUE(nanWhere(probs, badRow));
    k.softmaxCrossEntropyGrad(kStream, probs.data(), labels.data(), 1.0f,
                              dlogits.data(), rows, cols);
    EXPECT_TRUE(nanWhere(dlogits, badRow));
  }
}

// Causal rows see columns [0, r]: the NaN at column 2 makes rows 2 and up
// NaN, rows 0 and 1 never read it.
TEST(DeviceKernelsNaN, CausalSoftmaxIgnoresAMaskedNaN) {
  std::mt19937_64 rng(4215);
  const int64_t seq = 6;
  Floats x = randomFloats(rng, seq * seq, -3.0f, 3.0f), y(seq * seq);
  for (int64_t r = 0; r < seq; ++r)
    x[r * seq + 2] = kNaN;
  ImmediateKernels k;
  k.softmax(kStream, x.data(), y.data(), seq, seq, seq);
  EXPECT_TRUE(nanWhere(y, [&](size_t i) {
    int64_t r = int64_t(i) / seq, c = int64_t(i) % seq;
    return r >= 2 && c <= r;
  }));
}

TEST(DeviceKernelsNaN, LayerNorm) {
  std::mt19937_64 rng(4216);
  const int64_t rows = 3, cols = 40;
  Floats x = randomFloats(rng, rows * cols), gamma = randomFloats(rng, cols),
         beta = randomFloats(rng, cols);
  x[cols + 5] = kNaN;
  Floats y(rows * cols), mean(rows), rstd(rows);
  ImmediateKernels k;
  k.layerNorm(kStream, x.data(), gamma.data(), beta.data(), y.data(),
              mean.data(), rstd.data(), rows, cols, 1e-5f);
  EXPECT_TRUE(nanWhere(y, [&](size_t i) { return int64_t(i) / cols == 1; }));
}

//===-- max pooling -------------------------------------------------------===//

namespace {
WindowGeometry poolGeometry(const ref::Pool2dShape &s) {
  const int64_t input[4] = {s.batch, s.height, s.width, s.channels};
  WindowAttrs attrs;
  attrs.window[0] = s.windowHeight, attrs.window[1] = s.windowWidth;
  attrs.stride[0] = s.strideRows, attrs.stride[1] = s.strideCols;
  attrs.padding[0] = s.padRows, attrs.padding[1] = s.padCols;
  return poolGeometryOf(input, attrs);
}
} // namespace

// One 4x4 image, 2x2 windows, stride 2, worked by hand with PyTorch's rule.
TEST(DeviceKernelsNaN, MaxPoolTakesTheLastNaN) {
  ref::Pool2dShape s;
  s.height = s.width = 4;
  s.windowHeight = s.windowWidth = 2;
  s.strideRows = s.strideCols = 2;
  const float n = kNaN, i = kInf;
  const Floats x = {1, n, 3,  4,  //
                    n, 2, 5,  6,  //
                    7, 8, -i, -i, //
                    9, 0, -i, n};
  const Floats dy = {10, 20, 30, 40};
  ImmediateKernels k;
  const WindowGeometry g = poolGeometry(s);
  Floats y(4), dx(16, -1.0f);
  k.maxPool2d(kStream, x.data(), y.data(), g);
  k.maxPool2dGrad(kStream, x.data(), dy.data(), dx.data(), g);
  EXPECT_TRUE(sameValues(y, Floats{n, 6, 9, n}));
  EXPECT_TRUE(sameValues(dx, Floats{0, 0, 0, 0,   //
                                    10, 0, 0, 20, //
                                    0, 0, 0, 0,   //
                                    30, 0, 0, 40}));
}

// Overlapping and padded windows over ties and NaNs, against the reference.
TEST(DeviceKernelsNaN, MaxPoolMatchesTheReference) {
  std::mt19937_64 rng(4217);
  for (int64_t stride : {1, 2}) {
    ref::Pool2dShape s;
    s.batch = 2, s.height = 6, s.width = 5, s.channels = 3;
    s.windowHeight = s.windowWidth = 3;
    s.strideRows = s.strideCols = stride, s.padRows = s.padCols = 1;
    std::uniform_int_distribution<int> value(0, 5);
    Floats x(s.inputSize());
    for (float &v : x)
      v = value(rng) == 5 ? kNaN : float(value(rng) % 3);
    Floats dy = randomFloats(rng, s.outputSize());
    ImmediateKernels k;
    const WindowGeometry g = poolGeometry(s);
    Floats y(s.outputSize()), dx(s.inputSize());
    k.maxPool2d(kStream, x.data(), y.data(), g);
    k.maxPool2dGrad(kStream, x.data(), dy.data(), dx.data(), g);
    std::vector<double> xd(x.begin(), x.end()), dyd(dy.begin(), dy.end());
    EXPECT_TRUE(sameValues(y, ref::maxPool2dForward(xd, s)));
    std::vector<double> dxRef = ref::maxPool2dBackward(dyd, xd, s);
    for (size_t j = 0; j < dx.size(); ++j)
      EXPECT_NEAR(dx[j], dxRef[j], 1e-6) << j;
  }
}

//===-- batch norm --------------------------------------------------------===//

// Column 1 holds a NaN: its output, statistics and running statistics are
// NaN (the running variance does not clamp a NaN variance to 0).
TEST(DeviceKernelsNaN, BatchNorm) {
  std::mt19937_64 rng(4218);
  const int64_t rows = 6, cols = 3;
  Floats x = randomFloats(rng, rows * cols), gamma(cols, 1.0f),
         beta(cols, 0.0f);
  x[4 * cols + 1] = kNaN;
  Floats y(rows * cols), mean(cols), rstd(cols), sum(cols, 0.0f),
      squares(cols, 0.0f);
  ImmediateKernels k;
  k.batchNorm(kStream, x.data(), gamma.data(), beta.data(), y.data(),
              mean.data(), rstd.data(), sum.data(), squares.data(), rows, cols,
              1e-5f);
  auto column1 = [&](size_t i) { return int64_t(i) % cols == 1; };
  EXPECT_TRUE(nanWhere(y, column1));
  EXPECT_TRUE(nanWhere(mean, column1));
  EXPECT_TRUE(nanWhere(rstd, column1));
  Floats runningMean(cols, 0.0f), runningVar(cols, 1.0f);
  k.batchNormRunningUpdate(kStream, runningMean.data(), runningVar.data(),
                           sum.data(), squares.data(), cols, rows, 0.1f);
  EXPECT_TRUE(nanWhere(runningMean, column1));
  EXPECT_TRUE(nanWhere(runningVar, column1));

  // A NaN in the accumulated squares alone (the mean finite).
  Floats finiteSum(cols, 0.5f), nanSquares(cols, 3.0f);
  nanSquares[1] = kNaN;
  runningMean.assign(cols, 0.0f), runningVar.assign(cols, 1.0f);
  k.batchNormRunningUpdate(kStream, runningMean.data(), runningVar.data(),
                           finiteSum.data(), nanSquares.data(), cols, rows,
                           0.1f);
  EXPECT_TRUE(nanWhere(runningMean, [](size_t) { return false; }));
  EXPECT_TRUE(nanWhere(runningVar, column1));
}
