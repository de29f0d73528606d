//===- CpuVectorMath.h - exp, tanh, erfc on vectors of floats ---*- C++ -*-===//
//
// Private to the CPU kernels (CpuKernels.cpp, CpuElementwiseKernels.cpp).
//
// libm's expf and tanhf are scalar calls (tens of ns each for tanhf), which
// made GELU and the softmaxes cost as much as the GEMMs around them. These
// are the Cephes single-precision approximations (about 1-2 ulp), written on
// GCC/Clang vectors of four floats (SSE2, the x86-64 baseline) or eight (in
// callers compiled for AVX2, `GPIPE_AVX2`), so that the clamps and range
// switches are SIMD selects: GCC does not if-convert such scalar code under
// its default -ftrapping-math, and the loops stayed scalar. Everything here
// is always inlined, so that a caller's target decides the instructions.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SRC_CPUVECTORMATH_H
#define GPIPE_RUNTIME_SRC_CPUVECTORMATH_H

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#define GPIPE_VECTOR_INLINE inline __attribute__((always_inline))
#define GPIPE_LAMBDA_INLINE __attribute__((always_inline))

#if defined(__x86_64__)
/// A kernel compiled for AVX2, called where hasAvx2(). Without FMA: each lane
/// runs the same IEEE operations as on four lanes, so both give the same bits
/// (and the device kernels' tolerances hold unchanged).
#define GPIPE_AVX2 __attribute__((target("avx2")))
#endif

// Float8 values pass between these always-inlined helpers only, never
// through a call: GCC's note that their ABI differs without AVX is moot.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace gpipe::runtime::cpu::simd {

using Float4 = float __attribute__((vector_size(16)));
using Int4 = int32_t __attribute__((vector_size(16)));
using Float8 = float __attribute__((vector_size(32)));
using Int8 = int32_t __attribute__((vector_size(32)));

/// The integer vector of a float vector's width.
template <class F> struct IntOf;
template <> struct IntOf<Float4> { using type = Int4; };
template <> struct IntOf<Float8> { using type = Int8; };

template <class F> constexpr int64_t kLanesOf = sizeof(F) / sizeof(float);

/// Whether this CPU runs the GPIPE_AVX2 kernels. GPIPE_CPU_NO_AVX2=1 in
/// the environment keeps them to four lanes (the tests run both).
inline bool hasAvx2() {
#if defined(__x86_64__)
  static const bool supported = [] {
    const char *off = std::getenv("GPIPE_CPU_NO_AVX2");
    return !(off && *off && std::string_view(off) != "0") &&
           __builtin_cpu_supports("avx2");
  }();
  return supported;
#else
  return false;
#endif
}

/// Loads count <= lanes floats; the missing lanes get `fill`.
template <class F>
GPIPE_VECTOR_INLINE F load(const float *p, int64_t count, float fill = 0.0f) {
  F v = F{} + fill;
  std::memcpy(&v, p, count * sizeof(float));
  return v;
}

/// Stores the first count <= lanes lanes of v.
template <class F>
GPIPE_VECTOR_INLINE void store(float *p, F v, int64_t count) {
  std::memcpy(p, &v, count * sizeof(float));
}

/// Calls body(i, count) on [0, n) in blocks of F's lanes, the last one
/// partial. The full blocks pass a constant count, so their loads and stores
/// compile to single vector moves instead of variable-length copies.
template <class F, typename Body>
GPIPE_VECTOR_INLINE void forEachBlock(int64_t n, Body body) {
  int64_t i = 0;
  for (; i + kLanesOf<F> <= n; i += kLanesOf<F>)
    body(i, kLanesOf<F>);
  if (i < n)
    body(i, n - i);
}

// The four-float names CpuKernels.cpp uses.
GPIPE_VECTOR_INLINE Float4 load4(const float *p, int64_t count,
                                 float fill = 0.0f) {
  return load<Float4>(p, count, fill);
}
GPIPE_VECTOR_INLINE void store4(float *p, Float4 v, int64_t count) {
  store<Float4>(p, v, count);
}
template <typename Body>
GPIPE_VECTOR_INLINE void forEachBlock4(int64_t n, Body body) {
  forEachBlock<Float4>(n, body);
}

/// acc += e four lanes at a time, in e's lane order: a sum has the same
/// bits on eight lanes as on four.
GPIPE_VECTOR_INLINE void addInFours(Float4 &acc, Float4 e) { acc += e; }
GPIPE_VECTOR_INLINE void addInFours(Float4 &acc, Float8 e) {
  acc += __builtin_shufflevector(e, e, 0, 1, 2, 3);
  acc += __builtin_shufflevector(e, e, 4, 5, 6, 7);
}

/// exp(x): 2^n * p(r) with x = n ln2 + r, |r| <= ln2 / 2. Underflows to 0
/// below ln(2^-126) (so exp(-inf) = 0); saturates at exp(88.37) (callers
/// never go that high); NaN stays NaN, so that a diverging run shows.
template <class F> GPIPE_VECTOR_INLINE F fastExp(F x) {
  using I = typename IntOf<F>::type;
  constexpr float kMax = 88.3762626647949f;
  constexpr float kMin = -87.3365447504f;
  constexpr float kLog2e = 1.44269504088896341f;
  // ln 2 split in a part exact in float and the rest (Cody-Waite).
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  // Adding 1.5 * 2^23 rounds to the nearest integer (default rounding mode).
  constexpr float kRound = 12582912.0f;
  // NaN clamps too (the comparisons are false): n is always a small integer.
  F c = x < kMax ? x : kMax;
  c = c > kMin ? c : kMin;
  F n = (c * kLog2e + kRound) - kRound;
  F r = c - n * kLn2Hi - n * kLn2Lo;
  F p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n from its exponent bits; 0 below the range, NaN for NaN.
  I bits = (__builtin_convertvector(n, I) + 127) << 23;
  bits = x < kMin ? 0 : bits;
  bits = x != x ? 0x7FC00000 : bits;
  return p * reinterpret_cast<F>(bits);
}

/// tanh(x): an odd polynomial below 0.625 (no cancellation near 0), else
/// 1 - 2 / (exp(2|x|) + 1), which is exactly 1 once exp saturates.
template <class F> GPIPE_VECTOR_INLINE F fastTanh(F x) {
  F z = x < 0.0f ? -x : x;
  F far = 1.0f - 2.0f / (fastExp(2.0f * z) + 1.0f);
  F z2 = z * z;
  F p = z2 * -5.70498872745e-3f + 2.06390887954e-2f;
  p = p * z2 - 5.37397155531e-2f;
  p = p * z2 + 1.33314422036e-1f;
  p = p * z2 - 3.33332819422e-1f;
  F nearZero = p * z2 * z + z;
  F t = z < 0.625f ? nearZero : far;
  return x < 0.0f ? -t : t;
}

/// erfc(x) to about 4e-6 relative error, from Cephes's single-precision
/// rational fits (erfcf): 1 - x T(x^2) below |x| = 1; above,
/// exp(-x^2) / |x| times a polynomial in 1/x^2 (one fit below |x| = 2, one
/// beyond), reflected to 2 - erfc(|x|) for negative x. Computed as erfc, not
/// 1 - erf, so that the left tail of the normal CDF keeps its digits.
template <class F> GPIPE_VECTOR_INLINE F fastErfc(F a) {
  F x = a < 0.0f ? -a : a;
  F a2 = a * a;
  F t = a2 * 7.853861353153693e-5f - 8.010193625184903e-4f;
  t = t * a2 + 5.188327685732524e-3f;
  t = t * a2 - 2.685381193529856e-2f;
  t = t * a2 + 1.128358514861418e-1f;
  t = t * a2 - 3.761262582423300e-1f;
  t = t * a2 + 1.128379165726710f;
  F nearZero = 1.0f - a * t;
  F q = 1.0f / (x < 1.0f ? 1.0f : x);
  F y = q * q;
  F p = y * 2.326819970068386e-2f - 1.387039388740657e-1f;
  p = p * y + 3.687424674597105e-1f;
  p = p * y - 5.824733027278666e-1f;
  p = p * y + 6.210004621745983e-1f;
  p = p * y - 4.944515323274145e-1f;
  p = p * y + 3.404879937665872e-1f;
  p = p * y - 2.741127028184656e-1f;
  p = p * y + 5.638259427386472e-1f;
  F r = y * -1.047766399936249e+1f + 1.297719955372516e+1f;
  r = r * y - 7.495518717768503f;
  r = r * y + 2.921019019210786f;
  r = r * y - 1.015265279202700f;
  r = r * y + 4.218463358204948e-1f;
  r = r * y - 2.820767439740514e-1f;
  r = r * y + 5.641895067754075e-1f;
  F tail = fastExp(-a2) * q * (x < 2.0f ? p : r);
  tail = a < 0.0f ? 2.0f - tail : tail;
  return x < 1.0f ? nearZero : tail;
}

} // namespace gpipe::runtime::cpu::simd

#pragma GCC diagnostic pop

#endif // GPIPE_RUNTIME_SRC_CPUVECTORMATH_H
