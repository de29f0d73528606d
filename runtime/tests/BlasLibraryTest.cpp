//===- BlasLibraryTest.cpp - The sgemm the CPU kernels call ---------------===//
//
// The linked OpenBLAS by default; another CBLAS library by its path, whose
// product is checked against a double-precision one; and the errors of a
// path that cannot serve, with the linked sgemm still in place.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/BlasLibrary.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::cpu;

namespace {
/// C = A B^T for A [m, k], B [n, k] through `sgemm`, against the double
/// product: the largest difference relative to |A||B| row norms' scale.
double productError(Sgemm sgemm) {
  const int m = 37, n = 29, k = 53;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(m * k), b(n * k), c(m * n, 7.0f);
  for (float &x : a)
    x = dist(rng);
  for (float &x : b)
    x = dist(rng);
  sgemm(101, 111, 112, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(),
        n);
  double worst = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double want = 0;
      for (int p = 0; p < k; ++p)
        want += double(a[i * k + p]) * double(b[j * k + p]);
      worst = std::max(worst, std::abs(want - double(c[i * n + j])));
    }
  return worst;
}

TEST(BlasLibrary, LinkedOpenBlasByDefault) {
  BlasLibrary linked = loadBlasLibrary("");
  EXPECT_EQ(linked.error, "");
  EXPECT_EQ(linked.name.rfind("OpenBLAS ", 0), 0u) << linked.name;
  EXPECT_LT(productError(linked.sgemm), 1e-5);
}

// Debian's OpenBLAS opened by its path, as MKL's libmkl_rt would be.
TEST(BlasLibrary, LoadsACblasLibraryByPath) {
  const std::string path = "libopenblas.so.0";
  BlasLibrary loaded = loadBlasLibrary(path);
  ASSERT_EQ(loaded.error, "");
  EXPECT_EQ(loaded.name, path);
  EXPECT_LT(productError(loaded.sgemm), 1e-5);
}

TEST(BlasLibrary, APathThatCannotServeIsAnError) {
  BlasLibrary missing = loadBlasLibrary("/nonexistent/libblas.so");
  EXPECT_EQ(missing.error,
            "cannot use the BLAS library '/nonexistent/libblas.so' "
            "(GPIPE_BLAS_LIBRARY): /nonexistent/libblas.so: cannot open "
            "shared object file: No such file or directory");
  BlasLibrary noGemm = loadBlasLibrary("libz.so.1");
  EXPECT_EQ(noGemm.error, "cannot use the BLAS library 'libz.so.1' "
                          "(GPIPE_BLAS_LIBRARY): it has no cblas_sgemm");
  // The linked sgemm stays: kernels called directly still multiply.
  EXPECT_EQ(missing.name.rfind("OpenBLAS ", 0), 0u);
  EXPECT_LT(productError(noGemm.sgemm), 1e-5);
}
} // namespace
