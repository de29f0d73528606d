//===- CApiConformanceTrainingCases.cpp - Input and loop cases ------------===//
//
// The C API conformance table's cases for what training and evaluation
// inputs can get wrong, and for the library's loops: their options and data
// (CApiConformanceSupport.h).
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"

#include "CApiConformanceSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace gpipe::runtime::testing::conformance {
namespace {

gpipe_image_training_options_t imageOptions() {
  gpipe_image_training_options_t o;
  gpipe_image_training_options_init(&o);
  return o;
}

gpipe_text_training_options_t textOptions() {
  gpipe_text_training_options_t o;
  gpipe_text_training_options_init(&o);
  return o;
}

/// IDX files of `count` 3x4 images (the test model's 12 features) in `dir`.
std::string writeImages(const std::string &dir, uint32_t count) {
  ::mkdir(dir.c_str(), 0755);
  auto bigEndian = [](uint32_t v) {
    return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  };
  for (const char *prefix : {"train", "t10k"}) {
    std::string images = bigEndian(0x803) + bigEndian(count) + bigEndian(3) +
                         bigEndian(4) + std::string(count * 12, char(7));
    std::string labels = bigEndian(0x801) + bigEndian(count);
    for (uint32_t i = 0; i < count; ++i)
      labels += char(i % kClasses);
    writeText(dir + "/" + prefix + "-images-idx3-ubyte", images);
    writeText(dir + "/" + prefix + "-labels-idx1-ubyte", labels);
  }
  return dir;
}

} // namespace

std::vector<Case> inputCases() {
  std::vector<Case> c;

  // Training and evaluation: what the inputs can get wrong.
  auto step = [&](const char *what,
                  std::function<void(std::vector<gpipe_input_t> &)> edit,
                  gpipe_status_t status, const std::string &message) {
    for (bool evaluate : {false, true}) {
      const char *function =
          evaluate ? "gpipe_session_evaluate" : "gpipe_session_train_step";
      c.push_back(
          {function, what,
           [edit, evaluate](World &w) {
             std::vector<gpipe_input_t> inputs = w.inputs();
             edit(inputs);
             double loss;
             return evaluate
                        ? gpipe_session_evaluate(w.trained, kBatch,
                                                 inputs.data(), inputs.size(),
                                                 0, nullptr, &loss)
                        : gpipe_session_train_step(w.trained, inputs.data(),
                                                   inputs.size(), &loss);
           },
           status, std::string(function) + ": " + message, true});
    }
  };
  step(
      "a missing input", [](auto &in) { in.pop_back(); },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "missing model input 'labels' (expected i32 [10])");
  step(
      "an unknown input", [](auto &in) { in[0].name = "y"; },
      GPIPE_ERROR_NOT_FOUND,
      "inputs[0]: unknown model input 'y' (the model reads 'x', 'labels')");
  step(
      "an input twice", [](auto &in) { in[1] = in[0]; },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "inputs[1]: model input 'x' is given twice (also inputs[0])");
  step(
      "a NULL name", [](auto &in) { in[0].name = nullptr; },
      GPIPE_ERROR_INVALID_ARGUMENT, "inputs[0].name is null");
  for (int32_t type : {-1, 2, std::numeric_limits<int32_t>::min()})
    step(
        "an element type out of range",
        [type](auto &in) { in[0].type = rawEnum<gpipe_element_type_t>(type); },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "input 'x': unknown element type " + std::to_string(type) +
            " (expected GPIPE_ELEMENT_F32 or GPIPE_ELEMENT_I32)");
  step(
      "the wrong element type",
      [](auto &in) { in[0].type = GPIPE_ELEMENT_I32; },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "input 'x': expected f32 elements, got i32");
  for (size_t count : {size_t(119), std::numeric_limits<size_t>::max()})
    step(
        "the wrong element count",
        [count](auto &in) { in[0].element_count = count; },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "input 'x': expected 120 f32 elements (shape [10, 12]), got " +
            std::to_string(count));
  step(
      "NULL data", [](auto &in) { in[1].data = nullptr; },
      GPIPE_ERROR_INVALID_ARGUMENT, "input 'labels': data is null");
  for (float bad : {kNaN, kInf, -kInf})
    step(
        "a non-finite input under the guard",
        [bad](auto &in) {
          static thread_local std::vector<float> x;
          const float *given = static_cast<const float *>(in[0].data);
          x.assign(given, given + in[0].element_count);
          x[37] = bad;
          in[0].data = x.data();
        },
        GPIPE_ERROR_NON_FINITE,
        std::string("input 'x': expected finite values (the session guards: "
                    "check_finite), got ") +
            (std::isnan(bad) ? "nan"
             : bad > 0       ? "inf"
                             : "-inf") +
            " at element 37");
  c.push_back({"gpipe_session_train_step", "NULL inputs with a count",
               [](World &w) {
                 double loss;
                 return gpipe_session_train_step(w.trained, nullptr, 2, &loss);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               "gpipe_session_train_step: inputs is null but input_count is 2",
               true});
  c.push_back({"gpipe_session_train_step", "NULL out_loss",
               [](World &w) {
                 std::vector<gpipe_input_t> inputs = w.inputs();
                 return gpipe_session_train_step(w.trained, inputs.data(),
                                                 inputs.size(), nullptr);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               "gpipe_session_train_step: out_loss is null", true});
  c.push_back({"gpipe_session_train_step", "NULL session",
               [](World &w) {
                 std::vector<gpipe_input_t> inputs = w.inputs();
                 double loss;
                 return gpipe_session_train_step(nullptr, inputs.data(),
                                                 inputs.size(), &loss);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               "gpipe_session_train_step: session is null"});
  const std::string evaluate = "gpipe_session_evaluate: ";
  for (int64_t rows : {int64_t(0), std::numeric_limits<int64_t>::min()})
    c.push_back(
        {"gpipe_session_evaluate", "rows < 1",
         [rows](World &w) {
           std::vector<gpipe_input_t> inputs = w.inputs();
           double loss;
           return gpipe_session_evaluate(w.trained, rows, inputs.data(),
                                         inputs.size(), 0, nullptr, &loss);
         },
         GPIPE_ERROR_INVALID_ARGUMENT,
         evaluate + "expected at least 1 row, got " + std::to_string(rows),
         true});
  c.push_back({"gpipe_session_evaluate", "rows that overflow",
               [](World &w) {
                 std::vector<gpipe_input_t> inputs = w.inputs();
                 double loss;
                 return gpipe_session_evaluate(
                     w.trained, std::numeric_limits<int64_t>::max(),
                     inputs.data(), inputs.size(), 0, nullptr, &loss);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               evaluate + "the prediction of 9223372036854775807 rows has "
                          "more elements than fit in size_t",
               true});
  c.push_back({"gpipe_session_evaluate", "a prediction buffer too small",
               [](World &w) {
                 std::vector<gpipe_input_t> inputs = w.inputs();
                 double loss;
                 return gpipe_session_evaluate(w.trained, kBatch, inputs.data(),
                                               inputs.size(), 49,
                                               w.buffer.data(), &loss);
               },
               GPIPE_ERROR_BUFFER_TOO_SMALL,
               evaluate + "the prediction of 10 rows (shape [10, 5]) needs 50 "
                          "floats, the buffer holds 49",
               true});
  c.push_back(
      {"gpipe_session_evaluate", "NULL prediction with a capacity",
       [](World &w) {
         std::vector<gpipe_input_t> inputs = w.inputs();
         double loss;
         return gpipe_session_evaluate(w.trained, kBatch, inputs.data(),
                                       inputs.size(), 50, nullptr, &loss);
       },
       GPIPE_ERROR_INVALID_ARGUMENT,
       evaluate + "out_prediction is null but prediction_capacity is 50",
       true});
  return c;
}

std::vector<Case> loopCases() {
  std::vector<Case> c;

  // The library's loops: options and data.
  auto images = [&](const char *what,
                    std::function<void(gpipe_image_training_options_t &)> edit,
                    std::function<std::string(World &)> dataset,
                    gpipe_status_t status, const std::string &message) {
    c.push_back({"gpipe_session_train_images", what,
                 [edit, dataset](World &w) {
                   gpipe_image_training_options_t o = imageOptions();
                   edit(o);
                   std::string dir = dataset(w);
                   return gpipe_session_train_images(w.trained, dir.c_str(), &o,
                                                     nullptr, nullptr, nullptr);
                 },
                 status, "gpipe_session_train_images: " + message, true});
  };
  auto enough = [](World &w) { return writeImages(w.dir.path + "/img", 20); };
  images(
      "epochs 0", [](auto &o) { o.epochs = 0; }, enough,
      GPIPE_ERROR_INVALID_ARGUMENT, "expected at least 1 epoch, got 0");
  images(
      "max_steps_per_epoch < 0", [](auto &o) { o.max_steps_per_epoch = -1; },
      enough, GPIPE_ERROR_INVALID_ARGUMENT,
      "expected at least 0 steps per epoch (0: all), got -1");
  images(
      "warmup_steps < 0", [](auto &o) { o.warmup_steps = -3; }, enough,
      GPIPE_ERROR_INVALID_ARGUMENT, "expected at least 0 warmup steps, got -3");
  images(
      "struct_size 0", [](auto &o) { o.struct_size = 0; }, enough,
      GPIPE_ERROR_INVALID_ARGUMENT,
      "options->struct_size: expected " +
          std::to_string(GPIPE_IMAGE_TRAINING_OPTIONS_MIN_SIZE) + " to " +
          std::to_string(sizeof(gpipe_image_training_options_t)) +
          ", got 0 (initialize the options with "
          "gpipe_image_training_options_init)");
  images(
      "a training set smaller than one batch", [](auto &) {},
      [](World &w) { return writeImages(w.dir.path + "/few", 5); },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "the training set has 5 examples, fewer than one mini-batch of 10 "
      "rows");
  c.push_back({"gpipe_session_train_images", "NULL dataset_dir",
               [](World &w) {
                 return gpipe_session_train_images(w.trained, nullptr, nullptr,
                                                   nullptr, nullptr, nullptr);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               "gpipe_session_train_images: dataset_dir is null", true});
  auto text = [&](const char *what,
                  std::function<void(gpipe_text_training_options_t &)> edit,
                  const char *corpus, gpipe_status_t status,
                  const std::string &message) {
    c.push_back({"gpipe_session_train_text", what,
                 [edit, corpus](World &w) {
                   gpipe_text_training_options_t o = textOptions();
                   edit(o);
                   return gpipe_session_train_text(w.trained, corpus, &o,
                                                   nullptr, nullptr, nullptr);
                 },
                 status, "gpipe_session_train_text: " + message, true});
  };
  text(
      "NULL corpus_path", [](auto &) {}, nullptr, GPIPE_ERROR_INVALID_ARGUMENT,
      "corpus_path is null");
  text(
      "steps 0", [](auto &o) { o.steps = 0; }, "/nonexistent",
      GPIPE_ERROR_INVALID_ARGUMENT, "expected at least 1 step, got 0");
  text(
      "learning_rate nan", [](auto &o) { o.learning_rate = kNaN; },
      "/nonexistent", GPIPE_ERROR_INVALID_ARGUMENT,
      "the learning rate must be a finite positive number, got nan");
  text(
      "warmup as long as the run",
      [](auto &o) {
        o.steps = 10;
        o.warmup_steps = 10;
      },
      "/nonexistent", GPIPE_ERROR_INVALID_ARGUMENT,
      "expected fewer warmup steps than the run's 10 steps, got 10");
  return c;
}

} // namespace gpipe::runtime::testing::conformance
