//===- Runtime.hpp - A thin C++ layer over the gpipe C API ------*- C++ -*-===//
//
// RAII and std types over gpipe_runtime.h, header-only, throw-free: every
// fallible call returns a `gpipe::Status` or a `gpipe::Result<T>` that holds
// either the value or the status with the C API's message.
//
//   gpipe::Result<gpipe::Session> session = gpipe::Session::open(path, opts);
//   if (!session.ok()) { report(session.status().toString()); return 1; }
//   gpipe::Result<double> loss = session->trainStep({
//       gpipe::Input::f32("x", images), gpipe::Input::i32("labels", labels)});
//
// Ownership: a Session owns its gpipe_session_t (move-only; destroyed with
// it). An Input points at the caller's buffer, which must outlive the call it
// is passed to (only). Thread safety: as the C API; const methods may run
// concurrently with each other, a non-const method (trainStep, evaluate,
// setParameter) must not overlap any other call on the same Session.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_RUNTIME_HPP
#define GPIPE_RUNTIME_RUNTIME_HPP

#include "gpipe/runtime/gpipe_runtime.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpipe {

/// A C API status with its message ("" when ok).
class Status {
public:
  Status() = default;
  Status(gpipe_status_t code, std::string message)
      : statusCode(code), text(std::move(message)) {}
  /// The status of the C call that just returned `code` on this thread.
  static Status fromLastCall(gpipe_status_t code) {
    return code == GPIPE_OK ? Status() : Status(code, gpipe_last_error());
  }

  bool ok() const { return statusCode == GPIPE_OK; }
  gpipe_status_t code() const { return statusCode; }
  const std::string &message() const { return text; }
  /// "GPIPE_ERROR_IO: gpipe_session_create_from_file: cannot open ...".
  std::string toString() const {
    return ok() ? "GPIPE_OK"
                : std::string(gpipe_status_string(statusCode)) + ": " + text;
  }

private:
  gpipe_status_t statusCode = GPIPE_OK;
  std::string text;
};

/// A value, or the status that says why there is none.
template <typename T> class Result {
public:
  Result(T value) : content(std::move(value)) {}
  Result(Status status) : failure(std::move(status)) {}

  bool ok() const { return content.has_value(); }
  const Status &status() const { return failure; }
  /// The value; only when ok().
  T &value() & { return *content; }
  const T &value() const & { return *content; }
  T &&value() && { return std::move(*content); }
  T &operator*() & { return *content; }
  const T &operator*() const & { return *content; }
  T *operator->() { return &*content; }
  const T *operator->() const { return &*content; }

private:
  std::optional<T> content;
  Status failure;
};

/// A model input, a parameter or the prediction (gpipe_tensor_info_t).
struct TensorInfo {
  std::string name;
  gpipe_element_type_t type = GPIPE_ELEMENT_F32;
  bool batched = false;
  std::vector<int64_t> shape;
  size_t elementCount = 0;

  static TensorInfo fromC(const gpipe_tensor_info_t &info) {
    TensorInfo result;
    result.name = info.name ? info.name : "";
    result.type = info.type;
    result.batched = info.batched != 0;
    result.shape.assign(info.shape, info.shape + info.rank);
    result.elementCount = info.element_count;
    return result;
  }
};

/// One named model input of a batch; points at the caller's elements.
struct Input {
  std::string name;
  gpipe_element_type_t type = GPIPE_ELEMENT_F32;
  const void *data = nullptr;
  size_t elementCount = 0;

  static Input f32(std::string name, const float *data, size_t count) {
    return {std::move(name), GPIPE_ELEMENT_F32, data, count};
  }
  static Input f32(std::string name, const std::vector<float> &values) {
    return f32(std::move(name), values.data(), values.size());
  }
  static Input i32(std::string name, const int32_t *data, size_t count) {
    return {std::move(name), GPIPE_ELEMENT_I32, data, count};
  }
  static Input i32(std::string name, const std::vector<int32_t> &values) {
    return i32(std::move(name), values.data(), values.size());
  }
};

/// What Session::evaluate returns.
struct Evaluation {
  double loss = 0.0;
  /// Row-major in `shape` (the prediction at the evaluated row count).
  std::vector<float> prediction;
  std::vector<int64_t> shape;
};

/// A loaded bundle: owns a gpipe_session_t.
class Session {
public:
  using Options = gpipe_session_options_t;

  /// The C API's defaults (gpipe_session_options_init).
  static Options defaultOptions() {
    Options options;
    gpipe_session_options_init(&options);
    return options;
  }

  /// gpipe_session_create_from_file.
  static Result<Session> open(const std::string &bundlePath,
                              const Options &options = defaultOptions()) {
    gpipe_session_t *handle = nullptr;
    gpipe_status_t code =
        gpipe_session_create_from_file(bundlePath.c_str(), &options, &handle);
    if (code != GPIPE_OK)
      return Status::fromLastCall(code);
    return Session(handle);
  }

  /// gpipe_session_create_from_json; `sourceName` labels errors.
  static Result<Session> fromJson(const std::string &json,
                                  const std::string &sourceName,
                                  const Options &options = defaultOptions()) {
    gpipe_session_t *handle = nullptr;
    gpipe_status_t code = gpipe_session_create_from_json(
        json.data(), json.size(), sourceName.c_str(), &options, &handle);
    if (code != GPIPE_OK)
      return Status::fromLastCall(code);
    return Session(handle);
  }

  Session(Session &&other) noexcept : handle(std::exchange(other.handle, {})) {}
  Session &operator=(Session &&other) noexcept {
    if (this != &other) {
      gpipe_session_destroy(handle);
      handle = std::exchange(other.handle, nullptr);
    }
    return *this;
  }
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;
  ~Session() { gpipe_session_destroy(handle); }

  /// The C handle, still owned by this Session.
  gpipe_session_t *get() const { return handle; }

  // Queries. They cannot fail on a Session that open/fromJson returned;
  // on a moved-from Session they return empty values.

  gpipe_session_info_t info() const {
    gpipe_session_info_t result{};
    gpipe_session_query_info(handle, &result);
    return result;
  }
  std::string model() const {
    const char *name = info().model;
    return name ? name : "";
  }
  int64_t batchSize() const { return info().batch_size; }
  size_t deviceCount() const { return info().device_count; }
  size_t microbatchCount() const { return info().microbatch_count; }

  std::vector<TensorInfo> inputs() const {
    std::vector<TensorInfo> result;
    gpipe_tensor_info_t c;
    for (size_t i = 0; i < info().input_count; ++i)
      if (gpipe_session_input_info(handle, i, &c) == GPIPE_OK)
        result.push_back(TensorInfo::fromC(c));
    return result;
  }
  std::vector<TensorInfo> parameters() const {
    std::vector<TensorInfo> result;
    gpipe_tensor_info_t c;
    for (size_t i = 0; i < info().parameter_count; ++i)
      if (gpipe_session_parameter_info(handle, i, &c) == GPIPE_OK)
        result.push_back(TensorInfo::fromC(c));
    return result;
  }
  int64_t stepsDone() const {
    int64_t steps = 0;
    gpipe_session_steps_done(handle, &steps);
    return steps;
  }
  std::vector<int64_t> peakMemoryBytes() const {
    std::vector<int64_t> result(deviceCount(), 0);
    for (size_t d = 0; d < result.size(); ++d)
      gpipe_session_peak_memory_bytes(handle, d, &result[d]);
    return result;
  }

  // Fallible calls.

  /// gpipe_session_prediction_info at `rows` rows.
  Result<TensorInfo> prediction(int64_t rows) const {
    gpipe_tensor_info_t c;
    gpipe_status_t code = gpipe_session_prediction_info(handle, rows, &c);
    if (code != GPIPE_OK)
      return Status::fromLastCall(code);
    return TensorInfo::fromC(c);
  }

  /// gpipe_session_bubble_fraction of the last step.
  Result<double> bubbleFraction() const {
    double fraction = 0;
    gpipe_status_t code = gpipe_session_bubble_fraction(handle, &fraction);
    if (code != GPIPE_OK)
      return Status::fromLastCall(code);
    return fraction;
  }

  /// gpipe_session_gradient_norm: the global gradient norm of the last
  /// step, before clipping.
  Result<double> gradientNorm() const {
    double norm = 0;
    gpipe_status_t code = gpipe_session_gradient_norm(handle, &norm);
    if (code != GPIPE_OK)
      return Status::fromLastCall(code);
    return norm;
  }

  /// One training step (gpipe_session_train_step); the mini-batch loss.
  Result<double> trainStep(const std::vector<Input> &inputs) {
    std::vector<gpipe_input_t> c = toC(inputs);
    double loss = 0;
    gpipe_status_t code =
        gpipe_session_train_step(handle, c.data(), c.size(), &loss);
    if (code != GPIPE_OK)
      return Status::fromLastCall(code);
    return loss;
  }

  /// Forward on `rows` rows (gpipe_session_evaluate) with the prediction.
  Result<Evaluation> evaluate(int64_t rows, const std::vector<Input> &inputs) {
    Result<TensorInfo> shape = prediction(rows);
    if (!shape.ok())
      return shape.status();
    Evaluation result;
    result.shape = shape->shape;
    result.prediction.resize(shape->elementCount);
    std::vector<gpipe_input_t> c = toC(inputs);
    gpipe_status_t code = gpipe_session_evaluate(
        handle, rows, c.data(), c.size(), result.prediction.size(),
        result.prediction.data(), &result.loss);
    if (code != GPIPE_OK)
      return Status::fromLastCall(code);
    return result;
  }

  /// A copy of parameter `name` (gpipe_session_get_parameter).
  Result<std::vector<float>> parameter(const std::string &name) const {
    return copy(name, gpipe_session_get_parameter);
  }
  /// A copy of the gradient of `name` from the last step.
  Result<std::vector<float>> gradient(const std::string &name) const {
    return copy(name, gpipe_session_get_gradient);
  }
  /// gpipe_session_set_parameter.
  Status setParameter(const std::string &name,
                      const std::vector<float> &values) {
    return Status::fromLastCall(gpipe_session_set_parameter(
        handle, name.c_str(), values.data(), values.size()));
  }

  /// gpipe_session_set_learning_rate: the rate of the next steps.
  Status setLearningRate(float learningRate) {
    return Status::fromLastCall(
        gpipe_session_set_learning_rate(handle, learningRate));
  }
  /// gpipe_session_get_learning_rate.
  float learningRate() const {
    float rate = 0;
    gpipe_session_get_learning_rate(handle, &rate);
    return rate;
  }
  /// gpipe_session_optimizer_slot_count: state tensors per parameter.
  uint32_t optimizerSlotCount() const {
    uint32_t slots = 0;
    gpipe_session_optimizer_slot_count(handle, &slots);
    return slots;
  }
  /// A copy of optimizer state `slot` of parameter `name`.
  Result<std::vector<float>> optimizerState(const std::string &name,
                                            uint32_t slot) const {
    size_t size = 0;
    gpipe_status_t code =
        gpipe_session_optimizer_state_size(handle, name.c_str(), slot, &size);
    if (code != GPIPE_OK)
      return Status::fromLastCall(code);
    std::vector<float> values(size);
    code = gpipe_session_get_optimizer_state(handle, name.c_str(), slot,
                                             values.size(), values.data());
    if (code != GPIPE_OK)
      return Status::fromLastCall(code);
    return values;
  }
  /// gpipe_session_set_optimizer_state.
  Status setOptimizerState(const std::string &name, uint32_t slot,
                           const std::vector<float> &values) {
    return Status::fromLastCall(gpipe_session_set_optimizer_state(
        handle, name.c_str(), slot, values.data(), values.size()));
  }
  /// gpipe_session_set_steps_done: the next step is `steps` + 1.
  Status setStepsDone(int64_t steps) {
    return Status::fromLastCall(gpipe_session_set_steps_done(handle, steps));
  }

  /// gpipe_session_write_trace: the last step's Chrome trace.
  Status writeTrace(const std::string &path) const {
    return Status::fromLastCall(
        gpipe_session_write_trace(handle, path.c_str()));
  }

private:
  explicit Session(gpipe_session_t *handle) : handle(handle) {}

  static std::vector<gpipe_input_t> toC(const std::vector<Input> &inputs) {
    std::vector<gpipe_input_t> c;
    c.reserve(inputs.size());
    for (const Input &input : inputs)
      c.push_back(
          {input.name.c_str(), input.type, input.data, input.elementCount});
    return c;
  }

  template <typename Getter>
  Result<std::vector<float>> copy(const std::string &name,
                                  Getter getter) const {
    size_t size = 0;
    gpipe_status_t code =
        gpipe_session_parameter_size(handle, name.c_str(), &size);
    if (code != GPIPE_OK)
      return Status::fromLastCall(code);
    std::vector<float> values(size);
    code = getter(handle, name.c_str(), values.size(), values.data());
    if (code != GPIPE_OK)
      return Status::fromLastCall(code);
    return values;
  }

  gpipe_session_t *handle = nullptr;
};

} // namespace gpipe

#endif // GPIPE_RUNTIME_RUNTIME_HPP
