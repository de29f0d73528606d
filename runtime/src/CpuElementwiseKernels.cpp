//===- CpuElementwiseKernels.cpp - Element-wise CPU kernels ---------------===//
//
// relu, both GELUs, tanh and add on contiguous f32 buffers (CpuKernels.h).
// Both GELUs and tanh run on vectors of four floats with CpuVectorMath.h's
// exp, tanh and erfc; the exact GELU keeps the device kernels' formula
// (DeviceKernels.h), with the erfc of Cephes's fits instead of libm's.
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

void cpu::geluForward(const float *x, float *y, int64_t n) {
  forEachBlock4(n, [&](int64_t i, int64_t count) {
    Float4 v = load4(x + i, count);
    Float4 u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
    Float4 onePlusTanh = 2.0f / (1.0f + fastExp(-2.0f * u));
    store4(y + i, 0.5f * v * onePlusTanh, count);
  });
}

void cpu::geluBackward(const float *x, const float *dy, float *dx, int64_t n) {
  forEachBlock4(n, [&](int64_t i, int64_t count) {
    Float4 v = load4(x + i, count);
    Float4 v2 = v * v;
    Float4 u = kSqrt2OverPi * v * (1.0f + kGeluCubic * v2);
    Float4 e = fastExp(-2.0f * u);
    Float4 inv = 1.0f / (1.0f + e);
    Float4 onePlusTanh = 2.0f * inv;
    Float4 sech2 = 4.0f * (e * inv) * inv;
    // d/dv [0.5 v (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 v sech^2(u) u'.
    Float4 du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v2);
    Float4 d = 0.5f * onePlusTanh + 0.5f * v * sech2 * du;
    store4(dx + i, load4(dy + i, count) * d, count);
  });
}

// x Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2, as DeviceKernels.h's
// geluErfOf, on vectors (fastErfc; libm's erfcf per element was 4.8x the
// tanh GELU's time).
void cpu::geluErfForward(const float *x, float *y, int64_t n) {
  forEachBlock4(n, [&](int64_t i, int64_t count) {
    Float4 v = load4(x + i, count);
    store4(y + i, v * (0.5f * fastErfc(-kInvSqrt2 * v)), count);
  });
}

// Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
void cpu::geluErfBackward(const float *x, const float *dy, float *dx,
                          int64_t n) {
  forEachBlock4(n, [&](int64_t i, int64_t count) {
    Float4 v = load4(x + i, count);
    Float4 slope = 0.5f * fastErfc(-kInvSqrt2 * v) +
                   v * kInvSqrt2Pi * fastExp(-0.5f * v * v);
    store4(dx + i, load4(dy + i, count) * slope, count);
  });
}

void cpu::tanhForward(const float *x, float *y, int64_t n) {
  forEachBlock4(n, [&](int64_t i, int64_t count) {
    store4(y + i, fastTanh(load4(x + i, count)), count);
  });
}

void cpu::tanhBackward(const float *y, const float *dy, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

void cpu::addForward(const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] + b[i];
}
