//===- CheckpointOptimizerConfigTest.cpp - The update rule in checkpoints -===//
//
// A checkpoint records the hyper-parameters of its optimizer's update rule
// (state.json's "optimizer_config": weight decay, clipping norm and those
// the kind reads), and a load into a run whose values differ is refused
// with both values, changing nothing; a checkpoint saved before they were
// recorded loads whatever the run's. Through the C API, on the dropout MLP
// of CApiSessionSupport.h.
//
//===----------------------------------------------------------------------===//

#include "CApiSessionSupport.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace gpipe::runtime::testing::capi;
using Json = nlohmann::json;

namespace {

class CheckpointOptimizerConfig : public ::testing::Test {
protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("gpipe-ckpt-optimizer-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  /// Saves a session of `options` after one step; the checkpoint's path.
  std::string saveAfterOneStep(const gpipe_session_options_t &options) {
    gpipe_session_t *session = createSession(&options);
    EXPECT_NE(session, nullptr) << gpipe_last_error();
    if (!session)
      return {};
    trainStep(session, 1);
    EXPECT_EQ(gpipe_session_save_checkpoint(session, dir.c_str(), 0), GPIPE_OK)
        << gpipe_session_last_error(session);
    gpipe_session_destroy(session);
    return (dir / "step-0000000001").string();
  }

  Json readState(const std::string &checkpoint) {
    std::ifstream in(checkpoint + "/state.json");
    std::stringstream text;
    text << in.rdbuf();
    return Json::parse(text.str(), nullptr, false);
  }

  /// Loads `checkpoint` into a fresh session of `options`: "" or the
  /// message; a refused load must leave the session as it was.
  std::string loadInto(const gpipe_session_options_t &options,
                       const std::string &checkpoint) {
    gpipe_session_t *session = createSession(&options);
    EXPECT_NE(session, nullptr) << gpipe_last_error();
    if (!session)
      return "no session";
    auto before = parameters(session);
    gpipe_status_t status =
        gpipe_session_load_checkpoint(session, checkpoint.c_str());
    std::string message = gpipe_session_last_error(session);
    if (status != GPIPE_OK) {
      EXPECT_EQ(status, GPIPE_ERROR_INVALID_ARGUMENT) << message;
      auto after = parameters(session);
      for (size_t i = 0; i < before.size(); ++i)
        EXPECT_TRUE(bitwiseEqual(before[i], after[i])) << "parameter " << i;
      int64_t steps = -1;
      EXPECT_EQ(gpipe_session_steps_done(session, &steps), GPIPE_OK);
      EXPECT_EQ(steps, 0);
    }
    gpipe_session_destroy(session);
    return message;
  }

  std::filesystem::path dir;
};

gpipe_session_options_t optionsOf(gpipe_optimizer_t optimizer,
                                  float weightDecay) {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.seed = 4;
  options.optimizer = optimizer;
  options.weight_decay = weightDecay;
  return options;
}

} // namespace

// state.json records what the update rule reads, as the shortest decimals.
TEST_F(CheckpointOptimizerConfig, StateRecordsTheUpdateRule) {
  gpipe_session_options_t options = optionsOf(GPIPE_OPTIMIZER_ADAMW, 0.01f);
  options.clip_grad_norm = 1.5f;
  std::string checkpoint = saveAfterOneStep(options);
  Json state = readState(checkpoint);
  ASSERT_TRUE(state.is_object());
  EXPECT_EQ(state["optimizer_config"].dump(),
            R"({"beta1":0.9,"beta2":0.999,"clip_grad_norm":1.5,)"
            R"("epsilon":1e-08,"weight_decay":0.01})");

  // A second save of step 1 in the same directory is step-0000000001-2.
  std::string momentum =
      saveAfterOneStep(optionsOf(GPIPE_OPTIMIZER_MOMENTUM, 0)) + "-2";
  EXPECT_EQ(readState(momentum)["optimizer_config"].dump(),
            R"({"clip_grad_norm":0.0,"momentum":0.9,"weight_decay":0.0})");
}

// Another weight decay is refused, naming both; the same one loads.
TEST_F(CheckpointOptimizerConfig, AnotherWeightDecayIsRefused) {
  std::string checkpoint =
      saveAfterOneStep(optionsOf(GPIPE_OPTIMIZER_SGD, 0.01f));
  EXPECT_EQ(loadInto(optionsOf(GPIPE_OPTIMIZER_SGD, 0.1f), checkpoint),
            "gpipe_session_load_checkpoint: '" + checkpoint +
                "' was saved with weight_decay 0.01 (optimizer sgd), the run "
                "uses 0.1");
  EXPECT_EQ(
      loadInto(optionsOf(GPIPE_OPTIMIZER_SGD, 0), checkpoint),
      "gpipe_session_load_checkpoint: '" + checkpoint +
          "' was saved with weight_decay 0.01 (optimizer sgd), the run uses 0");
  EXPECT_EQ(loadInto(optionsOf(GPIPE_OPTIMIZER_SGD, 0.01f), checkpoint), "");
}

// The other hyper-parameters of the rule, and the clipping norm, likewise.
TEST_F(CheckpointOptimizerConfig, AnotherRuleIsRefused) {
  gpipe_session_options_t adamw = optionsOf(GPIPE_OPTIMIZER_ADAMW, 0.01f);
  adamw.beta2 = 0.99f;
  std::string checkpoint = saveAfterOneStep(adamw);
  EXPECT_EQ(
      loadInto(optionsOf(GPIPE_OPTIMIZER_ADAMW, 0.01f), checkpoint),
      "gpipe_session_load_checkpoint: '" + checkpoint +
          "' was saved with beta2 0.99 (optimizer adamw), the run uses 0.999");
  gpipe_session_options_t clipped = adamw;
  clipped.clip_grad_norm = 2.0f;
  EXPECT_EQ(loadInto(clipped, checkpoint),
            "gpipe_session_load_checkpoint: '" + checkpoint +
                "' was saved with clip_grad_norm 0 (optimizer adamw), the run "
                "uses 2");
  EXPECT_EQ(loadInto(adamw, checkpoint), "");
  // A hyper-parameter the rule does not read is not compared: sgd has no
  // betas.
  std::filesystem::remove_all(dir);
  std::string sgd = saveAfterOneStep(optionsOf(GPIPE_OPTIMIZER_SGD, 0));
  gpipe_session_options_t otherBetas = optionsOf(GPIPE_OPTIMIZER_SGD, 0);
  otherBetas.beta1 = 0.5f;
  EXPECT_EQ(loadInto(otherBetas, sgd), "");
}

// A checkpoint without "optimizer_config" (saved before it was recorded)
// loads into a run of any weight decay: the value is unknown, not checked.
TEST_F(CheckpointOptimizerConfig, OldCheckpointsLoadUnchecked) {
  std::string checkpoint =
      saveAfterOneStep(optionsOf(GPIPE_OPTIMIZER_SGD, 0.01f));
  Json state = readState(checkpoint);
  ASSERT_TRUE(state.contains("optimizer_config"));
  state.erase("optimizer_config");
  std::ofstream(checkpoint + "/state.json") << state.dump(2) << "\n";
  EXPECT_EQ(loadInto(optionsOf(GPIPE_OPTIMIZER_SGD, 0.1f), checkpoint), "");
  EXPECT_EQ(loadInto(optionsOf(GPIPE_OPTIMIZER_SGD, 0), checkpoint), "");
}
