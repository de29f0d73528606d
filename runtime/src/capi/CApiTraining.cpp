//===- CApiTraining.cpp - The C API: training, evaluation, parameters -----===//

#include "capi/CApiSupport.h"

#include "gpipe/runtime/kernels/Optimizers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

using namespace gpipe::runtime::capi;

//===----------------------------------------------------------------------===//
// Training and evaluation
//===----------------------------------------------------------------------===//

gpipe_status_t gpipe_session_train_step(gpipe_session_t *session,
                                        const gpipe_input_t *inputs,
                                        size_t input_count, double *out_loss) {
  const char *function = "gpipe_session_train_step";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!out_loss)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_loss is null");
    const int64_t steps = session->executor->stepsDone();
    if (steps >= rt::kMaxStepsDone)
      return fail(session, GPIPE_ERROR_FAILED_PRECONDITION, function,
                  "the session has done " + std::to_string(steps) +
                      " steps, the most it counts (GPIPE_MAX_STEPS_DONE)");
    rt::Batch batch;
    gpipe_status_t status =
        makeBatch(session, function, session->executor->bundle().batch, inputs,
                  input_count, batch);
    if (status != GPIPE_OK)
      return status;
    rt::StepResult result = session->executor->trainStep(batch);
    session->stepRan = true;
    session->gradientNorm = result.gradientNorm;
    if (!result.ok())
      return fail(session,
                  result.nonFinite ? GPIPE_ERROR_NON_FINITE
                                   : GPIPE_ERROR_RUNTIME,
                  function, result.error);
    *out_loss = result.loss;
    return succeed(session);
  });
}

gpipe_status_t gpipe_session_gradient_norm(const gpipe_session_t *session,
                                           double *out_norm) {
  const char *function = "gpipe_session_gradient_norm";
  return guarded(nullptr, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!out_norm)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_norm is null");
    if (!session->gradientNorm)
      return fail(nullptr, GPIPE_ERROR_FAILED_PRECONDITION, function,
                  !session->stepRan ? "no training step has run yet"
                  : !session->measuresNorm
                      ? "the session measures no gradient norm: it neither "
                        "clips nor guards (clip_grad_norm 0, check_finite 0)"
                      : "the last step failed before it measured the "
                        "gradient norm");
    *out_norm = *session->gradientNorm;
    return succeed(nullptr);
  });
}

gpipe_status_t gpipe_session_evaluate(gpipe_session_t *session, int64_t rows,
                                      const gpipe_input_t *inputs,
                                      size_t input_count,
                                      size_t prediction_capacity,
                                      float *out_prediction, double *out_loss) {
  const char *function = "gpipe_session_evaluate";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!out_loss)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_loss is null");
    if (rows < 1)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "expected at least 1 row, got " + std::to_string(rows));
    gpipe_tensor_info_t prediction;
    if (!atRows(session->prediction, rows, prediction))
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "the prediction of " + std::to_string(rows) +
                      " rows has more elements than fit in size_t");
    for (const gpipe_tensor_info_t &input : session->inputs) {
      gpipe_tensor_info_t atRowCount;
      if (!atRows(input, rows, atRowCount))
        return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                    "input '" + std::string(input.name) + "' at " +
                        std::to_string(rows) +
                        " rows has more elements than fit in size_t");
    }
    if (!out_prediction && prediction_capacity > 0)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_prediction is null but prediction_capacity is " +
                      std::to_string(prediction_capacity));
    if (out_prediction && prediction_capacity < prediction.element_count)
      return fail(session, GPIPE_ERROR_BUFFER_TOO_SMALL, function,
                  "the prediction of " + std::to_string(rows) +
                      " rows (shape " + shapeString(prediction) + ") needs " +
                      std::to_string(prediction.element_count) +
                      " floats, the buffer holds " +
                      std::to_string(prediction_capacity));
    rt::Batch batch;
    gpipe_status_t status =
        makeBatch(session, function, rows, inputs, input_count, batch);
    if (status != GPIPE_OK)
      return status;
    rt::EvalResult result = session->executor->evaluate(batch, rows);
    if (!result.ok())
      return fail(session,
                  result.nonFinite ? GPIPE_ERROR_NON_FINITE
                                   : GPIPE_ERROR_RUNTIME,
                  function, result.error);
    if (out_prediction) {
      if (result.prediction.f32.size() != prediction.element_count)
        return fail(session, GPIPE_ERROR_RUNTIME, function,
                    "internal error: the prediction has " +
                        std::to_string(result.prediction.f32.size()) +
                        " elements, expected " +
                        std::to_string(prediction.element_count));
      std::memcpy(out_prediction, result.prediction.f32.data(),
                  prediction.element_count * sizeof(float));
    }
    *out_loss = result.loss;
    return succeed(session);
  });
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

gpipe_status_t gpipe_session_parameter_size(const gpipe_session_t *session,
                                            const char *name,
                                            size_t *out_element_count) {
  const char *function = "gpipe_session_parameter_size";
  return guarded(nullptr, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!name)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "name is null");
    if (!out_element_count)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "out_element_count is null");
    auto param = std::find_if(session->params.begin(), session->params.end(),
                              [&](const gpipe_tensor_info_t &info) {
                                return std::strcmp(info.name, name) == 0;
                              });
    if (param == session->params.end())
      return fail(nullptr, GPIPE_ERROR_NOT_FOUND, function,
                  "unknown parameter '" + std::string(name) +
                      "' (the model has " + quotedNames(session->params) + ")");
    *out_element_count = param->element_count;
    return succeed(nullptr);
  });
}

gpipe_status_t gpipe_session_get_parameter(const gpipe_session_t *session,
                                           const char *name, size_t capacity,
                                           float *out_values) {
  const char *function = "gpipe_session_get_parameter";
  return guarded(nullptr, function, [&] {
    return copyParameter(function, session, name, capacity, out_values,
                         /*gradient=*/false);
  });
}

gpipe_status_t gpipe_session_get_gradient(const gpipe_session_t *session,
                                          const char *name, size_t capacity,
                                          float *out_values) {
  const char *function = "gpipe_session_get_gradient";
  return guarded(nullptr, function, [&] {
    return copyParameter(function, session, name, capacity, out_values,
                         /*gradient=*/true);
  });
}

gpipe_status_t gpipe_session_set_parameter(gpipe_session_t *session,
                                           const char *name,
                                           const float *values,
                                           size_t element_count) {
  const char *function = "gpipe_session_set_parameter";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!name)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "name is null");
    auto param = std::find_if(session->params.begin(), session->params.end(),
                              [&](const gpipe_tensor_info_t &info) {
                                return std::strcmp(info.name, name) == 0;
                              });
    if (!values)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "values is null");
    if (param == session->params.end())
      return fail(session, GPIPE_ERROR_NOT_FOUND, function,
                  "unknown parameter '" + std::string(name) +
                      "' (the model has " + quotedNames(session->params) + ")");
    if (element_count != param->element_count)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "parameter '" + std::string(name) + "': expected " +
                      std::to_string(param->element_count) +
                      " elements (shape " + shapeString(*param) + "), got " +
                      std::to_string(element_count));
    if (std::string error =
            rt::checkStateValues(session->executor->optimizerKind(),
                                 /*slot=*/-1, values, element_count);
        !error.empty())
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "parameter '" + std::string(name) + "': " + error);
    rt::Status status = session->executor->setParameter(
        name, std::vector<float>(values, values + element_count));
    if (!status.ok())
      return fail(session, GPIPE_ERROR_RUNTIME, function, status.message());
    return succeed(session);
  });
}
