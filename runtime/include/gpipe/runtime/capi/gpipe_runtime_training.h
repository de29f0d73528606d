/*===- gpipe_runtime_training.h - Training and evaluation ---------*- C -*-===*\
 *
 * One training step or evaluation on host buffers, the gradient norm,
 * and the library's training loops (images, text) with their options.
 *
 * Part of the C API; applications include gpipe/runtime/gpipe_runtime.h,
 * which includes every part in order and states the conventions (status,
 * ownership, thread safety) that the comments here rely on.
 *
 *===----------------------------------------------------------------------===*/

#ifndef GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_TRAINING_H
#define GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_TRAINING_H

#include "gpipe/runtime/capi/gpipe_runtime_session.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Training and evaluation
 *===----------------------------------------------------------------------===*/

/* One model input of a batch: `element_count` elements of `type` at `data`,
 * row-major in the input's shape (gpipe_session_input_info) with the batch's
 * row count as dimension 0. Read during the call only. */
typedef struct gpipe_input_t {
  const char *name;
  gpipe_element_type_t type;
  const void *data; /* const float * or const int32_t *, per `type` */
  size_t element_count;
} gpipe_input_t;

/* One training step on a mini-batch of batch_size rows: `inputs` holds each
 * model input exactly once, in any order. Runs every device's program on its
 * own thread (joined before the return) and applies one optimizer step;
 * *out_loss is the mini-batch loss (the row-weighted mean of the
 * micro-batch losses). The input buffers are copied; the caller keeps them.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, a missing or
 * duplicated input, a wrong element type or count), GPIPE_ERROR_NOT_FOUND (an
 * input name the model does not have), GPIPE_ERROR_RUNTIME (a device failed;
 * parameters and optimizer state are unchanged), GPIPE_ERROR_NON_FINITE (the
 * guard, options->check_finite: a nan or infinite loss or gradient, the
 * parameters unchanged; or a parameter the update made non-finite, the
 * update applied), GPIPE_ERROR_OUT_OF_MEMORY. A failed step does not count
 * in gpipe_session_steps_done.
 * Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_train_step(gpipe_session_t *session,
                                                  const gpipe_input_t *inputs,
                                                  size_t input_count,
                                                  double *out_loss);

/* The global gradient norm of the last training step (train_step or a step
 * of the training loops): the L2 norm of every parameter's gradient across
 * all the devices, before clipping. Steps measure it when the session clips
 * or guards (options->clip_grad_norm > 0 or check_finite, the default).
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer),
 * GPIPE_ERROR_FAILED_PRECONDITION (no step has run, the session neither
 * clips nor guards, or the last step failed before it measured the norm).
 * Reads the session: must not overlap a non-const call on it. */
GPIPE_API gpipe_status_t
gpipe_session_gradient_norm(const gpipe_session_t *session, double *out_norm);

/* Forward only (no dropout, no gradients, no parameter change) on `rows`
 * rows (any number >= 1; each input has `rows` as dimension 0). Writes the
 * prediction (the loss op's first operand, gpipe_session_prediction_info) to
 * out_prediction, which holds `prediction_capacity` floats, and the loss to
 * *out_loss. out_prediction may be NULL when prediction_capacity is 0: then
 * only the loss is computed.
 * Errors: as gpipe_session_train_step, plus GPIPE_ERROR_BUFFER_TOO_SMALL
 * (prediction_capacity < the prediction's element count; checked before any
 * work). Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_evaluate(
    gpipe_session_t *session, int64_t rows, const gpipe_input_t *inputs,
    size_t input_count, size_t prediction_capacity, float *out_prediction,
    double *out_loss);

/*===----------------------------------------------------------------------===*
 * Training loops (the library's, shared with gpipe-run)
 *===----------------------------------------------------------------------===*/

/* What a loop reports after each epoch (images) or evaluation (text). Fields
 * that do not apply are NaN. */
typedef struct gpipe_training_report_t {
  uint32_t epoch;       /* images: 1-based; text: 0 */
  int64_t step;         /* steps done: in the epoch (images), the run (text) */
  double train_loss;    /* mean since the last report */
  double test_accuracy; /* images: share of the test set classified right */
  double validation_loss; /* text: nats per character */
  double samples_per_second;
} gpipe_training_report_t;

/* Receives each report; `user_data` is the loop's argument. May be NULL. */
typedef void (*gpipe_report_fn)(const gpipe_training_report_t *report,
                                void *user_data);

/* The loops' options grow at their end only, as gpipe_session_options_t:
 * struct_size (set by the _init function) says how much of the struct the
 * caller knows, the fields beyond it take their defaults, and a struct_size
 * below the _MIN_SIZE (the first layout, API version 3) or above the
 * library's sizeof is refused with GPIPE_ERROR_INVALID_ARGUMENT. */
typedef struct gpipe_image_training_options_t {
  /* sizeof(gpipe_image_training_options_t) of the caller's header; set by
   * gpipe_image_training_options_init. */
  size_t struct_size;
  uint32_t epochs;             /* >= 1. Default 10. */
  int64_t max_steps_per_epoch; /* 0: the whole training set. Default 0. */
  float learning_rate;         /* > 0 and finite. Default 1e-3. */
  int cosine_schedule;   /* Nonzero: decay to 0 over the run. Default 1. */
  uint64_t shuffle_seed; /* Default 1. */

  /* Added after the first layout (GPIPE_IMAGE_TRAINING_OPTIONS_MIN_SIZE). */

  /* Steps of linear warmup to learning_rate before the schedule (as
   * gpipe-run's --warmup-steps); >= 0 and fewer than the run's steps.
   * Default 0. */
  int64_t warmup_steps;
} gpipe_image_training_options_t;

/* The struct_size of the first layout the library accepts (API version 3:
 * struct_size through shuffle_seed). */
#define GPIPE_IMAGE_TRAINING_OPTIONS_MIN_SIZE                                  \
  (offsetof(gpipe_image_training_options_t, shuffle_seed) + sizeof(uint64_t))

/* Sets struct_size to sizeof(gpipe_image_training_options_t) and every
 * other field to its default. NULL is a no-op. Thread-safe. */
GPIPE_API void
gpipe_image_training_options_init(gpipe_image_training_options_t *out_options);

/* Trains an image classifier: epochs over the shuffled training set of the
 * IDX files in `dataset_dir` (Fashion-MNIST's names: train-images-idx3-ubyte,
 * ... , raw or .gz), the test accuracy after each. The model must have one
 * f32 input of height x width values per example and one i32 label input.
 * *out_test_accuracy (may be NULL) gets the last epoch's accuracy.
 * `options` may be NULL for the defaults.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL session or directory, a bad
 * option or struct_size, a model whose inputs do not fit the images; the
 * message says what was expected and found), GPIPE_ERROR_IO (a file missing
 * or unreadable), GPIPE_ERROR_RUNTIME (a failed step),
 * GPIPE_ERROR_NON_FINITE (the guard stopped a step), GPIPE_ERROR_OUT_OF_MEMORY.
 * Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_train_images(
    gpipe_session_t *session, const char *dataset_dir,
    const gpipe_image_training_options_t *options, gpipe_report_fn report,
    void *user_data, double *out_test_accuracy);

typedef struct gpipe_text_training_options_t {
  /* sizeof(gpipe_text_training_options_t) of the caller's header; set by
   * gpipe_text_training_options_init. */
  size_t struct_size;
  int64_t steps;         /* >= 1. Default 1000. */
  uint32_t eval_every;   /* Steps between evaluations; 0: at the end only.
                            Default 100. */
  uint32_t eval_batches; /* Validation batches per evaluation; 0: all.
                            Default 8. */
  float learning_rate;   /* > 0 and finite. Default 1e-3. */
  int cosine_schedule;   /* Default 1. */
  uint64_t seed;         /* The windows drawn. Default 1. */

  /* Added after the first layout (GPIPE_TEXT_TRAINING_OPTIONS_MIN_SIZE). */
  int64_t warmup_steps; /* As the image options'. Default 0. */
} gpipe_text_training_options_t;

/* The struct_size of the first layout the library accepts (API version 3:
 * struct_size through seed). */
#define GPIPE_TEXT_TRAINING_OPTIONS_MIN_SIZE                                   \
  (offsetof(gpipe_text_training_options_t, seed) + sizeof(uint64_t))

/* Sets struct_size to sizeof(gpipe_text_training_options_t) and every other
 * field to its default. NULL is a no-op. Thread-safe. */
GPIPE_API void
gpipe_text_training_options_init(gpipe_text_training_options_t *out_options);

/* Trains a character language model on the text at `corpus_path` (a file or
 * a directory of files; every tenth document is validation): steps of random
 * windows, the validation loss before the first step, every eval_every steps
 * and after the last. The model must have i32 inputs ids, positions and
 * targets of one shape [batch, seq]. *out_validation_loss (may be NULL) gets
 * the last validation loss, in nats per character. `options` may be
 * NULL for the defaults.
 * Errors: as gpipe_session_train_images. */
GPIPE_API gpipe_status_t gpipe_session_train_text(
    gpipe_session_t *session, const char *corpus_path,
    const gpipe_text_training_options_t *options, gpipe_report_fn report,
    void *user_data, double *out_validation_loss);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_TRAINING_H */
