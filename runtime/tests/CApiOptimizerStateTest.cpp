//===- CApiOptimizerStateTest.cpp - Optimizer state through the C API -----===//
//
// gpipe_session_optimizer_slot_count, _optimizer_state_size,
// _get_optimizer_state, _set_optimizer_state and _set_steps_done: a run
// moved into a fresh session through them (parameters, every optimizer
// state tensor, the step count) continues bitwise as the original does; the
// state read back is the update rule's (momentum's velocity after one step
// is the gradient); and every misuse comes back with its message.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"

#include "gpipe/runtime/Runtime.hpp"

#include "CApiSessionSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace gpipe::runtime::testing::capi;

namespace {

gpipe_session_options_t optionsFor(gpipe_optimizer_t optimizer, uint64_t seed) {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.seed = seed;
  options.optimizer = optimizer;
  options.learning_rate = 0.02f;
  return options;
}

std::vector<std::string> parameterNames(const gpipe_session_t *session) {
  gpipe_session_info_t info;
  gpipe_session_query_info(session, &info);
  std::vector<std::string> names;
  for (size_t i = 0; i < info.parameter_count; ++i) {
    gpipe_tensor_info_t param;
    gpipe_session_parameter_info(session, i, &param);
    names.push_back(param.name);
  }
  return names;
}

std::vector<float> stateOf(const gpipe_session_t *session,
                           const std::string &name, uint32_t slot) {
  size_t size = 0;
  EXPECT_EQ(
      gpipe_session_optimizer_state_size(session, name.c_str(), slot, &size),
      GPIPE_OK)
      << gpipe_last_error();
  std::vector<float> values(size);
  EXPECT_EQ(gpipe_session_get_optimizer_state(session, name.c_str(), slot,
                                              values.size(), values.data()),
            GPIPE_OK)
      << gpipe_last_error();
  return values;
}

/// Moves `from`'s parameters, and unless `parametersOnly` its optimizer
/// state and step count, into `to`.
void copyRun(const gpipe_session_t *from, gpipe_session_t *to,
             bool parametersOnly = false) {
  uint32_t slots = 0;
  ASSERT_EQ(gpipe_session_optimizer_slot_count(from, &slots), GPIPE_OK);
  std::vector<std::vector<float>> params = parameters(from);
  std::vector<std::string> names = parameterNames(from);
  for (size_t p = 0; p < names.size(); ++p) {
    ASSERT_EQ(gpipe_session_set_parameter(to, names[p].c_str(),
                                          params[p].data(), params[p].size()),
              GPIPE_OK)
        << gpipe_session_last_error(to);
    for (uint32_t slot = 0; slot < slots && !parametersOnly; ++slot) {
      std::vector<float> state = stateOf(from, names[p], slot);
      ASSERT_EQ(gpipe_session_set_optimizer_state(to, names[p].c_str(), slot,
                                                  state.data(), state.size()),
                GPIPE_OK)
          << gpipe_session_last_error(to);
    }
  }
  int64_t steps = 0;
  ASSERT_EQ(gpipe_session_steps_done(from, &steps), GPIPE_OK);
  if (!parametersOnly) {
    ASSERT_EQ(gpipe_session_set_steps_done(to, steps), GPIPE_OK);
  }
}

// Per optimizer: three steps on one session, its run moved into a fresh
// session of another seed, then two more steps on both give the same bits
// (losses, parameters, optimizer state). Moving the parameters alone does
// not: the state and the step count matter.
TEST(CApiOptimizerState, MovedRunContinuesBitwise) {
  const struct {
    gpipe_optimizer_t optimizer;
    uint32_t slots;
  } cases[] = {{GPIPE_OPTIMIZER_SGD, 0},
               {GPIPE_OPTIMIZER_MOMENTUM, 1},
               {GPIPE_OPTIMIZER_RMSPROP, 2},
               {GPIPE_OPTIMIZER_ADAM, 2}};
  for (const auto &c : cases) {
    SCOPED_TRACE("optimizer " + std::to_string(int(c.optimizer)));
    gpipe_session_options_t first = optionsFor(c.optimizer, 7);
    gpipe_session_options_t second = optionsFor(c.optimizer, 99);
    gpipe_session_t *original = createSession(&first);
    gpipe_session_t *moved = createSession(&second);
    gpipe_session_t *paramsOnly = createSession(&second);
    ASSERT_TRUE(original && moved && paramsOnly) << gpipe_last_error();
    uint32_t slots = 99;
    ASSERT_EQ(gpipe_session_optimizer_slot_count(original, &slots), GPIPE_OK);
    EXPECT_EQ(slots, c.slots);

    for (uint64_t step = 1; step <= 3; ++step)
      ASSERT_FALSE(std::isnan(trainStep(original, step)));
    copyRun(original, moved);
    copyRun(original, paramsOnly, /*parametersOnly=*/true);
    int64_t steps = 0;
    gpipe_session_steps_done(moved, &steps);
    EXPECT_EQ(steps, 3);

    bool paramsOnlyDiffers = false;
    for (uint64_t step = 4; step <= 5; ++step) {
      double expected = trainStep(original, step);
      EXPECT_EQ(trainStep(moved, step), expected) << "step " << step;
      paramsOnlyDiffers |= trainStep(paramsOnly, step) != expected;
    }
    std::vector<std::vector<float>> want = parameters(original);
    std::vector<std::vector<float>> got = parameters(moved);
    std::vector<std::vector<float>> alone = parameters(paramsOnly);
    ASSERT_EQ(got.size(), want.size());
    std::vector<std::string> names = parameterNames(original);
    for (size_t p = 0; p < want.size(); ++p) {
      EXPECT_TRUE(bitwiseEqual(got[p], want[p])) << names[p];
      paramsOnlyDiffers |= !bitwiseEqual(alone[p], want[p]);
      for (uint32_t slot = 0; slot < slots; ++slot)
        EXPECT_TRUE(bitwiseEqual(stateOf(moved, names[p], slot),
                                 stateOf(original, names[p], slot)))
            << names[p] << " slot " << slot;
    }
    // SGD keeps no state, but dropout's masks follow the step number.
    EXPECT_TRUE(paramsOnlyDiffers);
    gpipe_session_destroy(original);
    gpipe_session_destroy(moved);
    gpipe_session_destroy(paramsOnly);
  }
}

// The state is zero before the first step; after it, momentum's velocity
// v = momentum * 0 + g is the step's gradient.
TEST(CApiOptimizerState, MomentumVelocityIsTheFirstGradient) {
  gpipe_session_options_t options = optionsFor(GPIPE_OPTIMIZER_MOMENTUM, 7);
  gpipe_session_t *session = createSession(&options);
  ASSERT_NE(session, nullptr) << gpipe_last_error();
  for (const std::string &name : parameterNames(session))
    for (float v : stateOf(session, name, 0))
      ASSERT_EQ(v, 0.0f) << name;
  ASSERT_FALSE(std::isnan(trainStep(session, 1)));
  for (const std::string &name : parameterNames(session)) {
    size_t size = 0;
    gpipe_session_parameter_size(session, name.c_str(), &size);
    std::vector<float> gradient(size);
    ASSERT_EQ(gpipe_session_get_gradient(session, name.c_str(), size,
                                         gradient.data()),
              GPIPE_OK);
    EXPECT_TRUE(bitwiseEqual(stateOf(session, name, 0), gradient)) << name;
  }
  gpipe_session_destroy(session);
}

// Every misuse: its status and exact message; a refused write changes
// nothing.
TEST(CApiOptimizerState, Errors) {
  gpipe_session_options_t options = optionsFor(GPIPE_OPTIMIZER_ADAM, 7);
  gpipe_session_t *session = createSession(&options);
  ASSERT_NE(session, nullptr) << gpipe_last_error();
  ASSERT_FALSE(std::isnan(trainStep(session, 1)));
  std::vector<float> v = stateOf(session, "l1.b", 1);
  ASSERT_EQ(v.size(), 16u);
  size_t size = 0;
  uint32_t slots = 0;
  float value = 0;
  std::vector<float> buffer(16, 0.5f);
  const std::string models =
      "(the model has 'l1.w', 'l1.b', 'l2.w', 'l2.b', 'l3.w', 'l3.b')";

  EXPECT_EQ(gpipe_session_optimizer_state_size(session, "nope", 0, &size),
            GPIPE_ERROR_NOT_FOUND);
  EXPECT_EQ(gpipe_last_error(),
            "gpipe_session_optimizer_state_size: unknown parameter 'nope' " +
                models);
  EXPECT_EQ(gpipe_session_optimizer_state_size(session, "l1.b", 2, &size),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_optimizer_state_size: optimizer state slot 2 "
               "out of range: adam keeps 2 per parameter (slots 0 to 1)");
  EXPECT_EQ(gpipe_session_optimizer_state_size(session, "l1.b", 0, nullptr),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(), "gpipe_session_optimizer_state_size: "
                                   "out_element_count is null");
  EXPECT_EQ(gpipe_session_optimizer_slot_count(nullptr, &slots),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_optimizer_slot_count: session is null");
  EXPECT_EQ(gpipe_session_optimizer_slot_count(session, nullptr),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_optimizer_slot_count: out_slot_count is null");

  EXPECT_EQ(
      gpipe_session_get_optimizer_state(session, "l1.b", 0, 15, buffer.data()),
      GPIPE_ERROR_BUFFER_TOO_SMALL);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_get_optimizer_state: optimizer state 0 of "
               "parameter 'l1.b' has 16 elements, the buffer holds 15");
  EXPECT_EQ(
      gpipe_session_get_optimizer_state(session, nullptr, 0, 16, buffer.data()),
      GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_get_optimizer_state: name is null");
  EXPECT_EQ(gpipe_session_get_optimizer_state(session, "l1.b", 0, 16, nullptr),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_get_optimizer_state: out_values is null");

  struct Write {
    const char *name;
    uint32_t slot;
    std::vector<float> values;
    gpipe_status_t status;
    std::string message;
  } writes[] = {
      {"l1.b", 1, std::vector<float>(15, 0.5f), GPIPE_ERROR_INVALID_ARGUMENT,
       "optimizer state 1 of parameter 'l1.b': expected 16 elements (shape "
       "[16]), got 15"},
      {"l1.b", 0, {}, GPIPE_ERROR_INVALID_ARGUMENT, ""},
      {"l1.b", 1, {}, GPIPE_ERROR_INVALID_ARGUMENT, ""},
      {"nope", 0, buffer, GPIPE_ERROR_NOT_FOUND,
       "unknown parameter 'nope' " + models},
      {"l1.b", 7, buffer, GPIPE_ERROR_INVALID_ARGUMENT,
       "optimizer state slot 7 out of range: adam keeps 2 per parameter "
       "(slots 0 to 1)"},
  };
  writes[1].values = buffer;
  writes[1].values[3] = std::numeric_limits<float>::quiet_NaN();
  writes[1].message = "optimizer state 0 of parameter 'l1.b': expected finite "
                      "values, got nan at element 3";
  writes[2].values = buffer;
  writes[2].values[5] = -1.0f;
  writes[2].message =
      "optimizer state 1 of parameter 'l1.b': expected finite values >= 0 "
      "(adam's mean of squared gradients), got -1 at element 5";
  for (const Write &w : writes) {
    EXPECT_EQ(gpipe_session_set_optimizer_state(
                  session, w.name, w.slot, w.values.data(), w.values.size()),
              w.status)
        << w.message;
    EXPECT_EQ(gpipe_session_last_error(session),
              "gpipe_session_set_optimizer_state: " + w.message);
  }
  EXPECT_EQ(gpipe_session_set_optimizer_state(session, "l1.b", 1, nullptr, 16),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_session_last_error(session),
               "gpipe_session_set_optimizer_state: values is null");
  EXPECT_EQ(
      gpipe_session_set_optimizer_state(nullptr, "l1.b", 1, buffer.data(), 16),
      GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_set_optimizer_state: session is null");
  EXPECT_TRUE(bitwiseEqual(stateOf(session, "l1.b", 1), v))
      << "a refused write changed the state";
  // A negative first moment is fine: only v must be >= 0.
  EXPECT_EQ(gpipe_session_set_optimizer_state(session, "l1.b", 0,
                                              writes[2].values.data(), 16),
            GPIPE_OK)
      << gpipe_session_last_error(session);

  EXPECT_EQ(gpipe_session_set_steps_done(session, -1),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(
      gpipe_session_last_error(session),
      "gpipe_session_set_steps_done: expected 0 to 9223372036854775806 "
      "steps done, got -1");
  EXPECT_EQ(gpipe_session_set_steps_done(nullptr, 1),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_set_steps_done: session is null");
  int64_t steps = 0;
  gpipe_session_steps_done(session, &steps);
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(gpipe_session_get_learning_rate(nullptr, &value),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_get_learning_rate: session is null");
  gpipe_session_destroy(session);

  // SGD keeps no state: any slot is out of range.
  gpipe_session_options_t sgd = optionsFor(GPIPE_OPTIMIZER_SGD, 7);
  session = createSession(&sgd);
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(
      gpipe_session_get_optimizer_state(session, "l1.b", 0, 16, buffer.data()),
      GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_get_optimizer_state: optimizer state slot 0 out "
               "of range: sgd keeps none");
  gpipe_session_destroy(session);
}

// The C++ layer's wrappers move a run the same way.
TEST(CApiOptimizerState, CppLayer) {
  gpipe::Result<gpipe::Session> original = gpipe::Session::fromJson(
      dropoutMlpJson(), "mlp", optionsFor(GPIPE_OPTIMIZER_RMSPROP, 7));
  gpipe::Result<gpipe::Session> moved = gpipe::Session::fromJson(
      dropoutMlpJson(), "mlp", optionsFor(GPIPE_OPTIMIZER_RMSPROP, 8));
  ASSERT_TRUE(original.ok() && moved.ok()) << gpipe_last_error();
  ASSERT_TRUE(original->setLearningRate(0.05f).ok());
  EXPECT_EQ(original->learningRate(), 0.05f);
  EXPECT_EQ(original->optimizerSlotCount(), 2u);
  for (uint64_t step = 1; step <= 2; ++step)
    trainStep(original->get(), step);
  for (const gpipe::TensorInfo &param : original->parameters()) {
    ASSERT_TRUE(
        moved->setParameter(param.name, *original->parameter(param.name)).ok());
    for (uint32_t slot = 0; slot < 2; ++slot) {
      gpipe::Result<std::vector<float>> state =
          original->optimizerState(param.name, slot);
      ASSERT_TRUE(state.ok()) << state.status().toString();
      ASSERT_TRUE(moved->setOptimizerState(param.name, slot, *state).ok());
    }
  }
  ASSERT_TRUE(moved->setStepsDone(original->stepsDone()).ok());
  ASSERT_TRUE(moved->setLearningRate(original->learningRate()).ok());
  EXPECT_EQ(trainStep(moved->get(), 3), trainStep(original->get(), 3));
  std::vector<std::vector<float>> want = parameters(original->get());
  std::vector<std::vector<float>> got = parameters(moved->get());
  for (size_t p = 0; p < want.size(); ++p)
    EXPECT_TRUE(bitwiseEqual(got[p], want[p])) << p;
  gpipe::Result<std::vector<float>> bad = moved->optimizerState("l1.b", 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().toString(),
            "GPIPE_ERROR_INVALID_ARGUMENT: gpipe_session_optimizer_state_size: "
            "optimizer state slot 2 out of range: rmsprop keeps 2 per "
            "parameter (slots 0 to 1)");
  EXPECT_EQ(moved->setLearningRate(-2.0f).toString(),
            "GPIPE_ERROR_INVALID_ARGUMENT: gpipe_session_set_learning_rate: "
            "expected a finite learning rate >= 0, got -2");
}

} // namespace
