//===- CpuElementwiseKernels.cpp - Element-wise CPU kernels ---------------===//
//
// relu, both GELUs, tanh, dropout and add on contiguous f32 buffers
// (CpuKernels.h). Both GELUs, tanh and dropout run on vectors of eight floats
// (AVX2) or four (dropout's forward: one column at a time), with the same
// bits, with CpuVectorMath.h's exp, tanh and erfc; the exact GELU keeps the
// device kernels' formula (DeviceKernels.h), with the erfc of Cephes's fits
// instead of libm's.
//
// Dropout draws DropoutHash.h's mask, bit for bit, without its float: the
// element is kept iff u * 2^-24 >= rate, u the hash's top 24 bits, that is
// iff u >= ceil(rate * 2^24) (scaling by 2^24 is exact). So the kernel
// compares integers, and the AVX2 clone hashes four columns per vector
// (splitmix64's 64-bit products, each composed from three 32-bit ones; on
// SSE2's two lanes, without a 64-bit compare, the scalar loop was faster).
//
//===----------------------------------------------------------------------===//

// Float8 and the dropout hash's four 64-bit lanes stay inside the inlined
// kernels (CpuVectorMath.h, DropoutHash.h's mix64); GCC reports the ABI note
// where it emits them, in the headers and at the end of the file.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "gpipe/runtime/kernels/CpuKernels.h"
#include "gpipe/runtime/kernels/DeviceKernels.h"
#include "gpipe/runtime/kernels/DropoutHash.h"

#include "kernels/CpuVectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace gpipe::runtime;
using namespace gpipe::runtime::cpu::simd;
using gpipe::runtime::device::dropoutRowKey;
using gpipe::runtime::device::kGolden;
using gpipe::runtime::device::mix64;

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
} // namespace

// Both operands of each select are loaded first, so that the loops compile
// to vector selects: a conditional load stays a branch, which half the
// elements of a layer mispredict.
//
// PyTorch's NaN semantics: relu(NaN) = NaN, and the gradient passes where
// the value is NaN (threshold_backward: x <= 0 ? 0 : dy), so a NaN cannot
// become a finite loss. Hence `x <= 0 ? 0 : ...`, false for NaN: the same
// two instructions (cmpleps, andnps) as `x > 0 ? ... : 0`, and relu(-0) stays
// +0 (max(0, x) would give -0).
void cpu::reluForward(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    y[i] = v <= 0.0f ? 0.0f : v;
  }
}

void cpu::reluBackward(const float *x, const float *dy, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i], g = dy[i];
    dx[i] = v <= 0.0f ? 0.0f : g;
  }
}

// GELU goes through 1 + tanh(u) = 2 / (1 + exp(-2u)) and
// 1 - tanh(u)^2 = 4 e / (1 + e)^2 with e = exp(-2u): neither cancels where
// tanh(u) is close to -1 or 1 (the float tanh is then exactly +-1, and
// 1 + t or 1 - t^2 would lose every digit). exp saturates at a finite value,
// so e / (1 + e) never becomes inf / inf.

namespace {
// Each kernel on vectors of F: Float4 everywhere, Float8 in the AVX2 clones.
// The lambdas are inlined too, so that the clone's target compiles them.

template <class F>
GPIPE_VECTOR_INLINE void geluForwardOn(const float *x, float *y, int64_t n) {
  forEachBlock<F>(n, [&](int64_t i, int64_t count) GPIPE_LAMBDA_INLINE {
    F v = load<F>(x + i, count);
    F u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
    F onePlusTanh = 2.0f / (1.0f + fastExp(-2.0f * u));
    store<F>(y + i, 0.5f * v * onePlusTanh, count);
  });
}

template <class F>
GPIPE_VECTOR_INLINE void geluBackwardOn(const float *x, const float *dy,
                                        float *dx, int64_t n) {
  forEachBlock<F>(n, [&](int64_t i, int64_t count) GPIPE_LAMBDA_INLINE {
    F v = load<F>(x + i, count);
    F v2 = v * v;
    F u = kSqrt2OverPi * v * (1.0f + kGeluCubic * v2);
    F e = fastExp(-2.0f * u);
    F inv = 1.0f / (1.0f + e);
    F onePlusTanh = 2.0f * inv;
    F sech2 = 4.0f * (e * inv) * inv;
    // d/dv [0.5 v (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 v sech^2(u) u'.
    F du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v2);
    F d = 0.5f * onePlusTanh + 0.5f * v * sech2 * du;
    store<F>(dx + i, load<F>(dy + i, count) * d, count);
  });
}

// x Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2, as DeviceKernels.h's
// geluErfOf, on vectors (fastErfc; libm's erfcf per element was 4.8x the
// tanh GELU's time).
template <class F>
GPIPE_VECTOR_INLINE void geluErfForwardOn(const float *x, float *y, int64_t n) {
  forEachBlock<F>(n, [&](int64_t i, int64_t count) GPIPE_LAMBDA_INLINE {
    F v = load<F>(x + i, count);
    store<F>(y + i, v * (0.5f * fastErfc(-kInvSqrt2 * v)), count);
  });
}

// Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
template <class F>
GPIPE_VECTOR_INLINE void geluErfBackwardOn(const float *x, const float *dy,
                                           float *dx, int64_t n) {
  forEachBlock<F>(n, [&](int64_t i, int64_t count) GPIPE_LAMBDA_INLINE {
    F v = load<F>(x + i, count);
    F slope = 0.5f * fastErfc(-kInvSqrt2 * v) +
              v * kInvSqrt2Pi * fastExp(-0.5f * v * v);
    store<F>(dx + i, load<F>(dy + i, count) * slope, count);
  });
}

template <class F>
GPIPE_VECTOR_INLINE void tanhForwardOn(const float *x, float *y, int64_t n) {
  forEachBlock<F>(n, [&](int64_t i, int64_t count) GPIPE_LAMBDA_INLINE {
    store<F>(y + i, fastTanh(load<F>(x + i, count)), count);
  });
}

/// A mask's bytes, one per lane of F.
template <class F> struct BytesOf;
template <> struct BytesOf<Float4> {
  using type = uint8_t __attribute__((vector_size(4)));
};
template <> struct BytesOf<Float8> {
  using type = uint8_t __attribute__((vector_size(8)));
};

// Dropout: one row at a time, mask[j] = u(key, j) >= threshold and
// y[j] = mask[j] ? x[j] * keepScale : x[j] - x[j]. A dropped element is
// x - x: +0 for a finite x, NaN for a NaN or an infinity, as
// PyTorch's x * 0, so dropout hides no NaN. The scalar hash walks a counter
// (one 64-bit add per column instead of a product).
void dropoutRow(const float *x, float *y, uint8_t *mask, int64_t cols,
                uint64_t key, int64_t threshold, float keepScale,
                int64_t from = 0) {
  uint64_t counter = key + uint64_t(from + 1) * kGolden;
  for (int64_t j = from; j < cols; ++j, counter += kGolden)
    mask[j] = int64_t(mix64(counter) >> 40) >= threshold;
  for (int64_t j = from; j < cols; ++j) {
    float v = x[j];
    y[j] = mask[j] ? v * keepScale : v - v;
  }
}

#if defined(GPIPE_AVX2)
using U64x4 = uint64_t __attribute__((vector_size(32)));
using I64x4 = int64_t __attribute__((vector_size(32)));

/// dropoutRow eight columns at a time: two vectors of four hashes. Inlined
/// into the AVX2 clone below, whose target compiles it; the clone passes no
/// vector through a call (Clang refuses one across targets).
GPIPE_VECTOR_INLINE void dropoutRowEight(const float *x, float *y,
                                         uint8_t *mask, int64_t cols,
                                         uint64_t key, int64_t threshold,
                                         float keepScale) {
  U64x4 counter;
  for (int l = 0; l < 4; ++l)
    counter[l] = key + uint64_t(l + 1) * kGolden;
  const uint64_t step4 = 4 * kGolden;
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) {
    I64x4 low = reinterpret_cast<I64x4>(mix64(counter) >> 40) >= threshold;
    I64x4 high =
        reinterpret_cast<I64x4>(mix64(counter + step4) >> 40) >= threshold;
    counter += 2 * step4;
    // The low halves of the 64-bit flags (-1 kept, 0 dropped) in column order.
    Int8 kept = __builtin_shufflevector(reinterpret_cast<Int8>(low),
                                        reinterpret_cast<Int8>(high), 0, 2, 4,
                                        6, 8, 10, 12, 14);
    Float8 v = load<Float8>(x + j, 8);
    store<Float8>(y + j, kept != 0 ? v * keepScale : v - v, 8);
    auto bytes = __builtin_convertvector(-kept, BytesOf<Float8>::type);
    std::memcpy(mask + j, &bytes, 8);
  }
  dropoutRow(x, y, mask, cols, key, threshold, keepScale, j);
}

GPIPE_AVX2 void dropoutRowAvx2(const float *x, float *y, uint8_t *mask,
                               int64_t cols, uint64_t key, int64_t threshold,
                               float keepScale) {
  dropoutRowEight(x, y, mask, cols, key, threshold, keepScale);
}
#endif

template <class F>
GPIPE_VECTOR_INLINE void dropoutBackwardOn(const uint8_t *mask, const float *dy,
                                           float *dx, int64_t n,
                                           float keepScale) {
  using I = typename IntOf<F>::type;
  using Bytes = typename BytesOf<F>::type;
  forEachBlock<F>(n, [&](int64_t i, int64_t count) GPIPE_LAMBDA_INLINE {
    Bytes bytes = {};
    std::memcpy(&bytes, mask + i, count);
    I kept = __builtin_convertvector(bytes, I);
    F g = load<F>(dy + i, count);
    store<F>(dx + i, kept != 0 ? g * keepScale : g - g, count);
  });
}

#if defined(GPIPE_AVX2)
GPIPE_AVX2 void geluForwardAvx2(const float *x, float *y, int64_t n) {
  geluForwardOn<Float8>(x, y, n);
}
GPIPE_AVX2 void geluBackwardAvx2(const float *x, const float *dy, float *dx,
                                 int64_t n) {
  geluBackwardOn<Float8>(x, dy, dx, n);
}
GPIPE_AVX2 void geluErfForwardAvx2(const float *x, float *y, int64_t n) {
  geluErfForwardOn<Float8>(x, y, n);
}
GPIPE_AVX2 void geluErfBackwardAvx2(const float *x, const float *dy, float *dx,
                                    int64_t n) {
  geluErfBackwardOn<Float8>(x, dy, dx, n);
}
GPIPE_AVX2 void tanhForwardAvx2(const float *x, float *y, int64_t n) {
  tanhForwardOn<Float8>(x, y, n);
}
GPIPE_AVX2 void dropoutBackwardAvx2(const uint8_t *mask, const float *dy,
                                    float *dx, int64_t n, float keepScale) {
  dropoutBackwardOn<Float8>(mask, dy, dx, n, keepScale);
}
#endif
} // namespace

// Eight lanes where the CPU has AVX2: less than half the time of four.
#if defined(GPIPE_AVX2)
#define GPIPE_ON_AVX2(call)                                                    \
  if (hasAvx2())                                                               \
    return call;
#else
#define GPIPE_ON_AVX2(call)
#endif

void cpu::geluForward(const float *x, float *y, int64_t n) {
  GPIPE_ON_AVX2(geluForwardAvx2(x, y, n));
  geluForwardOn<Float4>(x, y, n);
}

void cpu::geluBackward(const float *x, const float *dy, float *dx, int64_t n) {
  GPIPE_ON_AVX2(geluBackwardAvx2(x, dy, dx, n));
  geluBackwardOn<Float4>(x, dy, dx, n);
}

void cpu::geluErfForward(const float *x, float *y, int64_t n) {
  GPIPE_ON_AVX2(geluErfForwardAvx2(x, y, n));
  geluErfForwardOn<Float4>(x, y, n);
}

void cpu::geluErfBackward(const float *x, const float *dy, float *dx,
                          int64_t n) {
  GPIPE_ON_AVX2(geluErfBackwardAvx2(x, dy, dx, n));
  geluErfBackwardOn<Float4>(x, dy, dx, n);
}

void cpu::tanhForward(const float *x, float *y, int64_t n) {
  GPIPE_ON_AVX2(tanhForwardAvx2(x, y, n));
  tanhForwardOn<Float4>(x, y, n);
}

void cpu::tanhBackward(const float *y, const float *dy, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

void cpu::dropoutForward(const float *x, float *y, uint8_t *mask, int64_t rows,
                         int64_t cols, float rate, uint64_t seed, uint64_t step,
                         int64_t rowOffset) {
  const int64_t n = rows * cols;
  if (rate <= 0.0f) {
    std::fill(mask, mask + n, uint8_t(1));
    if (y != x)
      std::memcpy(y, x, n * sizeof(float));
    return;
  }
  if (rate >= 1.0f) {
    // Everything dropped; avoids 0 * inf (keepScale).
    std::fill(mask, mask + n, uint8_t(0));
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] - x[i];
    return;
  }
  const float keepScale = 1.0f / (1.0f - rate);
  const auto threshold = int64_t(std::ceil(double(rate) * 16777216.0));
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t key = dropoutRowKey(seed, step, uint64_t(rowOffset + r));
    const int64_t at = r * cols;
#if defined(GPIPE_AVX2)
    if (hasAvx2()) {
      dropoutRowAvx2(x + at, y + at, mask + at, cols, key, threshold,
                     keepScale);
      continue;
    }
#endif
    dropoutRow(x + at, y + at, mask + at, cols, key, threshold, keepScale);
  }
}

void cpu::dropoutBackward(const uint8_t *mask, const float *dy, float *dx,
                          int64_t n, float rate) {
  if (rate >= 1.0f) {
    for (int64_t i = 0; i < n; ++i)
      dx[i] = dy[i] - dy[i];
    return;
  }
  const float keepScale = rate <= 0.0f ? 1.0f : 1.0f / (1.0f - rate);
  GPIPE_ON_AVX2(dropoutBackwardAvx2(mask, dy, dx, n, keepScale));
  dropoutBackwardOn<Float4>(mask, dy, dx, n, keepScale);
}

void cpu::addForward(const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] + b[i];
}
