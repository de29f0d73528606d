//===- CApiAdamWTest.cpp - AdamW and weight decay through the C API -------===//
//
// GPIPE_OPTIMIZER_ADAMW and options->weight_decay, checked against the update
// rule computed here in double from the step's gradient, and the refusals.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"

#include "CApiSessionSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace gpipe::runtime::testing::capi;

std::vector<float> read(const gpipe_session_t *session, const char *name,
                        size_t count, bool gradient) {
  std::vector<float> values(count);
  gpipe_status_t status =
      gradient
          ? gpipe_session_get_gradient(session, name, count, values.data())
          : gpipe_session_get_parameter(session, name, count, values.data());
  EXPECT_EQ(status, GPIPE_OK) << gpipe_last_error();
  return values;
}

// One AdamW step from zero moments: m_hat = g and v_hat = g^2, so
// p1 = p0 - lr (g / (|g| + eps) + wd p0).
TEST(CApiAdamW, FirstStepIsTheDecoupledRule) {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.optimizer = GPIPE_OPTIMIZER_ADAMW;
  options.learning_rate = 0.01f;
  options.weight_decay = 0.5f;
  gpipe_session_t *session = createSession(&options);
  ASSERT_NE(session, nullptr) << gpipe_last_error();
  gpipe_session_info_t info;
  ASSERT_EQ(gpipe_session_query_info(session, &info), GPIPE_OK);
  std::vector<std::vector<float>> before = parameters(session);
  ASSERT_FALSE(std::isnan(trainStep(session, 1)));
  double worst = 0;
  for (size_t i = 0; i < info.parameter_count; ++i) {
    gpipe_tensor_info_t t;
    ASSERT_EQ(gpipe_session_parameter_info(session, i, &t), GPIPE_OK);
    std::vector<float> g = read(session, t.name, t.element_count, true);
    std::vector<float> after = read(session, t.name, t.element_count, false);
    for (size_t e = 0; e < t.element_count; ++e) {
      const double p0 = before[i][e], ge = g[e];
      const double want = p0 - 0.01 * (ge / (std::fabs(ge) + 1e-8) + 0.5 * p0);
      worst = std::max(worst, std::fabs(after[e] - want));
      ASSERT_NEAR(after[e], want, 1e-6 + 1e-5 * std::fabs(want))
          << t.name << "[" << e << "]";
    }
  }
  std::printf("AdamW first step: largest |gpipe - reference| %.2e\n", worst);
  gpipe_session_destroy(session);
}

// SGD with weight decay adds wd p to the gradient: p1 = p0 - lr (g + wd p0),
// where g is the loss's gradient the session reports.
TEST(CApiAdamW, SgdWeightDecayIsL2) {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.learning_rate = 0.1f;
  options.weight_decay = 0.25f;
  gpipe_session_t *session = createSession(&options);
  ASSERT_NE(session, nullptr) << gpipe_last_error();
  std::vector<std::vector<float>> before = parameters(session);
  ASSERT_FALSE(std::isnan(trainStep(session, 2)));
  gpipe_tensor_info_t t;
  ASSERT_EQ(gpipe_session_parameter_info(session, 0, &t), GPIPE_OK);
  std::vector<float> g = read(session, t.name, t.element_count, true);
  std::vector<float> after = read(session, t.name, t.element_count, false);
  for (size_t e = 0; e < t.element_count; ++e) {
    const double p0 = before[0][e];
    const double want = p0 - 0.1 * (double(g[e]) + 0.25 * p0);
    ASSERT_NEAR(after[e], want, 1e-6 + 1e-5 * std::fabs(want)) << e;
  }
  gpipe_session_destroy(session);
}

// Weight decay where it has no meaning, or out of range, is refused.
TEST(CApiAdamW, Refusals) {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.optimizer = GPIPE_OPTIMIZER_ADAM;
  options.weight_decay = 0.1f;
  EXPECT_EQ(createSession(&options), nullptr);
  EXPECT_NE(std::string(gpipe_last_error())
                .find("weight decay applies to sgd and momentum (L2 added to "
                      "the gradient) and to adamw (decoupled), not to adam: "
                      "use adamw"),
            std::string::npos)
      << gpipe_last_error();
  options.optimizer = GPIPE_OPTIMIZER_ADAMW;
  options.weight_decay = -1.0f;
  EXPECT_EQ(createSession(&options), nullptr);
  EXPECT_NE(std::string(gpipe_last_error())
                .find("options->weight_decay: expected a finite value >= 0, "
                      "got -1"),
            std::string::npos)
      << gpipe_last_error();
}

} // namespace
