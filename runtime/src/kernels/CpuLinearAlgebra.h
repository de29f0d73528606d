//===- CpuLinearAlgebra.h - The CPU kernels' sgemm and dot ------*- C++ -*-===//
//
// Private to the CPU kernels (CpuKernels.cpp, CpuAttention.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SRC_CPULINEARALGEBRA_H
#define GPIPE_RUNTIME_SRC_CPULINEARALGEBRA_H

#include "gpipe/runtime/kernels/BlasLibrary.h"

#include <cblas.h>

#include <cstdint>

namespace gpipe::runtime::cpu::linalg {

/// Row-major sgemm: C = alpha op(A) op(B) + beta C, with op(A) [m, k] and
/// op(B) [k, n], through the process's BLAS (BlasLibrary.h); sizes are
/// CBLAS's 32-bit ints.
inline void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  blas().sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
               transB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
               alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

/// Dot product of x[0, n) and y[0, n), in eight partial sums (independent
/// dependency chains; the inner loop vectorizes as one register).
inline float dot(const float *x, const float *y, int64_t n) {
  constexpr int64_t kLanes = 8;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      acc[l] += x[i + l] * y[i + l];
  float total = 0.0f;
  for (; i < n; ++i)
    total += x[i] * y[i];
  for (int64_t l = 0; l < kLanes; ++l)
    total += acc[l];
  return total;
}

} // namespace gpipe::runtime::cpu::linalg

#endif // GPIPE_RUNTIME_SRC_CPULINEARALGEBRA_H
