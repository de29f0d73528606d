//===- Initializers.cpp - Deterministic parameter initializers ------------===//

#include "gpipe/runtime/bundle/Initializers.h"

#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace gpipe::runtime;

namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

/// The splitmix64 output function: a bijective 64-bit mixer.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a64(const std::string &text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

/// The splitmix64 stream keyed by (seed, name), addressed by element index
/// rather than advanced, so any element can be drawn independently.
struct CounterRng {
  uint64_t key;
  CounterRng(uint64_t seed, const std::string &name)
      : key(mix64(mix64(seed + kGolden) ^ fnv1a64(name))) {}
  uint64_t bits(uint64_t index) const {
    return mix64(key + (index + 1) * kGolden);
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform(uint64_t index) const {
    return static_cast<double>(bits(index) >> 11) * 0x1p-53;
  }
};

int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t dim : shape) {
    assert(dim >= 0 && "negative dimension");
    n *= dim;
  }
  return n;
}

} // namespace

double gpipe::runtime::glorotUniformLimit(const std::vector<int64_t> &shape) {
  // A conv2d's HWIO weight [KH, KW, I, O] has fans KH KW I and KH KW O.
  double fanSum =
      shape.size() == 2 ? static_cast<double>(shape[0] + shape[1])
      : shape.size() == 4
          ? static_cast<double>(shape[0] * shape[1] * (shape[2] + shape[3]))
          : 2.0 * static_cast<double>(elementCount(shape));
  // An empty tensor has nothing to initialize; avoid dividing by zero.
  return fanSum > 0 ? std::sqrt(6.0 / fanSum) : 0.0;
}

void gpipe::runtime::initializeParameter(InitKind kind, double scale,
                                         const std::vector<int64_t> &shape,
                                         uint64_t seed, const std::string &name,
                                         float *out) {
  const int64_t n = elementCount(shape);
  const CounterRng rng(seed, name);
  switch (kind) {
  case InitKind::Zeros:
  case InitKind::Ones: {
    float value = kind == InitKind::Ones ? 1.0f : 0.0f;
    for (int64_t i = 0; i < n; ++i)
      out[i] = value;
    return;
  }
  case InitKind::Normal: {
    // Box-Muller: the pair (2k, 2k+1) of uniforms gives elements 2k and 2k+1.
    constexpr double twoPi = 6.283185307179586476925286766559;
    for (int64_t i = 0; i < n; i += 2) {
      double u1 = 1.0 - rng.uniform(i); // (0, 1]: log stays finite
      double u2 = rng.uniform(i + 1);
      double radius = scale * std::sqrt(-2.0 * std::log(u1));
      out[i] = static_cast<float>(radius * std::cos(twoPi * u2));
      if (i + 1 < n)
        out[i + 1] = static_cast<float>(radius * std::sin(twoPi * u2));
    }
    return;
  }
  case InitKind::Uniform:
  case InitKind::GlorotUniform: {
    double limit =
        kind == InitKind::Uniform ? scale : glorotUniformLimit(shape);
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<float>(limit * (2.0 * rng.uniform(i) - 1.0));
    return;
  }
  case InitKind::Pretrained:
    // Values made up here would train silently from the wrong start.
    std::fprintf(stderr,
                 "gpipe runtime: initializeParameter asked for the "
                 "pretrained parameter '%s', whose values are in the "
                 "bundle's weights file\n",
                 name.c_str());
    std::abort();
  }
  assert(false && "unknown initializer kind");
}
