//===- ImageKernelsTest.cpp - The image kernels' bodies, checked ----------===//
//
// ImageKernels.h's functors, run on the host as the GPU runs them
// (ImmediateKernels), against the double-precision reference of the pools
// (ReferenceConvOps.h) on data full of ties, where max pooling's rule (the
// first maximum, rows then columns) decides the gradient; and im2col against
// col2im, which must be its adjoint: <im2col(x), p> = <x, col2im(p)>.
// conv2d's GEMMs are checked through the executor (ImageModelTest.cpp).
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"

#include "AllClose.h"
#include "ImmediateKernels.h"
#include "RandomData.h"
#include "ReferenceConvOps.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

using namespace gpipe::runtime;
namespace cpu = gpipe::runtime::cpu;
using gpipe::runtime::testing::ImmediateKernels;
using gpipe::runtime::testing::kStream;
namespace ref = gpipe::reference;
using Floats = std::vector<float>;

namespace {

WindowGeometry poolGeometry(const ref::Pool2dShape &s) {
  const int64_t input[4] = {s.batch, s.height, s.width, s.channels};
  WindowAttrs attrs;
  attrs.window[0] = s.windowHeight, attrs.window[1] = s.windowWidth;
  attrs.stride[0] = s.strideRows, attrs.stride[1] = s.strideCols;
  attrs.padding[0] = s.padRows, attrs.padding[1] = s.padCols;
  return poolGeometryOf(input, attrs);
}

ref::Pool2dShape poolShape(int64_t height, int64_t width, int64_t window,
                           int64_t stride, int64_t pad) {
  ref::Pool2dShape s;
  s.batch = 2, s.height = height, s.width = width, s.channels = 3;
  s.windowHeight = s.windowWidth = window;
  s.strideRows = s.strideCols = stride, s.padRows = s.padCols = pad;
  return s;
}

/// Small integers: most windows hold their maximum more than once.
Floats tiedValues(std::mt19937_64 &rng, int64_t n) {
  std::uniform_int_distribution<int> value(0, 2);
  Floats x(n);
  for (float &v : x)
    v = float(value(rng));
  return x;
}

std::vector<double> toDouble(const Floats &v) {
  return std::vector<double>(v.begin(), v.end());
}

} // namespace

TEST(ImageKernels, PoolsMatchTheReferenceAndBreakTiesAtTheFirstMaximum) {
  const ref::Pool2dShape shapes[] = {
      poolShape(5, 4, 2, 2, 0), poolShape(6, 5, 3, 2, 1),
      poolShape(4, 4, 3, 1, 2), poolShape(7, 3, 3, 3, 1)};
  std::mt19937_64 rng(181);
  for (const ref::Pool2dShape &s : shapes) {
    SCOPED_TRACE("window " + std::to_string(s.windowHeight) + " stride " +
                 std::to_string(s.strideRows) + " pad " +
                 std::to_string(s.padRows));
    const WindowGeometry g = poolGeometry(s);
    ASSERT_EQ(g.pixels() * g.channels, s.outputSize());
    Floats x = tiedValues(rng, s.inputSize());
    Floats dy = gpipe::testing::randomFloats(rng, s.outputSize());
    ImmediateKernels k;
    Floats y(s.outputSize()), dx(s.inputSize(), -1.0f);
    k.maxPool2d(kStream, x.data(), y.data(), g);
    k.maxPool2dGrad(kStream, x.data(), dy.data(), dx.data(), g);
    EXPECT_EQ(toDouble(y), ref::maxPool2dForward(toDouble(x), s));
    EXPECT_TRUE(gpipe::testing::allClose(
        dx, ref::maxPool2dBackward(toDouble(dy), toDouble(x), s), 1e-6, 1e-7));
    k.avgPool2d(kStream, x.data(), y.data(), g);
    k.avgPool2dGrad(kStream, dy.data(), dx.data(), g);
    EXPECT_TRUE(gpipe::testing::allClose(
        y, ref::avgPool2dForward(toDouble(x), s), 1e-6, 1e-7));
    EXPECT_TRUE(gpipe::testing::allClose(
        dx, ref::avgPool2dBackward(toDouble(dy), s), 1e-6, 1e-7));
  }
}

TEST(ImageKernels, GlobalAveragePoolMatchesTheReference) {
  std::mt19937_64 rng(182);
  const int64_t batch = 3, pixels = 7, channels = 5;
  Floats x = gpipe::testing::randomFloats(rng, batch * pixels * channels);
  Floats dy = gpipe::testing::randomFloats(rng, batch * channels);
  ImmediateKernels k;
  Floats y(batch * channels), dx(x.size());
  k.globalAvgPool(kStream, x.data(), y.data(), batch, pixels, channels);
  k.globalAvgPoolGrad(kStream, dy.data(), dx.data(), batch, pixels, channels);
  EXPECT_TRUE(gpipe::testing::allClose(
      y, ref::globalAvgPoolForward(toDouble(x), batch, pixels, channels), 1e-6,
      1e-7));
  EXPECT_TRUE(gpipe::testing::allClose(
      dx, ref::globalAvgPoolBackward(toDouble(dy), batch, pixels, channels),
      1e-6, 1e-7));
}

// col2im is the adjoint of im2col, for strides, padding, groups and a
// kernel reaching past the border.
TEST(ImageKernels, Col2imIsTheAdjointOfIm2col) {
  struct Case {
    int64_t height, width, channels, kernel, stride[2], pad[2], groups;
  };
  const Case cases[] = {{5, 4, 3, 3, {1, 1}, {1, 1}, 1},
                        {6, 5, 4, 2, {2, 1}, {1, 0}, 2},
                        {3, 3, 2, 3, {2, 2}, {2, 1}, 1},
                        {4, 7, 6, 3, {1, 3}, {0, 1}, 3}};
  std::mt19937_64 rng(183);
  for (const Case &c : cases) {
    const int64_t input[4] = {2, c.height, c.width, c.channels};
    const int64_t weight[4] = {c.kernel, c.kernel, c.channels / c.groups, 6};
    WindowAttrs attrs;
    attrs.stride[0] = c.stride[0], attrs.stride[1] = c.stride[1];
    attrs.padding[0] = c.pad[0], attrs.padding[1] = c.pad[1];
    attrs.groups = c.groups;
    const WindowGeometry g = convGeometryOf(input, weight, attrs);
    ASSERT_GT(g.patchElements(), 0);
    Floats x =
        gpipe::testing::randomFloats(rng, 2 * c.height * c.width * c.channels);
    Floats p = gpipe::testing::randomFloats(rng, g.patchElements());
    ImmediateKernels k;
    Floats patches(g.patchElements()), dx(x.size());
    k.im2col(kStream, x.data(), patches.data(), g);
    k.col2im(kStream, p.data(), dx.data(), g);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < p.size(); ++i)
      lhs += double(patches[i]) * p[i];
    for (size_t i = 0; i < x.size(); ++i)
      rhs += double(x[i]) * dx[i];
    EXPECT_NEAR(lhs, rhs, 1e-4 * (std::fabs(lhs) + 1.0))
        << "height " << c.height << " stride " << c.stride[0] << "x"
        << c.stride[1] << " groups " << c.groups;
  }
}

// The CPU backend's im2col and col2im (channel runs, CpuImageKernels.cpp)
// against the device functors: the same patch matrix bit for bit, the same
// folded gradient within rounding (another order of addition).
TEST(ImageKernels, CpuRunsMatchTheDeviceFunctors) {
  std::mt19937_64 rng(184);
  for (int64_t groups : {1, 2}) {
    const int64_t input[4] = {2, 5, 6, 4};
    const int64_t weight[4] = {3, 2, 4 / groups, 6};
    WindowAttrs attrs;
    attrs.stride[0] = 2, attrs.padding[0] = 1, attrs.padding[1] = 1;
    attrs.groups = groups;
    const WindowGeometry g = convGeometryOf(input, weight, attrs);
    Floats x = gpipe::testing::randomFloats(rng, 2 * 5 * 6 * 4);
    Floats p = gpipe::testing::randomFloats(rng, g.patchElements());
    ImmediateKernels k;
    Floats devicePatches(g.patchElements()), cpuPatches(g.patchElements());
    k.im2col(kStream, x.data(), devicePatches.data(), g);
    cpu::im2col(x.data(), cpuPatches.data(), g);
    EXPECT_EQ(cpuPatches, devicePatches) << groups << " groups";
    Floats deviceDx(x.size()), cpuDx(x.size(), 7.0f);
    k.col2im(kStream, p.data(), deviceDx.data(), g);
    cpu::col2im(p.data(), cpuDx.data(), g);
    EXPECT_TRUE(gpipe::testing::allClose(cpuDx, toDouble(deviceDx), 1e-6, 1e-6))
        << groups << " groups";
  }
}
