//===- CapacityTest.cpp - The capacity search and fit ---------------------===//
//
// The search of gpipe-capacity's table against monotone arenas whose answer
// is known, and its least-squares fit against hand-solved points.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Models/Capacity.h"

#include <gtest/gtest.h>

#include <set>

using namespace gpipe;

namespace {

// arena(b) = 100 b: the most blocks under a budget is budget / 100, found
// with O(log) probes, each probed once.
TEST(Capacity, FindsTheLargestFittingBlockCount) {
  for (uint64_t budget : {100u, 150u, 999u, 1000u, 1001u, 12345u}) {
    std::set<int64_t> probed;
    int probes = 0;
    auto arenaOf = [&](int64_t blocks) -> std::optional<int64_t> {
      EXPECT_TRUE(probed.insert(blocks).second) << "probed twice: " << blocks;
      ++probes;
      return 100 * blocks;
    };
    std::optional<Capacity> found =
        findLargestFitting(arenaOf, 1, 4096, budget);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->blocks, int64_t(budget / 100)) << budget;
    EXPECT_EQ(found->arena, 100 * found->blocks);
    EXPECT_FALSE(found->capped);
    EXPECT_LE(probes, 30);
  }
}

TEST(Capacity, NothingFitsAndCappedAndFailure) {
  auto linear = [](int64_t blocks) -> std::optional<int64_t> {
    return 100 * blocks;
  };
  std::optional<Capacity> none = findLargestFitting(linear, 3, 64, 250);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->blocks, 0);
  EXPECT_EQ(none->smallestArena, 300);
  std::optional<Capacity> capped = findLargestFitting(linear, 1, 64, 1u << 30);
  ASSERT_TRUE(capped);
  EXPECT_EQ(capped->blocks, 64);
  EXPECT_TRUE(capped->capped);
  auto failing = [](int64_t blocks) -> std::optional<int64_t> {
    if (blocks > 8)
      return std::nullopt;
    return blocks;
  };
  EXPECT_FALSE(findLargestFitting(failing, 1, 64, 1000));
  EXPECT_EQ(minBlocksFor(1), 1);
  EXPECT_EQ(minBlocksFor(8), 3);
}

// The edges of [fewest, most]: a budget equal to an arena fits it, one byte
// less does not; a range of one block count; a convex arena (b^2 + 7).
TEST(Capacity, SearchBoundaries) {
  auto linear = [](int64_t blocks) -> std::optional<int64_t> {
    return 100 * blocks;
  };
  std::optional<Capacity> atFewest = findLargestFitting(linear, 3, 64, 300);
  ASSERT_TRUE(atFewest);
  EXPECT_EQ(atFewest->blocks, 3);
  EXPECT_EQ(atFewest->arena, 300);
  EXPECT_FALSE(atFewest->capped);
  std::optional<Capacity> belowFewest = findLargestFitting(linear, 3, 64, 299);
  ASSERT_TRUE(belowFewest);
  EXPECT_EQ(belowFewest->blocks, 0);
  EXPECT_EQ(belowFewest->smallestArena, 300);
  std::optional<Capacity> atMost = findLargestFitting(linear, 3, 64, 6400);
  ASSERT_TRUE(atMost);
  EXPECT_EQ(atMost->blocks, 64);
  EXPECT_TRUE(atMost->capped);
  std::optional<Capacity> belowMost = findLargestFitting(linear, 3, 64, 6399);
  ASSERT_TRUE(belowMost);
  EXPECT_EQ(belowMost->blocks, 63);
  EXPECT_EQ(belowMost->arena, 6300);
  EXPECT_FALSE(belowMost->capped);
  std::optional<Capacity> single = findLargestFitting(linear, 5, 5, 1000);
  ASSERT_TRUE(single);
  EXPECT_EQ(single->blocks, 5);
  EXPECT_TRUE(single->capped);
  auto convex = [](int64_t blocks) -> std::optional<int64_t> {
    return blocks * blocks + 7;
  };
  // 31^2 + 7 = 968 <= 1000 < 1031 = 32^2 + 7.
  std::optional<Capacity> curved = findLargestFitting(convex, 1, 4096, 1000);
  ASSERT_TRUE(curved);
  EXPECT_EQ(curved->blocks, 31);
  EXPECT_EQ(curved->arena, 968);
}

// y = 3 x1 + 5 x2 exactly: the fit recovers a = 3, b = 5; proportional
// columns cannot be separated.
TEST(Capacity, FitThroughOrigin) {
  std::vector<double> x1 = {1, 2, 3, 4}, x2 = {2, 1, 5, 0.5}, y;
  for (size_t i = 0; i < x1.size(); ++i)
    y.push_back(3 * x1[i] + 5 * x2[i]);
  LinearFit fit = fitThroughOrigin(x1, x2, y);
  ASSERT_TRUE(fit.solvable);
  EXPECT_NEAR(fit.a, 3.0, 1e-9);
  EXPECT_NEAR(fit.b, 5.0, 1e-9);
  EXPECT_FALSE(fitThroughOrigin({1, 2}, {2, 4}, {3, 6}).solvable);
  EXPECT_FALSE(fitThroughOrigin({}, {}, {}).solvable);
}

// Points no (a, b) goes through: x1 = (1, 0, 1), x2 = (0, 1, 1),
// y = (1, 1, 3). The normal equations [2 1; 1 2] (a, b) = (4, 4) give
// a = b = 4/3, with residuals (-1/3, -1/3, 1/3).
TEST(Capacity, FitIsLeastSquares) {
  LinearFit fit = fitThroughOrigin({1, 0, 1}, {0, 1, 1}, {1, 1, 3});
  ASSERT_TRUE(fit.solvable);
  EXPECT_NEAR(fit.a, 4.0 / 3.0, 1e-12);
  EXPECT_NEAR(fit.b, 4.0 / 3.0, 1e-12);
  // x1 = (1, 2, 3), x2 = (1, 1, 1), y = (2, 2, 5): [14 6; 6 3] (a, b) =
  // (21, 9) gives a = 3/2, b = 0.
  LinearFit tilted = fitThroughOrigin({1, 2, 3}, {1, 1, 1}, {2, 2, 5});
  ASSERT_TRUE(tilted.solvable);
  EXPECT_NEAR(tilted.a, 1.5, 1e-12);
  EXPECT_NEAR(tilted.b, 0.0, 1e-12);
}

// y = 2 x1 + 7 x2 - 3 x3 exactly: the three-term fit recovers all three; a
// third column that is a multiple of the first cannot be separated (one
// block count: (L/K)*N is proportional to N).
TEST(Capacity, FitThroughOriginThreeTerms) {
  std::vector<double> x1 = {1, 2, 3, 4, 5}, x2 = {2, 1, 5, 0.5, 3},
                      x3 = {0, 4, 1, 2, 7}, y;
  for (size_t i = 0; i < x1.size(); ++i)
    y.push_back(2 * x1[i] + 7 * x2[i] - 3 * x3[i]);
  LinearFit fit = fitThroughOrigin(x1, x2, x3, y);
  ASSERT_TRUE(fit.solvable);
  EXPECT_TRUE(fit.hasC);
  EXPECT_NEAR(fit.a, 2.0, 1e-9);
  EXPECT_NEAR(fit.b, 7.0, 1e-9);
  EXPECT_NEAR(fit.c, -3.0, 1e-9);
  std::vector<double> twiceX1 = {2, 4, 6, 8, 10};
  EXPECT_FALSE(fitThroughOrigin(x1, x2, twiceX1, y).solvable);
  // Least squares, not interpolation: x = the unit vectors and (1, 1, 1),
  // y = (1, 1, 1, 6). The normal equations [2 1 1; 1 2 1; 1 1 2] (a, b, c)
  // = (7, 7, 7) give a = b = c = 7/4.
  LinearFit square =
      fitThroughOrigin({1, 0, 0, 1}, {0, 1, 0, 1}, {0, 0, 1, 1}, {1, 1, 1, 6});
  ASSERT_TRUE(square.solvable);
  EXPECT_NEAR(square.a, 1.75, 1e-12);
  EXPECT_NEAR(square.b, 1.75, 1e-12);
  EXPECT_NEAR(square.c, 1.75, 1e-12);
}

TEST(Capacity, FormatSize) {
  EXPECT_EQ(formatSize(1536), "1.5 KiB");
  EXPECT_EQ(formatSize(-2048, 0), "-2 KiB");
}

} // namespace
