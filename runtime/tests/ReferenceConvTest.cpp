//===- ReferenceConvTest.cpp - The conv ops' reference, checked -----------===//
//
// The double-precision reference of the convolutional ops (ReferenceConvOps.h)
// is what the conv kernels are tested against, so it is checked first:
// its forward against values worked out by hand, its analytic backward
// against central finite differences of its forward, over strides, padding,
// groups and kernels that reach past the border.
//
//===----------------------------------------------------------------------===//

#include "FiniteDifferences.h"
#include "ReferenceConvOps.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace ref = gpipe::reference;
using gpipe::testing::dot;
using gpipe::testing::matchesFiniteDifferences;
using gpipe::testing::randomVec;
using ref::Conv2dShape;
using ref::Vec;

// A 3x3 image of 1..9 (one channel), a 2x2 kernel of ones, stride 1, no
// padding: each output is the sum of a 2x2 window (1+2+4+5 = 12, 2+3+5+6 =
// 16, 4+5+7+8 = 24, 5+6+8+9 = 28), plus the bias 0.5. With padding 1 and
// stride 2 the windows are the corners: 1, 2+3, 4+7, 5+6+8+9.
TEST(ReferenceConv2d, ForwardByHand) {
  Vec x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w = {1, 1, 1, 1};
  Conv2dShape s;
  s.height = s.width = 3;
  s.kernelHeight = s.kernelWidth = 2;
  EXPECT_EQ(ref::conv2dForward(x, w, {0.5}, s), (Vec{12.5, 16.5, 24.5, 28.5}));
  s.strideRows = s.strideCols = 2;
  s.padRows = s.padCols = 1;
  EXPECT_EQ(ref::conv2dForward(x, w, {}, s), (Vec{1, 5, 11, 28}));
}

// Two groups of one channel and one filter each: filter 0 sees channel 0 only
// (weights 1), filter 1 channel 1 only (weights 10); a 1x1 kernel.
TEST(ReferenceConv2d, GroupsSeeTheirOwnChannels) {
  Vec x = {1, 2, 3, 4}; // two pixels of two channels
  Vec w = {1, 10};      // [1, 1, 1, 2]
  Conv2dShape s;
  s.width = 2;
  s.channels = s.filters = s.groups = 2;
  EXPECT_EQ(ref::conv2dForward(x, w, {}, s), (Vec{1, 20, 3, 40}));
}

namespace {
struct Case {
  const char *name;
  Conv2dShape shape;
};

Conv2dShape makeShape(int64_t batch, int64_t height, int64_t width,
                      int64_t channels, int64_t kernel, int64_t filters,
                      int64_t stride, int64_t pad, int64_t groups) {
  Conv2dShape s;
  s.batch = batch;
  s.height = height;
  s.width = width;
  s.channels = channels;
  s.kernelHeight = kernel;
  s.kernelWidth = kernel + 1; // not square: rows and columns kept apart
  s.filters = filters;
  s.strideRows = stride;
  s.strideCols = 1;
  s.padRows = pad;
  s.padCols = pad + 1;
  s.groups = groups;
  return s;
}
} // namespace

// dx, dw and db are the gradients of sum(r * conv2d(x, w, b)).
TEST(ReferenceConv2d, BackwardMatchesFiniteDifferences) {
  const Case cases[] = {
      {"plain", makeShape(2, 5, 4, 3, 3, 2, 1, 0, 1)},
      {"strided and padded", makeShape(2, 6, 5, 2, 3, 4, 2, 1, 1)},
      {"grouped", makeShape(1, 5, 5, 4, 2, 6, 1, 1, 2)},
      {"depthwise", makeShape(2, 4, 4, 3, 3, 3, 2, 1, 3)},
      {"kernel past the border", makeShape(1, 3, 3, 2, 3, 2, 3, 2, 1)},
  };
  std::mt19937_64 rng(171);
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    const Conv2dShape &s = c.shape;
    Vec x = randomVec(rng, s.inputSize()), w = randomVec(rng, s.weightSize()),
        b = randomVec(rng, s.filters), r = randomVec(rng, s.outputSize());
    auto f = [&] { return dot(r, ref::conv2dForward(x, w, b, s)); };
    ref::Conv2dGrads g = ref::conv2dBackward(r, x, w, s);
    EXPECT_TRUE(matchesFiniteDifferences(x, f, g.dx));
    EXPECT_TRUE(matchesFiniteDifferences(w, f, g.dw));
    EXPECT_TRUE(matchesFiniteDifferences(b, f, g.db));
  }
}

// The mean over 2 x 3 pixels, and its gradient.
TEST(ReferenceGlobalAvgPool, ForwardByHandAndBackwardByDifferences) {
  Vec x = {1, 10, 2, 20, 3, 30, 4, 40, 5, 50, 6, 60}; // [1, 2, 3, 2]
  EXPECT_EQ(ref::globalAvgPoolForward(x, 1, 6, 2), (Vec{3.5, 35}));
  std::mt19937_64 rng(172);
  Vec y = randomVec(rng, 2 * 6 * 3), r = randomVec(rng, 2 * 3);
  auto f = [&] { return dot(r, ref::globalAvgPoolForward(y, 2, 6, 3)); };
  EXPECT_TRUE(
      matchesFiniteDifferences(y, f, ref::globalAvgPoolBackward(r, 2, 6, 3)));
}

namespace {
ref::Pool2dShape makePool(int64_t batch, int64_t size, int64_t channels,
                          int64_t window, int64_t stride, int64_t pad) {
  ref::Pool2dShape s;
  s.batch = batch, s.height = size, s.width = size + 1, s.channels = channels;
  s.windowHeight = window, s.windowWidth = window;
  s.strideRows = stride, s.strideCols = stride;
  s.padRows = pad, s.padCols = pad;
  return s;
}
} // namespace

// A 3x4 image (one channel: rows 1 2 3 4 / 5 6 7 8 / 9 10 11 12), 2x2
// windows, stride 2, padding 1: the windows' in-image pixels are {1}, {2, 3},
// {4} over {5, 9}, {6, 7, 10, 11}, {8, 12}. Their maxima and means, padding
// not counted: [1, 3, 4; 9, 11, 12] and [1, 2.5, 4; 7, 8.5, 10].
TEST(ReferencePool2d, ForwardByHand) {
  ref::Pool2dShape s;
  s.height = 3, s.width = 4, s.windowHeight = 2, s.windowWidth = 2;
  s.strideRows = 2, s.strideCols = 2, s.padRows = 1, s.padCols = 1;
  Vec x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  ASSERT_EQ(s.outputSize(), 6);
  EXPECT_EQ(ref::maxPool2dForward(x, s), (Vec{1, 3, 4, 9, 11, 12}));
  EXPECT_EQ(ref::avgPool2dForward(x, s), (Vec{1, 2.5, 4, 7, 8.5, 10}));
}

// Random inputs have unique maxima, where max pooling is differentiable.
TEST(ReferencePool2d, BackwardMatchesFiniteDifferences) {
  const ref::Pool2dShape shapes[] = {makePool(2, 5, 3, 2, 2, 0),
                                     makePool(1, 6, 2, 3, 2, 1),
                                     makePool(2, 4, 2, 3, 1, 2)};
  std::mt19937_64 rng(173);
  for (const ref::Pool2dShape &s : shapes) {
    SCOPED_TRACE("window " + std::to_string(s.windowHeight) + " stride " +
                 std::to_string(s.strideRows) + " pad " +
                 std::to_string(s.padRows));
    Vec x = randomVec(rng, s.inputSize()), r = randomVec(rng, s.outputSize());
    auto maxOf = [&] { return dot(r, ref::maxPool2dForward(x, s)); };
    EXPECT_TRUE(
        matchesFiniteDifferences(x, maxOf, ref::maxPool2dBackward(r, x, s)));
    auto meanOf = [&] { return dot(r, ref::avgPool2dForward(x, s)); };
    EXPECT_TRUE(
        matchesFiniteDifferences(x, meanOf, ref::avgPool2dBackward(r, s)));
  }
}

// Batch norm, rank 2 and an image's pixels as rows: its backward through
// the statistics against central differences of its forward.
TEST(ReferenceBatchNorm, ForwardNormalisesAndBackwardMatchesDifferences) {
  std::mt19937_64 rng(174);
  for (auto shape : {std::pair<int64_t, int64_t>{6, 3}, {20, 4}}) {
    const int64_t rows = shape.first, channels = shape.second;
    Vec x = randomVec(rng, rows * channels, -2.0, 3.0),
        gamma = randomVec(rng, channels), beta = randomVec(rng, channels),
        r = randomVec(rng, rows * channels);
    ref::BatchNormResult f = ref::batchNormForward(
        x, Vec(channels, 1.0), Vec(channels, 0.0), rows, channels, 0.0);
    for (int64_t c = 0; c < channels; ++c) { // zero mean, unit variance
      double sum = 0, squares = 0;
      for (int64_t i = 0; i < rows; ++i) {
        sum += f.y[i * channels + c];
        squares += f.y[i * channels + c] * f.y[i * channels + c];
      }
      EXPECT_NEAR(sum / rows, 0.0, 1e-12);
      EXPECT_NEAR(squares / rows, 1.0, 1e-12);
    }
    auto objective = [&] {
      return dot(r,
                 ref::batchNormForward(x, gamma, beta, rows, channels, 1e-5).y);
    };
    ref::BatchNormGrads g =
        ref::batchNormBackward(r, x, gamma, rows, channels, 1e-5);
    EXPECT_TRUE(matchesFiniteDifferences(x, objective, g.dx));
    EXPECT_TRUE(matchesFiniteDifferences(gamma, objective, g.dgamma));
    EXPECT_TRUE(matchesFiniteDifferences(beta, objective, g.dbeta));
  }
}
