//===- CApiVersionTest.cpp - gpipe_runtime_version and its API version ----===//

#include "gpipe/runtime/gpipe_runtime.h"

#include <gtest/gtest.h>

namespace {

// The library reports the version CMake configured (the project's) and the
// API version of the header it was built with.
TEST(CApiVersion, IsTheProjectsAndTheHeaders) {
  EXPECT_STREQ(gpipe_runtime_version(), GPIPE_EXPECTED_VERSION);
  EXPECT_EQ(gpipe_runtime_api_version(), GPIPE_RUNTIME_API_VERSION);
}

} // namespace
