/*===- gpipe_runtime_state.h - Parameters, state, checkpoints -----*- C -*-===*\
 *
 * Reading and writing parameters, gradients, the learning rate, the
 * optimizer state and the step count, and saving and loading
 * checkpoints.
 *
 * Part of the C API; applications include gpipe/runtime/gpipe_runtime.h,
 * which includes every part in order and states the conventions (status,
 * ownership, thread safety) that the comments here rely on.
 *
 *===----------------------------------------------------------------------===*/

#ifndef GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_STATE_H
#define GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_STATE_H

#include "gpipe/runtime/capi/gpipe_runtime_session.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Parameters
 *===----------------------------------------------------------------------===*/

/* The element count of parameter `name`.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer), GPIPE_ERROR_NOT_FOUND
 * (no such parameter). */
GPIPE_API gpipe_status_t
gpipe_session_parameter_size(const gpipe_session_t *session, const char *name,
                             size_t *out_element_count);

/* Copies parameter `name` (row-major, gpipe_session_parameter_info's shape)
 * into out_values, which holds `capacity` floats.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer), GPIPE_ERROR_NOT_FOUND,
 * GPIPE_ERROR_BUFFER_TOO_SMALL (capacity < the parameter's element count). */
GPIPE_API gpipe_status_t
gpipe_session_get_parameter(const gpipe_session_t *session, const char *name,
                            size_t capacity, float *out_values);

/* As gpipe_session_get_parameter, for the gradient of parameter `name`
 * accumulated over the micro-batches of the last training step (zeros before
 * the first). */
GPIPE_API gpipe_status_t
gpipe_session_get_gradient(const gpipe_session_t *session, const char *name,
                           size_t capacity, float *out_values);

/* Overwrites parameter `name` with the `element_count` floats at `values`
 * (e.g. from a checkpoint); the optimizer state is kept.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, element_count not the
 * parameter's, a non-finite value), GPIPE_ERROR_NOT_FOUND.
 * Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_set_parameter(gpipe_session_t *session,
                                                     const char *name,
                                                     const float *values,
                                                     size_t element_count);

/*===----------------------------------------------------------------------===*
 * Training state: learning rate, optimizer state, step count
 *===----------------------------------------------------------------------===*/

/* Sets the learning rate of the next gpipe_session_train_step calls (e.g. a
 * schedule the application computes per step); the optimizer state is kept.
 * The library's training loops (gpipe_session_train_images / _text) use
 * their own options' rate and schedule, and restore this one when they
 * return. On an error the rate is unchanged. At rate 0 a step leaves the
 * parameters as they are, except under RMSProp, whose momentum term keeps
 * moving them by what earlier steps accumulated (TensorFlow's rule).
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL session; learning_rate not
 * finite or < 0). Non-const: must not overlap any other call on the
 * session. */
GPIPE_API gpipe_status_t
gpipe_session_set_learning_rate(gpipe_session_t *session, float learning_rate);

/* The learning rate of the next training step: options->learning_rate until
 * gpipe_session_set_learning_rate changes it.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer). */
GPIPE_API gpipe_status_t gpipe_session_get_learning_rate(
    const gpipe_session_t *session, float *out_learning_rate);

/* The number of optimizer state tensors ("slots") kept per parameter, each
 * of the parameter's shape: SGD 0, momentum 1 (slot 0: the velocity),
 * RMSProp 2 (0: the mean square ms, 1: the momentum mom), Adam 2 (0: m,
 * 1: v); Optimizers.h gives the update rules. A checkpoint saves slot k of
 * parameter p as "optimizer.<k>/<p>".
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer). */
GPIPE_API gpipe_status_t gpipe_session_optimizer_slot_count(
    const gpipe_session_t *session, uint32_t *out_slot_count);

/* The element count of optimizer state `slot` of parameter `name` (the
 * parameter's).
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, slot >= the slot
 * count), GPIPE_ERROR_NOT_FOUND (no such parameter). */
GPIPE_API gpipe_status_t gpipe_session_optimizer_state_size(
    const gpipe_session_t *session, const char *name, uint32_t slot,
    size_t *out_element_count);

/* Copies optimizer state `slot` of parameter `name` (row-major in the
 * parameter's shape; zeros before the first step) into out_values, which
 * holds `capacity` floats.
 * Errors: as gpipe_session_optimizer_state_size, plus
 * GPIPE_ERROR_BUFFER_TOO_SMALL (capacity < the element count). */
GPIPE_API gpipe_status_t gpipe_session_get_optimizer_state(
    const gpipe_session_t *session, const char *name, uint32_t slot,
    size_t capacity, float *out_values);

/* Overwrites optimizer state `slot` of parameter `name` with the
 * `element_count` floats at `values`. With gpipe_session_set_parameter and
 * gpipe_session_set_steps_done this moves a run into another session: the
 * next steps are bitwise those the first session would take.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, slot out of range,
 * element_count not the parameter's, a non-finite value, a negative value
 * in a mean of squared gradients: RMSProp's slot 0, Adam's slot 1),
 * GPIPE_ERROR_NOT_FOUND. On an error nothing changes.
 * Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_set_optimizer_state(
    gpipe_session_t *session, const char *name, uint32_t slot,
    const float *values, size_t element_count);

/* Sets the number of steps done (gpipe_session_steps_done): the next
 * training step is step `steps` + 1, which fixes Adam's bias correction and
 * the dropout masks.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL session, steps < 0 or
 * > GPIPE_MAX_STEPS_DONE).
 * Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_set_steps_done(gpipe_session_t *session,
                                                      int64_t steps);

/*===----------------------------------------------------------------------===*
 * Checkpoints (docs/Checkpoints.md)
 *===----------------------------------------------------------------------===*/

/* Saves the session's parameters, optimizer state and steps done as the
 * checkpoint `<dir>/step-<N>` (created with its parents; safetensors plus a
 * JSON state), atomically: a process killed at any point leaves the previous
 * checkpoint loadable. Then `<dir>/latest` names it, and all but the newest
 * `keep` checkpoints are deleted (0: none).
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL or empty pointer), GPIPE_ERROR_IO
 * (the directory cannot be created or written), GPIPE_ERROR_RUNTIME (a
 * device failed). Non-const: must not overlap any other call on the
 * session. */
GPIPE_API gpipe_status_t gpipe_session_save_checkpoint(gpipe_session_t *session,
                                                       const char *dir,
                                                       uint32_t keep);

/* Loads a checkpoint into the session: `path` is a checkpoint directory or a
 * save directory whose `latest` names one; it may come from a run on any
 * number of pipeline devices or another device kind. Every parameter and
 * optimizer state tensor must be there with the model's shape, each passes
 * its checksum, and the optimizer must be the session's; then the next step
 * is the checkpoint's step + 1. Nothing changes on an error.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL or empty pointer; a shape, the
 * optimizer or a checksum that does not match: the message names the tensor
 * and both shapes), GPIPE_ERROR_NOT_FOUND (a tensor the model needs is
 * missing), GPIPE_ERROR_IO (the files cannot be read), GPIPE_ERROR_RUNTIME.
 * Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_load_checkpoint(gpipe_session_t *session,
                                                       const char *path);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_STATE_H */
