//===- CApiCheckpoints.cpp - The C API: the training state ----------------===//
//
// What a training run carries from one step to the next, through the
// session's engine: the learning rate, the optimizer state of each parameter
// (the tensors a checkpoint saves as "optimizer.<slot>/<name>") and the step
// count; and Checkpoint.h's save and load of all of it, with its errors
// mapped to gpipe_status_t.
//
//===----------------------------------------------------------------------===//

#include "capi/CApiSupport.h"

#include "gpipe/runtime/train/Checkpoint.h"
#include "gpipe/runtime/kernels/Optimizers.h"

#include <cmath>
#include <cstring>

using namespace gpipe::runtime::capi;

static_assert(GPIPE_MAX_STEPS_DONE == gpipe::runtime::kMaxStepsDone,
              "the C API's step limit is the runtime's");

//===----------------------------------------------------------------------===//
// Learning rate and steps
//===----------------------------------------------------------------------===//

gpipe_status_t gpipe_session_set_learning_rate(gpipe_session_t *session,
                                               float learning_rate) {
  const char *function = "gpipe_session_set_learning_rate";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!std::isfinite(learning_rate) || learning_rate < 0)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "expected a finite learning rate >= 0, got " +
                      formatReal(learning_rate));
    session->executor->setLearningRate(learning_rate);
    session->learningRate = learning_rate;
    return succeed(session);
  });
}

gpipe_status_t gpipe_session_get_learning_rate(const gpipe_session_t *session,
                                               float *out_learning_rate) {
  const char *function = "gpipe_session_get_learning_rate";
  return guarded(nullptr, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!out_learning_rate)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_learning_rate is null");
    *out_learning_rate = session->learningRate;
    return succeed(nullptr);
  });
}

gpipe_status_t gpipe_session_set_steps_done(gpipe_session_t *session,
                                            int64_t steps) {
  const char *function = "gpipe_session_set_steps_done";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (std::string error = rt::checkStepsDone(steps); !error.empty())
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function, error);
    session->executor->setStepsDone(steps);
    return succeed(session);
  });
}

//===----------------------------------------------------------------------===//
// Optimizer state
//===----------------------------------------------------------------------===//

namespace {

/// Checks the session, the name and the slot of an optimizer state call;
/// on success `param` is the parameter's info. Failures are recorded on
/// `recordOn` (the session for the non-const calls, else null).
gpipe_status_t checkSlot(gpipe_session_t *recordOn,
                         const gpipe_session_t *session, const char *function,
                         const char *name, uint32_t slot,
                         const gpipe_tensor_info_t *&param) {
  if (!session)
    return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "session is null");
  if (!name)
    return fail(recordOn, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "name is null");
  int64_t index = findParameter(session, name);
  if (index < 0)
    return unknownParameter(recordOn, session, function, name);
  param = &session->params[index];
  rt::OptimizerKind kind = session->executor->optimizerKind();
  unsigned slots = rt::optimizerSlots(kind);
  if (slot >= slots)
    return fail(recordOn, GPIPE_ERROR_INVALID_ARGUMENT, function,
                "optimizer state slot " + std::to_string(slot) +
                    " out of range: " + rt::optimizerKindName(kind) +
                    (slots == 0 ? " keeps none"
                                : " keeps " + std::to_string(slots) +
                                      " per parameter (slots 0 to " +
                                      std::to_string(slots - 1) + ")"));
  return GPIPE_OK;
}

std::string stateName(uint32_t slot, const char *name) {
  return "optimizer state " + std::to_string(slot) + " of parameter '" + name +
         "'";
}

} // namespace

gpipe_status_t
gpipe_session_optimizer_slot_count(const gpipe_session_t *session,
                                   uint32_t *out_slot_count) {
  const char *function = "gpipe_session_optimizer_slot_count";
  return guarded(nullptr, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!out_slot_count)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_slot_count is null");
    *out_slot_count = rt::optimizerSlots(session->executor->optimizerKind());
    return succeed(nullptr);
  });
}

gpipe_status_t
gpipe_session_optimizer_state_size(const gpipe_session_t *session,
                                   const char *name, uint32_t slot,
                                   size_t *out_element_count) {
  const char *function = "gpipe_session_optimizer_state_size";
  return guarded(nullptr, function, [&]() -> gpipe_status_t {
    const gpipe_tensor_info_t *param = nullptr;
    if (gpipe_status_t status =
            checkSlot(nullptr, session, function, name, slot, param))
      return status;
    if (!out_element_count)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_element_count is null");
    *out_element_count = param->element_count;
    return succeed(nullptr);
  });
}

gpipe_status_t gpipe_session_get_optimizer_state(const gpipe_session_t *session,
                                                 const char *name,
                                                 uint32_t slot, size_t capacity,
                                                 float *out_values) {
  const char *function = "gpipe_session_get_optimizer_state";
  return guarded(nullptr, function, [&]() -> gpipe_status_t {
    const gpipe_tensor_info_t *param = nullptr;
    if (gpipe_status_t status =
            checkSlot(nullptr, session, function, name, slot, param))
      return status;
    if (!out_values)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_values is null");
    if (capacity < param->element_count)
      return fail(nullptr, GPIPE_ERROR_BUFFER_TOO_SMALL, function,
                  stateName(slot, name) + " has " +
                      std::to_string(param->element_count) +
                      " elements, the buffer holds " +
                      std::to_string(capacity));
    std::vector<float> values;
    rt::Status status = session->executor->optimizerState(name, slot, values);
    if (!status.ok())
      return fail(nullptr, GPIPE_ERROR_RUNTIME, function, status.message());
    if (values.size() != param->element_count)
      return fail(nullptr, GPIPE_ERROR_RUNTIME, function,
                  "internal error: " + stateName(slot, name) + " has " +
                      std::to_string(values.size()) + " elements, expected " +
                      std::to_string(param->element_count));
    std::memcpy(out_values, values.data(), values.size() * sizeof(float));
    return succeed(nullptr);
  });
}

gpipe_status_t gpipe_session_set_optimizer_state(gpipe_session_t *session,
                                                 const char *name,
                                                 uint32_t slot,
                                                 const float *values,
                                                 size_t element_count) {
  const char *function = "gpipe_session_set_optimizer_state";
  return guarded(session, function, [&]() -> gpipe_status_t {
    const gpipe_tensor_info_t *param = nullptr;
    if (gpipe_status_t status =
            checkSlot(session, session, function, name, slot, param))
      return status;
    if (!values)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "values is null");
    if (element_count != param->element_count)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  stateName(slot, name) + ": expected " +
                      std::to_string(param->element_count) +
                      " elements (shape " + shapeString(*param) + "), got " +
                      std::to_string(element_count));
    if (std::string error =
            rt::checkStateValues(session->executor->optimizerKind(), int(slot),
                                 values, element_count);
        !error.empty())
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  stateName(slot, name) + ": " + error);
    rt::Status status = session->executor->setOptimizerState(
        name, slot, std::vector<float>(values, values + element_count));
    if (!status.ok())
      return fail(session, GPIPE_ERROR_RUNTIME, function, status.message());
    return succeed(session);
  });
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

gpipe_status_t gpipe_session_save_checkpoint(gpipe_session_t *session,
                                             const char *dir, uint32_t keep) {
  const char *function = "gpipe_session_save_checkpoint";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!dir || !*dir)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "dir is null or empty");
    rt::StatusOr<std::string> saved =
        rt::saveCheckpoint(*session->executor, dir, "{}", keep);
    return saved.ok() ? succeed(session)
                      : fail(session, saved.status(), function);
  });
}

gpipe_status_t gpipe_session_load_checkpoint(gpipe_session_t *session,
                                             const char *path) {
  const char *function = "gpipe_session_load_checkpoint";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!path || !*path)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "path is null or empty");
    rt::Status loaded = rt::loadCheckpoint(*session->executor, path);
    return loaded.ok() ? succeed(session) : fail(session, loaded, function);
  });
}
