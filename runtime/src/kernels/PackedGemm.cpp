//===- PackedGemm.cpp - Weights packed once per step for the CPU ----------===//
//
// The kernel keeps a 12 x 32 block of C in 24 AVX-512 registers and, for
// each k, multiplies one broadcast element of each of A's 12 rows by the
// panel's row (two registers, contiguous in the packed copy): 24 FMAs for 2
// loads and 12 broadcasts. (8 x 32 reached 166 GFLOP/s, 12 x 32 177, on the
// MLP's 512-wide products on this machine's Xeon.) Tails: fewer rows take
// the same kernel with fewer accumulators, a narrower last panel masks its
// loads and stores of C (its packed columns are zeros). Without AVX-512, an
// AVX2 kernel (with FMA) keeps 3 x 32 of C in 12 of its 16 registers; each
// element is the same chain of fused multiply-adds, so the two kernels give
// the same bits.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/PackedGemm.h"

#include <algorithm>
#include <cstring>
#include <new>

#if defined(__x86_64__)
#include <immintrin.h>
#define GPIPE_PACKED_GEMM_TARGET __attribute__((target("avx512f")))
#define GPIPE_PACKED_GEMM_AVX2 __attribute__((target("avx2,fma")))
#endif

using namespace gpipe::runtime::device;

#if defined(__x86_64__)
static bool hasAvx512() {
  static const bool supported = __builtin_cpu_supports("avx512f");
  return supported;
}
static bool hasAvx2Fma() {
  static const bool supported =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
}
#endif

bool gpipe::runtime::device::packedGemmSupported() {
#if defined(__x86_64__)
  return hasAvx512() || hasAvx2Fma();
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

#if defined(__x86_64__)
/// dst[c ldd + r] = src[r lds + c] for r, c < 16: sixteen rows loaded, four
/// rounds of shuffles, sixteen rows stored.
GPIPE_PACKED_GEMM_TARGET static void
transpose16x16(const float *src, int64_t lds, float *dst, int64_t ldd) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i)
    r[i] = _mm512_loadu_ps(src + i * lds);
    // Pairs of rows interleaved, then pairs of pairs: each 128-bit lane
    // holds a 4 x 4 block transposed.
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Then the 4 x 4 blocks themselves moved across lanes.
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i)
    _mm512_storeu_ps(dst + i * ldd, r[i]);
}

/// The same for 8 x 8 with AVX2: the classic three rounds of unpacks,
/// shuffles and 128-bit lane permutes.
GPIPE_PACKED_GEMM_AVX2 static void transpose8x8(const float *src, int64_t lds,
                                                float *dst, int64_t ldd) {
  __m256 r[8], t[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    r[i] = _mm256_loadu_ps(src + i * lds);
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    _mm256_storeu_ps(dst + i * ldd, t[i]);
}
#endif

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
    // Column j of the panel is row first + j of the stored matrix. Blocks
    // of 16 x 16 through registers with AVX-512, 8 x 8 with AVX2 (2 and 8
    // times as fast as the scalar copy, docs/Benchmarks.md); the rest row by
    // row of the panel, each of the 32 source lines in flight serving 16
    // consecutive rows (three times faster than column by column).
    int64_t done = 0;
#if defined(__x86_64__)
    const int64_t side = hasAvx512() ? 16 : hasAvx2Fma() ? 8 : 0;
    if (side) {
      done = rows / side * side;
      for (int64_t j = 0; j + side <= width; j += side)
        for (int64_t r = 0; r < done; r += side) {
          const float *from = b + (first + j) * ldb + r;
          float *to = dst + r * kPanel + j;
          if (side == 16)
            transpose16x16(from, ldb, to, kPanel);
          else
            transpose8x8(from, ldb, to, kPanel);
        }
      for (int64_t r = 0; r < done; ++r)
        for (int64_t j = width / side * side; j < width; ++j)
          dst[r * kPanel + j] = b[(first + j) * ldb + r];
    }
#endif
    for (int64_t r = done; r < rows; ++r)
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

/// The same products with 8-float vectors (AVX2 and FMA): C[0..R) x
/// [0..width) of one panel. Each element is the same chain of fused
/// multiply-adds over k as in multiplyBlock, so both kernels give the same
/// bits; R = 3 keeps the 12 accumulators in the 16 registers.
/// `ahead` names `aheadRows` rows of the panel to multiply next, fetched
/// into the cache while this one computes. alpha and beta come by address:
/// as values they held one of the 16 registers through the loop, which then
/// kept an accumulator in memory.
template <int R>
GPIPE_PACKED_GEMM_AVX2 void
multiplyBlockAvx2(const float *a, int64_t lda, const float *panel, int64_t k,
                  const float &alpha, const float &beta, float *c, int64_t ldc,
                  int64_t width, const float *ahead, int64_t aheadRows) {
  __m256 acc[R][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g)
      acc[r][g] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    if (i < aheadRows) {
      _mm_prefetch(
          reinterpret_cast<const char *>(ahead + i * PackedMatrix::kPanel),
          _MM_HINT_T0);
      _mm_prefetch(
          reinterpret_cast<const char *>(ahead + i * PackedMatrix::kPanel + 16),
          _MM_HINT_T0);
    }
    __m256 x[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      x[r] = _mm256_broadcast_ss(a + r * lda + i);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      __m256 w = _mm256_load_ps(panel + i * PackedMatrix::kPanel + 8 * g);
      // In a register, loaded once: at -O3 GCC folded the load into each
      // of the R multiply-adds, 15 loads a step for 12 of them, more than
      // the two load ports keep up with. Clang loads it once without being
      // told, and with the barrier it kept three accumulators in memory
      // (half the speed).
#if !defined(__clang__)
      __asm__("" : "+x"(w));
#endif
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        acc[r][g] = _mm256_fmadd_ps(x[r], w, acc[r][g]);
    }
  }
  const __m256 scale = _mm256_set1_ps(alpha);
  const __m256 keep = _mm256_set1_ps(beta);
  // A masked store is microcoded on AMD's cores: whole panels store
  // plainly. (No control flow in these loops: a loop left rolled would
  // keep the accumulators in memory.)
  if (width >= PackedMatrix::kPanel) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        float *at = c + r * ldc + 8 * g;
        __m256 v = _mm256_mul_ps(acc[r][g], scale);
        if (beta != 0.0f)
          v = _mm256_fmadd_ps(keep, _mm256_loadu_ps(at), v);
        _mm256_storeu_ps(at, v);
      }
    return;
  }
  __m256i mask[4];
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g)
    mask[g] = _mm256_cmpgt_epi32(
        _mm256_set1_epi32(int(std::min<int64_t>(width, 32)) - 8 * g), lane);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float *row = c + r * ldc;
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      if (8 * g >= width)
        break;
      __m256 v = _mm256_mul_ps(acc[r][g], scale);
      if (beta != 0.0f)
        v = _mm256_fmadd_ps(keep, _mm256_maskload_ps(row + 8 * g, mask[g]), v);
      _mm256_maskstore_ps(row + 8 * g, mask[g], v);
    }
  }
}

using Avx2Kernel = void (*)(const float *, int64_t, const float *, int64_t,
                            const float &, const float &, float *, int64_t,
                            int64_t, const float *, int64_t);
constexpr Avx2Kernel kAvx2BlockOfRows[4] = {
    nullptr, multiplyBlockAvx2<1>, multiplyBlockAvx2<2>, multiplyBlockAvx2<3>};

/// Rows [rowBegin, rowEnd) in blocks of 3, with a block of 2 wherever 3
/// would leave a lone row behind: a lone row would keep 4 of the 12
/// accumulators busy (64 rows would end in one). That makes (count + 2) / 3
/// blocks.
GPIPE_PACKED_GEMM_AVX2 void
packedGemmAvx2(const float *a, int64_t lda, const PackedMatrix &b, float alpha,
               float beta, float *c, int64_t ldc, int64_t rowBegin,
               int64_t rowEnd, int64_t panelBegin, int64_t panelEnd) {
  const int64_t count = rowEnd - rowBegin, k = b.k();
  if (count <= 0)
    return;
  const int64_t blocks = (count + 2) / 3;
  // Every block brings a share of the next panel into the cache, rather
  // than the next panel's first block streaming it from L3 alone (with few
  // rows per call that block is a large share of the product).
  const int64_t aheadShare = (k + blocks - 1) / blocks;
  for (int64_t p = panelBegin; p < panelEnd; ++p) {
    const int64_t first = p * PackedMatrix::kPanel;
    const int64_t width = std::min(PackedMatrix::kPanel, b.n() - first);
    const float *next = p + 1 < panelEnd ? b.panel(p + 1) : nullptr;
    int64_t r = rowBegin;
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t left = rowEnd - r;
      const int64_t rows =
          left % 3 == 1 && left > 1 ? 2 : std::min<int64_t>(3, left);
      const int64_t aheadFirst = std::min(k, block * aheadShare);
      const int64_t aheadRows =
          next ? std::min(k, aheadFirst + aheadShare) - aheadFirst : 0;
      kAvx2BlockOfRows[rows](
          a + r * lda, lda, b.panel(p), k, alpha, beta, c + r * ldc + first,
          ldc, width, next ? next + aheadFirst * PackedMatrix::kPanel : nullptr,
          aheadRows);
      r += rows;
    }
  }
}

GPIPE_PACKED_GEMM_TARGET void
packedGemmAvx512(const float *a, int64_t lda, const PackedMatrix &b,
                 float alpha, float beta, float *c, int64_t ldc,
                 int64_t rowBegin, int64_t rowEnd, int64_t panelBegin,
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

} // namespace

void gpipe::runtime::device::packedGemm(const float *a, int64_t lda,
                                        const PackedMatrix &b, float alpha,
                                        float beta, float *c, int64_t ldc,
                                        int64_t rowBegin, int64_t rowEnd,
                                        int64_t panelBegin, int64_t panelEnd) {
  if (hasAvx512())
    packedGemmAvx512(a, lda, b, alpha, beta, c, ldc, rowBegin, rowEnd,
                     panelBegin, panelEnd);
  else
    packedGemmAvx2(a, lda, b, alpha, beta, c, ldc, rowBegin, rowEnd, panelBegin,
                   panelEnd);
}
#else
void gpipe::runtime::device::packedGemm(const float *, int64_t,
                                        const PackedMatrix &, float, float,
                                        float *, int64_t, int64_t, int64_t,
                                        int64_t, int64_t) {
  std::abort(); // packedGemmSupported() is false off x86-64
}
#endif
