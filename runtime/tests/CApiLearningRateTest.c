/*===- CApiLearningRateTest.c - The learning rate, from C ------------------===*
 *
 * gpipe_session_set_learning_rate and _get_learning_rate as a C program uses
 * them. Each check creates its own session from the bundle text it is given
 * and returns NULL when it holds, or what went wrong; CApiLearningRateTest.cpp
 * runs them under GoogleTest. The expected updates are computed here from the
 * gradients the session reports, not by the library's optimizer code.
 *
 *===----------------------------------------------------------------------===*/

#include "CApiLearningRateTest.h"
#include "CApiTestSupport.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A session over `json` with `optimizer`, seed 3; NULL on failure. */
static gpipe_session_t *open_session(const char *json, size_t length,
                                     gpipe_optimizer_t optimizer) {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.seed = 3;
  options.optimizer = optimizer;
  gpipe_session_t *session = NULL;
  if (gpipe_session_create_from_json(json, length, "lr-test", &options,
                                     &session) != GPIPE_OK)
    return NULL;
  return session;
}

/* Parameter `index` or its gradient, malloc'd; NULL on failure. */
static float *copy_parameter(const gpipe_session_t *session, size_t index,
                             int gradient, gpipe_tensor_info_t *out_info) {
  if (gpipe_session_parameter_info(session, index, out_info) != GPIPE_OK)
    return NULL;
  float *values = malloc(out_info->element_count * sizeof(float));
  gpipe_status_t status =
      gradient ? gpipe_session_get_gradient(session, out_info->name,
                                            out_info->element_count, values)
               : gpipe_session_get_parameter(session, out_info->name,
                                             out_info->element_count, values);
  if (status != GPIPE_OK) {
    free(values);
    return NULL;
  }
  return values;
}

/* All parameters, concatenated in bundle order (or their gradients). */
static float *copy_all(const gpipe_session_t *session, int gradient,
                       size_t *out_count) {
  gpipe_session_info_t info;
  gpipe_session_query_info(session, &info);
  float *all = NULL;
  size_t count = 0;
  for (size_t p = 0; p < info.parameter_count; ++p) {
    gpipe_tensor_info_t param;
    float *values = copy_parameter(session, p, gradient, &param);
    if (!values) {
      free(all);
      return NULL;
    }
    all = realloc(all, (count + param.element_count) * sizeof(float));
    memcpy(all + count, values, param.element_count * sizeof(float));
    count += param.element_count;
    free(values);
  }
  *out_count = count;
  return all;
}

static const char *train(gpipe_session_t *session, double *out_loss) {
  capi_batch_t batch;
  if (!capi_make_batch(session, 12345, &batch))
    return capi_failure("cannot describe the model's inputs: %s",
                        gpipe_last_error());
  gpipe_status_t status =
      gpipe_session_train_step(session, batch.inputs, batch.count, out_loss);
  capi_free_batch(&batch);
  if (status != GPIPE_OK)
    return capi_failure("train_step: %s: %s", gpipe_status_string(status),
                        gpipe_last_error());
  if (!isfinite(*out_loss))
    return capi_failure("train_step: loss %g", *out_loss);
  return NULL;
}

const char *capi_lr_check_zero_rate(const char *json, size_t length,
                                    gpipe_optimizer_t optimizer, int warm_up) {
  gpipe_session_t *session = open_session(json, length, optimizer);
  if (!session)
    return capi_failure("create: %s", gpipe_last_error());
  const char *error = NULL;
  size_t count = 0, after_count = 0;
  float *before = NULL, *after = NULL, *gradient = NULL;
  double loss = 0;
  /* A first step at the default rate, so that momentum and Adam have state
   * that a zero rate must not let through either. */
  if (warm_up && (error = train(session, &loss)))
    goto done;
  if (gpipe_session_set_learning_rate(session, 0.0f) != GPIPE_OK) {
    error = capi_failure("set_learning_rate(0): %s", gpipe_last_error());
    goto done;
  }
  before = copy_all(session, 0, &count);
  if ((error = train(session, &loss)))
    goto done;
  after = copy_all(session, 0, &after_count);
  gradient = copy_all(session, 1, &after_count);
  if (!before || !after || !gradient || after_count != count) {
    error = capi_failure("cannot read the parameters: %s", gpipe_last_error());
    goto done;
  }
  if (memcmp(before, after, count * sizeof(float)) != 0) {
    error = capi_failure("a step at learning rate 0 changed the parameters");
    goto done;
  }
  int nonzero = 0;
  for (size_t i = 0; i < count; ++i)
    nonzero |= gradient[i] != 0.0f;
  if (!nonzero)
    error =
        capi_failure("the step computed no gradient: the test shows nothing");
done:
  free(before);
  free(after);
  free(gradient);
  gpipe_session_destroy(session);
  return error;
}

const char *capi_lr_check_sgd_update(const char *json, size_t length) {
  gpipe_session_t *session = open_session(json, length, GPIPE_OPTIMIZER_SGD);
  if (!session)
    return capi_failure("create: %s", gpipe_last_error());
  const char *error = NULL;
  size_t count = 0, after_count = 0;
  float *before = NULL, *after = NULL, *gradient = NULL;
  double loss = 0;
  float rate = 0.0f;
  const float chosen = 0.37f;
  if (gpipe_session_get_learning_rate(session, &rate) != GPIPE_OK ||
      rate != 0.01f) {
    error = capi_failure("the initial rate is %g, expected the options' 0.01",
                         rate);
    goto done;
  }
  if (gpipe_session_set_learning_rate(session, chosen) != GPIPE_OK ||
      gpipe_session_get_learning_rate(session, &rate) != GPIPE_OK ||
      rate != chosen) {
    error = capi_failure("set then get gave %g, expected %g (%s)", rate, chosen,
                         gpipe_last_error());
    goto done;
  }
  before = copy_all(session, 0, &count);
  if ((error = train(session, &loss)))
    goto done;
  after = copy_all(session, 0, &after_count);
  gradient = copy_all(session, 1, &after_count);
  if (!before || !after || !gradient || after_count != count) {
    error = capi_failure("cannot read the parameters: %s", gpipe_last_error());
    goto done;
  }
  /* SGD: p1 = p0 - lr g, each a float operation. */
  for (size_t i = 0; i < count; ++i) {
    float expected = before[i] - chosen * gradient[i];
    if (memcmp(&expected, &after[i], sizeof(float)) != 0) {
      error =
          capi_failure("element %zu: %.9g - %g * %.9g = %.9g, the step gave "
                       "%.9g",
                       i, before[i], chosen, gradient[i], expected, after[i]);
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

const char *capi_lr_check_errors(const char *json, size_t length) {
  gpipe_session_t *session = open_session(json, length, GPIPE_OPTIMIZER_SGD);
  if (!session)
    return capi_failure("create: %s", gpipe_last_error());
  const char *error = NULL;
  static const struct {
    float rate;
    const char *message;
  } bad[] = {
      {-1.0f, "gpipe_session_set_learning_rate: expected a finite learning "
              "rate >= 0, got -1"},
      {INFINITY, "gpipe_session_set_learning_rate: expected a finite "
                 "learning rate >= 0, got inf"},
      {NAN, "gpipe_session_set_learning_rate: expected a finite learning "
            "rate >= 0, got nan"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]) && !error; ++i) {
    gpipe_status_t status =
        gpipe_session_set_learning_rate(session, bad[i].rate);
    float rate = 0.0f;
    gpipe_session_get_learning_rate(session, &rate);
    if (status != GPIPE_ERROR_INVALID_ARGUMENT ||
        strcmp(gpipe_session_last_error(session), bad[i].message) != 0)
      error = capi_failure("rate %g: %s: '%s'", bad[i].rate,
                           gpipe_status_string(status),
                           gpipe_session_last_error(session));
    else if (rate != 0.01f)
      error = capi_failure("a refused rate changed it to %g", rate);
  }
  if (!error &&
      (gpipe_session_set_learning_rate(NULL, 0.1f) !=
           GPIPE_ERROR_INVALID_ARGUMENT ||
       strcmp(gpipe_last_error(),
              "gpipe_session_set_learning_rate: session is null") != 0))
    error = capi_failure("set(NULL): '%s'", gpipe_last_error());
  if (!error && (gpipe_session_get_learning_rate(session, NULL) !=
                     GPIPE_ERROR_INVALID_ARGUMENT ||
                 strcmp(gpipe_last_error(), "gpipe_session_get_learning_rate: "
                                            "out_learning_rate is null") != 0))
    error = capi_failure("get(NULL): '%s'", gpipe_last_error());
  gpipe_session_destroy(session);
  return error;
}
