//===- CApiConformanceSupport.h - C API conformance cases -*- C++ -*- -----===//
//
// What the C API conformance tests share: the world a case runs in (a
// trained and a fresh session, good inputs, scratch files, copies of a
// checkpoint with one thing wrong), one careless call (Case), and the table
// of every case, made of one function per subject.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_CAPICONFORMANCESUPPORT_H
#define GPIPE_RUNTIME_TESTS_CAPICONFORMANCESUPPORT_H

#include "gpipe/runtime/gpipe_runtime.h"

#include "gpipe/runtime/bundle/SafeTensors.h"

#include "CApiSessionSupport.h"
#include "TempDir.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <regex>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace gpipe::runtime::testing::conformance {

using namespace gpipe::runtime::testing::capi;

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

/// An out-of-range enum value, stored as the application's int32 would be.
template <typename Enum> inline Enum rawEnum(int32_t value) {
  Enum e;
  static_assert(sizeof(Enum) == sizeof(int32_t), "the C enums are 32-bit");
  std::memcpy(&e, &value, sizeof e);
  return e;
}

/// The bytes of the file at `path` (empty when it cannot be read).
std::string readText(const std::string &path);

/// Writes `text` as the file at `path`.
void writeText(const std::string &path, const std::string &text);

/// gpipe_session_options_init's options.
gpipe_session_options_t defaultOptions();

/// The world a case runs in: a session trained one step (Adam, the guard
/// on), one never trained, good inputs and scratch files.
struct World {
  gpipe_session_t *trained = nullptr;
  gpipe_session_t *fresh = nullptr;
  Data data = makeData(kBatch, 3);
  std::vector<float> buffer = std::vector<float>(1024);
  TempDir dir{"gpipe-conformance"};
  std::string checkpoint; ///< a checkpoint of `trained`
  std::string regularFile;

  World() {
    gpipe_session_options_t options;
    gpipe_session_options_init(&options);
    options.optimizer = GPIPE_OPTIMIZER_ADAM;
    trained = createSession(&options);
    fresh = createSession(&options);
    if (!trained || !fresh)
      return;
    trainStep(trained, 1);
    gpipe_session_save_checkpoint(trained, (dir.path + "/saved").c_str(), 0);
    checkpoint = dir.path + "/saved/step-0000000001";
    regularFile = dir.path + "/file";
    writeText(regularFile, "not a directory\n");
  }
  ~World() {
    gpipe_session_destroy(trained);
    gpipe_session_destroy(fresh);
  }
  World(const World &) = delete;
  World &operator=(const World &) = delete;

  std::vector<gpipe_input_t> inputs() const { return data.inputs(); }

  /// A copy of the checkpoint (at {dir}/bad, replacing the last) with
  /// state.json's step written as `step`.
  std::string withStep(const std::string &step) {
    std::string copy = dir.path + "/bad";
    ::mkdir(copy.c_str(), 0755);
    std::string state = readText(checkpoint + "/state.json");
    state = std::regex_replace(state, std::regex("\"step\": 1"),
                               "\"step\": " + step);
    writeText(copy + "/state.json", state);
    writeText(copy + "/tensors.safetensors",
              readText(checkpoint + "/tensors.safetensors"));
    return copy;
  }
  /// A copy of the checkpoint whose tensor `name` has `value` at element 0.
  std::string withValue(const std::string &name, float value) {
    std::string copy = withStep("1");
    namespace rt = gpipe::runtime;
    std::string bytes = readText(copy + "/tensors.safetensors");
    std::map<std::string, std::string> metadata;
    rt::StatusOr<std::vector<rt::NamedTensor>> tensors =
        rt::decodeSafeTensors(bytes, "copy", &metadata);
    if (!tensors.ok())
      return copy;
    for (rt::NamedTensor &tensor : *tensors)
      if (tensor.name == name)
        tensor.data[0] = value;
    writeText(copy + "/tensors.safetensors",
              rt::encodeSafeTensors(*tensors, metadata));
    return copy;
  }
};

/// One careless call: `function` is the C API function it makes.
struct Case {
  const char *function;
  const char *what;
  std::function<gpipe_status_t(World &)> call;
  gpipe_status_t status;
  /// The exact message; `{dir}` stands for the world's scratch directory.
  std::string message;
  /// The session the call takes non-const (its last error is the message
  /// too), if any; the `trained` one unless `fresh`.
  bool recordsOnSession = false;
  bool fresh = false;
};

/// The cases, one function per subject, in the table's order.
std::vector<Case> creationCases();   ///< paths, bytes and every option
std::vector<Case> queryCases();      ///< the const queries
std::vector<Case> inputCases();      ///< training and evaluation inputs
std::vector<Case> loopCases();       ///< the library's loops
std::vector<Case> parameterCases();  ///< parameters and optimizer state
std::vector<Case> checkpointCases(); ///< saving and loading checkpoints

/// Every case. The functions that return no status (the version, the
/// status strings, the _init functions, destroy and the last errors) are
/// checked by their own tests (CApiConformanceTest.cpp) and listed in
/// kUnstatused.
std::vector<Case> cases();

} // namespace gpipe::runtime::testing::conformance

#endif // GPIPE_RUNTIME_TESTS_CAPICONFORMANCESUPPORT_H
