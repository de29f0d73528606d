/*===- gpipe_runtime_session.h - Session lifetime and queries -----*- C -*-===*\
 *
 * Creating and destroying a session, its last error, and the const
 * queries: model, inputs, parameters, prediction, steps done, memory,
 * bubble fraction and trace.
 *
 * Part of the C API; applications include gpipe/runtime/gpipe_runtime.h,
 * which includes every part in order and states the conventions (status,
 * ownership, thread safety) that the comments here rely on.
 *
 *===----------------------------------------------------------------------===*/

#ifndef GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_SESSION_H
#define GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_SESSION_H

#include "gpipe/runtime/capi/gpipe_runtime_options.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Sessions
 *===----------------------------------------------------------------------===*/

/* A loaded bundle with its parameters, gradients and optimizer state. */
typedef struct gpipe_session gpipe_session_t;

/* Reads the bundle file at `bundle_path`, checks it, and creates a session
 * that initializes every parameter from options->seed. `options` may be NULL
 * for the defaults; it is copied. On success *out_session is a new session
 * owned by the caller (release it with gpipe_session_destroy); on failure it
 * is NULL.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL path or out_session, an invalid
 * option), GPIPE_ERROR_IO (the file cannot be read), GPIPE_ERROR_INVALID_BUNDLE
 * (its text is not a valid bundle; the message names the file and the JSON
 * location), GPIPE_ERROR_OUT_OF_MEMORY.
 * Thread-safe: creations are independent. */
GPIPE_API gpipe_status_t gpipe_session_create_from_file(
    const char *bundle_path, const gpipe_session_options_t *options,
    gpipe_session_t **out_session);

/* As gpipe_session_create_from_file, from the `json_length` bytes of bundle
 * text at `json` (need not be NUL-terminated; copied). `source_name` labels
 * the text in error messages (e.g. the path it came from); NULL means
 * "<memory>". Errors as gpipe_session_create_from_file, without
 * GPIPE_ERROR_IO. Thread-safe. */
GPIPE_API gpipe_status_t gpipe_session_create_from_json(
    const char *json, size_t json_length, const char *source_name,
    const gpipe_session_options_t *options, gpipe_session_t **out_session);

/* Releases the session and everything it owns (its strings and info structs
 * become invalid). NULL is a no-op. Must not overlap any other call on the
 * session. */
GPIPE_API void gpipe_session_destroy(gpipe_session_t *session);

/* The message of the most recent call on `session` that took it non-const
 * (train, evaluate, set parameter): "" if that call returned GPIPE_OK or
 * none was made yet. Owned by the session, valid until its next non-const
 * call or its destruction. "" for a NULL session. Never NULL. Reads the
 * session: must not overlap a non-const call on it. */
GPIPE_API const char *gpipe_session_last_error(const gpipe_session_t *session);

/*===----------------------------------------------------------------------===*
 * Queries (const: may run concurrently with each other)
 *===----------------------------------------------------------------------===*/

typedef enum gpipe_element_type_e {
  GPIPE_ELEMENT_F32 = 0, /* float */
  GPIPE_ELEMENT_I32 = 1, /* int32_t */
  /* Not types: keep the enum 32-bit and any int32 value defined. */
  GPIPE_ELEMENT_ENUM_MIN = -0x7fffffff - 1,
  GPIPE_ELEMENT_ENUM_MAX = 0x7fffffff
} gpipe_element_type_t;

typedef struct gpipe_session_info_t {
  /* The bundle's model name; owned by the session. */
  const char *model;
  /* Rows of every training mini-batch (dimension 0 of each batched input). */
  int64_t batch_size;
  /* Pipeline devices K (= stages); one thread each during a step. */
  size_t device_count;
  /* Micro-batches M per mini-batch. */
  size_t microbatch_count;
  size_t input_count;
  size_t parameter_count;
} gpipe_session_info_t;

/* A model input, a parameter or the prediction. */
typedef struct gpipe_tensor_info_t {
  /* The input's or parameter's name; for the prediction the loss op,
   * "softmax_cross_entropy" (the prediction is the logits) or "mse_loss".
   * Owned by the session. */
  const char *name;
  gpipe_element_type_t type;
  /* Nonzero if dimension 0 is the batch (inputs and the prediction). */
  int batched;
  size_t rank;
  /* shape[0..rank); a batched tensor's shape[0] is its row count. */
  int64_t shape[GPIPE_MAX_RANK];
  /* The product of the shape. */
  size_t element_count;
} gpipe_tensor_info_t;

/* The session's model, batch size and counts.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL session or out_info). */
GPIPE_API gpipe_status_t gpipe_session_query_info(
    const gpipe_session_t *session, gpipe_session_info_t *out_info);

/* Model input `index` (in [0, input_count), bundle order) at the full batch:
 * its shape[0] is the batch size.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, index out of range). */
GPIPE_API gpipe_status_t
gpipe_session_input_info(const gpipe_session_t *session, size_t index,
                         gpipe_tensor_info_t *out_info);

/* Parameter `index` (in [0, parameter_count), bundle order); always f32 and
 * not batched.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, index out of range). */
GPIPE_API gpipe_status_t
gpipe_session_parameter_info(const gpipe_session_t *session, size_t index,
                             gpipe_tensor_info_t *out_info);

/* The prediction gpipe_session_evaluate writes for `rows` rows (>= 1): f32,
 * shape[0] = rows; its element_count is the buffer size evaluate needs.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, rows < 1, a size that
 * overflows). */
GPIPE_API gpipe_status_t
gpipe_session_prediction_info(const gpipe_session_t *session, int64_t rows,
                              gpipe_tensor_info_t *out_info);

/* The most steps a session counts: steps done are in [0,
 * GPIPE_MAX_STEPS_DONE], so that the next step's number (steps done + 1,
 * which seeds dropout and Adam's bias correction) is an int64_t.
 * gpipe_session_set_steps_done and a checkpoint's step are refused above
 * it; a training step once the count has reached it fails with
 * GPIPE_ERROR_FAILED_PRECONDITION. */
#define GPIPE_MAX_STEPS_DONE (INT64_MAX - 1)

/* The number of successful training steps (the optimizer's step count).
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer). */
GPIPE_API gpipe_status_t
gpipe_session_steps_done(const gpipe_session_t *session, int64_t *out_steps);

/* Per device, the high-water mark of the bytes its tensors held during the
 * last training step (by the executor's own accounting: parameters,
 * gradients, optimizer slots, kept and received activations, scratch);
 * before the first step, the resident bytes.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, device out of range). */
GPIPE_API gpipe_status_t gpipe_session_peak_memory_bytes(
    const gpipe_session_t *session, size_t device, int64_t *out_bytes);

/* The measured bubble fraction of the last training step: the share of
 * device time spent idle or waiting.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer),
 * GPIPE_ERROR_FAILED_PRECONDITION (no step has run, or record_timeline is
 * off). */
GPIPE_API gpipe_status_t gpipe_session_bubble_fraction(
    const gpipe_session_t *session, double *out_fraction);

/* Writes the last training step's timeline as Chrome trace event JSON
 * (open it in Perfetto or chrome://tracing; one row per device) to `path`.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer),
 * GPIPE_ERROR_FAILED_PRECONDITION (no step has run, or record_timeline is
 * off), GPIPE_ERROR_IO (the file cannot be written). */
GPIPE_API gpipe_status_t
gpipe_session_write_trace(const gpipe_session_t *session, const char *path);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_SESSION_H */
