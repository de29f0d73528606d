//===- RandomData.h - Random inputs for the kernel tests ---------*- C++ -*-===//

#ifndef GPIPE_RUNTIME_TESTS_RANDOMDATA_H
#define GPIPE_RUNTIME_TESTS_RANDOMDATA_H

#include <cstdint>
#include <random>
#include <vector>

namespace gpipe::testing {

/// n reals of type T uniform in [lo, hi).
template <typename T>
std::vector<T> randomReals(std::mt19937_64 &rng, size_t n, T lo, T hi) {
  std::uniform_real_distribution<T> dist(lo, hi);
  std::vector<T> v(n);
  for (T &e : v)
    e = dist(rng);
  return v;
}

/// n floats uniform in [lo, hi).
inline std::vector<float> randomFloats(std::mt19937_64 &rng, size_t n,
                                       float lo = -1.0f, float hi = 1.0f) {
  return randomReals<float>(rng, n, lo, hi);
}

/// n doubles uniform in [lo, hi).
inline std::vector<double> randomVec(std::mt19937_64 &rng, size_t n,
                                     double lo = -1.0, double hi = 1.0) {
  return randomReals<double>(rng, n, lo, hi);
}

/// n ids uniform in [0, bound).
inline std::vector<int32_t> randomIds(std::mt19937_64 &rng, size_t n,
                                      int32_t bound) {
  std::uniform_int_distribution<int32_t> dist(0, bound - 1);
  std::vector<int32_t> ids(n);
  for (int32_t &e : ids)
    e = dist(rng);
  return ids;
}

} // namespace gpipe::testing

#endif // GPIPE_RUNTIME_TESTS_RANDOMDATA_H
