//===- NanAssertions.h - Where a result must be NaN --------------*- C++
//-*-===//
//
// What the NaN tests of the CPU kernels (NanPropagationTest.cpp) and of the
// device kernels (DeviceNanTest.cpp) assert of a result: NaN exactly where
// PyTorch's definition gives NaN, and otherwise the expected value, or just a
// finite one.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_NANASSERTIONS_H
#define GPIPE_RUNTIME_TESTS_NANASSERTIONS_H

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace gpipe::testing {

/// actual is NaN exactly where expected is, and equal to it elsewhere.
template <class T>
::testing::AssertionResult sameValues(const std::vector<float> &actual,
                                      const std::vector<T> &expected) {
  for (size_t i = 0; i < expected.size(); ++i)
    if (std::isnan(actual[i]) != std::isnan(expected[i]) ||
        (!std::isnan(expected[i]) && actual[i] != expected[i]))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << actual[i] << ", expected "
             << expected[i];
  return ::testing::AssertionSuccess();
}

/// actual is NaN exactly where `nan` holds, finite elsewhere.
template <class Nan>
::testing::AssertionResult nanWhere(const std::vector<float> &actual, Nan nan) {
  for (size_t i = 0; i < actual.size(); ++i)
    if (bool(std::isnan(actual[i])) != nan(i) ||
        (!nan(i) && !std::isfinite(actual[i])))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << actual[i] << ", expected "
             << (nan(i) ? "NaN" : "a finite value");
  return ::testing::AssertionSuccess();
}

} // namespace gpipe::testing

#endif // GPIPE_RUNTIME_TESTS_NANASSERTIONS_H
