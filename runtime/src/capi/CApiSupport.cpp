//===- CApiSupport.cpp - What the C API's entry points share --------------===//

#include "capi/CApiSupport.h"

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/kernels/Optimizers.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>

namespace gpipe::runtime::capi {

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
static_assert(int(rt::StatusCode::InvalidBundle) ==
                      GPIPE_ERROR_INVALID_BUNDLE &&
                  int(rt::StatusCode::OutOfMemory) ==
                      GPIPE_ERROR_OUT_OF_MEMORY &&
                  int(rt::StatusCode::Unavailable) == GPIPE_ERROR_UNAVAILABLE &&
                  int(rt::StatusCode::DeadlineExceeded) ==
                      GPIPE_ERROR_DEADLINE_EXCEEDED &&
                  int(rt::StatusCode::Cancelled) == GPIPE_ERROR_CANCELLED &&
                  int(rt::StatusCode::NonFinite) == GPIPE_ERROR_NON_FINITE,
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
  // Enums are compared as the int32 the caller stored: any value is
  // defined (the _ENUM_MIN/_MAX sentinels), only 0 to N name something.
  const int32_t optimizer = o.optimizer;
  if (optimizer < GPIPE_OPTIMIZER_SGD || optimizer > GPIPE_OPTIMIZER_ADAMW)
    return "options->optimizer: expected GPIPE_OPTIMIZER_SGD, _MOMENTUM, "
           "_RMSPROP, _ADAM or _ADAMW (0 to 4), got " +
           std::to_string(optimizer);
  struct NonNegative {
    const char *field;
    float value;
  } nonNegative[] = {{"learning_rate", o.learning_rate},
                     {"momentum", o.momentum},
                     {"epsilon", o.epsilon},
                     {"weight_decay", o.weight_decay},
                     {"clip_grad_norm", o.clip_grad_norm}};
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
  const int32_t device = o.device;
  if (device < GPIPE_DEVICE_CPU || device > GPIPE_DEVICE_HOST_EMULATION)
    return "options->device: expected GPIPE_DEVICE_CPU, _CUDA or "
           "_HOST_EMULATION (0 to 2), got " +
           std::to_string(device);
  if (o.threads_per_device > kMaxThreadsPerDevice)
    return "options->threads_per_device: expected 0 (the cores divided among "
           "the devices) to " +
           std::to_string(kMaxThreadsPerDevice) + ", got " +
           std::to_string(o.threads_per_device);
  // What only the combination rules out (weight decay for Adam): the
  // runtime's own check, as an option error.
  if (std::string error =
          rt::checkOptimizerConfig(toEngineOptions(o).optimizer);
      !error.empty())
    return "options->weight_decay: " + error;
  return {};
}

std::string checkStructSize(size_t size, size_t first, size_t own,
                            const char *init) {
  if (size >= first && size <= own)
    return {};
  // A newer header's struct grows by a few fields, not by kilobytes: a
  // larger size is more likely memory the caller never initialized.
  constexpr size_t kPlausibleGrowth = 1024;
  return "options->struct_size: expected " + std::to_string(first) + " to " +
         std::to_string(own) + ", got " + std::to_string(size) +
         (size == 0 || size > own + kPlausibleGrowth
              ? std::string(" (initialize the options with ") + init + ")"
          : size > own
              ? std::string(" (options of a newer gpipe_runtime.h than "
                            "this library's, ") +
                    GPIPE_VERSION_STRING + ")"
              : "");
}

std::string readOptions(const gpipe_session_options_t *options,
                        gpipe_session_options_t &o) {
  gpipe_session_options_init(&o);
  if (!options)
    return {};
  const size_t size = options->struct_size;
  const size_t own = sizeof(gpipe_session_options_t);
  std::string error = checkStructSize(size, GPIPE_SESSION_OPTIONS_MIN_SIZE, own,
                                      "gpipe_session_options_init");
  if (!error.empty())
    return error;
  // The caller's fields; those beyond its struct keep their defaults.
  std::memcpy(static_cast<void *>(&o), options, size);
  o.struct_size = own;
  gpipe_session_options_t defaults;
  gpipe_session_options_init(&defaults);
  using T = gpipe_session_options_t;
  keepDefaultBeyond(size, offsetof(T, threads_per_device), o.threads_per_device,
                    defaults.threads_per_device);
  keepDefaultBeyond(size, offsetof(T, weight_decay), o.weight_decay,
                    defaults.weight_decay);
  keepDefaultBeyond(size, offsetof(T, clip_grad_norm), o.clip_grad_norm,
                    defaults.clip_grad_norm);
  keepDefaultBeyond(size, offsetof(T, check_finite), o.check_finite,
                    defaults.check_finite);
  return {};
}

rt::EngineOptions toEngineOptions(const gpipe_session_options_t &o) {
  rt::EngineOptions engine;
  static const rt::OptimizerKind kinds[] = {
      rt::OptimizerKind::Sgd, rt::OptimizerKind::Momentum,
      rt::OptimizerKind::RmsProp, rt::OptimizerKind::Adam,
      rt::OptimizerKind::AdamW};
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
  engine.optimizer.weightDecay = o.weight_decay;
  engine.optimizer.clipGradNorm = o.clip_grad_norm;
  engine.optimizer.checkFinite = o.check_finite != 0;
  engine.seed = o.seed;
  engine.timeout = std::chrono::milliseconds(o.recv_timeout_ms);
  engine.recordTimeline = o.record_timeline != 0;
  engine.cpuThreading.threadsPerDevice = o.threads_per_device;
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
  std::string error = readOptions(options, o);
  if (error.empty())
    error = validateOptions(o);
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
  session->learningRate = o.learning_rate;
  session->measuresNorm = o.clip_grad_norm > 0 || o.check_finite != 0;
  session->checksFinite = o.check_finite != 0;
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
    const int32_t type = input.type;
    if (type != GPIPE_ELEMENT_F32 && type != GPIPE_ELEMENT_I32)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  where + ": unknown element type " + std::to_string(type) +
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
      // The guard refuses what would make the loss non-finite, naming it.
      if (session->checksFinite)
        for (size_t e = 0; e < n; ++e)
          if (!std::isfinite(data[e]))
            return fail(session, GPIPE_ERROR_NON_FINITE, function,
                        where +
                            ": expected finite values (the session "
                            "guards: check_finite), got " +
                            formatReal(data[e]) + " at element " +
                            std::to_string(e));
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

int64_t findParameter(const gpipe_session_t *session, const char *name) {
  for (size_t i = 0; i < session->params.size(); ++i)
    if (std::strcmp(session->params[i].name, name) == 0)
      return int64_t(i);
  return -1;
}

gpipe_status_t unknownParameter(gpipe_session_t *recordOn,
                                const gpipe_session_t *session,
                                const char *function, const char *name) {
  return fail(recordOn, GPIPE_ERROR_NOT_FOUND, function,
              "unknown parameter '" + std::string(name) + "' (the model has " +
                  quotedNames(session->params) + ")");
}

std::string formatReal(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

extern const char *const kNoTimeline =
    "no timeline: no training step has run yet, or the session was created "
    "with record_timeline = 0";

} // namespace gpipe::runtime::capi
