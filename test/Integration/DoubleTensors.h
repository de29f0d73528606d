//===- DoubleTensors.h - Tensors in double for gradient checks ---*- C++ -*-===//
//
// What the compiled models' gradient tests (BroadcastGradientsTest,
// GatherGradientsTest) share for their independent references: a row-major
// tensor of doubles, its element count, float values widened into one, and
// the numbers of a committed PyTorch fixture's JSON array.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TEST_INTEGRATION_DOUBLETENSORS_H
#define GPIPE_TEST_INTEGRATION_DOUBLETENSORS_H

#include "llvm/Support/JSON.h"

#include <cstdint>
#include <vector>

namespace gpipe::testing {

using Shape = std::vector<int64_t>;

/// A double tensor, row-major.
struct T {
  Shape shape;
  std::vector<double> v;
};

inline int64_t count(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

inline T fromFloats(const Shape &shape, const std::vector<float> &values) {
  return {shape, std::vector<double>(values.begin(), values.end())};
}

/// The numbers of a JSON array (a fixture's values).
inline std::vector<double> doublesOf(const llvm::json::Value *value) {
  std::vector<double> out;
  for (const llvm::json::Value &v : *value->getAsArray())
    out.push_back(*v.getAsNumber());
  return out;
}

/// The same, rounded to float (a fixture's inputs and parameters).
inline std::vector<float> floatsOf(const llvm::json::Value *value) {
  std::vector<double> numbers = doublesOf(value);
  return std::vector<float>(numbers.begin(), numbers.end());
}

} // namespace gpipe::testing

#endif // GPIPE_TEST_INTEGRATION_DOUBLETENSORS_H
