//===- CpuKernels.cpp - Forward and backward CPU kernels of the gpipe ops -===//
//
// Matrix products go through cblas_sgemm (row-major); everything else is a
// contiguous loop over rows that the compiler can vectorize; exp and tanh are
// inlined polynomial approximations on four-float vectors instead of scalar
// libm calls (the softmaxes on eight where the CPU has AVX2, their sums still
// in four partial sums: the same bits). Reductions use several partial sums
// (independent dependency chains, and a smaller rounding error than one running
// sum) and, for the losses and layer norm's mean, double precision.
//
// Attention is in CpuAttention.cpp.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"
#include "gpipe/runtime/kernels/BlasLibrary.h"

#include "kernels/CpuLinearAlgebra.h"
#include "kernels/CpuVectorMath.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace gpipe::runtime;
using namespace gpipe::runtime::cpu::simd;
using gpipe::runtime::cpu::linalg::dot;
using gpipe::runtime::cpu::linalg::gemm;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

/// Number of partial sums of the reductions below: enough independent chains
/// to hide the add latency, and the inner loop vectorizes as one register.
constexpr int64_t kLanes = 8;

/// Sum of x[0, n) accumulated in double: layer norm's mean, where a row with a
/// large offset would otherwise lose the digits that the centering keeps.
double sumAsDouble(const float *x, int64_t n) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      acc[l] += x[i + l];
  double total = 0.0;
  for (; i < n; ++i)
    total += x[i];
  for (int64_t l = 0; l < kLanes; ++l)
    total += acc[l];
  return total;
}

/// Sum of (x[i] - shift)^2 over [0, n).
float sumSquaredDeviation(const float *x, float shift, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      float d = x[i + l] - shift;
      acc[l] += d * d;
    }
  float total = 0.0f;
  for (; i < n; ++i) {
    float d = x[i] - shift;
    total += d * d;
  }
  for (int64_t l = 0; l < kLanes; ++l)
    total += acc[l];
  return total;
}

float maxOf(const float *x, int64_t n) {
  float acc[kLanes];
  for (int64_t l = 0; l < kLanes; ++l)
    acc[l] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  float m = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i)
    m = x[i] > m ? x[i] : m;
  for (int64_t l = 0; l < kLanes; ++l)
    m = acc[l] > m ? acc[l] : m;
  return m;
}

// Float8 stays inside the inlined kernels (CpuVectorMath.h); GCC reports
// the ABI note where it emits the lambdas, at the end of the file.
#pragma GCC diagnostic ignored "-Wpsabi"

/// y[0, n) = softmax(x[0, n)), max-shifted; x and y may be the same buffer.
/// Returns log(sum(exp(x - max))) + max, the log-partition of the row.
template <class F>
GPIPE_VECTOR_INLINE float softmaxRowOn(const float *x, float *y, int64_t n) {
  float m = maxOf(x, n);
  Float4 acc = {};
  forEachBlock<F>(n, [&](int64_t i, int64_t count) GPIPE_LAMBDA_INLINE {
    // Missing lanes load -inf: their exp is 0 and does not enter the sum.
    F e = fastExp(
        load<F>(x + i, count, -std::numeric_limits<float>::infinity()) - m);
    addInFours(acc, e);
    store<F>(y + i, e, count);
  });
  float s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i)
    y[i] *= inv;
  return std::log(s) + m;
}

#if defined(GPIPE_AVX2)
GPIPE_AVX2 float softmaxRowAvx2(const float *x, float *y, int64_t n) {
  return softmaxRowOn<Float8>(x, y, n);
}
#endif

/// softmaxRowOn on eight lanes where the CPU has AVX2 (the same bits).
float softmaxRow(const float *x, float *y, int64_t n) {
#if defined(GPIPE_AVX2)
  if (hasAvx2())
    return softmaxRowAvx2(x, y, n);
#endif
  return softmaxRowOn<Float4>(x, y, n);
}

} // namespace

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

void cpu::useSingleThreadedBlas() { openblas_set_num_threads(1); }

//===-- dense --------------------------------------------------------------===//

void cpu::denseForward(const float *x, const float *w, const float *b,
                       float *y, int64_t rows, int64_t in, int64_t out) {
  // Seed y with the bias so that the GEMM adds onto it (beta = 1).
  if (b) {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(y + r * out, b, out * sizeof(float));
  }
  gemm(false, false, rows, out, in, 1.0f, x, in, w, out, b ? 1.0f : 0.0f, y,
       out);
}

void cpu::denseBackward(const float *dy, const float *x, const float *w,
                        float *dx, float *dw, float *db, int64_t rows,
                        int64_t in, int64_t out) {
  if (dx)
    gemm(false, true, rows, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
  if (dw)
    gemm(true, false, in, out, rows, 1.0f, x, in, dy, out, 1.0f, dw, out);
  if (db) {
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = dy + r * out;
      for (int64_t j = 0; j < out; ++j)
        db[j] += row[j];
    }
  }
}

//===-- softmax ------------------------------------------------------------===//

void cpu::softmaxForward(const float *x, float *y, int64_t rows,
                         int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    softmaxRow(x + r * cols, y + r * cols, cols);
}

void cpu::softmaxBackward(const float *y, const float *dy, float *dx,
                          int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *yr = y + r * cols;
    const float *dyr = dy + r * cols;
    float *dxr = dx + r * cols;
    float s = dot(dyr, yr, cols);
    for (int64_t j = 0; j < cols; ++j)
      dxr[j] = yr[j] * (dyr[j] - s);
  }
}

//===-- layer norm ---------------------------------------------------------===//

void cpu::layerNormForward(const float *x, const float *gamma,
                           const float *beta, float *y, float *mean,
                           float *rstd, int64_t rows, int64_t cols,
                           float epsilon) {
  float invCols = 1.0f / static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    // Two passes: the variance of the centered row, not E[x^2] - E[x]^2.
    float mu = static_cast<float>(sumAsDouble(xr, cols) / cols);
    float var = sumSquaredDeviation(xr, mu, cols) * invCols;
    float rs = 1.0f / std::sqrt(var + epsilon);
    mean[r] = mu;
    rstd[r] = rs;
    for (int64_t j = 0; j < cols; ++j)
      yr[j] = (xr[j] - mu) * rs * gamma[j] + beta[j];
  }
}

void cpu::layerNormBackward(const float *dy, const float *x,
                            const float *gamma, const float *mean,
                            const float *rstd, float *dx, float *dgamma,
                            float *dbeta, int64_t rows, int64_t cols) {
  float invCols = 1.0f / static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    const float *dyr = dy + r * cols;
    float mu = mean[r];
    float rs = rstd[r];
    if (dgamma) {
      for (int64_t j = 0; j < cols; ++j)
        dgamma[j] += dyr[j] * (xr[j] - mu) * rs;
    }
    if (dbeta) {
      for (int64_t j = 0; j < cols; ++j)
        dbeta[j] += dyr[j];
    }
    if (!dx)
      continue;
    // With g = dy * gamma and xhat = (x - mean) * rstd:
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
    float acc[kLanes] = {}, accHat[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= cols; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) {
        float g = dyr[j + l] * gamma[j + l];
        acc[l] += g;
        accHat[l] += g * (xr[j + l] - mu);
      }
    float sumG = 0.0f, sumGHat = 0.0f;
    for (; j < cols; ++j) {
      float g = dyr[j] * gamma[j];
      sumG += g;
      sumGHat += g * (xr[j] - mu);
    }
    for (int64_t l = 0; l < kLanes; ++l) {
      sumG += acc[l];
      sumGHat += accHat[l];
    }
    float meanG = sumG * invCols;
    float meanGHat = sumGHat * rs * invCols;
    float *dxr = dx + r * cols;
    for (int64_t k = 0; k < cols; ++k) {
      float xHat = (xr[k] - mu) * rs;
      dxr[k] = rs * (dyr[k] * gamma[k] - meanG - xHat * meanGHat);
    }
  }
}

//===-- embedding ----------------------------------------------------------===//

int64_t cpu::embeddingForward(const int32_t *ids, const float *table,
                              float *y, int64_t n, int64_t vocab,
                              int64_t width) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = ids[i];
    if (id < 0 || id >= vocab)
      return i;
    std::memcpy(y + i * width, table + id * width, width * sizeof(float));
  }
  return -1;
}

void cpu::embeddingBackward(const int32_t *ids, const float *dy,
                            float *dtable, int64_t n, int64_t width) {
  // Row by row, so repeated ids add up.
  for (int64_t i = 0; i < n; ++i) {
    float *row = dtable + static_cast<int64_t>(ids[i]) * width;
    const float *dyr = dy + i * width;
    for (int64_t j = 0; j < width; ++j)
      row[j] += dyr[j];
  }
}

//===-- losses -------------------------------------------------------------===//

float cpu::softmaxCrossEntropyForward(const float *logits,
                                      const int32_t *labels, float *probs,
                                      int64_t rows, int64_t classes,
                                      int64_t *badLabel) {
  int64_t firstBad = -1;
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *lr = logits + r * classes;
    // -log p[label] = logPartition - logit[label]: no log of a rounded-to-0
    // probability.
    float logPartition = softmaxRow(lr, probs + r * classes, classes);
    int64_t label = labels[r];
    if (label < 0 || label >= classes) {
      if (firstBad < 0)
        firstBad = r;
      continue;
    }
    total += static_cast<double>(logPartition) - lr[label];
  }
  if (badLabel)
    *badLabel = firstBad;
  if (firstBad >= 0)
    return std::numeric_limits<float>::quiet_NaN();
  return rows > 0 ? static_cast<float>(total / static_cast<double>(rows))
                  : 0.0f;
}

void cpu::softmaxCrossEntropyBackward(const float *probs,
                                      const int32_t *labels, float scale,
                                      float *dlogits, int64_t rows,
                                      int64_t classes) {
  if (rows == 0)
    return;
  const float factor = scale / static_cast<float>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float *pr = probs + r * classes;
    float *dr = dlogits + r * classes;
    for (int64_t j = 0; j < classes; ++j)
      dr[j] = factor * pr[j];
    int64_t label = labels[r];
    // Out-of-range labels were reported by the forward; never write outside.
    if (label >= 0 && label < classes)
      dr[label] = factor * (pr[label] - 1.0f);
  }
}

float cpu::mseForward(const float *prediction, const float *target,
                      int64_t n) {
  if (n == 0)
    return 0.0f;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      double d = static_cast<double>(prediction[i + l]) - target[i + l];
      acc[l] += d * d;
    }
  double total = 0.0;
  for (; i < n; ++i) {
    double d = static_cast<double>(prediction[i]) - target[i];
    total += d * d;
  }
  for (int64_t l = 0; l < kLanes; ++l)
    total += acc[l];
  return static_cast<float>(total / static_cast<double>(n));
}

void cpu::mseBackward(const float *prediction, const float *target,
                      float scale, float *dprediction, int64_t n) {
  if (n == 0)
    return;
  const float factor = 2.0f * scale / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i)
    dprediction[i] = factor * (prediction[i] - target[i]);
}
