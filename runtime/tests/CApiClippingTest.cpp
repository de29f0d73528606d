//===- CApiClippingTest.cpp - Clipping and the guard, under gtest ---------===//
//
// Runs the C checks of CApiClippingTest.c on the dropout MLP's bundle
// (CApiSessionSupport.h) and on a two-stage linear MSE model whose inputs
// make one quantity at a time non-finite (as NonFiniteGuardTest.cpp does
// for the executor): the loss, a gradient with a finite loss, a parameter
// after the update. Also the new fields' defaults for a binary built against
// an older options struct.
//
//===----------------------------------------------------------------------===//

#include "CApiClippingTest.h"

#include "CApiSessionSupport.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/Runtime.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <string>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;
using namespace gpipe::runtime::testing::capi;

namespace {

const char *orOk(const char *error) { return error ? error : "ok"; }

/// x [4, 1] -> dense (w [1, 1], b [1]) in stage 0, MSE against target [4, 1]
/// in stage 1; one micro-batch.
const std::string &linearJson() {
  static const std::string json = [] {
    ModelGraph g(4);
    int x = g.input("x", {4, 1});
    int t = g.input("target", {4, 1});
    int w = g.param("w", {1, 1}, InitKind::GlorotUniform);
    int b = g.param("b", {1}, InitKind::Zeros);
    int y = g.dense(x, w, b);
    g.nextLayer();
    g.mse(y, t);
    return writeBundle(buildBundle(g, {0, 1}, 1, RematPolicy::None));
  }();
  return json;
}

struct LinearStep {
  gpipe_status_t status = GPIPE_OK;
  std::string message;
  float w = 0;
  int64_t steps = -1;
  gpipe_status_t normStatus = GPIPE_OK;
  std::string normMessage;
};

LinearStep linearStep(float x0, float learningRate = 0.01f,
                      float weightDecay = 0.0f, int checkFinite = 1) {
  LinearStep step;
  char message[512] = "", normMessage[512] = "";
  const std::string &json = linearJson();
  const char *error = capi_guard_run_linear_step(
      json.data(), json.size(), x0, learningRate, weightDecay, checkFinite,
      &step.status, message, sizeof(message), &step.w, &step.steps,
      &step.normStatus, normMessage);
  EXPECT_STREQ(orOk(error), "ok");
  step.message = message;
  step.normMessage = normMessage;
  return step;
}

// The reported norm is the norm of the gradients the session reports, and
// the clipped SGD step is p - lr (s g) with s = clip / (norm + 1e-6).
TEST(CApiClipping, ClippedSgdStepMatchesTheReference) {
  const std::string &json = dropoutMlpJson();
  EXPECT_STREQ(orOk(capi_clip_check_sgd_step(json.data(), json.size(), 0.25)),
               "ok");
}

// A clipping norm above the gradient norm leaves the step p - lr g.
TEST(CApiClipping, NormBelowTheClipIsUnscaled) {
  const std::string &json = dropoutMlpJson();
  EXPECT_STREQ(orOk(capi_clip_check_sgd_step(json.data(), json.size(), 4.0)),
               "ok");
}

TEST(CApiClipping, Errors) {
  const std::string &json = dropoutMlpJson();
  EXPECT_STREQ(orOk(capi_clip_check_errors(json.data(), json.size())), "ok");
}

// A finite step reports its norm: y = 0.1 x, dy = 2 y / 4, so with x0 = 1
// dw = db = 0.05.
TEST(CApiNonFiniteGuard, AFiniteStepReportsItsNorm) {
  LinearStep step = linearStep(1.0f);
  EXPECT_EQ(step.status, GPIPE_OK) << step.message;
  EXPECT_EQ(step.steps, 1);
  EXPECT_EQ(step.normStatus, GPIPE_OK) << step.normMessage;
}

// An inf in the input is refused before the step runs: nothing changes,
// and no step counts as run.
TEST(CApiNonFiniteGuard, AnInfiniteInputIsRefusedBeforeTheStep) {
  LinearStep step = linearStep(std::numeric_limits<float>::infinity());
  EXPECT_EQ(step.status, GPIPE_ERROR_NON_FINITE);
  EXPECT_EQ(step.message,
            "gpipe_session_train_step: input 'x': expected finite values (the "
            "session guards: check_finite), got inf at element 0");
  EXPECT_EQ(step.w, 0.1f);
  EXPECT_EQ(step.steps, 0);
  EXPECT_EQ(step.normStatus, GPIPE_ERROR_FAILED_PRECONDITION);
  EXPECT_EQ(step.normMessage,
            "gpipe_session_gradient_norm: no training step has run yet");
}

// x0 = 1e30: y = 1e29 and the loss y^2 / 4 overflow to inf from finite
// inputs: the step stops before the update.
TEST(CApiNonFiniteGuard, AnInfiniteLossStopsBeforeTheUpdate) {
  LinearStep step = linearStep(1e30f);
  EXPECT_EQ(step.status, GPIPE_ERROR_NON_FINITE);
  EXPECT_EQ(step.message,
            "gpipe_session_train_step: step 1: the loss of micro-batch 0 is "
            "inf (stage 1 on device 1); the step stopped before the update, "
            "the parameters are unchanged");
  EXPECT_EQ(step.w, 0.1f);
  EXPECT_EQ(step.steps, 0);
  EXPECT_EQ(step.normStatus, GPIPE_ERROR_FAILED_PRECONDITION);
  EXPECT_EQ(step.normMessage, "gpipe_session_gradient_norm: the last step "
                              "failed before it measured the gradient norm");
}

// x0 = 1e20: y = 1e19, loss = 1e38 / 4 is finite, dw = x dy = 5e38 is not.
TEST(CApiNonFiniteGuard, AnInfiniteGradientNamesTheParameter) {
  LinearStep step = linearStep(1e20f);
  EXPECT_EQ(step.status, GPIPE_ERROR_NON_FINITE);
  EXPECT_EQ(step.message,
            "gpipe_session_train_step: step 1: the gradient of parameter 'w' "
            "is inf (stage 0 on device 0); the step stopped before the "
            "update, the parameters are unchanged");
  EXPECT_EQ(step.w, 0.1f);
  EXPECT_EQ(step.steps, 0);
  // Without the guard the step goes through and wrecks w.
  LinearStep unguarded = linearStep(1e20f, 0.01f, 0.0f, /*checkFinite=*/0);
  EXPECT_EQ(unguarded.status, GPIPE_OK) << unguarded.message;
  EXPECT_FALSE(std::isfinite(unguarded.w));
  EXPECT_EQ(unguarded.steps, 1);
}

// lr (g + wd w) = 1e10 (0.05 + 1e30 * 0.1) overflows: w is -inf after the
// update, which the step applied; the norm was measured before it.
TEST(CApiNonFiniteGuard, AParameterThatOverflowsInTheUpdate) {
  LinearStep step = linearStep(1.0f, 1e10f, 1e30f);
  EXPECT_EQ(step.status, GPIPE_ERROR_NON_FINITE);
  EXPECT_EQ(step.message, "gpipe_session_train_step: step 1: parameter 'w' "
                          "is inf after the update (stage 0 on device 0)");
  EXPECT_TRUE(std::isinf(step.w));
  EXPECT_EQ(step.steps, 0);
  EXPECT_EQ(step.normStatus, GPIPE_OK) << step.normMessage;
}

/// The options of API version 3 before clip_grad_norm and check_finite.
struct BeforeClippingOptions {
  size_t struct_size;
  uint64_t seed;
  gpipe_optimizer_t optimizer;
  float learning_rate, momentum, decay, beta1, beta2, epsilon;
  uint32_t recv_timeout_ms;
  int record_timeline;
  gpipe_device_t device;
  uint32_t threads_per_device;
  float weight_decay;
};
static_assert(offsetof(BeforeClippingOptions, weight_decay) ==
                  offsetof(gpipe_session_options_t, weight_decay),
              "a prefix of the current layout");
static_assert(sizeof(BeforeClippingOptions) <
                  offsetof(gpipe_session_options_t, check_finite) + sizeof(int),
              "the new fields lie beyond it");

// A binary that knows neither field gets the defaults: no clipping (bytes
// beyond its struct_size would be a NaN norm, refused if read) and the
// guard, on.
TEST(CApiNonFiniteGuard, OlderOptionsGetTheGuardAndNoClipping) {
  alignas(gpipe_session_options_t) unsigned char
      memory[sizeof(gpipe_session_options_t)];
  std::memset(memory, 0xFF, sizeof(memory));
  gpipe_session_options_t current;
  gpipe_session_options_init(&current);
  EXPECT_EQ(current.clip_grad_norm, 0.0f);
  EXPECT_EQ(current.check_finite, 1);
  auto *old = new (memory) BeforeClippingOptions;
  std::memcpy(static_cast<void *>(old), &current,
              sizeof(BeforeClippingOptions));
  old->struct_size = sizeof(BeforeClippingOptions);
  const std::string &json = linearJson();
  gpipe_session_t *session = nullptr;
  ASSERT_EQ(gpipe_session_create_from_json(
                json.data(), json.size(), "old",
                reinterpret_cast<const gpipe_session_options_t *>(memory),
                &session),
            GPIPE_OK)
      << gpipe_last_error();
  float x[4] = {std::numeric_limits<float>::infinity(), 0, 0, 0};
  float target[4] = {0, 0, 0, 0};
  gpipe_input_t inputs[2] = {{"x", GPIPE_ELEMENT_F32, x, 4},
                             {"target", GPIPE_ELEMENT_F32, target, 4}};
  double loss = 0;
  EXPECT_EQ(gpipe_session_train_step(session, inputs, 2, &loss),
            GPIPE_ERROR_NON_FINITE)
      << gpipe_session_last_error(session);
  gpipe_session_destroy(session);
}

} // namespace

// The C++ layer's gradientNorm: none before a step; after one, the norm of
// every parameter's gradient, as gradient() reads them (the guard is on, so
// the step measures it).
TEST(CApiGradientNorm, CppLayer) {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  gpipe::Result<gpipe::Session> session =
      gpipe::Session::fromJson(dropoutMlpJson(), "mlp", options);
  ASSERT_TRUE(session.ok()) << gpipe_last_error();
  gpipe::Result<double> none = session->gradientNorm();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), GPIPE_ERROR_FAILED_PRECONDITION);
  ASSERT_TRUE(std::isfinite(trainStep(session->get(), 3)));
  double squares = 0;
  for (const gpipe::TensorInfo &param : session->parameters()) {
    gpipe::Result<std::vector<float>> gradient = session->gradient(param.name);
    ASSERT_TRUE(gradient.ok()) << gradient.status().toString();
    for (float g : *gradient)
      squares += double(g) * double(g);
  }
  gpipe::Result<double> norm = session->gradientNorm();
  ASSERT_TRUE(norm.ok()) << norm.status().toString();
  EXPECT_GT(*norm, 0.0);
  EXPECT_NEAR(*norm, std::sqrt(squares), 1e-6 * std::sqrt(squares));
}
