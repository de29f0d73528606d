//===- CApi.cpp - The C API of the gpipe runtime --------------------------===//
//
// gpipe_runtime.h over PipelineExecutor. The executor and the bundle reader
// return their errors as strings; this layer checks the arguments itself
// (so that each failure gets its own status and a message naming the
// argument), reads the bundle file itself (so that an unreadable file is
// GPIPE_ERROR_IO and bad text GPIPE_ERROR_INVALID_BUNDLE), and maps what the
// executor reports after those checks to GPIPE_ERROR_RUNTIME. No exception
// crosses the C boundary: an allocation failure is GPIPE_ERROR_OUT_OF_MEMORY.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"

#include "gpipe/runtime/BundleReader.h"
#include "gpipe/runtime/Engine.h"
#include "gpipe/runtime/Executor.h"

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

namespace rt = gpipe::runtime;

struct gpipe_session {
  std::unique_ptr<rt::Engine> executor;
  /// The message of the last non-const call ("" after a success).
  std::string lastError;
  /// Infos of the inputs and parameters, in bundle order; their names point
  /// into the executor's bundle, which never changes.
  std::vector<gpipe_tensor_info_t> inputs;
  std::vector<gpipe_tensor_info_t> params;
  /// The prediction at the full batch.
  gpipe_tensor_info_t prediction{};
  std::map<std::string, size_t> inputIndex;
};

namespace {

thread_local std::string lastThreadError;

/// Records a failure of `function` on this thread (and on `session`, for
/// non-const calls) and returns `status`.
gpipe_status_t fail(gpipe_session_t *session, gpipe_status_t status,
                    const char *function, const std::string &message) {
  try {
    lastThreadError = std::string(function) + ": " + message;
    if (session)
      session->lastError = lastThreadError;
  } catch (const std::bad_alloc &) {
    // Keep what fits: the status still says what happened.
    lastThreadError.clear();
    if (session)
      session->lastError.clear();
  }
  return status;
}

/// The C code of a runtime Status: the enums match one for one.
gpipe_status_t toC(rt::StatusCode code) {
  return static_cast<gpipe_status_t>(code);
}
static_assert(
    int(rt::StatusCode::InvalidBundle) == GPIPE_ERROR_INVALID_BUNDLE &&
        int(rt::StatusCode::OutOfMemory) == GPIPE_ERROR_OUT_OF_MEMORY &&
        int(rt::StatusCode::Unavailable) == GPIPE_ERROR_UNAVAILABLE &&
        int(rt::StatusCode::DeadlineExceeded) == GPIPE_ERROR_DEADLINE_EXCEEDED,
    "gpipe_status_t and StatusCode must match");

gpipe_status_t fail(gpipe_session_t *session, const rt::Status &status,
                    const char *function) {
  return fail(session, toC(status.code()), function, status.message());
}

gpipe_status_t succeed(gpipe_session_t *session) {
  lastThreadError.clear();
  if (session)
    session->lastError.clear();
  return GPIPE_OK;
}

/// Runs `body` (which returns a status through fail/succeed), turning an
/// exception into a status so that none crosses the C boundary.
template <typename Body>
gpipe_status_t guarded(gpipe_session_t *session, const char *function,
                       Body &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(session, GPIPE_ERROR_OUT_OF_MEMORY, function, "out of memory");
  } catch (const std::exception &e) {
    return fail(session, GPIPE_ERROR_RUNTIME, function,
                std::string("internal error: ") + e.what());
  }
}

std::string shapeString(const int64_t *shape, size_t rank) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string shapeString(const gpipe_tensor_info_t &info) {
  return shapeString(info.shape, info.rank);
}

const char *typeName(gpipe_element_type_t type) {
  return type == GPIPE_ELEMENT_F32 ? "f32" : "i32";
}

gpipe_element_type_t toC(rt::ElementType type) {
  return type == rt::ElementType::F32 ? GPIPE_ELEMENT_F32 : GPIPE_ELEMENT_I32;
}

/// Fills `info` from a shape; fails (returns false) on a rank above
/// GPIPE_MAX_RANK or an element count that does not fit.
bool makeInfo(const char *name, gpipe_element_type_t type, bool batched,
              const std::vector<int64_t> &shape, gpipe_tensor_info_t &info) {
  info = gpipe_tensor_info_t{};
  info.name = name;
  info.type = type;
  info.batched = batched ? 1 : 0;
  if (shape.size() > GPIPE_MAX_RANK)
    return false;
  info.rank = shape.size();
  size_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    info.shape[i] = shape[i];
    if (shape[i] < 0 ||
        (shape[i] > 0 &&
         count > std::numeric_limits<size_t>::max() / size_t(shape[i])))
      return false;
    count *= size_t(shape[i]);
  }
  info.element_count = count;
  return true;
}

/// `info` (batched, at the full batch) at `rows` rows; false on overflow.
bool atRows(const gpipe_tensor_info_t &info, int64_t rows,
            gpipe_tensor_info_t &out) {
  out = info;
  if (!info.batched || info.rank == 0)
    return true;
  out.shape[0] = rows;
  size_t perRow =
      info.shape[0] ? info.element_count / size_t(info.shape[0]) : 0;
  if (perRow && size_t(rows) > std::numeric_limits<size_t>::max() / perRow)
    return false;
  out.element_count = perRow * size_t(rows);
  return true;
}

std::string validateOptions(const gpipe_session_options_t &o) {
  auto bad = [](const char *field, const char *expected, double value) {
    char found[64];
    std::snprintf(found, sizeof(found), "%g", value);
    return std::string("options->") + field + ": expected " + expected +
           ", got " + found;
  };
  if (int64_t(o.optimizer) < GPIPE_OPTIMIZER_SGD ||
      int64_t(o.optimizer) > GPIPE_OPTIMIZER_ADAM)
    return "options->optimizer: expected GPIPE_OPTIMIZER_SGD, _MOMENTUM, "
           "_RMSPROP or _ADAM (0 to 3), got " +
           std::to_string(int(o.optimizer));
  struct NonNegative {
    const char *field;
    float value;
  } nonNegative[] = {{"learning_rate", o.learning_rate},
                     {"momentum", o.momentum},
                     {"epsilon", o.epsilon}};
  for (const NonNegative &f : nonNegative)
    if (!std::isfinite(f.value) || f.value < 0)
      return bad(f.field, "a finite value >= 0", f.value);
  struct Fraction {
    const char *field;
    float value;
  } fractions[] = {{"decay", o.decay}, {"beta1", o.beta1}, {"beta2", o.beta2}};
  for (const Fraction &f : fractions)
    if (!(f.value >= 0 && f.value < 1))
      return bad(f.field, "a value in [0, 1)", f.value);
  if (o.recv_timeout_ms < 1)
    return "options->recv_timeout_ms: expected at least 1, got 0";
  if (int64_t(o.device) < GPIPE_DEVICE_CPU ||
      int64_t(o.device) > GPIPE_DEVICE_HOST_EMULATION)
    return "options->device: expected GPIPE_DEVICE_CPU, _CUDA or "
           "_HOST_EMULATION (0 to 2), got " +
           std::to_string(int(o.device));
  return {};
}

rt::EngineOptions toEngineOptions(const gpipe_session_options_t &o) {
  rt::EngineOptions engine;
  static const rt::OptimizerKind kinds[] = {
      rt::OptimizerKind::Sgd, rt::OptimizerKind::Momentum,
      rt::OptimizerKind::RmsProp, rt::OptimizerKind::Adam};
  static const rt::DeviceKind devices[] = {
      rt::DeviceKind::Cpu, rt::DeviceKind::Cuda, rt::DeviceKind::HostEmulation};
  engine.device = devices[o.device];
  engine.optimizer.kind = kinds[o.optimizer];
  engine.optimizer.learningRate = o.learning_rate;
  engine.optimizer.momentum = o.momentum;
  engine.optimizer.decay = o.decay;
  engine.optimizer.beta1 = o.beta1;
  engine.optimizer.beta2 = o.beta2;
  engine.optimizer.epsilon = o.epsilon;
  engine.seed = o.seed;
  engine.timeout = std::chrono::milliseconds(o.recv_timeout_ms);
  engine.recordTimeline = o.record_timeline != 0;
  return engine;
}

/// Creates the session of a parsed bundle: checks the options, builds the
/// executor (which validates the bundle) and the infos.
gpipe_status_t createSession(const char *function,
                             rt::StatusOr<rt::Bundle> load,
                             const gpipe_session_options_t *options,
                             gpipe_session_t **out_session) {
  if (!load.ok())
    return fail(nullptr, load.status(), function);
  gpipe_session_options_t o;
  gpipe_session_options_init(&o);
  if (options)
    o = *options;
  std::string error = validateOptions(o);
  if (!error.empty())
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function, error);

  auto session = std::make_unique<gpipe_session>();
  rt::StatusOr<std::unique_ptr<rt::Engine>> engine =
      rt::createEngine(std::move(*load), toEngineOptions(o));
  if (!engine.ok())
    return engine.status().code() == rt::StatusCode::InvalidBundle
               ? fail(nullptr, GPIPE_ERROR_INVALID_BUNDLE, function,
                      "invalid bundle: " + engine.status().message())
               : fail(nullptr, engine.status(), function);
  session->executor = std::move(*engine);
  const rt::Bundle &bundle = session->executor->bundle();
  auto tooLarge = [&](const std::string &what, size_t rank) {
    return fail(nullptr, GPIPE_ERROR_INVALID_BUNDLE, function,
                what + " has rank " + std::to_string(rank) +
                    " (the C API supports up to " +
                    std::to_string(GPIPE_MAX_RANK) + ") or too many elements");
  };
  for (const rt::ModelInputSpec &input : bundle.inputs) {
    gpipe_tensor_info_t info;
    if (!makeInfo(input.name.c_str(), toC(input.type), true, input.shape, info))
      return tooLarge("model input '" + input.name + "'", input.shape.size());
    session->inputIndex[input.name] = session->inputs.size();
    session->inputs.push_back(info);
  }
  for (const rt::ParamSpec &param : bundle.params) {
    gpipe_tensor_info_t info;
    if (!makeInfo(param.name.c_str(), GPIPE_ELEMENT_F32, false, param.shape,
                  info))
      return tooLarge("parameter '" + param.name + "'", param.shape.size());
    session->params.push_back(info);
  }
  // The last stage's loss op (validateBundle guarantees one) and its first
  // operand, the prediction.
  const rt::StageProgram &last = bundle.stages.back();
  for (const rt::Op &op : last.forward) {
    if (op.results.empty() || op.results[0] != last.loss)
      continue;
    const rt::ValueSpec &spec = last.values[op.operands[0]];
    const char *kind = op.kind == rt::OpKind::SoftmaxCrossEntropy
                           ? "softmax_cross_entropy"
                           : "mse_loss";
    if (!makeInfo(kind, toC(spec.type), spec.batched, spec.shape,
                  session->prediction))
      return tooLarge("the prediction", spec.shape.size());
  }
  *out_session = session.release();
  return succeed(*out_session);
}

std::string quotedNames(const std::vector<gpipe_tensor_info_t> &infos) {
  std::string names;
  size_t shown = 0;
  for (const gpipe_tensor_info_t &info : infos) {
    if (shown == 8) {
      names += ", ... (" + std::to_string(infos.size()) + " in all)";
      break;
    }
    names += (shown++ ? ", '" : "'") + std::string(info.name) + "'";
  }
  return names;
}

/// Checks `inputs` against the model's inputs at `rows` rows and builds the
/// batch; on failure records the error and returns its status.
gpipe_status_t makeBatch(gpipe_session_t *session, const char *function,
                         int64_t rows, const gpipe_input_t *inputs,
                         size_t inputCount, rt::Batch &batch) {
  if (!inputs && inputCount > 0)
    return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "inputs is null but input_count is " +
                    std::to_string(inputCount));
  std::vector<size_t> givenAt(session->inputs.size(), SIZE_MAX);
  for (size_t i = 0; i < inputCount; ++i) {
    const gpipe_input_t &input = inputs[i];
    std::string at = "inputs[" + std::to_string(i) + "]";
    if (!input.name)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  at + ".name is null");
    auto found = session->inputIndex.find(input.name);
    if (found == session->inputIndex.end())
      return fail(session, GPIPE_ERROR_NOT_FOUND, function,
                  at + ": unknown model input '" + input.name +
                      "' (the model reads " + quotedNames(session->inputs) +
                      ")");
    size_t index = found->second;
    if (givenAt[index] != SIZE_MAX)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  at + ": model input '" + input.name +
                      "' is given twice (also inputs[" +
                      std::to_string(givenAt[index]) + "])");
    givenAt[index] = i;
    gpipe_tensor_info_t expected;
    atRows(session->inputs[index], rows, expected); // rows checked by caller
    std::string where = "input '" + std::string(input.name) + "'";
    if (input.type != GPIPE_ELEMENT_F32 && input.type != GPIPE_ELEMENT_I32)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  where + ": unknown element type " +
                      std::to_string(int(input.type)) +
                      " (expected GPIPE_ELEMENT_F32 or GPIPE_ELEMENT_I32)");
    if (input.type != expected.type)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  where + ": expected " + typeName(expected.type) +
                      " elements, got " + typeName(input.type));
    if (input.element_count != expected.element_count)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  where + ": expected " +
                      std::to_string(expected.element_count) + " " +
                      typeName(expected.type) + " elements (shape " +
                      shapeString(expected) + "), got " +
                      std::to_string(input.element_count));
    if (!input.data)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  where + ": data is null");
    std::vector<int64_t> shape(expected.shape, expected.shape + expected.rank);
    size_t n = input.element_count;
    if (input.type == GPIPE_ELEMENT_F32) {
      const float *data = static_cast<const float *>(input.data);
      batch[input.name] =
          rt::HostTensor::floats(std::move(shape), {data, data + n});
    } else {
      const int32_t *data = static_cast<const int32_t *>(input.data);
      batch[input.name] =
          rt::HostTensor::ints(std::move(shape), {data, data + n});
    }
  }
  for (size_t index = 0; index < session->inputs.size(); ++index) {
    if (givenAt[index] != SIZE_MAX)
      continue;
    gpipe_tensor_info_t expected;
    atRows(session->inputs[index], rows, expected);
    return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "missing model input '" + std::string(expected.name) +
                    "' (expected " + typeName(expected.type) + " " +
                    shapeString(expected) + ")");
  }
  return GPIPE_OK;
}

/// The parameter or gradient `name` for the const getters.
gpipe_status_t copyParameter(const char *function,
                             const gpipe_session_t *session, const char *name,
                             size_t capacity, float *out_values,
                             bool gradient) {
  if (!session)
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "session is null");
  if (!name)
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "name is null");
  if (!out_values)
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "out_values is null");
  std::vector<float> values;
  rt::Status status = gradient ? session->executor->gradient(name, values)
                               : session->executor->parameter(name, values);
  if (status.code() == rt::StatusCode::NotFound)
    return fail(nullptr, GPIPE_ERROR_NOT_FOUND, function,
                "unknown parameter '" + std::string(name) +
                    "' (the model has " + quotedNames(session->params) + ")");
  if (!status.ok())
    return fail(nullptr, GPIPE_ERROR_RUNTIME, function, status.message());
  if (capacity < values.size())
    return fail(nullptr, GPIPE_ERROR_BUFFER_TOO_SMALL, function,
                "parameter '" + std::string(name) + "' has " +
                    std::to_string(values.size()) +
                    " elements, the buffer holds " + std::to_string(capacity));
  std::memcpy(out_values, values.data(), values.size() * sizeof(float));
  return succeed(nullptr);
}

/// Whether the last step left a timeline.
bool hasTimeline(const gpipe_session_t *session) {
  const rt::Timeline &timeline = session->executor->timeline();
  for (unsigned d = 0; d < timeline.numDevices(); ++d)
    if (!timeline.lane(d).empty())
      return true;
  return false;
}

const char *const kNoTimeline =
    "no timeline: no training step has run yet, or the session was created "
    "with record_timeline = 0";

} // namespace

//===----------------------------------------------------------------------===//
// Status and options
//===----------------------------------------------------------------------===//

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
  }
  return "GPIPE_ERROR_UNKNOWN";
}

const char *gpipe_last_error(void) { return lastThreadError.c_str(); }

void gpipe_session_options_init(gpipe_session_options_t *out_options) {
  if (!out_options)
    return;
  rt::ExecutorConfig defaults;
  *out_options = gpipe_session_options_t{};
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

//===----------------------------------------------------------------------===//
// Training and evaluation
//===----------------------------------------------------------------------===//

gpipe_status_t gpipe_session_train_step(gpipe_session_t *session,
                                        const gpipe_input_t *inputs,
                                        size_t input_count, double *out_loss) {
  const char *function = "gpipe_session_train_step";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!out_loss)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_loss is null");
    rt::Batch batch;
    gpipe_status_t status =
        makeBatch(session, function, session->executor->bundle().batch, inputs,
                  input_count, batch);
    if (status != GPIPE_OK)
      return status;
    rt::StepResult result = session->executor->trainStep(batch);
    if (!result.ok())
      return fail(session, GPIPE_ERROR_RUNTIME, function, result.error);
    *out_loss = result.loss;
    return succeed(session);
  });
}

gpipe_status_t gpipe_session_evaluate(gpipe_session_t *session, int64_t rows,
                                      const gpipe_input_t *inputs,
                                      size_t input_count,
                                      size_t prediction_capacity,
                                      float *out_prediction, double *out_loss) {
  const char *function = "gpipe_session_evaluate";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!out_loss)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_loss is null");
    if (rows < 1)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "expected at least 1 row, got " + std::to_string(rows));
    gpipe_tensor_info_t prediction;
    if (!atRows(session->prediction, rows, prediction))
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "the prediction of " + std::to_string(rows) +
                      " rows has more elements than fit in size_t");
    for (const gpipe_tensor_info_t &input : session->inputs) {
      gpipe_tensor_info_t atRowCount;
      if (!atRows(input, rows, atRowCount))
        return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                    "input '" + std::string(input.name) + "' at " +
                        std::to_string(rows) +
                        " rows has more elements than fit in size_t");
    }
    if (!out_prediction && prediction_capacity > 0)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_prediction is null but prediction_capacity is " +
                      std::to_string(prediction_capacity));
    if (out_prediction && prediction_capacity < prediction.element_count)
      return fail(session, GPIPE_ERROR_BUFFER_TOO_SMALL, function,
                  "the prediction of " + std::to_string(rows) +
                      " rows (shape " + shapeString(prediction) + ") needs " +
                      std::to_string(prediction.element_count) +
                      " floats, the buffer holds " +
                      std::to_string(prediction_capacity));
    rt::Batch batch;
    gpipe_status_t status =
        makeBatch(session, function, rows, inputs, input_count, batch);
    if (status != GPIPE_OK)
      return status;
    rt::EvalResult result = session->executor->evaluate(batch, rows);
    if (!result.ok())
      return fail(session, GPIPE_ERROR_RUNTIME, function, result.error);
    if (out_prediction) {
      if (result.prediction.f32.size() != prediction.element_count)
        return fail(session, GPIPE_ERROR_RUNTIME, function,
                    "internal error: the prediction has " +
                        std::to_string(result.prediction.f32.size()) +
                        " elements, expected " +
                        std::to_string(prediction.element_count));
      std::memcpy(out_prediction, result.prediction.f32.data(),
                  prediction.element_count * sizeof(float));
    }
    *out_loss = result.loss;
    return succeed(session);
  });
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

gpipe_status_t gpipe_session_parameter_size(const gpipe_session_t *session,
                                            const char *name,
                                            size_t *out_element_count) {
  const char *function = "gpipe_session_parameter_size";
  return guarded(nullptr, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!name)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "name is null");
    if (!out_element_count)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_element_count is null");
    auto param = std::find_if(session->params.begin(), session->params.end(),
                              [&](const gpipe_tensor_info_t &info) {
                                return std::strcmp(info.name, name) == 0;
                              });
    if (param == session->params.end())
      return fail(nullptr, GPIPE_ERROR_NOT_FOUND, function,
                  "unknown parameter '" + std::string(name) +
                      "' (the model has " + quotedNames(session->params) + ")");
    *out_element_count = param->element_count;
    return succeed(nullptr);
  });
}

gpipe_status_t gpipe_session_get_parameter(const gpipe_session_t *session,
                                           const char *name, size_t capacity,
                                           float *out_values) {
  const char *function = "gpipe_session_get_parameter";
  return guarded(nullptr, function, [&] {
    return copyParameter(function, session, name, capacity, out_values,
                         /*gradient=*/false);
  });
}

gpipe_status_t gpipe_session_get_gradient(const gpipe_session_t *session,
                                          const char *name, size_t capacity,
                                          float *out_values) {
  const char *function = "gpipe_session_get_gradient";
  return guarded(nullptr, function, [&] {
    return copyParameter(function, session, name, capacity, out_values,
                         /*gradient=*/true);
  });
}

gpipe_status_t gpipe_session_set_parameter(gpipe_session_t *session,
                                           const char *name,
                                           const float *values,
                                           size_t element_count) {
  const char *function = "gpipe_session_set_parameter";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!name)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "name is null");
    auto param = std::find_if(session->params.begin(), session->params.end(),
                              [&](const gpipe_tensor_info_t &info) {
                                return std::strcmp(info.name, name) == 0;
                              });
    if (!values)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "values is null");
    if (param == session->params.end())
      return fail(session, GPIPE_ERROR_NOT_FOUND, function,
                  "unknown parameter '" + std::string(name) +
                      "' (the model has " + quotedNames(session->params) + ")");
    if (element_count != param->element_count)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "parameter '" + std::string(name) + "': expected " +
                      std::to_string(param->element_count) +
                      " elements (shape " + shapeString(*param) + "), got " +
                      std::to_string(element_count));
    for (size_t i = 0; i < element_count; ++i)
      if (!std::isfinite(values[i])) {
        char found[32];
        std::snprintf(found, sizeof(found), "%g", double(values[i]));
        return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                    "parameter '" + std::string(name) +
                        "': expected finite values, got " + found +
                        " at element " + std::to_string(i));
      }
    rt::Status status = session->executor->setParameter(
        name, std::vector<float>(values, values + element_count));
    if (!status.ok())
      return fail(session, GPIPE_ERROR_RUNTIME, function, status.message());
    return succeed(session);
  });
}
