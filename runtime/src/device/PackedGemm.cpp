//===- PackedGemm.cpp - Weights packed once per step for the CPU ----------===//
//
// The kernel keeps a 12 x 32 block of C in 24 AVX-512 registers and, for
// each k, multiplies one broadcast element of each of A's 12 rows by the
// panel's row (two registers, contiguous in the packed copy): 24 FMAs for 2
// loads and 12 broadcasts. (8 x 32 reached 166 GFLOP/s, 12 x 32 177, on the
// MLP's 512-wide products on this machine's Xeon.) Tails: fewer rows take
// the same kernel with fewer accumulators, a narrower last panel masks its
// loads and stores of C (its packed columns are zeros).
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/device/PackedGemm.h"

#include <algorithm>
#include <cstring>
#include <new>

#if defined(__x86_64__)
#include <immintrin.h>
#define GPIPE_PACKED_GEMM_TARGET __attribute__((target("avx512f")))
#endif

using namespace gpipe::runtime::device;

bool gpipe::runtime::device::packedGemmSupported() {
#if defined(__x86_64__)
  static const bool supported = __builtin_cpu_supports("avx512f");
  return supported;
#else
  return false;
#endif
}

void PackedMatrix::resize(int64_t k, int64_t n) {
  rows = k;
  cols = n;
  const int64_t needed = panels() * k * kPanel;
  if (needed <= capacity)
    return;
  // 64-byte rows of a panel: aligned loads, one cache line per half row.
  const size_t bytes = (size_t(needed) * sizeof(float) + 63) / 64 * 64;
  storage.reset(static_cast<float *>(std::aligned_alloc(64, bytes)));
  if (!storage) {
    capacity = 0;
    throw std::bad_alloc();
  }
  capacity = needed;
}

void PackedMatrix::packPanels(const float *b, int64_t ldb, bool transposed,
                              int64_t begin, int64_t end) {
  for (int64_t p = begin; p < end; ++p) {
    float *dst = storage.get() + p * rows * kPanel;
    const int64_t first = p * kPanel;
    const int64_t width = std::min(kPanel, cols - first);
    if (width < kPanel)
      std::memset(dst, 0, size_t(rows * kPanel) * sizeof(float));
    if (!transposed) {
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(dst + r * kPanel, b + r * ldb + first,
                    size_t(width) * sizeof(float));
      continue;
    }
    // Column j of the panel is row first + j of the stored matrix. Row by
    // row of the panel: each of the 32 source lines in flight serves 16
    // consecutive rows (three times faster than column by column).
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < width; ++j)
        dst[r * kPanel + j] = b[(first + j) * ldb + r];
  }
}

int64_t PackedWeightCache::bytes() const {
  int64_t total = 0;
  for (const auto &entry : entries)
    total += entry.second.matrix.bytes();
  return total;
}

#if defined(__x86_64__)
namespace {

/// C[0..R) x [0..32) (masked by lo, hi) = alpha A[0..R) panel + beta C.
template <int R>
GPIPE_PACKED_GEMM_TARGET void
multiplyBlock(const float *a, int64_t lda, const float *panel, int64_t k,
              float alpha, float beta, float *c, int64_t ldc, __mmask16 lo,
              __mmask16 hi) {
  __m512 left[R], right[R];
  // Unrolled at any -O level: the accumulators must stay in registers.
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    left[r] = right[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    const __m512 w0 = _mm512_load_ps(panel + i * PackedMatrix::kPanel);
    const __m512 w1 = _mm512_load_ps(panel + i * PackedMatrix::kPanel + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + i]);
      left[r] = _mm512_fmadd_ps(x, w0, left[r]);
      right[r] = _mm512_fmadd_ps(x, w1, right[r]);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float *row = c + r * ldc;
    __m512 v0 = _mm512_mul_ps(left[r], scale);
    __m512 v1 = _mm512_mul_ps(right[r], scale);
    if (beta != 0.0f) {
      const __m512 keep = _mm512_set1_ps(beta);
      v0 = _mm512_fmadd_ps(keep, _mm512_maskz_loadu_ps(lo, row), v0);
      v1 = _mm512_fmadd_ps(keep, _mm512_maskz_loadu_ps(hi, row + 16), v1);
    }
    _mm512_mask_storeu_ps(row, lo, v0);
    _mm512_mask_storeu_ps(row + 16, hi, v1);
  }
}

using BlockKernel = void (*)(const float *, int64_t, const float *, int64_t,
                             float, float, float *, int64_t, __mmask16,
                             __mmask16);
constexpr int kBlockRows = int(kPackedGemmRows);
constexpr BlockKernel kBlockOfRows[kBlockRows + 1] = {
    nullptr,          multiplyBlock<1>, multiplyBlock<2>,  multiplyBlock<3>,
    multiplyBlock<4>, multiplyBlock<5>, multiplyBlock<6>,  multiplyBlock<7>,
    multiplyBlock<8>, multiplyBlock<9>, multiplyBlock<10>, multiplyBlock<11>,
    multiplyBlock<12>};

} // namespace

GPIPE_PACKED_GEMM_TARGET void gpipe::runtime::device::packedGemm(
    const float *a, int64_t lda, const PackedMatrix &b, float alpha, float beta,
    float *c, int64_t ldc, int64_t rowBegin, int64_t rowEnd, int64_t panelBegin,
    int64_t panelEnd) {
  const int64_t k = b.k();
  for (int64_t p = panelBegin; p < panelEnd; ++p) {
    const int64_t first = p * PackedMatrix::kPanel;
    const int64_t width = std::min(PackedMatrix::kPanel, b.n() - first);
    const __mmask16 lo = __mmask16((1u << std::min<int64_t>(width, 16)) - 1);
    const __mmask16 hi = __mmask16(width > 16 ? (1u << (width - 16)) - 1 : 0u);
    for (int64_t r = rowBegin; r < rowEnd; r += kBlockRows) {
      const int64_t rows = std::min<int64_t>(kBlockRows, rowEnd - r);
      kBlockOfRows[rows](a + r * lda, lda, b.panel(p), k, alpha, beta,
                         c + r * ldc + first, ldc, lo, hi);
    }
  }
}
#else
void gpipe::runtime::device::packedGemm(const float *, int64_t,
                                        const PackedMatrix &, float, float,
                                        float *, int64_t, int64_t, int64_t,
                                        int64_t, int64_t) {
  std::abort(); // packedGemmSupported() is false off x86-64
}
#endif
