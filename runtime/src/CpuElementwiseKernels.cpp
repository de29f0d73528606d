//===- CpuElementwiseKernels.cpp - Element-wise CPU kernels ---------------===//
//
// relu, both GELUs, tanh and add on contiguous f32 buffers (CpuKernels.h).
// Both GELUs and tanh run on vectors of eight floats (AVX2) or four, with the
// same bits, with CpuVectorMath.h's exp, tanh and erfc; the exact GELU keeps
// the device kernels' formula (DeviceKernels.h), with the erfc of Cephes's
// fits instead of libm's.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/CpuKernels.h"
#include "gpipe/runtime/device/DeviceKernels.h"

#include "CpuVectorMath.h"

using namespace gpipe::runtime;
using namespace gpipe::runtime::cpu::simd;

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
} // namespace

// Both operands of each select are loaded first, so that the loops compile
// to vector selects: a conditional load stays a branch, which half the
// elements of a layer mispredict.
void cpu::reluForward(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

void cpu::reluBackward(const float *x, const float *dy, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i], g = dy[i];
    dx[i] = v > 0.0f ? g : 0.0f;
  }
}

// GELU goes through 1 + tanh(u) = 2 / (1 + exp(-2u)) and
// 1 - tanh(u)^2 = 4 e / (1 + e)^2 with e = exp(-2u): neither cancels where
// tanh(u) is close to -1 or 1 (the float tanh is then exactly +-1, and
// 1 + t or 1 - t^2 would lose every digit). exp saturates at a finite value,
// so e / (1 + e) never becomes inf / inf.

// Float8 stays inside the inlined kernels (CpuVectorMath.h); GCC reports
// the ABI note where it emits the lambdas, at the end of the file.
#pragma GCC diagnostic ignored "-Wpsabi"
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

void cpu::addForward(const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] + b[i];
}
