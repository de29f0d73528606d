//===- TempDir.h - A scratch directory for one test -------------*- C++ -*-===//

#ifndef GPIPE_RUNTIME_TESTS_TEMPDIR_H
#define GPIPE_RUNTIME_TESTS_TEMPDIR_H

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <system_error>

#include <stdlib.h>

namespace gpipe::runtime::testing {

/// A fresh directory under the test's temporary directory, removed with its
/// files when it goes out of scope.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string &prefix = "gpipe-test") {
    path = ::testing::TempDir() + prefix + "-XXXXXX";
    if (!::mkdtemp(path.data()))
      ADD_FAILURE() << "mkdtemp failed for " << path;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
};

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_TEMPDIR_H
