/*===- CApiClippingTest.c - Clipping and the guard, from C -----------------===*
 *
 * options->clip_grad_norm, options->check_finite and
 * gpipe_session_gradient_norm as a C program uses them. Each check creates
 * its own sessions from the bundle text it is given and returns NULL when it
 * holds, or what went wrong; CApiClippingTest.cpp runs them under
 * GoogleTest. The reference norm and the clipped update are computed here
 * from the gradients the session reports, not by the library's code.
 *
 *===----------------------------------------------------------------------===*/

#include "CApiClippingTest.h"
#include "CApiTestSupport.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gpipe_session_t *open_session(const char *json, size_t length,
                                     const gpipe_session_options_t *options) {
  gpipe_session_t *session = NULL;
  if (gpipe_session_create_from_json(json, length, "clip-test", options,
                                     &session) != GPIPE_OK)
    return NULL;
  return session;
}

/* All parameters (or their gradients) concatenated in bundle order,
 * malloc'd; NULL on failure. */
static float *copy_all(const gpipe_session_t *session, int gradient,
                       size_t *out_count) {
  gpipe_session_info_t info;
  if (gpipe_session_query_info(session, &info) != GPIPE_OK)
    return NULL;
  float *all = NULL;
  size_t count = 0;
  for (size_t p = 0; p < info.parameter_count; ++p) {
    gpipe_tensor_info_t param;
    if (gpipe_session_parameter_info(session, p, &param) != GPIPE_OK) {
      free(all);
      return NULL;
    }
    all = realloc(all, (count + param.element_count) * sizeof(float));
    gpipe_status_t status =
        gradient ? gpipe_session_get_gradient(session, param.name,
                                              param.element_count, all + count)
                 : gpipe_session_get_parameter(
                       session, param.name, param.element_count, all + count);
    if (status != GPIPE_OK) {
      free(all);
      return NULL;
    }
    count += param.element_count;
  }
  *out_count = count;
  return all;
}

static const char *train(gpipe_session_t *session) {
  capi_batch_t batch;
  if (!capi_make_batch(session, 777, &batch))
    return capi_failure("cannot describe the model's inputs: %s",
                        gpipe_last_error());
  double loss = 0;
  gpipe_status_t status =
      gpipe_session_train_step(session, batch.inputs, batch.count, &loss);
  capi_free_batch(&batch);
  if (status != GPIPE_OK)
    return capi_failure("train_step: %s: %s", gpipe_status_string(status),
                        gpipe_last_error());
  return NULL;
}

static gpipe_session_options_t sgd_options(float clip) {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.seed = 5;
  options.optimizer = GPIPE_OPTIMIZER_SGD;
  options.learning_rate = 0.1f;
  options.clip_grad_norm = clip;
  return options;
}

/* The first step's gradient norm without clipping. */
static const char *unclipped_norm(const char *json, size_t length,
                                  double *out_norm) {
  gpipe_session_options_t options = sgd_options(0.0f);
  gpipe_session_t *session = open_session(json, length, &options);
  if (!session)
    return capi_failure("create: %s", gpipe_last_error());
  const char *error = train(session);
  if (!error && gpipe_session_gradient_norm(session, out_norm) != GPIPE_OK)
    error = capi_failure("gradient_norm: %s", gpipe_last_error());
  gpipe_session_destroy(session);
  return error;
}

const char *capi_clip_check_sgd_step(const char *json, size_t length,
                                     double clip_fraction) {
  double unclipped = 0;
  const char *error = unclipped_norm(json, length, &unclipped);
  if (error)
    return error;
  const float clip = (float)(clip_fraction * unclipped);
  gpipe_session_options_t options = sgd_options(clip);
  gpipe_session_t *session = open_session(json, length, &options);
  if (!session)
    return capi_failure("create (clip %g): %s", clip, gpipe_last_error());
  size_t count = 0, after_count = 0, gradient_count = 0;
  float *before = copy_all(session, 0, &count);
  float *after = NULL, *gradient = NULL;
  double norm = 0, reference = 0;
  if ((error = train(session)))
    goto done;
  after = copy_all(session, 0, &after_count);
  gradient = copy_all(session, 1, &gradient_count);
  if (!before || !after || !gradient || after_count != count ||
      gradient_count != count) {
    error = capi_failure("cannot read the parameters: %s", gpipe_last_error());
    goto done;
  }
  if (gpipe_session_gradient_norm(session, &norm) != GPIPE_OK) {
    error = capi_failure("gradient_norm: %s", gpipe_last_error());
    goto done;
  }
  /* The norm before clipping, of every gradient of every stage. */
  for (size_t i = 0; i < count; ++i)
    reference += (double)gradient[i] * (double)gradient[i];
  reference = sqrt(reference);
  if (!(reference > 0) || fabs(norm - reference) > 1e-6 * reference) {
    error = capi_failure("gradient_norm %.17g, the gradients' norm is %.17g",
                         norm, reference);
    goto done;
  }
  if (norm != unclipped) {
    error =
        capi_failure("the clipped session measured %.17g, the unclipped one "
                     "%.17g: the norm is taken before clipping",
                     norm, unclipped);
    goto done;
  }
  double ratio = (double)clip / (norm + 1e-6);
  const float scale = ratio < 1.0 ? (float)ratio : 1.0f;
  if (clip_fraction < 1.0 && !(scale < 1.0f)) {
    error = capi_failure("clip %g does not clip a norm of %g", clip, norm);
    goto done;
  }
  /* SGD on the clipped gradient: p1 = p0 - lr (s g), each a float op. */
  for (size_t i = 0; i < count; ++i) {
    float expected = before[i] - options.learning_rate * (scale * gradient[i]);
    if (memcmp(&expected, &after[i], sizeof(float)) != 0) {
      error =
          capi_failure("element %zu: %.9g - %g (%.9g * %.9g) = %.9g, the step "
                       "gave %.9g",
                       i, before[i], options.learning_rate, scale, gradient[i],
                       expected, after[i]);
      goto done;
    }
  }
done:
  free(before);
  free(after);
  free(gradient);
  gpipe_session_destroy(session);
  return error;
}

static void copy_message(char *out, size_t capacity, const char *text) {
  if (capacity == 0)
    return;
  strncpy(out, text, capacity - 1);
  out[capacity - 1] = '\0';
}

const char *capi_guard_run_linear_step(
    const char *json, size_t length, float x0, float learning_rate,
    float weight_decay, int check_finite, gpipe_status_t *out_status,
    char *out_message, size_t message_capacity, float *out_w,
    int64_t *out_steps, gpipe_status_t *out_norm_status,
    char *out_norm_message) {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.optimizer = GPIPE_OPTIMIZER_SGD;
  options.learning_rate = learning_rate;
  options.weight_decay = weight_decay;
  options.check_finite = check_finite;
  gpipe_session_t *session = open_session(json, length, &options);
  if (!session)
    return capi_failure("create: %s", gpipe_last_error());
  const float w = 0.1f, b = 0.0f;
  if (gpipe_session_set_parameter(session, "w", &w, 1) != GPIPE_OK ||
      gpipe_session_set_parameter(session, "b", &b, 1) != GPIPE_OK) {
    gpipe_session_destroy(session);
    return capi_failure("set_parameter: %s", gpipe_last_error());
  }
  float x[4] = {x0, 0, 0, 0}, target[4] = {0, 0, 0, 0};
  gpipe_input_t inputs[2] = {{"x", GPIPE_ELEMENT_F32, x, 4},
                             {"target", GPIPE_ELEMENT_F32, target, 4}};
  double loss = 0, norm = 0;
  *out_status = gpipe_session_train_step(session, inputs, 2, &loss);
  copy_message(out_message, message_capacity,
               gpipe_session_last_error(session));
  const char *error = NULL;
  if (gpipe_session_get_parameter(session, "w", 1, out_w) != GPIPE_OK ||
      gpipe_session_steps_done(session, out_steps) != GPIPE_OK)
    error = capi_failure("reading the session: %s", gpipe_last_error());
  *out_norm_status = gpipe_session_gradient_norm(session, &norm);
  copy_message(out_norm_message, message_capacity, gpipe_last_error());
  gpipe_session_destroy(session);
  return error;
}

const char *capi_clip_check_errors(const char *json, size_t length) {
  static const struct {
    float clip;
    const char *message;
  } bad[] = {
      {-1.0f, "gpipe_session_create_from_json: options->clip_grad_norm: "
              "expected a finite value >= 0, got -1"},
      {INFINITY, "gpipe_session_create_from_json: options->clip_grad_norm: "
                 "expected a finite value >= 0, got inf"},
      {NAN, "gpipe_session_create_from_json: options->clip_grad_norm: "
            "expected a finite value >= 0, got nan"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    gpipe_session_options_t options = sgd_options(bad[i].clip);
    gpipe_session_t *session = NULL;
    gpipe_status_t status = gpipe_session_create_from_json(
        json, length, "clip-test", &options, &session);
    if (status != GPIPE_ERROR_INVALID_ARGUMENT || session ||
        strcmp(gpipe_last_error(), bad[i].message) != 0) {
      gpipe_session_destroy(session);
      return capi_failure("clip %g: %s: '%s'", bad[i].clip,
                          gpipe_status_string(status), gpipe_last_error());
    }
  }
  if (strcmp(gpipe_status_string(GPIPE_ERROR_NON_FINITE),
             "GPIPE_ERROR_NON_FINITE") != 0 ||
      GPIPE_ERROR_NON_FINITE != 12)
    return capi_failure("gpipe_status_string(12) is '%s'",
                        gpipe_status_string(GPIPE_ERROR_NON_FINITE));

  gpipe_session_options_t options = sgd_options(0.0f);
  options.check_finite = 0;
  gpipe_session_t *session = open_session(json, length, &options);
  if (!session)
    return capi_failure("create: %s", gpipe_last_error());
  const char *error = NULL;
  double norm = 0;
  if (gpipe_session_gradient_norm(NULL, &norm) !=
          GPIPE_ERROR_INVALID_ARGUMENT ||
      strcmp(gpipe_last_error(),
             "gpipe_session_gradient_norm: session is null") != 0)
    error = capi_failure("gradient_norm(NULL): '%s'", gpipe_last_error());
  else if (gpipe_session_gradient_norm(session, NULL) !=
               GPIPE_ERROR_INVALID_ARGUMENT ||
           strcmp(gpipe_last_error(),
                  "gpipe_session_gradient_norm: out_norm is null") != 0)
    error =
        capi_failure("gradient_norm(session, NULL): '%s'", gpipe_last_error());
  else if (gpipe_session_gradient_norm(session, &norm) !=
               GPIPE_ERROR_FAILED_PRECONDITION ||
           strcmp(gpipe_last_error(), "gpipe_session_gradient_norm: no "
                                      "training step has run yet") != 0)
    error = capi_failure("before a step: '%s'", gpipe_last_error());
  else if ((error = train(session)))
    ;
  else if (gpipe_session_gradient_norm(session, &norm) !=
               GPIPE_ERROR_FAILED_PRECONDITION ||
           strcmp(gpipe_last_error(),
                  "gpipe_session_gradient_norm: the session measures no "
                  "gradient norm: it neither clips nor guards (clip_grad_norm "
                  "0, check_finite 0)") != 0)
    error =
        capi_failure("without clipping or the guard: '%s'", gpipe_last_error());
  gpipe_session_destroy(session);
  return error;
}
