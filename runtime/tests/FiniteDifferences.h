//===- FiniteDifferences.h - Gradients checked numerically -------*- C++
//-*-===//
//
// What the reference tests (CpuKernelsTest.cpp, ReferenceConvTest.cpp) check
// an analytic backward with: central finite differences of a
// double-precision objective, one element at a time.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_FINITEDIFFERENCES_H
#define GPIPE_RUNTIME_TESTS_FINITEDIFFERENCES_H

#include "RandomData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace gpipe::testing {

inline double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += a[i] * b[i];
  return sum;
}

/// Central differences of a double-precision objective, step h.
constexpr double kFdStep = 1e-6;
/// |analytic - numeric| <= kFdRtol * max(|numeric|, 1): relative tolerance,
/// absolute for gradients of magnitude below one.
constexpr double kFdRtol = 1e-6;

/// `analytic` is the gradient of `objective` with respect to `theta`, which
/// this perturbs in place (and restores) one element at a time.
inline ::testing::AssertionResult
matchesFiniteDifferences(std::vector<double> &theta,
                         const std::function<double()> &objective,
                         const std::vector<double> &analytic) {
  if (theta.size() != analytic.size())
    return ::testing::AssertionFailure()
           << "gradient size " << analytic.size() << " != " << theta.size();
  size_t bad = 0, first = 0;
  double firstNumeric = 0;
  for (size_t k = 0; k < theta.size(); ++k) {
    double saved = theta[k];
    theta[k] = saved + kFdStep;
    double plus = objective();
    theta[k] = saved - kFdStep;
    double minus = objective();
    theta[k] = saved;
    double numeric = (plus - minus) / (2 * kFdStep);
    if (!(std::abs(analytic[k] - numeric) <=
          kFdRtol * std::max(std::abs(numeric), 1.0)) &&
        bad++ == 0) {
      first = k;
      firstNumeric = numeric;
    }
  }
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << theta.size() << " partials differ; first at ["
         << first << "]: analytic " << analytic[first] << ", numeric "
         << firstNumeric;
}

} // namespace gpipe::testing

#endif // GPIPE_RUNTIME_TESTS_FINITEDIFFERENCES_H
