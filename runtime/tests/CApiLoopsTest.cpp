//===- CApiLoopsTest.cpp - The C API's training loops ---------------------===//
//
// gpipe_session_train_images on a synthetic IDX image set whose label is a
// known function of the pixels (the brightest of the first five): it must
// learn the rule, and the accuracy it reports must equal a count made here
// from the session's own predictions. gpipe_session_train_text on the
// fortunes corpus with a bigram-sized character model: the validation loss
// must fall from about ln 96 to below it. And the errors of both.
//
//===----------------------------------------------------------------------===//

#include "CApiLoopSupport.h"
#include "TestBundles.h"
#include "TestModels.h"

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/data/TextCorpus.h"
#include "gpipe/runtime/gpipe_runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;
using namespace gpipe::runtime::testing::capi;

namespace {

/// `count` images of 3 x 4 bytes and their labels: the index of the
/// brightest of the first five pixels.
ByteImages brightestPixelImages(int count, uint64_t seed) {
  Lcg rng(seed);
  ByteImages out;
  for (int i = 0; i < count; ++i) {
    for (int p = 0; p < 12; ++p)
      out.pixels.push_back(uint8_t(128 + 127 * rng.uniform()));
    const uint8_t *first = out.pixels.data() + i * 12;
    out.labels.push_back(uint8_t(std::max_element(first, first + 5) - first));
  }
  return out;
}

void record(const gpipe_training_report_t *report, void *reports) {
  static_cast<std::vector<gpipe_training_report_t> *>(reports)->push_back(
      *report);
}

class CApiLoops : public ::testing::Test {
protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("gpipe-capi-loops-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    test = brightestPixelImages(97, 2);
    writeIdx(dir.string(), "train", brightestPixelImages(400, 1));
    writeIdx(dir.string(), "t10k", test);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::filesystem::path dir;
  ByteImages test;
};

} // namespace

TEST_F(CApiLoops, ImageLoopLearnsAndReportsTheAccuracyOfItsPredictions) {
  gpipe_session_t *session = adamSessionOf(
      buildBundle(mlpGraph(20), mlpSplit(2), 4, RematPolicy::Full));
  ASSERT_TRUE(session);
  gpipe_image_training_options_t options;
  gpipe_image_training_options_init(&options);
  options.epochs = 25;
  options.learning_rate = 0.02f;
  std::vector<gpipe_training_report_t> reports;
  double accuracy = -1;
  ASSERT_EQ(gpipe_session_train_images(session, dir.c_str(), &options, record,
                                       &reports, &accuracy),
            GPIPE_OK)
      << gpipe_session_last_error(session);
  ASSERT_EQ(reports.size(), 25u);
  for (unsigned e = 0; e < 25; ++e) {
    EXPECT_EQ(reports[e].epoch, e + 1);
    EXPECT_EQ(reports[e].step, 20); // 400 images in batches of 20
    EXPECT_TRUE(std::isnan(reports[e].validation_loss));
  }
  EXPECT_LT(reports.back().train_loss, reports.front().train_loss);
  EXPECT_EQ(accuracy, reports.back().test_accuracy);
  EXPECT_GT(accuracy, 0.75) << "chance is 0.2";

  // The reported accuracy is the share of test images whose largest logit
  // is their label, counted here from the session's predictions.
  std::vector<float> pixels(test.pixels.begin(), test.pixels.end());
  for (float &p : pixels)
    p /= 255.0f;
  std::vector<int32_t> labels(test.labels.begin(), test.labels.end());
  gpipe_input_t inputs[2] = {
      {"x", GPIPE_ELEMENT_F32, pixels.data(), pixels.size()},
      {"labels", GPIPE_ELEMENT_I32, labels.data(), labels.size()}};
  std::vector<float> logits(97 * 5);
  double loss;
  ASSERT_EQ(gpipe_session_evaluate(session, 97, inputs, 2, logits.size(),
                                   logits.data(), &loss),
            GPIPE_OK)
      << gpipe_session_last_error(session);
  int right = 0;
  for (int i = 0; i < 97; ++i)
    right +=
        std::max_element(&logits[i * 5], &logits[i * 5 + 5]) - &logits[i * 5] ==
        labels[i];
  EXPECT_EQ(accuracy, double(right) / 97);
  gpipe_session_destroy(session);
}

TEST_F(CApiLoops, ErrorsSayWhatWasExpected) {
  gpipe_session_t *session = adamSessionOf(
      buildBundle(mlpGraph(20), mlpSplit(1), 2, RematPolicy::Full));
  ASSERT_TRUE(session);
  gpipe_image_training_options_t options;
  gpipe_image_training_options_init(&options);
  options.learning_rate = std::nanf("");
  EXPECT_EQ(gpipe_session_train_images(session, dir.c_str(), &options, nullptr,
                                       nullptr, nullptr),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gpipe_session_last_error(session))
                .find("the learning rate must be a finite positive number, "
                      "got nan"),
            std::string::npos)
      << gpipe_session_last_error(session);
  EXPECT_EQ(gpipe_session_train_images(session, nullptr, nullptr, nullptr,
                                       nullptr, nullptr),
            GPIPE_ERROR_INVALID_ARGUMENT);
  std::string missing = (dir / "absent").string();
  EXPECT_NE(gpipe_session_train_images(session, missing.c_str(), nullptr,
                                       nullptr, nullptr, nullptr),
            GPIPE_OK);
  EXPECT_NE(std::string(gpipe_session_last_error(session)).find(missing),
            std::string::npos)
      << gpipe_session_last_error(session);
  // The MLP is no character model: the message names its inputs.
  EXPECT_EQ(gpipe_session_train_text(session, dir.c_str(), nullptr, nullptr,
                                     nullptr, nullptr),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gpipe_session_last_error(session)).find("ids"),
            std::string::npos)
      << gpipe_session_last_error(session);
  gpipe_text_training_options_t text;
  gpipe_text_training_options_init(&text);
  text.steps = 0;
  EXPECT_EQ(gpipe_session_train_text(session, dir.c_str(), &text, nullptr,
                                     nullptr, nullptr),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(gpipe_session_last_error(session)),
            "gpipe_session_train_text: expected at least 1 step, got 0");
  gpipe_session_destroy(session);
}

// The image loop runs at its own constant rate; afterwards train_step is
// back at the session's (0 here): the step after the loop changes nothing.
TEST_F(CApiLoops, LoopLeavesTheSessionsLearningRate) {
  std::string json =
      writeBundle(buildBundle(mlpGraph(20), mlpSplit(2), 2, RematPolicy::Full));
  gpipe_session_options_t sessionOptions;
  gpipe_session_options_init(&sessionOptions);
  gpipe_session_t *session = nullptr;
  ASSERT_EQ(gpipe_session_create_from_json(json.data(), json.size(), "test",
                                           &sessionOptions, &session),
            GPIPE_OK)
      << gpipe_last_error();
  ASSERT_EQ(gpipe_session_set_learning_rate(session, 0.0f), GPIPE_OK);
  gpipe_image_training_options_t options;
  gpipe_image_training_options_init(&options);
  options.epochs = 1;
  options.max_steps_per_epoch = 2;
  options.learning_rate = 0.05f;
  options.cosine_schedule = 0;
  ASSERT_EQ(gpipe_session_train_images(session, dir.c_str(), &options, nullptr,
                                       nullptr, nullptr),
            GPIPE_OK)
      << gpipe_session_last_error(session);
  float rate = -1;
  ASSERT_EQ(gpipe_session_get_learning_rate(session, &rate), GPIPE_OK);
  EXPECT_EQ(rate, 0.0f);

  std::vector<float> before(12 * 16), after(12 * 16);
  ASSERT_EQ(gpipe_session_get_parameter(session, "l1.w", before.size(),
                                        before.data()),
            GPIPE_OK);
  Batch batch = mlpBatch(20, 4);
  gpipe_input_t inputs[2] = {
      {"x", GPIPE_ELEMENT_F32, batch["x"].f32.data(), batch["x"].f32.size()},
      {"labels", GPIPE_ELEMENT_I32, batch["labels"].i32.data(),
       batch["labels"].i32.size()}};
  double loss = 0;
  ASSERT_EQ(gpipe_session_train_step(session, inputs, 2, &loss), GPIPE_OK)
      << gpipe_session_last_error(session);
  ASSERT_EQ(
      gpipe_session_get_parameter(session, "l1.w", after.size(), after.data()),
      GPIPE_OK);
  EXPECT_EQ(before, after);
  gpipe_session_destroy(session);
}

// A character model (token and position embeddings, one dense layer to the
// 96 characters) on the fortunes corpus: the validation loss starts near
// ln 96 = 4.56 nats and falls well below it.
TEST(CApiTextLoop, ValidationLossFalls) {
  constexpr int64_t batch = 16, seq = 8, width = 16;
  ModelGraph g = characterGraph(batch, seq, width);
  gpipe_session_t *session =
      adamSessionOf(buildBundle(g, {0, 1}, 2, RematPolicy::Full));
  ASSERT_TRUE(session);
  gpipe_text_training_options_t options;
  gpipe_text_training_options_init(&options);
  options.steps = 300;
  options.eval_every = 100;
  options.learning_rate = 1e-2f;
  std::vector<gpipe_training_report_t> reports;
  double validation = 0;
  ASSERT_EQ(gpipe_session_train_text(session, GPIPE_FORTUNES_DIR, &options,
                                     record, &reports, &validation),
            GPIPE_OK)
      << gpipe_session_last_error(session);
  ASSERT_EQ(reports.size(), 4u); // before the first step, at 100, 200, 300
  EXPECT_EQ(reports.front().step, 0);
  EXPECT_EQ(reports.back().step, 300);
  EXPECT_NEAR(reports.front().validation_loss, std::log(96.0), 0.1);
  EXPECT_LT(validation, std::log(96.0) - 1.0);
  EXPECT_EQ(validation, reports.back().validation_loss);
  EXPECT_TRUE(std::isnan(reports.back().test_accuracy));
  gpipe_session_destroy(session);
}
