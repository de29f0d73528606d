//===- CApiSessionSupport.h - A small model for the C API tests -*- C++ -*-===//
//
// What the tests of the session options' ABI, the learning rate and the
// optimizer state share: the bundle text of a 3-stage MLP with dropout (so
// that the step number matters), deterministic batches as C API inputs, and
// snapshots of every parameter, all through the C API only.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_CAPISESSIONSUPPORT_H
#define GPIPE_RUNTIME_TESTS_CAPISESSIONSUPPORT_H

#include "gpipe/runtime/gpipe_runtime.h"

#include "TestBundles.h"

#include <cstring>
#include <string>
#include <vector>

namespace gpipe::runtime::testing::capi {

constexpr int64_t kBatch = 10;
constexpr int64_t kFeatures = 12;
constexpr int64_t kClasses = 5;

/// 12 -> dense 16 relu -> dropout -> dense 16 tanh -> dense 5, softmax
/// cross-entropy; three layers, dropout so that the step number matters.
ModelGraph dropoutMlpGraph();

/// dropoutMlpGraph() on three devices, four micro-batches; the bundle's JSON.
const std::string &dropoutMlpJson();

/// Rows of x (f32 [rows, 12] in [-1, 1]) and labels (i32 [rows] in [0, 5)).
struct Data {
  std::vector<float> x;
  std::vector<int32_t> labels;
  std::vector<gpipe_input_t> inputs() const {
    return {{"x", GPIPE_ELEMENT_F32, x.data(), x.size()},
            {"labels", GPIPE_ELEMENT_I32, labels.data(), labels.size()}};
  }
};
Data makeData(int64_t rows, uint64_t seed);

/// A session over dropoutMlpJson() with `options` (may be null); null after
/// a failure, whose message is gpipe_last_error().
gpipe_session_t *createSession(const gpipe_session_options_t *options);

/// One step on makeData(kBatch, seed); NaN if it fails.
double trainStep(gpipe_session_t *session, uint64_t seed);

/// Every parameter, in bundle order, through gpipe_session_get_parameter.
std::vector<std::vector<float>> parameters(const gpipe_session_t *session);

inline bool bitwiseEqual(const std::vector<float> &a,
                         const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace gpipe::runtime::testing::capi

#endif // GPIPE_RUNTIME_TESTS_CAPISESSIONSUPPORT_H
