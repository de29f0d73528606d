//===- DropoutHash.h - The hash of the dropout mask ------------*- C++ -*-===//
//
// The keep/drop decision of element (row, col) of a dropout mask, shared by
// the CPU kernels and the device kernels (`__host__ __device__` under nvcc)
// so that both draw the same mask bit for bit: plain 64-bit integer
// arithmetic, and a float conversion of a 24-bit integer, which is exact.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_DROPOUTHASH_H
#define GPIPE_RUNTIME_DEVICE_DROPOUTHASH_H

#include <cstdint>

#ifndef GPIPE_HD
#ifdef __CUDACC__
#define GPIPE_HD __host__ __device__
#else
#define GPIPE_HD
#endif
#endif

namespace gpipe::runtime::device {

/// splitmix64's increment (2^64 / golden ratio) and finalizer: a bijective
/// 64-bit mix whose outputs over a counter stream pass BigCrush. A template
/// so that the CPU kernels run it on vectors of 64-bit lanes too.
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

template <class U> GPIPE_HD inline U mix64(U z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Key of global row `row` of the mask of (seed, step): element (row, col) is
/// then the splitmix64 output number col + 1 of the stream keyed by it.
GPIPE_HD inline uint64_t dropoutRowKey(uint64_t seed, uint64_t step,
                                       uint64_t row) {
  uint64_t key = mix64(seed + kGolden);
  key = mix64(key + (step + 1) * kGolden);
  return mix64(key + (row + 1) * kGolden);
}

/// Uniform in [0, 1) from the top 24 bits: exactly representable as a float.
GPIPE_HD inline float dropoutUniform(uint64_t rowKey, uint64_t col) {
  return static_cast<float>(mix64(rowKey + (col + 1) * kGolden) >> 40) *
         (1.0f / 16777216.0f);
}

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_DROPOUTHASH_H
