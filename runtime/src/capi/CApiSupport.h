//===- CApiSupport.h - What the C API's entry points share ----*- C++ -*-===//
//
// Private to runtime/src: the session behind the opaque handle, how a call
// records its error and picks its status, and the conversions and checks
// between C descriptions and the runtime's types. CApi.cpp holds the status,
// option, session and query entry points, CApiTraining.cpp the training,
// evaluation and parameter ones.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SRC_CAPISUPPORT_H
#define GPIPE_RUNTIME_SRC_CAPISUPPORT_H

#include "gpipe/runtime/gpipe_runtime.h"

#include "gpipe/runtime/exec/Engine.h"
#include "gpipe/runtime/base/Status.h"

#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <optional>
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
  /// The learning rate of the next train_step (options->learning_rate, then
  /// gpipe_session_set_learning_rate); the training loops schedule their
  /// own and restore this one.
  float learningRate = 0;
  /// The global gradient norm of the last step, if it measured one
  /// (gpipe_session_gradient_norm); train_step and the loops set it.
  std::optional<double> gradientNorm;
  /// Whether any step has run, and whether steps measure the norm (the
  /// session clips or guards): gpipe_session_gradient_norm's message.
  bool stepRan = false;
  bool measuresNorm = false;
  /// options->check_finite: inputs with nan or inf are refused.
  bool checksFinite = false;
};

namespace gpipe::runtime::capi {

/// The calling thread's last error (gpipe_last_error).
extern thread_local std::string lastThreadError;

gpipe_status_t fail(gpipe_session_t *session, gpipe_status_t status,
                    const char *function, const std::string &message);

gpipe_status_t toC(rt::StatusCode code);

gpipe_status_t fail(gpipe_session_t *session, const rt::Status &status,
                    const char *function);

gpipe_status_t succeed(gpipe_session_t *session);

std::string shapeString(const int64_t *shape, size_t rank);

std::string shapeString(const gpipe_tensor_info_t &info);

const char *typeName(gpipe_element_type_t type);

gpipe_element_type_t toC(rt::ElementType type);

bool makeInfo(const char *name, gpipe_element_type_t type, bool batched,
              const std::vector<int64_t> &shape, gpipe_tensor_info_t &info);

bool atRows(const gpipe_tensor_info_t &info, int64_t rows,
            gpipe_tensor_info_t &out);

/// The largest options->threads_per_device.
constexpr uint32_t kMaxThreadsPerDevice = 1024;

/// "" or what is wrong with the struct_size `size` of a caller's options
/// struct whose first layout has `first` bytes and this library's `own`;
/// `init` names the function that sets it.
std::string checkStructSize(size_t size, size_t first, size_t own,
                            const char *init);

/// Resets `field` (at `offset` of a caller's struct of `structSize` bytes) to
/// `fallback` unless the caller's struct holds all of it: a binary built
/// against an older header does not know the field.
template <typename Field>
void keepDefaultBeyond(size_t structSize, size_t offset, Field &field,
                       const Field &fallback) {
  if (structSize < offset + sizeof(Field))
    field = fallback;
}

/// The caller's options (or the defaults for null) as this library's struct:
/// "" or what is wrong with struct_size. Fields beyond the caller's
/// struct_size take their defaults.
std::string readOptions(const gpipe_session_options_t *options,
                        gpipe_session_options_t &o);

std::string validateOptions(const gpipe_session_options_t &o);

rt::EngineOptions toEngineOptions(const gpipe_session_options_t &o);

gpipe_status_t createSession(const char *function,
                             rt::StatusOr<rt::Bundle> load,
                             const gpipe_session_options_t *options,
                             gpipe_session_t **out_session);

std::string quotedNames(const std::vector<gpipe_tensor_info_t> &infos);

gpipe_status_t makeBatch(gpipe_session_t *session, const char *function,
                         int64_t rows, const gpipe_input_t *inputs,
                         size_t inputCount, rt::Batch &batch);

gpipe_status_t copyParameter(const char *function,
                             const gpipe_session_t *session, const char *name,
                             size_t capacity, float *out_values, bool gradient);

bool hasTimeline(const gpipe_session_t *session);

/// The index of parameter `name` in session->params, or -1.
int64_t findParameter(const gpipe_session_t *session, const char *name);

/// The NotFound failure of an unknown parameter name.
gpipe_status_t unknownParameter(gpipe_session_t *recordOn,
                                const gpipe_session_t *session,
                                const char *function, const char *name);

/// "%g" of `value`.
std::string formatReal(double value);

/// The message of a trace or bubble query before any timeline exists.
extern const char *const kNoTimeline;

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

} // namespace gpipe::runtime::capi

#endif // GPIPE_RUNTIME_SRC_CAPISUPPORT_H
