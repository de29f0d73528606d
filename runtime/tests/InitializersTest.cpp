//===- InitializersTest.cpp - Tests of the parameter initializers ---------===//

#include "gpipe/runtime/bundle/Initializers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace gpipe::runtime;

namespace {

std::vector<float> init(InitKind kind, double scale,
                        const std::vector<int64_t> &shape, uint64_t seed,
                        const std::string &name) {
  int64_t n = 1;
  for (int64_t dim : shape)
    n *= dim;
  // Poisoned, so an element left unwritten shows up.
  std::vector<float> values(n, std::nanf(""));
  initializeParameter(kind, scale, shape, seed, name, values.data());
  return values;
}

struct Moments {
  double mean = 0, stddev = 0, low = 0, high = 0;
};

Moments moments(const std::vector<float> &values) {
  Moments m;
  for (float v : values)
    m.mean += v;
  m.mean /= values.size();
  for (float v : values)
    m.stddev += (v - m.mean) * (v - m.mean);
  m.stddev = std::sqrt(m.stddev / values.size());
  auto [low, high] = std::minmax_element(values.begin(), values.end());
  m.low = *low;
  m.high = *high;
  return m;
}

} // namespace

TEST(Initializers, ZerosAndOnesAreExact) {
  for (float v : init(InitKind::Zeros, 1.0, {3, 5, 7}, 42, "z"))
    EXPECT_EQ(v, 0.0f);
  for (float v : init(InitKind::Ones, 1.0, {3, 5, 7}, 42, "o"))
    EXPECT_EQ(v, 1.0f);
}

TEST(Initializers, DeterministicFromSeedAndName) {
  for (InitKind kind :
       {InitKind::Normal, InitKind::Uniform, InitKind::GlorotUniform}) {
    std::vector<float> a = init(kind, 0.5, {64, 33}, 7, "fc1.w");
    EXPECT_EQ(a, init(kind, 0.5, {64, 33}, 7, "fc1.w"));
    EXPECT_NE(a, init(kind, 0.5, {64, 33}, 7, "fc2.w"));
    EXPECT_NE(a, init(kind, 0.5, {64, 33}, 8, "fc1.w"));
  }
}

TEST(Initializers, ValuesDependOnlyOnTheElementIndex) {
  // The same name and seed give the same leading elements whatever the shape:
  // element i is a function of (seed, name, i) alone. For normal, an odd total
  // still matches (the last pair is only cut short).
  for (InitKind kind : {InitKind::Normal, InitKind::Uniform}) {
    std::vector<float> big = init(kind, 1.0, {1001}, 3, "p");
    std::vector<float> small = init(kind, 1.0, {3, 7}, 3, "p");
    EXPECT_TRUE(std::equal(small.begin(), small.end(), big.begin()));
  }
}

TEST(Initializers, NormalStatistics) {
  for (double scale : {1.0, 0.02}) {
    Moments m = moments(init(InitKind::Normal, scale, {100000}, 1, "emb"));
    EXPECT_NEAR(m.mean, 0.0, 0.01 * scale);
    EXPECT_NEAR(m.stddev, scale, 0.02 * scale);
    // 100k draws: the extremes lie near 4.4 sigma, surely within 3..6 sigma.
    EXPECT_GT(m.high, 3 * scale);
    EXPECT_LT(m.high, 6 * scale);
    EXPECT_LT(m.low, -3 * scale);
    EXPECT_GT(m.low, -6 * scale);
  }
}

TEST(Initializers, UniformStatistics) {
  double scale = 0.25;
  Moments m = moments(init(InitKind::Uniform, scale, {100000}, 1, "u"));
  EXPECT_NEAR(m.mean, 0.0, 0.01 * scale);
  EXPECT_NEAR(m.stddev, scale / std::sqrt(3.0), 0.02 * scale / std::sqrt(3.0));
  EXPECT_GE(m.low, -scale);
  EXPECT_LE(m.high, scale);
  EXPECT_LT(m.low, -0.999 * scale);
  EXPECT_GT(m.high, 0.999 * scale);
}

TEST(Initializers, GlorotUniformBound) {
  // Rank 2 weights [in, out]: l = sqrt(6 / (784 + 256)).
  const double limit = std::sqrt(6.0 / (784 + 256));
  EXPECT_DOUBLE_EQ(glorotUniformLimit({784, 256}), limit);
  Moments m = moments(init(InitKind::GlorotUniform, 1.0, {784, 256}, 9, "w"));
  EXPECT_NEAR(m.mean, 0.0, 0.01 * limit);
  EXPECT_NEAR(m.stddev, limit / std::sqrt(3.0), 0.02 * limit / std::sqrt(3.0));
  EXPECT_GE(m.low, -static_cast<float>(limit));
  EXPECT_LE(m.high, static_cast<float>(limit));
  EXPECT_LT(m.low, -0.9999 * limit);
  EXPECT_GT(m.high, 0.9999 * limit);
}

// A 3x3 conv from 16 to 32 channels: fans 9 x 16 and 9 x 32 (Keras's and
// PyTorch's receptive-field rule).
TEST(Initializers, GlorotUniformOfAConvWeightCountsItsReceptiveField) {
  EXPECT_DOUBLE_EQ(glorotUniformLimit({3, 3, 16, 32}),
                   std::sqrt(6.0 / (144 + 288)));
}

TEST(Initializers, GlorotUniformOtherRanksUseTheElementCount) {
  EXPECT_DOUBLE_EQ(glorotUniformLimit({256}), std::sqrt(6.0 / 512));
  EXPECT_DOUBLE_EQ(glorotUniformLimit({2, 3, 4}), std::sqrt(6.0 / 48));
  EXPECT_DOUBLE_EQ(glorotUniformLimit({}), std::sqrt(3.0));
  for (float v : init(InitKind::GlorotUniform, 1.0, {256}, 1, "b"))
    EXPECT_LE(std::fabs(v), static_cast<float>(std::sqrt(6.0 / 512)));
}

TEST(Initializers, EmptyShapes) {
  // A zero dimension writes nothing; a scalar (rank 0) is one element.
  float sentinel = 5.0f;
  initializeParameter(InitKind::GlorotUniform, 1.0, {0, 0}, 1, "e", &sentinel);
  EXPECT_EQ(sentinel, 5.0f);
  initializeParameter(InitKind::Ones, 1.0, {}, 1, "s", &sentinel);
  EXPECT_EQ(sentinel, 1.0f);
}
