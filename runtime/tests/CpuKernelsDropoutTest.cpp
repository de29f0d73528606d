//===- CpuKernelsDropoutTest.cpp - Dropout masks and kernel errors --------===//
//
// Dropout.*: the CPU dropout kernel's mask properties (determinism per seed
// and step, micro-batch split invariance, the hash's definition, statistics)
// and its backward against the reference (ReferenceOps.h). Errors.*: the
// reporting of bad embedding ids and cross-entropy labels.
//
// All randomness comes from std::mt19937_64 with fixed seeds.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"
#include "ReferenceOps.h"
#include "gpipe/runtime/kernels/DropoutHash.h"

#include "CpuKernelsSupport.h"
#include "RandomData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace ref = gpipe::reference;
namespace cpu = gpipe::runtime::cpu;
using ref::Vec;
using Floats = std::vector<float>;
using Mask = std::vector<uint8_t>;
using Ids = std::vector<int32_t>;
using namespace gpipe::testing::cpukernels;

namespace {

using gpipe::testing::randomFloats;

} // namespace

//===----------------------------------------------------------------------===//
// 3. Dropout masks and error reporting.
//===----------------------------------------------------------------------===//

namespace {
struct DropoutRun {
  Floats y;
  Mask mask;
};
DropoutRun runDropout(const Floats &x, int64_t rows, int64_t cols, float rate,
                      uint64_t seed, uint64_t step, int64_t rowOffset) {
  DropoutRun run{Floats(rows * cols, kGarbage), Mask(rows * cols, 77)};
  cpu::dropoutForward(x.data(), run.y.data(), run.mask.data(), rows, cols, rate,
                      seed, step, rowOffset);
  return run;
}
double fractionEqual(const Mask &a, const Mask &b) {
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i)
    same += a[i] == b[i];
  return static_cast<double>(same) / a.size();
}
} // namespace

// Rate 0 keeps every element and y == x exactly.
TEST(Dropout, RateZeroIsIdentity) {
  std::mt19937_64 rng(301);
  Floats x = randomFloats(rng, 7 * 13);
  DropoutRun run = runDropout(x, 7, 13, 0.0f, 42, 3, 0);
  EXPECT_EQ(run.mask, Mask(x.size(), 1));
  EXPECT_EQ(run.y, x);
}

// Rate 0.3 over 100k elements drops a fraction within 0.01 of 0.3; the mask
// holds only 0 and 1; kept values are x / (1 - rate) (rtol 1e-6), dropped
// ones 0; y matches the reference given the mask.
TEST(Dropout, DropFractionAndScaling) {
  std::mt19937_64 rng(302);
  const int64_t rows = 100, cols = 1000;
  const float rate = 0.3f;
  Floats x = randomFloats(rng, rows * cols);
  DropoutRun run = runDropout(x, rows, cols, rate, 1234, 0, 0);
  size_t dropped = 0;
  for (uint8_t m : run.mask) {
    ASSERT_TRUE(m == 0 || m == 1) << int(m);
    dropped += m == 0;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / x.size(), 0.3, 0.01);
  EXPECT_TRUE(allClose(run.y, ref::dropoutForward(toDouble(x), run.mask, rate),
                       1e-6, 0));
}

// Element decisions look independent: neighbouring rows, neighbouring columns
// and two steps agree on about 0.7^2 + 0.3^2 = 0.58 of the elements (within
// 0.02), not on all of them.
TEST(Dropout, NeighboursAreUncorrelated) {
  const int64_t rows = 200, cols = 500;
  Floats x(rows * cols, 1.0f);
  Mask mask = runDropout(x, rows, cols, 0.3f, 99, 5, 0).mask;
  Mask up(mask.begin(), mask.end() - cols),
      down(mask.begin() + cols, mask.end());
  EXPECT_NEAR(fractionEqual(up, down), 0.58, 0.02);
  Mask left, right;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c + 1 < cols; ++c) {
      left.push_back(mask[r * cols + c]);
      right.push_back(mask[r * cols + c + 1]);
    }
  EXPECT_NEAR(fractionEqual(left, right), 0.58, 0.02);
  Mask nextStep = runDropout(x, rows, cols, 0.3f, 99, 6, 0).mask;
  EXPECT_NEAR(fractionEqual(mask, nextStep), 0.58, 0.02);
}

// Micro-batch split invariance: the mask (and y) of rows [0,8) at rowOffset 0
// is the concatenation of rows [0,3) at rowOffset 0 and rows [3,8) at
// rowOffset 3.
TEST(Dropout, MaskIsInvariantToMicroBatchSplit) {
  std::mt19937_64 rng(304);
  const int64_t rows = 8, cols = 37, split = 3;
  const float rate = 0.4f;
  Floats x = randomFloats(rng, rows * cols);
  DropoutRun whole = runDropout(x, rows, cols, rate, 7, 11, 0);
  Floats top(x.begin(), x.begin() + split * cols),
      bottom(x.begin() + split * cols, x.end());
  DropoutRun first = runDropout(top, split, cols, rate, 7, 11, 0);
  DropoutRun second =
      runDropout(bottom, rows - split, cols, rate, 7, 11, split);
  Mask joined = first.mask;
  joined.insert(joined.end(), second.mask.begin(), second.mask.end());
  Floats joinedY = first.y;
  joinedY.insert(joinedY.end(), second.y.begin(), second.y.end());
  EXPECT_EQ(joined, whole.mask);
  EXPECT_EQ(joinedY, whole.y);
}

// The mask is DropoutHash.h's, element for element: kept iff
// dropoutUniform(row key, col) >= rate, computed here in floats as the hash
// defines it. Besides ordinary rates, each column's own boundary: at rate
// u / 2^24 (u its hash's top 24 bits) it is kept, at (u + 0.5) / 2^24 dropped
// and at (u - 0.5) / 2^24 kept, in every lane of the kernel's vectors.
TEST(Dropout, MaskIsTheHashsDefinition) {
  using gpipe::runtime::device::dropoutRowKey;
  using gpipe::runtime::device::dropoutUniform;
  const uint64_t seed = 17, step = 4;
  const int64_t rowOffset = 5;
  auto expected = [&](int64_t rows, int64_t cols, float rate) {
    Mask mask(rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        mask[r * cols + c] =
            dropoutUniform(dropoutRowKey(seed, step, rowOffset + r), c) >= rate;
    return mask;
  };
  std::vector<float> rates = {0.1f, 0.3f, 0.5f, 1e-7f, 0.99999994f};
  const int64_t boundaryCols = 19;
  const uint64_t key0 = dropoutRowKey(seed, step, rowOffset);
  for (int64_t c = 0; c < boundaryCols; ++c) {
    float u = dropoutUniform(key0, c) * 16777216.0f;
    rates.push_back(u / 16777216.0f);
    if (u < 8388608.0f && u >= 1.0f) { // u +- 0.5 is a float below 2^23
      rates.push_back((u + 0.5f) / 16777216.0f);
      rates.push_back((u - 0.5f) / 16777216.0f);
    }
  }
  std::mt19937_64 rng(307);
  for (float rate : rates)
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, boundaryCols},
                              {3, 1},
                              {2, 8},
                              {4, 37},
                              {2, 64}}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) +
                   " rate " + std::to_string(rate));
      Floats x = randomFloats(rng, rows * cols);
      DropoutRun run = runDropout(x, rows, cols, rate, seed, step, rowOffset);
      ASSERT_EQ(run.mask, expected(rows, cols, rate));
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(run.y[i], run.mask[i] ? x[i] * (1.0f / (1.0f - rate)) : 0.0f);
    }
}

// The decision of (row, col) does not depend on the number of columns: the
// first 10 columns of a 4x25 mask equal the 4x10 mask.
TEST(Dropout, MaskDependsOnColumnNotOnWidth) {
  Floats wide(4 * 25, 1.0f), narrow(4 * 10, 1.0f);
  Mask wideMask = runDropout(wide, 4, 25, 0.5f, 3, 1, 2).mask;
  Mask narrowMask = runDropout(narrow, 4, 10, 0.5f, 3, 1, 2).mask;
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 10; ++c)
      EXPECT_EQ(wideMask[r * 25 + c], narrowMask[r * 10 + c]) << r << "," << c;
}

// Same inputs give the same mask and y (recomputation reproduces them); a
// different step or a different seed gives a different mask.
TEST(Dropout, DeterministicPerSeedAndStep) {
  std::mt19937_64 rng(305);
  const int64_t rows = 16, cols = 64;
  Floats x = randomFloats(rng, rows * cols);
  DropoutRun a = runDropout(x, rows, cols, 0.3f, 1, 1, 0);
  DropoutRun b = runDropout(x, rows, cols, 0.3f, 1, 1, 0);
  EXPECT_EQ(a.mask, b.mask);
  EXPECT_EQ(a.y, b.y);
  Mask otherStep = runDropout(x, rows, cols, 0.3f, 1, 2, 0).mask;
  Mask otherSeed = runDropout(x, rows, cols, 0.3f, 2, 1, 0).mask;
  // Independent masks agree on about 58% of elements.
  EXPECT_LT(fractionEqual(a.mask, otherStep), 0.75);
  EXPECT_LT(fractionEqual(a.mask, otherSeed), 0.75);
}

// dropout backward matches the reference given the mask (rtol 1e-6) and
// overwrites dx.
TEST(Dropout, Backward) {
  std::mt19937_64 rng(306);
  for (float rate : {0.0f, 0.3f, 0.9f}) {
    SCOPED_TRACE(rate);
    const int64_t n = 1001;
    Mask mask = randomMask(rng, n, 1.0 - rate);
    Floats dy = randomFloats(rng, n), dx(n, kGarbage);
    cpu::dropoutBackward(mask.data(), dy.data(), dx.data(), n, rate);
    EXPECT_TRUE(
        allClose(dx, ref::dropoutBackward(mask, toDouble(dy), rate), 1e-6, 0));
  }
}

// embedding reports the index of the first out-of-range id (too large or
// negative) and writes no row past it.
TEST(Errors, EmbeddingOutOfRangeId) {
  std::mt19937_64 rng(311);
  const int64_t vocab = 5, width = 3;
  Floats table = randomFloats(rng, vocab * width);
  struct Case {
    Ids ids;
    int64_t expected;
  };
  for (const Case &c :
       {Case{{1, 3, 5, 2, 9}, 2}, Case{{-1, 0}, 0}, Case{{0, 4, 4, -7}, 3}}) {
    int64_t n = c.ids.size();
    Floats y(n * width, kGarbage);
    EXPECT_EQ(cpu::embeddingForward(c.ids.data(), table.data(), y.data(), n,
                                    vocab, width),
              c.expected);
    for (int64_t i = (c.expected + 1) * width; i < n * width; ++i)
      EXPECT_EQ(y[i], kGarbage) << i;
  }
}

// cross-entropy reports the index of the first label outside [0, classes)
// through badLabel, and -1 for valid labels.
TEST(Errors, CrossEntropyBadLabel) {
  std::mt19937_64 rng(312);
  const int64_t rows = 4, classes = 5;
  Floats logits = randomFloats(rng, rows * classes);
  struct Case {
    Ids labels;
    int64_t expected;
  };
  for (const Case &c : {Case{{0, 4, 5, 1}, 2}, Case{{-1, 0, 0, 9}, 0},
                        Case{{4, 3, 2, 1}, -1}}) {
    Floats probs(rows * classes);
    int64_t badLabel = 12345;
    cpu::softmaxCrossEntropyForward(logits.data(), c.labels.data(),
                                    probs.data(), rows, classes, &badLabel);
    EXPECT_EQ(badLabel, c.expected);
  }
}
