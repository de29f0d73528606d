//===- CApi.cpp - The C API of the gpipe runtime --------------------------===//
//
// gpipe_runtime.h over the runtime's Engine: status strings, options,
// sessions and queries (training, evaluation and parameters are in
// CApiTraining.cpp). This layer checks the arguments itself, so that each
// failure gets its own status and a message naming the argument; the
// runtime's Status codes map to gpipe_status_t one for one (an unreadable
// bundle is GPIPE_ERROR_IO, bad text GPIPE_ERROR_INVALID_BUNDLE); what a
// device reports during a step is GPIPE_ERROR_RUNTIME, what the non-finite
// guard stops GPIPE_ERROR_NON_FINITE. No exception crosses
// the C boundary: an allocation failure is GPIPE_ERROR_OUT_OF_MEMORY.
//
//===----------------------------------------------------------------------===//

#include "capi/CApiSupport.h"

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/Engine.h"
#include "gpipe/runtime/exec/Executor.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

using namespace gpipe::runtime::capi;

//===----------------------------------------------------------------------===//
// Versions, status and options
//===----------------------------------------------------------------------===//

#ifndef GPIPE_VERSION_STRING
#error "the build defines GPIPE_VERSION_STRING (the project's version)"
#endif

const char *gpipe_runtime_version(void) { return GPIPE_VERSION_STRING; }

int gpipe_runtime_api_version(void) { return GPIPE_RUNTIME_API_VERSION; }

const char *gpipe_status_string(gpipe_status_t status) {
  switch (status) {
  case GPIPE_OK:
    return "GPIPE_OK";
  case GPIPE_ERROR_INVALID_ARGUMENT:
    return "GPIPE_ERROR_INVALID_ARGUMENT";
  case GPIPE_ERROR_NOT_FOUND:
    return "GPIPE_ERROR_NOT_FOUND";
  case GPIPE_ERROR_BUFFER_TOO_SMALL:
    return "GPIPE_ERROR_BUFFER_TOO_SMALL";
  case GPIPE_ERROR_IO:
    return "GPIPE_ERROR_IO";
  case GPIPE_ERROR_INVALID_BUNDLE:
    return "GPIPE_ERROR_INVALID_BUNDLE";
  case GPIPE_ERROR_RUNTIME:
    return "GPIPE_ERROR_RUNTIME";
  case GPIPE_ERROR_FAILED_PRECONDITION:
    return "GPIPE_ERROR_FAILED_PRECONDITION";
  case GPIPE_ERROR_OUT_OF_MEMORY:
    return "GPIPE_ERROR_OUT_OF_MEMORY";
  case GPIPE_ERROR_UNAVAILABLE:
    return "GPIPE_ERROR_UNAVAILABLE";
  case GPIPE_ERROR_DEADLINE_EXCEEDED:
    return "GPIPE_ERROR_DEADLINE_EXCEEDED";
  case GPIPE_ERROR_CANCELLED:
    return "GPIPE_ERROR_CANCELLED";
  case GPIPE_ERROR_NON_FINITE:
    return "GPIPE_ERROR_NON_FINITE";
  case GPIPE_STATUS_ENUM_MIN:
  case GPIPE_STATUS_ENUM_MAX:
    break;
  }
  return "GPIPE_ERROR_UNKNOWN";
}

const char *gpipe_last_error(void) { return lastThreadError.c_str(); }

void gpipe_session_options_init(gpipe_session_options_t *out_options) {
  if (!out_options)
    return;
  rt::ExecutorConfig defaults;
  *out_options = gpipe_session_options_t{};
  out_options->struct_size = sizeof(gpipe_session_options_t);
  out_options->device = GPIPE_DEVICE_CPU;
  out_options->seed = defaults.seed;
  out_options->optimizer = GPIPE_OPTIMIZER_SGD;
  out_options->learning_rate = defaults.optimizer.learningRate;
  out_options->momentum = defaults.optimizer.momentum;
  out_options->decay = defaults.optimizer.decay;
  out_options->beta1 = defaults.optimizer.beta1;
  out_options->beta2 = defaults.optimizer.beta2;
  out_options->epsilon = defaults.optimizer.epsilon;
  out_options->recv_timeout_ms = uint32_t(defaults.recvTimeout.count());
  out_options->record_timeline = defaults.recordTimeline ? 1 : 0;
  out_options->threads_per_device = defaults.threading.threadsPerDevice;
  out_options->weight_decay = defaults.optimizer.weightDecay;
  out_options->clip_grad_norm = defaults.optimizer.clipGradNorm;
  // On, as gpipe-run's --check-finite: a diverged run stops at once, naming
  // the tensor, instead of training on nan.
  out_options->check_finite = 1;
}

//===----------------------------------------------------------------------===//
// Sessions
//===----------------------------------------------------------------------===//

gpipe_status_t
gpipe_session_create_from_file(const char *bundle_path,
                               const gpipe_session_options_t *options,
                               gpipe_session_t **out_session) {
  const char *function = "gpipe_session_create_from_file";
  return guarded(nullptr, function, [&]() -> gpipe_status_t {
    if (!out_session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_session is null");
    *out_session = nullptr;
    if (!bundle_path)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "bundle_path is null");
    return createSession(function, rt::loadBundle(bundle_path), options,
                         out_session);
  });
}

gpipe_status_t gpipe_session_create_from_json(
    const char *json, size_t json_length, const char *source_name,
    const gpipe_session_options_t *options, gpipe_session_t **out_session) {
  const char *function = "gpipe_session_create_from_json";
  return guarded(nullptr, function, [&]() -> gpipe_status_t {
    if (!out_session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_session is null");
    *out_session = nullptr;
    if (!json)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "json is null");
    return createSession(
        function,
        rt::parseBundle(std::string(json, json_length),
                        source_name ? source_name : "<memory>"),
        options, out_session);
  });
}

void gpipe_session_destroy(gpipe_session_t *session) { delete session; }

const char *gpipe_session_last_error(const gpipe_session_t *session) {
  return session ? session->lastError.c_str() : "";
}

//===----------------------------------------------------------------------===//
// Queries
//===----------------------------------------------------------------------===//

gpipe_status_t gpipe_session_query_info(const gpipe_session_t *session,
                                        gpipe_session_info_t *out_info) {
  const char *function = "gpipe_session_query_info";
  if (!session)
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "session is null");
  if (!out_info)
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "out_info is null");
  const rt::Bundle &bundle = session->executor->bundle();
  out_info->model = bundle.model.c_str();
  out_info->batch_size = bundle.batch;
  out_info->device_count = session->executor->numDevices();
  out_info->microbatch_count = bundle.microbatchRows.size();
  out_info->input_count = session->inputs.size();
  out_info->parameter_count = session->params.size();
  return succeed(nullptr);
}

static gpipe_status_t indexedInfo(const char *function,
                                  const gpipe_session_t *session, size_t index,
                                  gpipe_tensor_info_t *out_info, bool input) {
  if (!session)
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "session is null");
  if (!out_info)
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "out_info is null");
  const std::vector<gpipe_tensor_info_t> &infos =
      input ? session->inputs : session->params;
  if (index >= infos.size())
    return guarded(nullptr, function, [&] {
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "index " + std::to_string(index) + " out of range: the " +
                      "model has " + std::to_string(infos.size()) +
                      (input ? " inputs" : " parameters"));
    });
  *out_info = infos[index];
  return succeed(nullptr);
}

gpipe_status_t gpipe_session_input_info(const gpipe_session_t *session,
                                        size_t index,
                                        gpipe_tensor_info_t *out_info) {
  return indexedInfo("gpipe_session_input_info", session, index, out_info,
                     /*input=*/true);
}

gpipe_status_t gpipe_session_parameter_info(const gpipe_session_t *session,
                                            size_t index,
                                            gpipe_tensor_info_t *out_info) {
  return indexedInfo("gpipe_session_parameter_info", session, index, out_info,
                     /*input=*/false);
}

gpipe_status_t gpipe_session_prediction_info(const gpipe_session_t *session,
                                             int64_t rows,
                                             gpipe_tensor_info_t *out_info) {
  const char *function = "gpipe_session_prediction_info";
  return guarded(nullptr, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!out_info)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_info is null");
    if (rows < 1)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "expected at least 1 row, got " + std::to_string(rows));
    if (!atRows(session->prediction, rows, *out_info))
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "the prediction of " + std::to_string(rows) +
                      " rows has more elements than fit in size_t");
    return succeed(nullptr);
  });
}

gpipe_status_t gpipe_session_steps_done(const gpipe_session_t *session,
                                        int64_t *out_steps) {
  const char *function = "gpipe_session_steps_done";
  if (!session)
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "session is null");
  if (!out_steps)
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "out_steps is null");
  *out_steps = session->executor->stepsDone();
  return succeed(nullptr);
}

gpipe_status_t gpipe_session_peak_memory_bytes(const gpipe_session_t *session,
                                               size_t device,
                                               int64_t *out_bytes) {
  const char *function = "gpipe_session_peak_memory_bytes";
  return guarded(nullptr, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!out_bytes)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_bytes is null");
    std::vector<int64_t> peaks = session->executor->peakMemoryBytes();
    if (device >= peaks.size())
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "device " + std::to_string(device) +
                      " out of range: the pipeline has " +
                      std::to_string(peaks.size()) + " devices");
    *out_bytes = peaks[device];
    return succeed(nullptr);
  });
}

gpipe_status_t gpipe_session_bubble_fraction(const gpipe_session_t *session,
                                             double *out_fraction) {
  const char *function = "gpipe_session_bubble_fraction";
  if (!session)
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "session is null");
  if (!out_fraction)
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "out_fraction is null");
  if (!hasTimeline(session))
    return fail(nullptr, GPIPE_ERROR_FAILED_PRECONDITION, function,
                kNoTimeline);
  *out_fraction = session->executor->timeline().bubbleFraction();
  return succeed(nullptr);
}

gpipe_status_t gpipe_session_write_trace(const gpipe_session_t *session,
                                         const char *path) {
  const char *function = "gpipe_session_write_trace";
  return guarded(nullptr, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!path)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "path is null");
    if (!hasTimeline(session))
      return fail(nullptr, GPIPE_ERROR_FAILED_PRECONDITION, function,
                  kNoTimeline);
    std::string error = session->executor->timeline().writeChromeTrace(path);
    if (!error.empty())
      return fail(nullptr, GPIPE_ERROR_IO, function, error);
    return succeed(nullptr);
  });
}
