//===- AllClose.h - Element-wise comparison against a reference -*- C++ -*-===//
//
// Shared by the executor and compiled-training tests: |actual - expected| <=
// atol + rtol |expected| for every element, naming the first that is not.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_ALLCLOSE_H
#define GPIPE_RUNTIME_TESTS_ALLCLOSE_H

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace gpipe::testing {

inline ::testing::AssertionResult allClose(const std::vector<float> &actual,
                                           const std::vector<double> &expected,
                                           double rtol, double atol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != " << expected.size();
  for (size_t i = 0; i < actual.size(); ++i) {
    double diff = std::fabs(double(actual[i]) - expected[i]);
    if (!(diff <= atol + rtol * std::fabs(expected[i])))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << actual[i] << ", expected "
             << expected[i] << " (diff " << diff << ")";
  }
  return ::testing::AssertionSuccess();
}

} // namespace gpipe::testing

#endif // GPIPE_RUNTIME_TESTS_ALLCLOSE_H
