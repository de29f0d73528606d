/*===- CApiClippingTest.h - Clipping and the guard, in C -----------*- C -*-===*
 *
 * Checks written in C against gpipe_runtime.h (CApiClippingTest.c) of
 * options->clip_grad_norm, options->check_finite, GPIPE_ERROR_NON_FINITE and
 * gpipe_session_gradient_norm; each returns NULL when it holds, else a
 * message valid until the next check.
 *
 *===----------------------------------------------------------------------===*/

#ifndef GPIPE_RUNTIME_TESTS_CAPICLIPPINGTEST_H
#define GPIPE_RUNTIME_TESTS_CAPICLIPPINGTEST_H

#include "gpipe/runtime/gpipe_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One SGD step (learning rate 0.1) with clip_grad_norm = `clip_fraction`
 * times the step's gradient norm (measured by a first, unclipped session of
 * the same seed): gpipe_session_gradient_norm equals the norm computed here
 * from gpipe_session_get_gradient (relative 1e-6), and every parameter is
 * p - lr (s g), bitwise, with s = min(1, clip / (norm + 1e-6)) (PyTorch's
 * clip_grad_norm_); with a fraction >= 1, s = 1. */
const char *capi_clip_check_sgd_step(const char *json, size_t length,
                                     double clip_fraction);

/* On the linear MSE model (inputs x and target [4, 1], parameters w [1, 1]
 * and b [1]; w set to 0.1, b to 0): x holds `x0` in row 0 (0 elsewhere), the
 * target is 0, SGD at `learning_rate` with `weight_decay` and check_finite
 * `check_finite`. Trains one step and writes its status and
 * gpipe_session_last_error() to *out_status and out_message (of
 * `message_capacity` bytes), w after the step to *out_w, the steps done to
 * *out_steps and gpipe_session_gradient_norm's status to *out_norm_status
 * (and its message into out_norm_message, also `message_capacity` bytes).
 * NULL, or what failed before the step. */
const char *capi_guard_run_linear_step(
    const char *json, size_t length, float x0, float learning_rate,
    float weight_decay, int check_finite, gpipe_status_t *out_status,
    char *out_message, size_t message_capacity, float *out_w,
    int64_t *out_steps, gpipe_status_t *out_norm_status,
    char *out_norm_message);

/* A negative, infinite or NaN clip_grad_norm is refused at creation with
 * its message; gpipe_session_gradient_norm refuses NULL pointers and says
 * why it has no norm: no step yet, or a session that neither clips nor
 * guards; gpipe_status_string names GPIPE_ERROR_NON_FINITE. */
const char *capi_clip_check_errors(const char *json, size_t length);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPIPE_RUNTIME_TESTS_CAPICLIPPINGTEST_H */
