//===- SquaresKernelTest.cpp - The gradient norm's partial sums, checked --===//
//
// KernelApi::sumOfSquares (kernels::SquaresPartial), run on the host as the
// GPU runs it (ImmediateKernels), against sums of squares in double computed
// here: each part, and their total, for sizes that do and do not divide.
//
//===----------------------------------------------------------------------===//

#include "ImmediateKernels.h"
#include "RandomData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

using namespace gpipe::runtime;
using gpipe::runtime::testing::ImmediateKernels;
using gpipe::runtime::testing::kStream;
using gpipe::testing::randomFloats;
using Floats = std::vector<float>;

// sumOfSquares: each part's sum of squares, against a double reference.
TEST(DeviceKernels, SumOfSquaresPartsMatchDouble) {
  std::mt19937_64 rng(5);
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(1000), int64_t(1001)}) {
    for (int64_t parts : {int64_t(1), int64_t(3), int64_t(256)}) {
      SCOPED_TRACE("n " + std::to_string(n) + " parts " +
                   std::to_string(parts));
      Floats x = randomFloats(rng, n);
      std::vector<double> partials(size_t(parts), -1.0);
      ImmediateKernels k;
      k.sumOfSquares(kStream, x.data(), n, partials.data(), parts);
      const int64_t chunk = (n + parts - 1) / parts;
      double total = 0, totalRef = 0;
      for (int64_t r = 0; r < parts; ++r) {
        double expected = 0;
        for (int64_t i = r * chunk; i < std::min(n, (r + 1) * chunk); ++i)
          expected += double(x[i]) * double(x[i]);
        EXPECT_NEAR(partials[r], expected, 1e-12 * (1 + expected));
        total += partials[r];
      }
      for (float v : x)
        totalRef += double(v) * double(v);
      EXPECT_NEAR(total, totalRef, 1e-12 * totalRef);
    }
  }
}
