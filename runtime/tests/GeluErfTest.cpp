//===- GeluErfTest.cpp - The exact GELU against its double reference -----===//
//
// gelu_erf (x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), PyTorch's default GELU)
// and its gradient at every layer that computes them:
//   - ReferenceGradient.GeluErf*: the double-precision reference
//     (ReferenceOps.h, std::erf) has a backward that matches central finite
//     differences of its forward, and a forward and slope that match values
//     of the normal distribution known independently;
//   - KernelElementWise.GeluErf*: the CPU kernels (CpuKernels.h) against the
//     reference, rtol 1e-5 and atol 1e-6 as the tanh GELU's test, the left
//     tail (x down to -10, where 1 + erf(x / sqrt 2) would cancel) to a
//     relative 1e-5 of the exact values, and a dense grid over [-12, 12];
//   - DeviceKernels.GeluErf*: the device functors (the code the CUDA backend
//     launches, run on the host by ImmediateKernels) against the reference,
//     the fused dense epilogue (bias, then gelu_erf) against bias then the
//     reference, on the device functors and on CpuBackend's threads.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"

#include "FiniteDifferences.h"
#include "ImmediateKernels.h"
#include "RandomData.h"
#include "ReferenceOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace ref = gpipe::reference;
namespace cpu = gpipe::runtime::cpu;
using namespace gpipe::runtime::device;
using gpipe::runtime::testing::ImmediateKernels;
using gpipe::runtime::testing::kStream;
using ref::Vec;
using Floats = std::vector<float>;

namespace {

using gpipe::testing::dot;
using gpipe::testing::matchesFiniteDifferences;
using gpipe::testing::randomFloats;
using gpipe::testing::randomVec;

constexpr double kRtol = 1e-5, kAtol = 1e-6;

/// Random inputs on [-6, 6] and the edges of the usual range.
Floats inputs(std::mt19937_64 &rng, size_t n) {
  Floats x = randomFloats(rng, n, -6.0f, 6.0f);
  const Floats special = {0.0f,   1e-4f, -1e-4f, 3.0f,   -3.0f,  10.0f,
                          -10.0f, 30.0f, -30.0f, 100.0f, -100.0f};
  std::copy_n(special.begin(), std::min(special.size(), n), x.begin());
  return x;
}

Vec toDouble(const Floats &v) { return Vec(v.begin(), v.end()); }

::testing::AssertionResult allClose(const Floats &actual, const Vec &expected,
                                    double rtol, double atol) {
  for (size_t i = 0; i < actual.size(); ++i)
    if (!(std::fabs(actual[i] - expected[i]) <=
          rtol * std::fabs(expected[i]) + atol))
      return ::testing::AssertionFailure() << "at [" << i << "]: " << actual[i]
                                           << ", expected " << expected[i];
  return ::testing::AssertionSuccess();
}

const int64_t kCounts[] = {1, 3, 4, 17, 1000};

//===-- the reference -----------------------------------------------------===//

// dx is the gradient of sum(r * gelu_erf(x)), tails included.
TEST(ReferenceGradient, GeluErf) {
  std::mt19937_64 rng(151);
  Vec x = randomVec(rng, 15, -4.0, 4.0), r = randomVec(rng, 15);
  x[0] = 0.0;
  x[1] = -0.7518; // near the minimum, where the slope crosses 0
  auto f = [&] { return dot(r, ref::geluErfForward(x)); };
  EXPECT_TRUE(matchesFiniteDifferences(x, f, ref::geluErfBackward(x, r)));
}

// x Phi(x) and Phi(x) + x phi(x) at +-1: Phi(1) = 0.8413447460685429,
// phi(1) = 0.24197072451914337; the slope at 0 is Phi(0) = 1/2.
TEST(ReferenceGradient, GeluErfMatchesTheNormalDistribution) {
  Vec y = ref::geluErfForward({1.0, -1.0, 0.0});
  EXPECT_NEAR(y[0], 0.8413447460685429, 1e-15);
  EXPECT_NEAR(y[1], -0.15865525393145707, 1e-15);
  EXPECT_EQ(y[2], 0.0);
  Vec slope = ref::geluErfBackward({1.0, -1.0, 0.0}, {1.0, 1.0, 1.0});
  EXPECT_NEAR(slope[0], 0.8413447460685429 + 0.24197072451914337, 1e-15);
  EXPECT_NEAR(slope[1], 0.15865525393145707 - 0.24197072451914337, 1e-15);
  EXPECT_NEAR(slope[2], 0.5, 1e-15);
  // It is not the tanh approximation: they differ by about 1.6e-4 at 1.
  EXPECT_GT(std::fabs(y[0] - ref::geluForward({1.0})[0]), 1e-4);
}

//===-- the CPU kernels ---------------------------------------------------===//

// Forward and backward within rtol 1e-5, atol 1e-6; dx is overwritten.
TEST(KernelElementWise, GeluErf) {
  std::mt19937_64 rng(251);
  for (int64_t n : kCounts) {
    SCOPED_TRACE(n);
    Floats x = inputs(rng, n), dy = randomFloats(rng, n);
    Floats y(n, 7.0f), dx(n, 7.0f);
    cpu::geluErfForward(x.data(), y.data(), n);
    cpu::geluErfBackward(x.data(), dy.data(), dx.data(), n);
    EXPECT_TRUE(allClose(y, ref::geluErfForward(toDouble(x)), kRtol, kAtol));
    EXPECT_TRUE(allClose(dx, ref::geluErfBackward(toDouble(x), toDouble(dy)),
                         kRtol, kAtol));
  }
}

// The left tail keeps its relative precision: x Phi(x) and its slope at
// -3, -5, -8 and -10 (exact values from erfc in double).
TEST(KernelElementWise, GeluErfLeftTailIsRelativelyExact) {
  const Floats x = {-3.0f, -5.0f, -8.0f, -10.0f};
  const Vec y = {-0.004049694094890287, -1.4332578593959731e-06,
                 -4.9767684594174555e-15, -7.619853024160593e-23};
  const Vec slope = {-0.011945647204183927, -7.146946001792295e-06,
                     -3.979607261086796e-14, -7.618400096464813e-22};
  Floats actualY(4), actualSlope(4);
  const Floats ones(4, 1.0f);
  cpu::geluErfForward(x.data(), actualY.data(), 4);
  cpu::geluErfBackward(x.data(), ones.data(), actualSlope.data(), 4);
  EXPECT_TRUE(allClose(actualY, y, kRtol, 0.0));
  EXPECT_TRUE(allClose(actualSlope, slope, kRtol, 0.0));
}

// Every 1/256 on [-12, 12], across the vector erfc's three ranges (|x| /
// sqrt 2 below 1, below 2, beyond): x Phi(x) to a relative 1e-5 everywhere
// (the left tail down to 1e-33), the slope to 1e-5 relative plus 1e-7 where
// it crosses 0 near -0.75.
TEST(KernelElementWise, GeluErfOnADenseGrid) {
  Floats x;
  for (int i = -12 * 256; i <= 12 * 256; ++i)
    x.push_back(float(i) / 256.0f);
  const int64_t n = int64_t(x.size());
  Floats y(n), slope(n);
  const Floats ones(n, 1.0f);
  cpu::geluErfForward(x.data(), y.data(), n);
  cpu::geluErfBackward(x.data(), ones.data(), slope.data(), n);
  // Phi from erfc in double: the reference's 1 + erf cancels below -8.
  Vec exactY, exactSlope;
  for (float v : x) {
    const double phi = 0.5 * std::erfc(-double(v) / std::sqrt(2.0));
    const double density = std::exp(-0.5 * double(v) * v) / std::sqrt(2 * M_PI);
    exactY.push_back(v * phi);
    exactSlope.push_back(phi + v * density);
  }
  EXPECT_TRUE(allClose(y, exactY, kRtol, 0.0));
  EXPECT_TRUE(allClose(slope, exactSlope, kRtol, 1e-7));
}

//===-- the device functors and the fused epilogue ------------------------===//

// KernelApi's geluErf and geluErfGrad through the device functors.
TEST(DeviceKernels, GeluErfMatchesTheReference) {
  std::mt19937_64 rng(351);
  ImmediateKernels k;
  for (int64_t n : kCounts) {
    SCOPED_TRACE(n);
    Floats x = inputs(rng, n), dy = randomFloats(rng, n);
    Floats y(n), dx(n);
    k.geluErf(kStream, x.data(), y.data(), n);
    k.geluErfGrad(kStream, x.data(), dy.data(), dx.data(), n);
    EXPECT_TRUE(allClose(y, ref::geluErfForward(toDouble(x)), kRtol, kAtol));
    EXPECT_TRUE(allClose(dx, ref::geluErfBackward(toDouble(x), toDouble(dy)),
                         kRtol, kAtol));
  }
  k.geluErfGrad(kStream, nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(k.launches, 2 * int64_t(std::size(kCounts)));
}

/// h = x + bias (rows of cols), y = gelu_erf(h) in double.
struct Epilogue {
  Vec h, y;
};
Epilogue referenceEpilogue(const Floats &x, const Floats &bias, int64_t cols) {
  Epilogue e;
  for (size_t i = 0; i < x.size(); ++i)
    e.h.push_back(double(x[i]) + bias[i % cols]);
  e.y = ref::geluErfForward(e.h);
  return e;
}

// A dense op's fused epilogue with Activation::GeluErf: h gets the bias and
// y its exact GELU, on the device functors and on CpuBackend (2 threads).
TEST(DeviceKernels, BiasGeluErfEpilogue) {
  std::mt19937_64 rng(352);
  const int64_t rows = 33, cols = 70;
  Floats x = randomFloats(rng, rows * cols, -4.0f, 4.0f);
  Floats bias = randomFloats(rng, cols);
  Epilogue expected = referenceEpilogue(x, bias, cols);

  ImmediateKernels k;
  Floats h = x, y(rows * cols);
  k.biasActivation(kStream, bias.data(), h.data(), y.data(), rows, cols,
                   Activation::GeluErf);
  EXPECT_TRUE(allClose(h, expected.h, 1e-6, 1e-6));
  EXPECT_TRUE(allClose(y, expected.y, kRtol, kAtol));

  CpuBackend backend(1, {2, false});
  Floats hCpu = x, yCpu(rows * cols);
  StreamId s = backend.computeStream(0);
  backend.biasActivation(s, bias.data(), hCpu.data(), yCpu.data(), rows, cols,
                         Activation::GeluErf);
  ASSERT_EQ(backend.synchronize(std::chrono::seconds(60)), "");
  EXPECT_TRUE(allClose(hCpu, expected.h, 1e-6, 1e-6));
  EXPECT_TRUE(allClose(yCpu, expected.y, kRtol, kAtol));
}

} // namespace
