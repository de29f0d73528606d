//===- Status.h - The one error type of the runtime -------------*- C++ -*-===//
//
// Every fallible runtime call returns a Status (or a StatusOr<T>): a code
// that says what kind of failure it is, so that callers (the C API, the
// tools' exit codes) branch on the code and never parse the text; a message,
// a full sentence that says what was expected and what was found; and where
// it happened, when that is known: the pipeline device, the instruction of
// its program, the micro-batch and the training step. The message already
// names that place in words; the context carries it as numbers.
//
// The codes match the C API's gpipe_status_t one for one (gpipe_runtime.h).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_STATUS_H
#define GPIPE_RUNTIME_STATUS_H

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace gpipe::runtime {

enum class StatusCode {
  Ok = 0,
  /// The caller's input: an option, a shape, a batch, a value out of range.
  InvalidArgument = 1,
  /// A name (model input, parameter) the model does not have.
  NotFound = 2,
  /// A caller's buffer smaller than the data to write into it.
  BufferTooSmall = 3,
  /// A file that cannot be read or written.
  Io = 4,
  /// A bundle that is not valid: syntax, checksum, version, structure, or
  /// a check the loader proves (shapes, schedule).
  InvalidBundle = 5,
  /// A device failed while running a step (a label out of range in a
  /// kernel, a backend error). Parameters are left as they were.
  DeviceFailure = 6,
  /// The object is not in the state the call needs.
  FailedPrecondition = 7,
  /// An allocation failed, on the host or a device.
  OutOfMemory = 8,
  /// The requested backend or device does not exist on this machine (no
  /// CUDA device, a runtime built without CUDA).
  Unavailable = 9,
  /// A peer or a device did not answer within its timeout.
  DeadlineExceeded = 10,
  /// A run stopped on request (a signal) at a step boundary, its files
  /// complete.
  Cancelled = 11,
  /// Training diverged: a loss, a gradient or a parameter became nan or
  /// infinite (OptimizerConfig::checkFinite); the message names the step,
  /// the stage and the tensor.
  NonFinite = 12,
};

/// "invalid argument", "no such name", ... for messages and logs.
const char *statusCodeName(StatusCode code);

/// Where an error happened; -1 where unknown or not applicable.
struct StatusContext {
  int device = -1;
  int64_t instruction = -1;
  int microbatch = -1;
  int64_t step = -1;
};

class [[nodiscard]] Status {
public:
  /// Success.
  Status() = default;
  Status(StatusCode code, std::string message, StatusContext context = {})
      : code_(code), message_(std::move(message)), context_(context) {
    assert(code != StatusCode::Ok && "an error needs an error code");
  }

  bool ok() const { return code_ == StatusCode::Ok; }
  StatusCode code() const { return code_; }
  /// "" on success.
  const std::string &message() const { return message_; }
  const StatusContext &context() const { return context_; }

  /// The same error with `prefix` put before its message ("'m.json': ...").
  Status withPrefix(const std::string &prefix) const {
    Status copy = *this;
    if (!ok())
      copy.message_ = prefix + copy.message_;
    return copy;
  }
  /// The same error with the step it happened in.
  Status atStep(int64_t step) const {
    Status copy = *this;
    copy.context_.step = step;
    return copy;
  }

private:
  StatusCode code_ = StatusCode::Ok;
  std::string message_;
  StatusContext context_;
};

/// A T, or the Status that says why there is none.
template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) {
    assert(!status_.ok() && "a StatusOr without a value needs an error");
  }

  bool ok() const { return value_.has_value(); }
  const Status &status() const { return status_; }
  T &value() {
    assert(ok());
    return *value_;
  }
  const T &value() const {
    assert(ok());
    return *value_;
  }
  T &operator*() { return value(); }
  const T &operator*() const { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

private:
  Status status_;
  std::optional<T> value_;
};

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_STATUS_H
