//===- CpuAttention.cpp - Multi-head self-attention on the CPU, fused -----===//
//
// FlashAttention-2's algorithm (Dao, 2023) on the CPU: neither pass holds a
// [seq, seq] matrix, only tiles of kTileRows queries by kTileCols keys on the
// stack.
//
// Forward, per head and tile of queries: each tile of keys' scores is a GEMM
// into the stack; an online softmax keeps each query's running max and sum of
// exponentials, and multiplies its context row so far (the accumulator, in
// place in `context`) by exp(old max - new max) when the max grows; the
// context then adds the tile's exponentials times its values. At the end each
// context row is divided by its sum, and the query's log-sum-exp (max + log
// sum) is saved.
//
// Backward, per head and tile of keys, over strips of the queries that see
// them: the probabilities are recomputed as exp(score - lse), and the score
// gradient is p (dp - rowTerm), where the row term sum_j p_ij dp_ij equals
// dContext_i . context_i. The key tile's dk and dv are products over the
// strip's queries; its share of dq adds onto dq.
//
// Every head runs on one thread in a fixed order, so the bits do not depend
// on the threads.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"

#include "kernels/CpuLinearAlgebra.h"
#include "kernels/CpuVectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::cpu::simd;
using gpipe::runtime::cpu::linalg::dot;
using gpipe::runtime::cpu::linalg::gemm;

// Float8 stays inside the inlined kernels (CpuVectorMath.h); GCC reports
// the ABI note where it emits the lambdas, at the end of the file.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

/// The forward's tile of queries by keys: 64 KiB of stack.
constexpr int64_t kTileRows = 128;
constexpr int64_t kTileCols = 128;
/// The backward's strip of queries by a tile of keys (two on the heap, up to
/// 256 KiB each): the inner dimension of its dk and dv products.
constexpr int64_t kStripRows = 512;

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

/// gemm with C's rows split by `parallel`, in whole cpu::kBlasRowGrain
/// parts: each element is the same dot product over k, the bits of one call.
void gemmSplit(const cpu::ParallelFor &parallel, bool transA, bool transB,
               int64_t m, int64_t n, int64_t k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, float *c,
               int64_t ldc) {
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

/// The keys of a tile [j0, j0 + cols) that `query` sees: the first ones.
int64_t visibleIn(int64_t query, int64_t j0, int64_t cols, bool causal) {
  return causal ? std::clamp<int64_t>(query + 1 - j0, 0, cols) : cols;
}

template <class F> GPIPE_VECTOR_INLINE typename IntOf<F>::type laneIndices() {
  typename IntOf<F>::type lane;
  for (int64_t l = 0; l < kLanesOf<F>; ++l)
    lane[l] = int32_t(l);
  return lane;
}

/// One query's row of a score tile in the online softmax: row[0, n) are the
/// scores it sees, row[n, cols) masked. Raises *max to the max of them and
/// the earlier tiles', replaces the row by exp(score - *max) (0 where
/// masked) and returns the row's sum; *rescale = exp(old max - new max), by
/// which the query's sum and context so far are to be multiplied. The max
/// skips a NaN, its exponential does not: the row's sum becomes NaN.
template <class F>
GPIPE_VECTOR_INLINE float onlineSoftmaxRowOn(float *row, int64_t n,
                                             int64_t cols, float *max,
                                             float *rescale) {
  const float inf = std::numeric_limits<float>::infinity();
  const auto lane = laneIndices<F>();
  F top = F{} - inf;
  forEachBlock<F>(n, [&](int64_t j, int64_t count) GPIPE_LAMBDA_INLINE {
    F v = load<F>(row + j, count, -inf);
    top = v > top ? v : top;
  });
  float m = *max;
  for (int64_t l = 0; l < kLanesOf<F>; ++l)
    m = top[l] > m ? top[l] : m;
  *rescale = m == *max ? 1.0f : std::exp(*max - m);
  *max = m;
  Float4 acc = {};
  forEachBlock<F>(cols, [&](int64_t j, int64_t count) GPIPE_LAMBDA_INLINE {
    F e = fastExp(load<F>(row + j, count) - m);
    e = lane + int32_t(j) < int32_t(n) ? e : F{};
    addInFours(acc, e);
    store<F>(row + j, e, count);
  });
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/// A tile row's probabilities from its query's log-sum-exp: row[j] =
/// exp(score - lse) for the n keys the query sees, 0 after them.
template <class F>
GPIPE_VECTOR_INLINE void probabilitiesOn(float *row, int64_t n, int64_t cols,
                                         float lse) {
  const auto lane = laneIndices<F>();
  forEachBlock<F>(cols, [&](int64_t j, int64_t count) GPIPE_LAMBDA_INLINE {
    F e = fastExp(load<F>(row + j, count) - lse);
    store<F>(row + j, lane + int32_t(j) < int32_t(n) ? e : F{}, count);
  });
}

#if defined(GPIPE_AVX2)
GPIPE_AVX2 float onlineSoftmaxRowAvx2(float *row, int64_t n, int64_t cols,
                                      float *max, float *rescale) {
  return onlineSoftmaxRowOn<Float8>(row, n, cols, max, rescale);
}
GPIPE_AVX2 void probabilitiesAvx2(float *row, int64_t n, int64_t cols,
                                  float lse) {
  probabilitiesOn<Float8>(row, n, cols, lse);
}
#endif

/// On eight lanes where the CPU has AVX2 (the same bits: the sums go in
/// fours).
float onlineSoftmaxRow(float *row, int64_t n, int64_t cols, float *max,
                       float *rescale) {
#if defined(GPIPE_AVX2)
  if (hasAvx2())
    return onlineSoftmaxRowAvx2(row, n, cols, max, rescale);
#endif
  return onlineSoftmaxRowOn<Float4>(row, n, cols, max, rescale);
}
void probabilities(float *row, int64_t n, int64_t cols, float lse) {
#if defined(GPIPE_AVX2)
  if (hasAvx2())
    return probabilitiesAvx2(row, n, cols, lse);
#endif
  probabilitiesOn<Float4>(row, n, cols, lse);
}

/// One head's q, k, v (rows of ldQkv floats, dh wide) and its context rows
/// (ldContext floats apart).
struct Head {
  const float *q, *k, *v;
  float *context;
  int64_t ldQkv, ldContext, seq, dh;
  float scale;
  bool causal;
};

/// Queries [i0, i0 + rows) of one head: their context rows and lse[i0, ...).
void attendQueryTile(const Head &h, float *lse, int64_t i0, int64_t rows) {
  float tile[kTileRows * kTileCols];
  float max[kTileRows], sum[kTileRows], rescale[kTileRows];
  std::fill(max, max + rows, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + rows, 0.0f);
  float *context = h.context + i0 * h.ldContext;
  const int64_t keyEnd = h.causal ? i0 + rows : h.seq;
  for (int64_t j0 = 0; j0 < keyEnd; j0 += kTileCols) {
    const int64_t cols = std::min(kTileCols, keyEnd - j0);
    gemm(false, true, rows, cols, h.dh, h.scale, h.q + i0 * h.ldQkv, h.ldQkv,
         h.k + j0 * h.ldQkv, h.ldQkv, 0.0f, tile, cols);
    for (int64_t i = 0; i < rows; ++i) {
      float partial =
          onlineSoftmaxRow(tile + i * cols, visibleIn(i0 + i, j0, cols, h.causal),
                           cols, &max[i], &rescale[i]);
      sum[i] = sum[i] * rescale[i] + partial;
    }
    // The first tile writes the context rows, the others rescale and add.
    if (j0 > 0)
      for (int64_t i = 0; i < rows; ++i)
        if (rescale[i] != 1.0f) // NaN too
          for (int64_t d = 0; d < h.dh; ++d)
            context[i * h.ldContext + d] *= rescale[i];
    gemm(false, false, rows, h.dh, cols, 1.0f, tile, cols, h.v + j0 * h.ldQkv,
         h.ldQkv, j0 > 0 ? 1.0f : 0.0f, context, h.ldContext);
  }
  for (int64_t i = 0; i < rows; ++i) {
    const float inv = 1.0f / sum[i];
    for (int64_t d = 0; d < h.dh; ++d)
      context[i * h.ldContext + d] *= inv;
    lse[i0 + i] = max[i] + std::log(sum[i]);
  }
}

} // namespace

void cpu::attentionForward(const float *x, const float *wqkv, const float *wo,
                           const float *qkvBias, const float *outBias, float *y,
                           float *qkv, float *lse, float *context,
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

  // Each (sequence, head, query tile) writes its own context rows and lse.
  const int64_t tiles = (seq + kTileRows - 1) / kTileRows;
  forRange(parallel, batch * heads * tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t bh = u / tiles, i0 = u % tiles * kTileRows;
      const int64_t b = bh / heads, h = bh % heads;
      const float *q = qkv + b * seq * ldQkv + h * dh;
      Head head{q,     q + width, q + 2 * width, context + b * seq * width + h * dh,
                ldQkv, width,     seq,           dh,
                scale, causal};
      attendQueryTile(head, lse + bh * seq, i0, std::min(kTileRows, seq - i0));
    }
  });

  seedRows(outBias, y, tokens, width);
  gemmSplit(parallel, false, false, tokens, width, width, 1.0f, context, width,
            wo, width, outBias ? 1.0f : 0.0f, y, width);
}

void cpu::attentionBackward(const float *dy, const float *x, const float *wqkv,
                            const float *wo, const float *qkv, const float *lse,
                            const float *context, float *dx, float *dwqkv,
                            float *dwo, float *dqkvBias, float *doutBias,
                            float *scratch, int64_t batch, int64_t seq,
                            int64_t width, int64_t heads, bool causal,
                            const ParallelFor &parallel) {
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
  // dq adds up over the tiles of keys (dk and dv are written whole).
  std::fill(dqkv, dqkv + tokens * ldQkv, 0.0f);

  // Each (sequence, head) pair writes only its own columns of dqkv: per
  // tile of keys, its dk and dv over all the queries that see them (GEMMs
  // whose inner dimension is the queries, in strips of kStripRows), and
  // their share of dq.
  forRange(parallel, batch * heads, 1, [&](int64_t begin, int64_t end) {
    const int64_t stripFloats =
        std::min(kStripRows, seq) * std::min(kTileCols, seq);
    std::vector<float> strips(2 * stripFloats);
    float *probs = strips.data(), *dscores = probs + stripFloats;
    std::vector<float> rowTerm(seq);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / heads, h = bh % heads;
      const float *q = qkv + b * seq * ldQkv + h * dh;
      const float *k = q + width;
      const float *v = q + 2 * width;
      float *dq = dqkv + b * seq * ldQkv + h * dh;
      float *dk = dq + width;
      float *dv = dq + 2 * width;
      const float *c = context + b * seq * width + h * dh;
      const float *dc = dcontext + b * seq * width + h * dh;
      const float *headLse = lse + bh * seq;
      for (int64_t i = 0; i < seq; ++i)
        rowTerm[i] = dot(dc + i * width, c + i * width, dh);

      for (int64_t j0 = 0; j0 < seq; j0 += kTileCols) {
        const int64_t cols = std::min(kTileCols, seq - j0);
        const int64_t firstQuery = causal ? j0 : 0; // the first that sees j0
        for (int64_t i0 = firstQuery; i0 < seq; i0 += kStripRows) {
          const int64_t rows = std::min(kStripRows, seq - i0);
          // The first strip writes the tile's dk and dv, the others add.
          const float beta = i0 == firstQuery ? 0.0f : 1.0f;
          gemm(false, true, rows, cols, dh, scale, q + i0 * ldQkv, ldQkv,
               k + j0 * ldQkv, ldQkv, 0.0f, probs, cols);
          for (int64_t i = 0; i < rows; ++i)
            probabilities(probs + i * cols, visibleIn(i0 + i, j0, cols, causal),
                          cols, headLse[i0 + i]);
          // dv = p^T dc; dp = dc v^T; dscores = scale p (dp - rowTerm), 0
          // where masked (p is).
          gemm(true, false, cols, dh, rows, 1.0f, probs, cols, dc + i0 * width,
               width, beta, dv + j0 * ldQkv, ldQkv);
          gemm(false, true, rows, cols, dh, 1.0f, dc + i0 * width, width,
               v + j0 * ldQkv, ldQkv, 0.0f, dscores, cols);
          for (int64_t i = 0; i < rows; ++i) {
            const float *pRow = probs + i * cols;
            float *dRow = dscores + i * cols;
            const float term = rowTerm[i0 + i];
            for (int64_t j = 0; j < cols; ++j)
              dRow[j] = scale * pRow[j] * (dRow[j] - term);
          }
          gemm(true, false, cols, dh, rows, 1.0f, dscores, cols,
               q + i0 * ldQkv, ldQkv, beta, dk + j0 * ldQkv, ldQkv);
          gemm(false, false, rows, dh, cols, 1.0f, dscores, cols,
               k + j0 * ldQkv, ldQkv, 1.0f, dq + i0 * ldQkv, ldQkv);
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
