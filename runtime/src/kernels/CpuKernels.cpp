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
// Attention's backward never materializes a [seq, seq] gradient: the softmax
// row term sum_j P_ij dP_ij equals dContext_i . context_i, so dP and dScores
// are produced one fixed-size tile at a time, on the stack.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"
#include "gpipe/runtime/kernels/BlasLibrary.h"

#include "kernels/CpuVectorMath.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace gpipe::runtime;
using namespace gpipe::runtime::cpu::simd;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

/// Row-major sgemm: C = alpha op(A) op(B) + beta C, with op(A) [m, k] and
/// op(B) [k, n], through the process's BLAS (BlasLibrary.h); sizes are
/// CBLAS's 32-bit ints.
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t lda, const float *b,
          int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  cpu::blas().sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                    transB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
                    alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

/// Multiply-adds under which a product runs on one thread.
constexpr int64_t kSplitWork = int64_t(1) << 18;

/// `parallel` over [0, n), or the caller alone without one.
void forRange(const cpu::ParallelFor &parallel, int64_t n, int64_t grain,
              const std::function<void(int64_t, int64_t)> &body) {
  if (parallel)
    parallel(n, grain, body);
  else if (n > 0)
    body(0, n);
}

/// gemm with C's rows (or columns, where there are more) split by
/// `parallel`: each element is the same dot product over k.
void gemmSplit(const cpu::ParallelFor &parallel, bool transA, bool transB,
               int64_t m, int64_t n, int64_t k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, float *c,
               int64_t ldc) {
  // Rows only, in whole cpu::kBlasRowGrain parts: the bits of one call.
  if (!parallel || m * n * k < kSplitWork || m < 2 * cpu::kBlasRowGrain) {
    gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  parallel(m, cpu::kBlasRowGrain, [&](int64_t r0, int64_t r1) {
    gemm(transA, transB, r1 - r0, n, k, alpha, transA ? a + r0 : a + r0 * lda,
         lda, b, ldb, beta, c + r0 * ldc, ldc);
  });
}

/// Copies `bias` [cols] into every row of y [rows, cols] (nothing for a null
/// bias): a GEMM with beta = 1 then adds onto it.
void seedRows(const float *bias, float *y, int64_t rows, int64_t cols) {
  if (bias)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(y + r * cols, bias, cols * sizeof(float));
}

/// sums[c] += sum over rows of x[r, c], rows in order, each column on one
/// thread: the bits do not depend on the thread count.
void addColumnSums(const cpu::ParallelFor &parallel, const float *x,
                   float *sums, int64_t rows, int64_t cols) {
  forRange(parallel, cols, 64, [&](int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = x + r * cols;
      for (int64_t c = c0; c < c1; ++c)
        sums[c] += row[c];
    }
  });
}

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

/// Dot product of x[0, n) and y[0, n).
float dot(const float *x, const float *y, int64_t n) {
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

/// acc += e four lanes at a time, in e's lane order: softmax's sum has the
/// same bits on eight lanes as on four.
GPIPE_VECTOR_INLINE void addInFours(Float4 &acc, Float4 e) { acc += e; }
// Float8 stays inside the inlined kernels (CpuVectorMath.h); GCC reports
// the ABI note where it emits the lambdas, at the end of the file.
#pragma GCC diagnostic ignored "-Wpsabi"
GPIPE_VECTOR_INLINE void addInFours(Float4 &acc, Float8 e) {
  acc += __builtin_shufflevector(e, e, 0, 1, 2, 3);
  acc += __builtin_shufflevector(e, e, 4, 5, 6, 7);
}

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

/// Attention's probabilities, in place: row i of p [rows, seq] becomes the
/// softmax of its first n = seq entries (n = i + 1 when causal: the keys it
/// sees) and zeros after them. As softmaxRowOn without the log-partition,
/// and the lanes of a block past n count as -inf (an exact 0 after exp)
/// instead of a partial load: the same bits without a memcpy per row.
template <class F>
GPIPE_VECTOR_INLINE void attentionSoftmaxOn(float *p, int64_t rows,
                                            int64_t firstRow, int64_t seq,
                                            bool causal) {
  using I = typename IntOf<F>::type;
  constexpr int64_t kL = kLanesOf<F>;
  const float inf = std::numeric_limits<float>::infinity();
  I lane;
  for (int64_t l = 0; l < kL; ++l)
    lane[l] = int32_t(l);
  for (int64_t r = 0; r < rows; ++r) {
    float *row = p + r * seq;
    const int64_t n = causal ? std::min(firstRow + r + 1, seq) : seq;
    auto block = [&](int64_t j) GPIPE_LAMBDA_INLINE {
      F v = j + kL <= seq ? load<F>(row + j, kL)
                          : load<F>(row + j, seq - j, -inf);
      return lane + int32_t(j) < int32_t(n) ? v : F{} - inf;
    };
    auto put = [&](int64_t j, F v) GPIPE_LAMBDA_INLINE {
      store<F>(row + j, v, j + kL <= seq ? kL : seq - j);
    };
    F top = F{} - inf;
    for (int64_t j = 0; j < n; j += kL) {
      F v = block(j);
      top = v > top ? v : top;
    }
    float m = -inf;
    for (int64_t l = 0; l < kL; ++l)
      m = top[l] > m ? top[l] : m;
    Float4 acc = {};
    for (int64_t j = 0; j < n; j += kL) {
      F e = fastExp(block(j) - m);
      addInFours(acc, e);
      put(j, e);
    }
    float inv = 1.0f / ((acc[0] + acc[1]) + (acc[2] + acc[3]));
    int64_t j = 0;
    for (; j < n; j += kL)
      put(j, load<F>(row + j, std::min(kL, seq - j)) * inv);
    for (; j < seq; ++j)
      row[j] = 0.0f;
  }
}

#if defined(GPIPE_AVX2)
GPIPE_AVX2 void attentionSoftmaxAvx2(float *p, int64_t rows, int64_t firstRow,
                                     int64_t seq, bool causal) {
  attentionSoftmaxOn<Float8>(p, rows, firstRow, seq, causal);
}
#endif

void attentionSoftmax(float *p, int64_t rows, int64_t firstRow, int64_t seq,
                      bool causal) {
#if defined(GPIPE_AVX2)
  if (hasAvx2())
    return attentionSoftmaxAvx2(p, rows, firstRow, seq, causal);
#endif
  attentionSoftmaxOn<Float4>(p, rows, firstRow, seq, causal);
}

/// softmaxRowOn on eight lanes where the CPU has AVX2 (the same bits).
float softmaxRow(const float *x, float *y, int64_t n) {
#if defined(GPIPE_AVX2)
  if (hasAvx2())
    return softmaxRowAvx2(x, y, n);
#endif
  return softmaxRowOn<Float4>(x, y, n);
}

//===-- attention tiling ---------------------------------------------------===//

/// Tile of the [seq, seq] score gradient that attention's backward holds at a
/// time (64 KiB of stack), and the row block of the causal forward.
constexpr int64_t kTileRows = 64;
constexpr int64_t kTileCols = 256;

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

//===-- attention ----------------------------------------------------------===//

void cpu::attentionForward(const float *x, const float *wqkv, const float *wo,
                           const float *qkvBias, const float *outBias, float *y,
                           float *qkv, float *probs, float *context,
                           int64_t batch, int64_t seq, int64_t width,
                           int64_t heads, bool causal,
                           const ParallelFor &parallel) {
  const int64_t tokens = batch * seq;
  const int64_t ldQkv = 3 * width;
  const int64_t dh = width / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));

  // As dense: the bias seeds qkv, which the GEMM adds onto (beta = 1).
  seedRows(qkvBias, qkv, tokens, ldQkv);
  gemmSplit(parallel, false, false, tokens, ldQkv, width, 1.0f, x, width, wqkv,
            ldQkv, qkvBias ? 1.0f : 0.0f, qkv, ldQkv);

  // Each (sequence, head) pair writes its own probabilities and context.
  forRange(parallel, batch * heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / heads, h = bh % heads;
      const float *q = qkv + b * seq * ldQkv + h * dh;
      const float *k = q + width;
      const float *v = q + 2 * width;
      float *p = probs + (b * heads + h) * seq * seq;
      float *c = context + b * seq * width + h * dh;
      if (!causal) {
        gemm(false, true, seq, seq, dh, scale, q, ldQkv, k, ldQkv, 0.0f, p,
             seq);
        attentionSoftmax(p, seq, 0, seq, false);
        gemm(false, false, seq, dh, seq, 1.0f, p, seq, v, ldQkv, 0.0f, c,
             width);
        continue;
      }
      // Causal: a block of rows [i0, i1) only sees keys [0, i1), which skips
      // about half of both products.
      for (int64_t i0 = 0; i0 < seq; i0 += kTileRows) {
        int64_t i1 = std::min(i0 + kTileRows, seq);
        float *pBlock = p + i0 * seq;
        gemm(false, true, i1 - i0, i1, dh, scale, q + i0 * ldQkv, ldQkv, k,
             ldQkv, 0.0f, pBlock, seq);
        attentionSoftmax(pBlock, i1 - i0, i0, seq, true);
        gemm(false, false, i1 - i0, dh, i1, 1.0f, pBlock, seq, v, ldQkv, 0.0f,
             c + i0 * width, width);
      }
    }
  });

  seedRows(outBias, y, tokens, width);
  gemmSplit(parallel, false, false, tokens, width, width, 1.0f, context, width,
            wo, width, outBias ? 1.0f : 0.0f, y, width);
}

void cpu::attentionBackward(const float *dy, const float *x, const float *wqkv,
                            const float *wo, const float *qkv,
                            const float *probs, const float *context, float *dx,
                            float *dwqkv, float *dwo, float *dqkvBias,
                            float *doutBias, float *scratch, int64_t batch,
                            int64_t seq, int64_t width, int64_t heads,
                            bool causal, const ParallelFor &parallel) {
  const int64_t tokens = batch * seq;
  const int64_t ldQkv = 3 * width;
  const int64_t dh = width / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));

  if (dwo)
    gemmSplit(parallel, true, false, width, width, tokens, 1.0f, context, width,
              dy, width, 1.0f, dwo, width);
  if (doutBias)
    addColumnSums(parallel, dy, doutBias, tokens, width);
  if (!dx && !dwqkv && !dqkvBias)
    return;

  float *dqkv = scratch;
  float *dcontext = scratch + tokens * ldQkv;
  gemmSplit(parallel, false, true, tokens, width, width, 1.0f, dy, width, wo,
            width, 0.0f, dcontext, width);
  // dq and dk accumulate over tiles of keys and queries.
  std::fill(dqkv, dqkv + tokens * ldQkv, 0.0f);

  // Each (sequence, head) pair writes only its own columns of dqkv.
  forRange(parallel, batch * heads, 1, [&](int64_t begin, int64_t end) {
    float tile[kTileRows * kTileCols];
    float rowTerm[kTileRows];
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / heads, h = bh % heads;
      const float *q = qkv + b * seq * ldQkv + h * dh;
      const float *k = q + width;
      const float *v = q + 2 * width;
      float *dq = dqkv + b * seq * ldQkv + h * dh;
      float *dk = dq + width;
      float *dv = dq + 2 * width;
      const float *p = probs + (b * heads + h) * seq * seq;
      const float *c = context + b * seq * width + h * dh;
      const float *dc = dcontext + b * seq * width + h * dh;

      // dv = p^T dc. Causal: row j of dv only gets queries i >= j.
      if (!causal) {
        gemm(true, false, seq, dh, seq, 1.0f, p, seq, dc, width, 0.0f, dv,
             ldQkv);
      } else {
        for (int64_t j0 = 0; j0 < seq; j0 += kTileRows) {
          int64_t j1 = std::min(j0 + kTileRows, seq);
          gemm(true, false, j1 - j0, dh, seq - j0, 1.0f, p + j0 * seq + j0,
               seq, dc + j0 * width, width, 0.0f, dv + j0 * ldQkv, ldQkv);
        }
      }

      for (int64_t i0 = 0; i0 < seq; i0 += kTileRows) {
        int64_t i1 = std::min(i0 + kTileRows, seq);
        int64_t rows = i1 - i0;
        // sum_j p_ij dp_ij = dc_i . c_i, since c_i = sum_j p_ij v_j.
        for (int64_t i = 0; i < rows; ++i)
          rowTerm[i] = dot(dc + (i0 + i) * width, c + (i0 + i) * width, dh);
        int64_t keyEnd = causal ? i1 : seq;
        for (int64_t j0 = 0; j0 < keyEnd; j0 += kTileCols) {
          int64_t j1 = std::min(j0 + kTileCols, keyEnd);
          int64_t cols = j1 - j0;
          // tile = dp = dc v^T, then the scaled score gradient
          // scale * p (dp - rowTerm); masked probabilities are 0, so are their
          // gradients.
          gemm(false, true, rows, cols, dh, 1.0f, dc + i0 * width, width,
               v + j0 * ldQkv, ldQkv, 0.0f, tile, cols);
          for (int64_t i = 0; i < rows; ++i) {
            const float *pRow = p + (i0 + i) * seq + j0;
            float *tRow = tile + i * cols;
            float term = rowTerm[i];
            for (int64_t j = 0; j < cols; ++j)
              tRow[j] = scale * pRow[j] * (tRow[j] - term);
          }
          gemm(false, false, rows, dh, cols, 1.0f, tile, cols, k + j0 * ldQkv,
               ldQkv, 1.0f, dq + i0 * ldQkv, ldQkv);
          gemm(true, false, cols, dh, rows, 1.0f, tile, cols, q + i0 * ldQkv,
               ldQkv, 1.0f, dk + j0 * ldQkv, ldQkv);
        }
      }
    }
  });

  if (dx)
    gemmSplit(parallel, false, true, tokens, width, ldQkv, 1.0f, dqkv, ldQkv,
              wqkv, ldQkv, 0.0f, dx, width);
  if (dwqkv)
    gemmSplit(parallel, true, false, width, ldQkv, tokens, 1.0f, x, width, dqkv,
              ldQkv, 1.0f, dwqkv, ldQkv);
  if (dqkvBias)
    addColumnSums(parallel, dqkv, dqkvBias, tokens, ldQkv);
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
