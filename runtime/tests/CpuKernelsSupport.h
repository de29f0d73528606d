//===- CpuKernelsSupport.h - CPU kernel test helpers -*- C++ -*- ----------===//
//
// What the CPU kernel tests share: the garbage value no correct kernel
// leaves in an overwritten output, random dropout masks, f32 -> f64 copies
// and element-wise closeness with a message naming the first difference.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_CPUKERNELSSUPPORT_H
#define GPIPE_RUNTIME_TESTS_CPUKERNELSSUPPORT_H

#include "ReferenceOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace gpipe::testing::cpukernels {

// A value no correct kernel leaves in an overwritten output.
inline constexpr float kGarbage = 777.0f;

inline std::vector<uint8_t> randomMask(std::mt19937_64 &rng, size_t n,
                                       double keep) {
  std::bernoulli_distribution dist(keep);
  std::vector<uint8_t> m(n);
  for (uint8_t &e : m)
    e = dist(rng) ? 1 : 0;
  return m;
}

inline gpipe::reference::Vec toDouble(const std::vector<float> &v) {
  return gpipe::reference::Vec(v.begin(), v.end());
}

// Every element of `actual` is within atol + rtol * |expected| of `expected`;
// the message names the first offending index and how many offend.
inline ::testing::AssertionResult
allClose(const float *actual, const gpipe::reference::Vec &expected,
         double rtol, double atol) {
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    double error = std::abs(static_cast<double>(actual[i]) - expected[i]);
    bool ok = error <= atol + rtol * std::abs(expected[i]);
    if (!ok || std::isnan(actual[i])) {
      if (bad++ == 0)
        first = i;
    }
    worst = std::max(worst, error);
  }
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << expected.size() << " elements differ (rtol "
         << rtol << ", atol " << atol << "); first at [" << first
         << "]: actual " << actual[first] << ", expected " << expected[first]
         << "; max abs error " << worst;
}

inline ::testing::AssertionResult
allClose(const std::vector<float> &actual,
         const gpipe::reference::Vec &expected, double rtol, double atol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != " << expected.size();
  return allClose(actual.data(), expected, rtol, atol);
}

// The same for doubles.
inline ::testing::AssertionResult
allClose(const gpipe::reference::Vec &actual,
         const gpipe::reference::Vec &expected, double rtol, double atol) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    if (!(std::abs(actual[i] - expected[i]) <=
          atol + rtol * std::abs(expected[i])) &&
        bad++ == 0)
      first = i;
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << expected.size() << " elements differ (rtol "
         << rtol << ", atol " << atol << "); first at [" << first
         << "]: actual " << actual[first] << ", expected " << expected[first];
}

} // namespace gpipe::testing::cpukernels

#endif // GPIPE_RUNTIME_TESTS_CPUKERNELSSUPPORT_H
