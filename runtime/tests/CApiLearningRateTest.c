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

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char message[1024];

static const char *failure(const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  return message;
}

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

/* Every model input at the full batch, filled deterministically: f32 inputs
 * in [-1, 1], i32 inputs (the labels) in [0, classes). */
typedef struct batch_t {
  gpipe_input_t inputs[8];
  size_t count;
} batch_t;

static int make_batch(const gpipe_session_t *session, batch_t *batch) {
  gpipe_session_info_t info;
  gpipe_tensor_info_t prediction;
  if (gpipe_session_query_info(session, &info) != GPIPE_OK ||
      info.input_count > 8 ||
      gpipe_session_prediction_info(session, 1, &prediction) != GPIPE_OK)
    return 0;
  const int64_t classes = prediction.shape[prediction.rank - 1];
  uint64_t state = 12345;
  batch->count = info.input_count;
  for (size_t i = 0; i < info.input_count; ++i) {
    gpipe_tensor_info_t input;
    gpipe_session_input_info(session, i, &input);
    gpipe_input_t *in = &batch->inputs[i];
    in->name = input.name;
    in->type = input.type;
    in->element_count = input.element_count;
    if (input.type == GPIPE_ELEMENT_F32) {
      float *data = malloc(input.element_count * sizeof(float));
      for (size_t e = 0; e < input.element_count; ++e) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        data[e] = (float)((state >> 33) % 2001) / 1000.0f - 1.0f;
      }
      in->data = data;
    } else {
      int32_t *data = malloc(input.element_count * sizeof(int32_t));
      for (size_t e = 0; e < input.element_count; ++e) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        data[e] = (int32_t)((state >> 33) % (uint64_t)classes);
      }
      in->data = data;
    }
  }
  return 1;
}

static void free_batch(batch_t *batch) {
  for (size_t i = 0; i < batch->count; ++i)
    free((void *)(uintptr_t)batch->inputs[i].data);
  batch->count = 0;
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
  batch_t batch;
  if (!make_batch(session, &batch))
    return failure("cannot describe the model's inputs: %s",
                   gpipe_last_error());
  gpipe_status_t status =
      gpipe_session_train_step(session, batch.inputs, batch.count, out_loss);
  free_batch(&batch);
  if (status != GPIPE_OK)
    return failure("train_step: %s: %s", gpipe_status_string(status),
                   gpipe_last_error());
  if (!isfinite(*out_loss))
    return failure("train_step: loss %g", *out_loss);
  return NULL;
}

const char *capi_lr_check_zero_rate(const char *json, size_t length,
                                    gpipe_optimizer_t optimizer, int warm_up) {
  gpipe_session_t *session = open_session(json, length, optimizer);
  if (!session)
    return failure("create: %s", gpipe_last_error());
  const char *error = NULL;
  size_t count = 0, after_count = 0;
  float *before = NULL, *after = NULL, *gradient = NULL;
  double loss = 0;
  /* A first step at the default rate, so that momentum and Adam have state
   * that a zero rate must not let through either. */
  if (warm_up && (error = train(session, &loss)))
    goto done;
  if (gpipe_session_set_learning_rate(session, 0.0f) != GPIPE_OK) {
    error = failure("set_learning_rate(0): %s", gpipe_last_error());
    goto done;
  }
  before = copy_all(session, 0, &count);
  if ((error = train(session, &loss)))
    goto done;
  after = copy_all(session, 0, &after_count);
  gradient = copy_all(session, 1, &after_count);
  if (!before || !after || !gradient || after_count != count) {
    error = failure("cannot read the parameters: %s", gpipe_last_error());
    goto done;
  }
  if (memcmp(before, after, count * sizeof(float)) != 0) {
    error = failure("a step at learning rate 0 changed the parameters");
    goto done;
  }
  int nonzero = 0;
  for (size_t i = 0; i < count; ++i)
    nonzero |= gradient[i] != 0.0f;
  if (!nonzero)
    error = failure("the step computed no gradient: the test shows nothing");
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
    return failure("create: %s", gpipe_last_error());
  const char *error = NULL;
  size_t count = 0, after_count = 0;
  float *before = NULL, *after = NULL, *gradient = NULL;
  double loss = 0;
  float rate = 0.0f;
  const float chosen = 0.37f;
  if (gpipe_session_get_learning_rate(session, &rate) != GPIPE_OK ||
      rate != 0.01f) {
    error = failure("the initial rate is %g, expected the options' 0.01", rate);
    goto done;
  }
  if (gpipe_session_set_learning_rate(session, chosen) != GPIPE_OK ||
      gpipe_session_get_learning_rate(session, &rate) != GPIPE_OK ||
      rate != chosen) {
    error = failure("set then get gave %g, expected %g (%s)", rate, chosen,
                    gpipe_last_error());
    goto done;
  }
  before = copy_all(session, 0, &count);
  if ((error = train(session, &loss)))
    goto done;
  after = copy_all(session, 0, &after_count);
  gradient = copy_all(session, 1, &after_count);
  if (!before || !after || !gradient || after_count != count) {
    error = failure("cannot read the parameters: %s", gpipe_last_error());
    goto done;
  }
  /* SGD: p1 = p0 - lr g, each a float operation. */
  for (size_t i = 0; i < count; ++i) {
    float expected = before[i] - chosen * gradient[i];
    if (memcmp(&expected, &after[i], sizeof(float)) != 0) {
      error = failure("element %zu: %.9g - %g * %.9g = %.9g, the step gave "
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
    return failure("create: %s", gpipe_last_error());
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
      error =
          failure("rate %g: %s: '%s'", bad[i].rate, gpipe_status_string(status),
                  gpipe_session_last_error(session));
    else if (rate != 0.01f)
      error = failure("a refused rate changed it to %g", rate);
  }
  if (!error &&
      (gpipe_session_set_learning_rate(NULL, 0.1f) !=
           GPIPE_ERROR_INVALID_ARGUMENT ||
       strcmp(gpipe_last_error(),
              "gpipe_session_set_learning_rate: session is null") != 0))
    error = failure("set(NULL): '%s'", gpipe_last_error());
  if (!error && (gpipe_session_get_learning_rate(session, NULL) !=
                     GPIPE_ERROR_INVALID_ARGUMENT ||
                 strcmp(gpipe_last_error(), "gpipe_session_get_learning_rate: "
                                            "out_learning_rate is null") != 0))
    error = failure("get(NULL): '%s'", gpipe_last_error());
  gpipe_session_destroy(session);
  return error;
}
