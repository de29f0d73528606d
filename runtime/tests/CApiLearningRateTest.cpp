//===- CApiLearningRateTest.cpp - The learning rate checks, under gtest ---===//
//
// Runs the C checks of CApiLearningRateTest.c on the dropout MLP's bundle
// (CApiSessionSupport.h) and on a session the C++ side trains with the
// library's image loop, whose own schedule must not outlive it.
//
//===----------------------------------------------------------------------===//

#include "CApiLearningRateTest.h"

#include "CApiSessionSupport.h"

#include <gtest/gtest.h>

using namespace gpipe::runtime::testing::capi;

namespace {

const char *orOk(const char *error) { return error ? error : "ok"; }

// A step at learning rate 0 changes no parameter, whatever the optimizer
// state of an earlier step holds. RMSProp is the exception: its momentum
// term carries the earlier steps' rate, so only from a fresh state.
TEST(CApiLearningRate, ZeroRateLeavesParametersUnchanged) {
  const std::string &json = dropoutMlpJson();
  struct {
    gpipe_optimizer_t optimizer;
    int warmUp;
  } cases[] = {{GPIPE_OPTIMIZER_SGD, 1},
               {GPIPE_OPTIMIZER_MOMENTUM, 1},
               {GPIPE_OPTIMIZER_ADAM, 1},
               {GPIPE_OPTIMIZER_RMSPROP, 0}};
  for (const auto &c : cases)
    EXPECT_STREQ(orOk(capi_lr_check_zero_rate(json.data(), json.size(),
                                              c.optimizer, c.warmUp)),
                 "ok")
        << "optimizer " << int(c.optimizer);
}

// After an RMSProp step, a step at rate 0 still moves the parameters: the
// momentum term mom = momentum mom + lr g / sqrt(ms + epsilon) keeps the
// earlier rate's contribution (TensorFlow's rule, Optimizers.h).
TEST(CApiLearningRate, RmsPropMomentumOutlivesTheRate) {
  const std::string &json = dropoutMlpJson();
  EXPECT_STREQ(orOk(capi_lr_check_zero_rate(json.data(), json.size(),
                                            GPIPE_OPTIMIZER_RMSPROP, 1)),
               "a step at learning rate 0 changed the parameters");
}

// The rate set is the one the next SGD step applies to the gradient.
TEST(CApiLearningRate, SetRateIsTheNextSgdStep) {
  const std::string &json = dropoutMlpJson();
  EXPECT_STREQ(orOk(capi_lr_check_sgd_update(json.data(), json.size())), "ok");
}

// Invalid rates and NULL pointers are refused with their messages.
TEST(CApiLearningRate, Errors) {
  const std::string &json = dropoutMlpJson();
  EXPECT_STREQ(orOk(capi_lr_check_errors(json.data(), json.size())), "ok");
}

} // namespace
