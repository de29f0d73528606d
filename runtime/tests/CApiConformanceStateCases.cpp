//===- CApiConformanceStateCases.cpp - Parameter and checkpoint cases -----===//
//
// The C API conformance table's cases for parameters and optimizer state
// (sizes, names, counts, values set_* refuses) and for saving and loading
// checkpoints (CApiConformanceSupport.h).
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"

#include "CApiConformanceSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace gpipe::runtime::testing::conformance {
namespace {

const std::string kParams = "'l1.w', 'l1.b', 'l2.w', 'l2.b', 'l3.w', 'l3.b'";
const std::string kStepRange =
    "expected 0 to 9223372036854775806 steps done, got ";

} // namespace

std::vector<Case> parameterCases() {
  std::vector<Case> c;

  // Parameters and optimizer state.
  auto tensor = [&](const char *function, const char *what,
                    std::function<gpipe_status_t(World &)> call,
                    gpipe_status_t status, const std::string &message,
                    bool mutating) {
    c.push_back({function, what, call, status,
                 std::string(function) + ": " + message, mutating});
  };
  tensor(
      "gpipe_session_parameter_size", "an unknown name",
      [](World &w) {
        size_t n;
        return gpipe_session_parameter_size(w.trained, "nope", &n);
      },
      GPIPE_ERROR_NOT_FOUND,
      "unknown parameter 'nope' (the model has " + kParams + ")", false);
  tensor(
      "gpipe_session_parameter_size", "NULL name",
      [](World &w) {
        size_t n;
        return gpipe_session_parameter_size(w.trained, nullptr, &n);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "name is null", false);
  tensor(
      "gpipe_session_parameter_size", "NULL out_element_count",
      [](World &w) {
        return gpipe_session_parameter_size(w.trained, "l1.w", nullptr);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_element_count is null", false);
  for (const char *function :
       {"gpipe_session_get_parameter", "gpipe_session_get_gradient"}) {
    const bool gradient =
        std::strcmp(function, "gpipe_session_get_gradient") == 0;
    auto get = [gradient](World &w, const char *name, size_t capacity,
                          float *out) {
      return gradient
                 ? gpipe_session_get_gradient(w.trained, name, capacity, out)
                 : gpipe_session_get_parameter(w.trained, name, capacity, out);
    };
    tensor(
        function, "a buffer one short",
        [get](World &w) { return get(w, "l1.w", 191, w.buffer.data()); },
        GPIPE_ERROR_BUFFER_TOO_SMALL,
        "parameter 'l1.w' has 192 elements, the buffer holds 191", false);
    tensor(
        function, "an unknown name",
        [get](World &w) { return get(w, "l9.w", 1024, w.buffer.data()); },
        GPIPE_ERROR_NOT_FOUND,
        "unknown parameter 'l9.w' (the model has " + kParams + ")", false);
    tensor(
        function, "NULL out_values",
        [get](World &w) { return get(w, "l1.w", 1024, nullptr); },
        GPIPE_ERROR_INVALID_ARGUMENT, "out_values is null", false);
    tensor(
        function, "NULL name",
        [get](World &w) { return get(w, nullptr, 1024, w.buffer.data()); },
        GPIPE_ERROR_INVALID_ARGUMENT, "name is null", false);
  }
  auto setParameter = [](const char *name, size_t count, float first) {
    return [=](World &w) {
      std::vector<float> values(192, 0.5f);
      values[0] = first;
      return gpipe_session_set_parameter(w.trained, name, values.data(), count);
    };
  };
  tensor("gpipe_session_set_parameter", "a NaN",
         setParameter("l1.w", 192, kNaN), GPIPE_ERROR_INVALID_ARGUMENT,
         "parameter 'l1.w': expected finite values, got nan at element 0",
         true);
  tensor("gpipe_session_set_parameter", "-inf",
         setParameter("l1.w", 192, -kInf), GPIPE_ERROR_INVALID_ARGUMENT,
         "parameter 'l1.w': expected finite values, got -inf at element 0",
         true);
  tensor("gpipe_session_set_parameter", "the wrong count",
         setParameter("l1.w", 191, 0), GPIPE_ERROR_INVALID_ARGUMENT,
         "parameter 'l1.w': expected 192 elements (shape [12, 16]), got 191",
         true);
  tensor("gpipe_session_set_parameter", "an unknown name",
         setParameter("w", 192, 0), GPIPE_ERROR_NOT_FOUND,
         "unknown parameter 'w' (the model has " + kParams + ")", true);
  tensor(
      "gpipe_session_set_parameter", "NULL values",
      [](World &w) {
        return gpipe_session_set_parameter(w.trained, "l1.w", nullptr, 192);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "values is null", true);
  for (float rate : {kNaN, -1.0f, kInf})
    tensor(
        "gpipe_session_set_learning_rate", "a rate out of range",
        [rate](World &w) {
          return gpipe_session_set_learning_rate(w.trained, rate);
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        std::string("expected a finite learning rate >= 0, got ") +
            (std::isnan(rate) ? "nan"
             : rate > 0       ? "inf"
                              : "-1"),
        true);
  tensor(
      "gpipe_session_get_learning_rate", "NULL out_learning_rate",
      [](World &w) {
        return gpipe_session_get_learning_rate(w.trained, nullptr);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_learning_rate is null", false);
  tensor(
      "gpipe_session_optimizer_slot_count", "NULL out_slot_count",
      [](World &w) {
        return gpipe_session_optimizer_slot_count(w.trained, nullptr);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_slot_count is null", false);
  for (uint32_t slot : {2u, 0xffffffffu})
    tensor(
        "gpipe_session_optimizer_state_size", "a slot out of range",
        [slot](World &w) {
          size_t n;
          return gpipe_session_optimizer_state_size(w.trained, "l1.w", slot,
                                                    &n);
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "optimizer state slot " + std::to_string(slot) +
            " out of range: adam keeps 2 per parameter (slots 0 to 1)",
        false);
  tensor(
      "gpipe_session_optimizer_state_size", "an unknown name",
      [](World &w) {
        size_t n;
        return gpipe_session_optimizer_state_size(w.trained, "x", 0, &n);
      },
      GPIPE_ERROR_NOT_FOUND,
      "unknown parameter 'x' (the model has " + kParams + ")", false);
  tensor(
      "gpipe_session_get_optimizer_state", "a buffer one short",
      [](World &w) {
        return gpipe_session_get_optimizer_state(w.trained, "l1.w", 1, 191,
                                                 w.buffer.data());
      },
      GPIPE_ERROR_BUFFER_TOO_SMALL,
      "optimizer state 1 of parameter 'l1.w' has 192 elements, the buffer "
      "holds 191",
      false);
  tensor(
      "gpipe_session_get_optimizer_state", "NULL out_values",
      [](World &w) {
        return gpipe_session_get_optimizer_state(w.trained, "l1.w", 0, 192,
                                                 nullptr);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_values is null", false);
  auto setState = [](uint32_t slot, size_t count, float first) {
    return [=](World &w) {
      std::vector<float> values(192, 0.25f);
      values[0] = first;
      return gpipe_session_set_optimizer_state(w.trained, "l1.w", slot,
                                               values.data(), count);
    };
  };
  tensor("gpipe_session_set_optimizer_state", "a negative mean square",
         setState(1, 192, -1), GPIPE_ERROR_INVALID_ARGUMENT,
         "optimizer state 1 of parameter 'l1.w': expected finite values >= 0 "
         "(adam's mean of squared gradients), got -1 at element 0",
         true);
  tensor("gpipe_session_set_optimizer_state", "a NaN", setState(0, 192, kNaN),
         GPIPE_ERROR_INVALID_ARGUMENT,
         "optimizer state 0 of parameter 'l1.w': expected finite values, got "
         "nan at element 0",
         true);
  tensor("gpipe_session_set_optimizer_state", "the wrong count",
         setState(0, 0, 0), GPIPE_ERROR_INVALID_ARGUMENT,
         "optimizer state 0 of parameter 'l1.w': expected 192 elements (shape "
         "[12, 16]), got 0",
         true);
  tensor("gpipe_session_set_optimizer_state", "a slot out of range",
         setState(7, 192, 0), GPIPE_ERROR_INVALID_ARGUMENT,
         "optimizer state slot 7 out of range: adam keeps 2 per parameter "
         "(slots 0 to 1)",
         true);
  for (int64_t steps : {int64_t(-1), std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max()})
    tensor(
        "gpipe_session_set_steps_done", "a count out of range",
        [steps](World &w) {
          return gpipe_session_set_steps_done(w.trained, steps);
        },
        GPIPE_ERROR_INVALID_ARGUMENT, kStepRange + std::to_string(steps), true);
  return c;
}

std::vector<Case> checkpointCases() {
  std::vector<Case> c;
  auto tensor = [&](const char *function, const char *what,
                    std::function<gpipe_status_t(World &)> call,
                    gpipe_status_t status, const std::string &message,
                    bool mutating) {
    c.push_back({function, what, call, status,
                 std::string(function) + ": " + message, mutating});
  };

  // Checkpoints.
  tensor(
      "gpipe_session_save_checkpoint", "NULL dir",
      [](World &w) {
        return gpipe_session_save_checkpoint(w.trained, nullptr, 0);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "dir is null or empty", true);
  tensor(
      "gpipe_session_save_checkpoint", "a regular file as the directory",
      [](World &w) {
        return gpipe_session_save_checkpoint(w.trained, w.regularFile.c_str(),
                                             0);
      },
      GPIPE_ERROR_IO,
      "cannot create the checkpoint directory '{dir}/file': Not a "
      "directory",
      true);
  tensor(
      "gpipe_session_load_checkpoint", "an empty path",
      [](World &w) { return gpipe_session_load_checkpoint(w.trained, ""); },
      GPIPE_ERROR_INVALID_ARGUMENT, "path is null or empty", true);
  tensor(
      "gpipe_session_load_checkpoint", "a FIFO as `latest`",
      [](World &w) {
        std::string save = w.dir.path + "/fifo-save";
        ::mkdir(save.c_str(), 0755);
        ::mkfifo((save + "/latest").c_str(), 0644);
        return gpipe_session_load_checkpoint(w.trained, save.c_str());
      },
      GPIPE_ERROR_IO,
      "cannot read '{dir}/fifo-save/latest': expected a regular file, "
      "found a FIFO",
      true);
  for (const char *step : {"-5", "18446744073709551615", "9223372036854775807"})
    tensor(
        "gpipe_session_load_checkpoint", "a step out of range",
        [step](World &w) {
          return gpipe_session_load_checkpoint(w.trained,
                                               w.withStep(step).c_str());
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "'{dir}/bad/state.json': step " + std::string(step) +
            " is not a count of steps done (expected 0 to "
            "9223372036854775806)",
        true);
  struct BadTensor {
    const char *name;
    float value;
    const char *message;
  } badTensors[] = {
      {"l2.b", kNaN,
       "tensor 'l2.b': expected finite values, got nan at "
       "element 0"},
      {"optimizer.0/l1.w", kInf,
       "tensor 'optimizer.0/l1.w': expected finite values, got inf at "
       "element 0"},
      {"optimizer.1/l3.w", -2,
       "tensor 'optimizer.1/l3.w': expected finite values >= 0 (adam's mean "
       "of squared gradients), got -2 at element 0"},
  };
  for (const BadTensor &bad : badTensors)
    tensor(
        "gpipe_session_load_checkpoint", "a tensor set_* refuses",
        [bad](World &w) {
          return gpipe_session_load_checkpoint(
              w.trained, w.withValue(bad.name, bad.value).c_str());
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "'{dir}/bad': " + std::string(bad.message), true);
  return c;
}

} // namespace gpipe::runtime::testing::conformance
