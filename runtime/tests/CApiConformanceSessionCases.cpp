//===- CApiConformanceSessionCases.cpp - Creation and query cases ---------===//
//
// The C API conformance table's cases for creating sessions (paths, bytes
// and every option) and for the const queries (CApiConformanceSupport.h).
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

/// Creates a session over the test model with `edit` applied to the default
/// options; the out_session must come back NULL.
gpipe_status_t
createWith(const std::function<void(gpipe_session_options_t &)> &edit) {
  gpipe_session_options_t options = defaultOptions();
  edit(options);
  const std::string &json = dropoutMlpJson();
  gpipe_session_t *session = reinterpret_cast<gpipe_session_t *>(&options);
  gpipe_status_t status = gpipe_session_create_from_json(
      json.data(), json.size(), "mlp", &options, &session);
  if (status != GPIPE_OK)
    EXPECT_EQ(session, nullptr) << "a failed creation sets *out_session NULL";
  else
    gpipe_session_destroy(session);
  return status;
}

const std::string kBadOptimizer =
    "options->optimizer: expected GPIPE_OPTIMIZER_SGD, _MOMENTUM, _RMSPROP, "
    "_ADAM or _ADAMW (0 to 4), got ";
const std::string kBadDevice = "options->device: expected GPIPE_DEVICE_CPU, "
                               "_CUDA or _HOST_EMULATION (0 to 2), got ";
const std::string kNoTimeline =
    "no timeline: no training step has run yet, or the session was created "
    "with record_timeline = 0";

std::string structSizeError(size_t got, const char *tail) {
  return "options->struct_size: expected " +
         std::to_string(GPIPE_SESSION_OPTIONS_MIN_SIZE) + " to " +
         std::to_string(sizeof(gpipe_session_options_t)) + ", got " +
         std::to_string(got) + tail;
}

} // namespace

std::vector<Case> creationCases() {
  using O = gpipe_session_options_t;
  const std::string json = "gpipe_session_create_from_json: ";
  std::vector<Case> c;
  auto create = [&](const char *what, std::function<void(O &)> edit,
                    gpipe_status_t status, const std::string &message) {
    c.push_back({"gpipe_session_create_from_json", what,
                 [edit](World &) { return createWith(edit); }, status,
                 json + message});
  };

  // Creation: paths, bytes and every option.
  c.push_back({"gpipe_session_create_from_file", "NULL path",
               [](World &) {
                 gpipe_session_t *s = nullptr;
                 return gpipe_session_create_from_file(nullptr, nullptr, &s);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               "gpipe_session_create_from_file: bundle_path is null"});
  c.push_back({"gpipe_session_create_from_file", "NULL out_session",
               [](World &) {
                 return gpipe_session_create_from_file("x.json", nullptr,
                                                       nullptr);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               "gpipe_session_create_from_file: out_session is null"});
  c.push_back({"gpipe_session_create_from_file", "a missing file",
               [](World &w) {
                 gpipe_session_t *s = nullptr;
                 return gpipe_session_create_from_file(
                     (w.dir.path + "/none.json").c_str(), nullptr, &s);
               },
               GPIPE_ERROR_IO,
               "gpipe_session_create_from_file: cannot open "
               "'{dir}/none.json': No such file or directory"});
  c.push_back({"gpipe_session_create_from_json", "NULL json",
               [](World &) {
                 gpipe_session_t *s = nullptr;
                 return gpipe_session_create_from_json(nullptr, 3, "m", nullptr,
                                                       &s);
               },
               GPIPE_ERROR_INVALID_ARGUMENT, json + "json is null"});
  c.push_back({"gpipe_session_create_from_json", "NULL out_session",
               [](World &) {
                 return gpipe_session_create_from_json("{}", 2, "m", nullptr,
                                                       nullptr);
               },
               GPIPE_ERROR_INVALID_ARGUMENT, json + "out_session is null"});
  create(
      "struct_size 0", [](O &o) { o.struct_size = 0; },
      GPIPE_ERROR_INVALID_ARGUMENT,
      structSizeError(
          0, " (initialize the options with gpipe_session_options_init)"));
  create(
      "struct_size one byte short of the first layout",
      [](O &o) { o.struct_size = GPIPE_SESSION_OPTIONS_MIN_SIZE - 1; },
      GPIPE_ERROR_INVALID_ARGUMENT,
      structSizeError(GPIPE_SESSION_OPTIONS_MIN_SIZE - 1, ""));
  create(
      "struct_size of a newer header",
      [](O &o) { o.struct_size = sizeof(O) + 8; }, GPIPE_ERROR_INVALID_ARGUMENT,
      structSizeError(sizeof(O) + 8,
                      " (options of a newer gpipe_runtime.h than this "
                      "library's, " GPIPE_EXPECTED_VERSION ")"));
  create(
      "struct_size of uninitialized memory",
      [](O &o) { o.struct_size = 0xbebebebebebebebeull; },
      GPIPE_ERROR_INVALID_ARGUMENT,
      structSizeError(
          0xbebebebebebebebeull,
          " (initialize the options with gpipe_session_options_init)"));
  for (int32_t value : {-1, 5, std::numeric_limits<int32_t>::min(),
                        std::numeric_limits<int32_t>::max()}) {
    create(
        "optimizer out of range",
        [value](O &o) { o.optimizer = rawEnum<gpipe_optimizer_t>(value); },
        GPIPE_ERROR_INVALID_ARGUMENT, kBadOptimizer + std::to_string(value));
    create(
        "device out of range",
        [value](O &o) { o.device = rawEnum<gpipe_device_t>(value); },
        GPIPE_ERROR_INVALID_ARGUMENT, kBadDevice + std::to_string(value));
  }
  struct RealOption {
    const char *field;
    float O::*member;
    float value;
    const char *expected, *found;
  } reals[] = {
      {"learning_rate", &O::learning_rate, kNaN, "a finite value >= 0", "nan"},
      {"learning_rate", &O::learning_rate, -1, "a finite value >= 0", "-1"},
      {"learning_rate", &O::learning_rate, kInf, "a finite value >= 0", "inf"},
      {"momentum", &O::momentum, -0.5f, "a finite value >= 0", "-0.5"},
      {"epsilon", &O::epsilon, kInf, "a finite value >= 0", "inf"},
      {"weight_decay", &O::weight_decay, -1, "a finite value >= 0", "-1"},
      {"clip_grad_norm", &O::clip_grad_norm, kNaN, "a finite value >= 0",
       "nan"},
      {"decay", &O::decay, 1, "a value in [0, 1)", "1"},
      {"beta1", &O::beta1, kNaN, "a value in [0, 1)", "nan"},
      {"beta2", &O::beta2, -0.1f, "a value in [0, 1)", "-0.1"},
  };
  for (const RealOption &r : reals)
    create(
        r.field, [r](O &o) { o.*r.member = r.value; },
        GPIPE_ERROR_INVALID_ARGUMENT,
        std::string("options->") + r.field + ": expected " + r.expected +
            ", got " + r.found);
  create(
      "recv_timeout_ms 0", [](O &o) { o.recv_timeout_ms = 0; },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "options->recv_timeout_ms: expected at least 1, got 0");
  for (uint32_t threads : {1025u, 0xffffffffu})
    create(
        "threads_per_device too many",
        [threads](O &o) { o.threads_per_device = threads; },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "options->threads_per_device: expected 0 (the cores divided "
        "among the devices) to 1024, got " +
            std::to_string(threads));
  for (gpipe_optimizer_t optimizer :
       {GPIPE_OPTIMIZER_ADAM, GPIPE_OPTIMIZER_RMSPROP})
    create(
        "weight decay without a rule for it",
        [optimizer](O &o) {
          o.optimizer = optimizer;
          o.weight_decay = 0.01f;
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        std::string("options->weight_decay: weight decay applies to sgd "
                    "and momentum (L2 added to the gradient) and to adamw "
                    "(decoupled), not to ") +
            (optimizer == GPIPE_OPTIMIZER_ADAM ? "adam: use adamw"
                                               : "rmsprop"));
  create(
      "a CUDA device in a program without the CUDA backend",
      [](O &o) { o.device = GPIPE_DEVICE_CUDA; }, GPIPE_ERROR_UNAVAILABLE,
      "no CUDA device: this program has no CUDA backend (built without a "
      "CUDA compiler, or it does not link runtime/cuda)");
  return c;
}

std::vector<Case> queryCases() {
  std::vector<Case> c;

  // Queries.
  auto query = [&](const char *function, const char *what,
                   std::function<gpipe_status_t(World &)> call,
                   gpipe_status_t status, const std::string &message,
                   bool fresh = false) {
    c.push_back({function, what, call, status,
                 std::string(function) + ": " + message, false, fresh});
  };
  query(
      "gpipe_session_query_info", "NULL session",
      [](World &) {
        gpipe_session_info_t info;
        return gpipe_session_query_info(nullptr, &info);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "session is null");
  query(
      "gpipe_session_query_info", "NULL out_info",
      [](World &w) { return gpipe_session_query_info(w.trained, nullptr); },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_info is null");
  for (size_t index : {size_t(2), std::numeric_limits<size_t>::max()})
    query(
        "gpipe_session_input_info", "index out of range",
        [index](World &w) {
          gpipe_tensor_info_t info;
          return gpipe_session_input_info(w.trained, index, &info);
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "index " + std::to_string(index) +
            " out of range: the model has 2 inputs");
  query(
      "gpipe_session_input_info", "NULL out_info",
      [](World &w) { return gpipe_session_input_info(w.trained, 0, nullptr); },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_info is null");
  query(
      "gpipe_session_parameter_info", "index out of range",
      [](World &w) {
        gpipe_tensor_info_t info;
        return gpipe_session_parameter_info(w.trained, 6, &info);
      },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "index 6 out of range: the model has 6 parameters");
  query(
      "gpipe_session_parameter_info", "NULL session",
      [](World &) {
        gpipe_tensor_info_t info;
        return gpipe_session_parameter_info(nullptr, 0, &info);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "session is null");
  for (int64_t rows :
       {int64_t(0), int64_t(-1), std::numeric_limits<int64_t>::min()})
    query(
        "gpipe_session_prediction_info", "rows < 1",
        [rows](World &w) {
          gpipe_tensor_info_t info;
          return gpipe_session_prediction_info(w.trained, rows, &info);
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "expected at least 1 row, got " + std::to_string(rows));
  query(
      "gpipe_session_prediction_info", "rows that overflow",
      [](World &w) {
        gpipe_tensor_info_t info;
        return gpipe_session_prediction_info(
            w.trained, std::numeric_limits<int64_t>::max(), &info);
      },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "the prediction of 9223372036854775807 rows has more elements than "
      "fit in size_t");
  query(
      "gpipe_session_steps_done", "NULL out_steps",
      [](World &w) { return gpipe_session_steps_done(w.trained, nullptr); },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_steps is null");
  query(
      "gpipe_session_peak_memory_bytes", "device out of range",
      [](World &w) {
        int64_t bytes;
        return gpipe_session_peak_memory_bytes(w.trained, 3, &bytes);
      },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "device 3 out of range: the pipeline has 3 devices");
  query(
      "gpipe_session_peak_memory_bytes", "NULL out_bytes",
      [](World &w) {
        return gpipe_session_peak_memory_bytes(w.trained, 0, nullptr);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_bytes is null");
  query(
      "gpipe_session_bubble_fraction", "before the first step",
      [](World &w) {
        double fraction;
        return gpipe_session_bubble_fraction(w.fresh, &fraction);
      },
      GPIPE_ERROR_FAILED_PRECONDITION, kNoTimeline, /*fresh=*/true);
  query(
      "gpipe_session_bubble_fraction", "NULL out_fraction",
      [](World &w) {
        return gpipe_session_bubble_fraction(w.trained, nullptr);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_fraction is null");
  query(
      "gpipe_session_write_trace", "before the first step",
      [](World &w) {
        return gpipe_session_write_trace(w.fresh,
                                         (w.dir.path + "/t.json").c_str());
      },
      GPIPE_ERROR_FAILED_PRECONDITION, kNoTimeline, /*fresh=*/true);
  query(
      "gpipe_session_write_trace", "NULL path",
      [](World &w) { return gpipe_session_write_trace(w.trained, nullptr); },
      GPIPE_ERROR_INVALID_ARGUMENT, "path is null");
  query(
      "gpipe_session_gradient_norm", "before the first step",
      [](World &w) {
        double norm;
        return gpipe_session_gradient_norm(w.fresh, &norm);
      },
      GPIPE_ERROR_FAILED_PRECONDITION, "no training step has run yet",
      /*fresh=*/true);
  query(
      "gpipe_session_gradient_norm", "NULL out_norm",
      [](World &w) { return gpipe_session_gradient_norm(w.trained, nullptr); },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_norm is null");
  return c;
}

} // namespace gpipe::runtime::testing::conformance
