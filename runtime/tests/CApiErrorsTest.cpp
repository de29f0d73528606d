//===- CApiErrorsTest.cpp - C API misuse and its errors -------------------===//
//
// Every misuse of the C API (gpipe_runtime.h) must come back as the right
// status with a message that names what was expected and what was found:
// creating sessions, training and evaluation inputs, device failures,
// parameters and queries.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/Executor.h"

#include "CApiSessionSupport.h"
#include "CApiTestFixture.h"
#include "TestBundles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <unistd.h>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;
using namespace gpipe::runtime::testing::capitest;

namespace {

//===----------------------------------------------------------------------===//
// Creation errors
//===----------------------------------------------------------------------===//

// A missing file is an I/O error that names the path and the reason, and
// leaves no session.
TEST(CApiCreateTest, MissingFile) {
  gpipe_session_t *session = reinterpret_cast<gpipe_session_t *>(0x1);
  EXPECT_EQ(gpipe_session_create_from_file("/nonexistent/m.bundle.json",
                                           nullptr, &session),
            GPIPE_ERROR_IO);
  EXPECT_EQ(session, nullptr);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_create_from_file: cannot open "
               "'/nonexistent/m.bundle.json': No such file or directory");
}

// A directory is not a regular file: also an I/O error.
TEST(CApiCreateTest, DirectoryIsAnIoError) {
  gpipe_session_t *session = nullptr;
  EXPECT_EQ(gpipe_session_create_from_file("/", nullptr, &session),
            GPIPE_ERROR_IO);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_create_from_file: cannot read '/': expected a "
               "regular file, found a directory");
}

// Text that is not JSON, JSON that is not a bundle, and a bundle that reads
// but fails the executor's checks are all invalid bundles, with the reader's
// or the executor's message.
TEST(CApiCreateTest, MalformedBundles) {
  std::string path = tempPath("bad.bundle.json");
  writeFile(path, "{\"format\": \"gpipe-bundle\", \"version\": 1, ");
  gpipe_session_t *session = nullptr;
  EXPECT_EQ(gpipe_session_create_from_file(path.c_str(), nullptr, &session),
            GPIPE_ERROR_INVALID_BUNDLE);
  EXPECT_EQ(session, nullptr);
  std::string expectedPrefix =
      "gpipe_session_create_from_file: '" + path + "': malformed JSON: ";
  EXPECT_EQ(std::string(gpipe_last_error()).substr(0, expectedPrefix.size()),
            expectedPrefix)
      << gpipe_last_error();

  writeFile(path, "{\"format\": \"gpipe-bundle\", \"version\": 3}");
  EXPECT_EQ(gpipe_session_create_from_file(path.c_str(), nullptr, &session),
            GPIPE_ERROR_INVALID_BUNDLE);
  EXPECT_EQ(gpipe_last_error(),
            "gpipe_session_create_from_file: '" + path +
                "': unsupported bundle version 3 (this runtime reads 2); use "
                "the runtime that came with the compiler that wrote it");
  std::remove(path.c_str());

  // The reader accepts it; the executor's validateBundle does not.
  Bundle bundle = mlpBundle();
  bundle.stages[1].values[bundle.stages[1].inputs[0].value].shape.back() = 15;
  std::string text = writeBundle(bundle);
  ASSERT_TRUE(parseBundle(text, "m").ok())
      << parseBundle(text, "m").status().message();
  EXPECT_EQ(gpipe_session_create_from_json(text.data(), text.size(), "m",
                                           nullptr, &session),
            GPIPE_ERROR_INVALID_BUNDLE);
  EXPECT_EQ(session, nullptr);
  std::string error;
  ASSERT_EQ(PipelineExecutor::create(bundle, ExecutorConfig(), error), nullptr);
  EXPECT_EQ(gpipe_last_error(),
            "gpipe_session_create_from_json: invalid bundle: " + error);

  // The JSON length is respected: a truncated view is malformed.
  std::string good = writeBundle(mlpBundle());
  EXPECT_EQ(gpipe_session_create_from_json(good.data(), good.size() / 2,
                                           nullptr, nullptr, &session),
            GPIPE_ERROR_INVALID_BUNDLE);
  EXPECT_EQ(
      std::string(gpipe_last_error())
          .rfind("gpipe_session_create_from_json: '<memory>': malformed JSON",
                 0),
      0u)
      << gpipe_last_error();
}

// Null pointers and invalid options are invalid arguments, named.
TEST(CApiCreateTest, InvalidArguments) {
  std::string text = writeBundle(mlpBundle());
  gpipe_session_t *session = nullptr;
  EXPECT_EQ(gpipe_session_create_from_file(nullptr, nullptr, &session),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_create_from_file: bundle_path is null");
  EXPECT_EQ(gpipe_session_create_from_file("m.json", nullptr, nullptr),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_create_from_file: out_session is null");
  EXPECT_EQ(gpipe_session_create_from_json(nullptr, 0, "m", nullptr, &session),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_create_from_json: json is null");

  struct Case {
    void (*change)(gpipe_session_options_t &);
    const char *message;
  } cases[] = {
      {[](gpipe_session_options_t &o) { o.optimizer = gpipe_optimizer_t(9); },
       "options->optimizer: expected GPIPE_OPTIMIZER_SGD, _MOMENTUM, "
       "_RMSPROP, _ADAM or _ADAMW (0 to 4), got 9"},
      {[](gpipe_session_options_t &o) { o.learning_rate = -0.5f; },
       "options->learning_rate: expected a finite value >= 0, got -0.5"},
      {[](gpipe_session_options_t &o) {
         o.momentum = std::numeric_limits<float>::quiet_NaN();
       },
       "options->momentum: expected a finite value >= 0, got nan"},
      {[](gpipe_session_options_t &o) { o.beta2 = 1.0f; },
       "options->beta2: expected a value in [0, 1), got 1"},
      {[](gpipe_session_options_t &o) { o.recv_timeout_ms = 0; },
       "options->recv_timeout_ms: expected at least 1, got 0"},
  };
  for (const Case &c : cases) {
    gpipe_session_options_t options;
    gpipe_session_options_init(&options);
    c.change(options);
    EXPECT_EQ(gpipe_session_create_from_json(text.data(), text.size(), "m",
                                             &options, &session),
              GPIPE_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(session, nullptr);
    EXPECT_EQ(gpipe_last_error(),
              std::string("gpipe_session_create_from_json: ") + c.message);
  }
}

// The defaults are the executor's; destroying NULL is a no-op; statuses
// have names.
TEST(CApiCreateTest, DefaultsAndNames) {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  ExecutorConfig defaults;
  EXPECT_EQ(options.seed, defaults.seed);
  EXPECT_EQ(options.optimizer, GPIPE_OPTIMIZER_SGD);
  EXPECT_EQ(options.learning_rate, defaults.optimizer.learningRate);
  EXPECT_EQ(options.beta2, defaults.optimizer.beta2);
  EXPECT_EQ(options.recv_timeout_ms, 60000u);
  EXPECT_EQ(options.record_timeline, 1);
  gpipe_session_options_init(nullptr);
  gpipe_session_destroy(nullptr);
  EXPECT_STREQ(gpipe_session_last_error(nullptr), "");
  EXPECT_STREQ(gpipe_status_string(GPIPE_OK), "GPIPE_OK");
  EXPECT_STREQ(gpipe_status_string(GPIPE_ERROR_BUFFER_TOO_SMALL),
               "GPIPE_ERROR_BUFFER_TOO_SMALL");
  EXPECT_STREQ(gpipe_status_string(gpipe_status_t(42)), "GPIPE_ERROR_UNKNOWN");
}

//===----------------------------------------------------------------------===//
// Training and evaluation errors
//===----------------------------------------------------------------------===//

// Each malformed batch has its own status and message; none runs a step.
TEST_F(CApiTest, TrainStepInputErrors) {
  Data data = makeData(kBatch, 1);
  std::vector<float> shortX(kFeatures);
  double loss;
  auto train = [&](std::vector<gpipe_input_t> inputs) {
    return gpipe_session_train_step(session, inputs.data(), inputs.size(),
                                    &loss);
  };
  gpipe_input_t x = {"x", GPIPE_ELEMENT_F32, data.x.data(), data.x.size()};
  gpipe_input_t labels = {"labels", GPIPE_ELEMENT_I32, data.labels.data(),
                          data.labels.size()};
  const std::string f = "gpipe_session_train_step: ";

  expectError(train({x, labels, {"y", GPIPE_ELEMENT_F32, data.x.data(), 1}}),
              GPIPE_ERROR_NOT_FOUND,
              f + "inputs[2]: unknown model input 'y' (the model reads 'x', "
                  "'labels')",
              true);
  expectError(
      train({x, {"x", GPIPE_ELEMENT_F32, shortX.data(), shortX.size()}}),
      GPIPE_ERROR_INVALID_ARGUMENT,
      f + "inputs[1]: model input 'x' is given twice (also "
          "inputs[0])",
      true);
  expectError(
      train({{"x", GPIPE_ELEMENT_F32, shortX.data(), shortX.size()}, labels}),
      GPIPE_ERROR_INVALID_ARGUMENT,
      f + "input 'x': expected 120 f32 elements (shape [10, 12]), got 12",
      true);
  expectError(train({x, {"labels", GPIPE_ELEMENT_F32, data.x.data(), 10}}),
              GPIPE_ERROR_INVALID_ARGUMENT,
              f + "input 'labels': expected i32 elements, got f32", true);
  expectError(
      train({x, {"labels", gpipe_element_type_t(7), data.labels.data(), 10}}),
      GPIPE_ERROR_INVALID_ARGUMENT,
      f + "input 'labels': unknown element type 7 (expected "
          "GPIPE_ELEMENT_F32 or GPIPE_ELEMENT_I32)",
      true);
  expectError(train({x, {"labels", GPIPE_ELEMENT_I32, nullptr, 10}}),
              GPIPE_ERROR_INVALID_ARGUMENT, f + "input 'labels': data is null",
              true);
  expectError(train({x, {nullptr, GPIPE_ELEMENT_I32, data.labels.data(), 10}}),
              GPIPE_ERROR_INVALID_ARGUMENT, f + "inputs[1].name is null", true);
  expectError(train({x}), GPIPE_ERROR_INVALID_ARGUMENT,
              f + "missing model input 'labels' (expected i32 [10])", true);
  expectError(gpipe_session_train_step(session, nullptr, 2, &loss),
              GPIPE_ERROR_INVALID_ARGUMENT,
              f + "inputs is null but input_count is 2", true);
  std::vector<gpipe_input_t> good = {x, labels};
  expectError(
      gpipe_session_train_step(session, good.data(), good.size(), nullptr),
      GPIPE_ERROR_INVALID_ARGUMENT, f + "out_loss is null", true);
  expectError(
      gpipe_session_train_step(nullptr, good.data(), good.size(), &loss),
      GPIPE_ERROR_INVALID_ARGUMENT, f + "session is null");

  int64_t steps = -1;
  gpipe_session_steps_done(session, &steps);
  EXPECT_EQ(steps, 0);
  // A success clears the session's error.
  ASSERT_EQ(train(good), GPIPE_OK);
  EXPECT_STREQ(gpipe_session_last_error(session), "");
  EXPECT_STREQ(gpipe_last_error(), "");
}

// A device failure (a label outside the classes) is a runtime error with the
// executor's message, and leaves the parameters unchanged.
TEST_F(CApiTest, DeviceFailureIsRuntimeError) {
  std::unique_ptr<PipelineExecutor> direct = directExecutor();
  ASSERT_TRUE(direct);
  Data data = makeData(kBatch, 1);
  data.labels[4] = kClasses + 2;
  std::vector<float> before = parameter("l1.w");
  std::vector<gpipe_input_t> inputs = toInputs(data);
  double loss;
  gpipe_status_t status =
      gpipe_session_train_step(session, inputs.data(), inputs.size(), &loss);
  StepResult expected = direct->trainStep(toBatch(data));
  ASSERT_FALSE(expected.ok());
  expectError(status, GPIPE_ERROR_RUNTIME,
              "gpipe_session_train_step: " + expected.error, true);
  EXPECT_NE(expected.error.find("label 7 outside [0, 5)"), std::string::npos)
      << expected.error;
  EXPECT_TRUE(bitwiseEqual(parameter("l1.w"), before));

  std::vector<float> prediction(kBatch * kClasses);
  status = gpipe_session_evaluate(session, kBatch, inputs.data(), inputs.size(),
                                  prediction.size(), prediction.data(), &loss);
  EvalResult expectedEval = direct->evaluate(toBatch(data), kBatch);
  ASSERT_FALSE(expectedEval.ok());
  expectError(status, GPIPE_ERROR_RUNTIME,
              "gpipe_session_evaluate: " + expectedEval.error, true);
}

// Evaluation checks its row count, buffer and inputs before any work.
TEST_F(CApiTest, EvaluateErrors) {
  const int64_t rows = 4;
  Data data = makeData(rows, 1);
  std::vector<gpipe_input_t> inputs = toInputs(data);
  std::vector<float> prediction(rows * kClasses);
  double loss;
  const std::string f = "gpipe_session_evaluate: ";
  expectError(gpipe_session_evaluate(session, rows, inputs.data(),
                                     inputs.size(), prediction.size() - 1,
                                     prediction.data(), &loss),
              GPIPE_ERROR_BUFFER_TOO_SMALL,
              f + "the prediction of 4 rows (shape [4, 5]) needs 20 floats, "
                  "the buffer holds 19",
              true);
  expectError(gpipe_session_evaluate(session, rows, inputs.data(),
                                     inputs.size(), 0, prediction.data(),
                                     &loss),
              GPIPE_ERROR_BUFFER_TOO_SMALL,
              f + "the prediction of 4 rows (shape [4, 5]) needs 20 floats, "
                  "the buffer holds 0",
              true);
  expectError(gpipe_session_evaluate(session, rows, inputs.data(),
                                     inputs.size(), 20, nullptr, &loss),
              GPIPE_ERROR_INVALID_ARGUMENT,
              f + "out_prediction is null but prediction_capacity is 20", true);
  expectError(
      gpipe_session_evaluate(session, 0, inputs.data(), inputs.size(),
                             prediction.size(), prediction.data(), &loss),
      GPIPE_ERROR_INVALID_ARGUMENT, f + "expected at least 1 row, got 0", true);
  // The inputs are checked at the evaluated row count.
  std::vector<float> big(100);
  expectError(gpipe_session_evaluate(session, rows + 1, inputs.data(),
                                     inputs.size(), big.size(), big.data(),
                                     &loss),
              GPIPE_ERROR_INVALID_ARGUMENT,
              f + "input 'x': expected 60 f32 elements (shape [5, 12]), got "
                  "48",
              true);
  expectError(gpipe_session_evaluate(session, rows, inputs.data(),
                                     inputs.size(), prediction.size(),
                                     prediction.data(), nullptr),
              GPIPE_ERROR_INVALID_ARGUMENT, f + "out_loss is null", true);
  gpipe_tensor_info_t info;
  expectError(gpipe_session_prediction_info(session, -3, &info),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_prediction_info: expected at least 1 row, got "
              "-3");
}

//===----------------------------------------------------------------------===//
// Parameter and query errors
//===----------------------------------------------------------------------===//

TEST_F(CApiTest, ParameterErrors) {
  std::vector<float> buffer(300);
  size_t size;
  const std::string names =
      "(the model has 'l1.w', 'l1.b', 'l2.w', 'l2.b', 'l3.w', 'l3.b')";
  expectError(gpipe_session_parameter_size(session, "l9.w", &size),
              GPIPE_ERROR_NOT_FOUND,
              "gpipe_session_parameter_size: unknown parameter 'l9.w' " +
                  names);
  expectError(gpipe_session_get_parameter(session, "l9.w", buffer.size(),
                                          buffer.data()),
              GPIPE_ERROR_NOT_FOUND,
              "gpipe_session_get_parameter: unknown parameter 'l9.w' " + names);
  expectError(gpipe_session_get_parameter(session, "l2.w", 255, buffer.data()),
              GPIPE_ERROR_BUFFER_TOO_SMALL,
              "gpipe_session_get_parameter: parameter 'l2.w' has 256 "
              "elements, the buffer holds 255");
  expectError(gpipe_session_get_gradient(session, "l2.w", 10, buffer.data()),
              GPIPE_ERROR_BUFFER_TOO_SMALL,
              "gpipe_session_get_gradient: parameter 'l2.w' has 256 "
              "elements, the buffer holds 10");
  expectError(gpipe_session_get_parameter(session, "l2.w", 256, nullptr),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_get_parameter: out_values is null");
  expectError(gpipe_session_get_parameter(session, nullptr, 256, buffer.data()),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_get_parameter: name is null");
  expectError(gpipe_session_get_parameter(nullptr, "l2.w", 256, buffer.data()),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_get_parameter: session is null");
  expectError(gpipe_session_parameter_size(session, "l2.w", nullptr),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_parameter_size: out_element_count is null");

  expectError(gpipe_session_set_parameter(session, "l2.w", buffer.data(), 255),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_set_parameter: parameter 'l2.w': expected 256 "
              "elements (shape [16, 16]), got 255",
              true);
  expectError(gpipe_session_set_parameter(session, "nope", buffer.data(), 1),
              GPIPE_ERROR_NOT_FOUND,
              "gpipe_session_set_parameter: unknown parameter 'nope' " + names,
              true);
  expectError(gpipe_session_set_parameter(session, "l2.w", nullptr, 256),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_set_parameter: values is null", true);
  std::vector<float> values = parameter("l2.w");
  std::vector<float> bad = values;
  bad[17] = std::numeric_limits<float>::infinity();
  expectError(
      gpipe_session_set_parameter(session, "l2.w", bad.data(), bad.size()),
      GPIPE_ERROR_INVALID_ARGUMENT,
      "gpipe_session_set_parameter: parameter 'l2.w': expected "
      "finite values, got inf at element 17",
      true);
  EXPECT_TRUE(bitwiseEqual(parameter("l2.w"), values)); // unchanged
}

TEST_F(CApiTest, QueryErrors) {
  gpipe_tensor_info_t info;
  gpipe_session_info_t sessionInfo;
  int64_t steps;
  expectError(gpipe_session_input_info(session, 2, &info),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_input_info: index 2 out of range: the model has "
              "2 inputs");
  expectError(gpipe_session_parameter_info(session, 6, &info),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_parameter_info: index 6 out of range: the model "
              "has 6 parameters");
  expectError(gpipe_session_input_info(session, 0, nullptr),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_input_info: out_info is null");
  expectError(gpipe_session_query_info(nullptr, &sessionInfo),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_query_info: session is null");
  expectError(gpipe_session_steps_done(session, nullptr),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_steps_done: out_steps is null");
  expectError(gpipe_session_steps_done(nullptr, &steps),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_steps_done: session is null");
  expectError(gpipe_session_write_trace(session, nullptr),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_write_trace: path is null");
  // A const query records its error on the thread only.
  EXPECT_STREQ(gpipe_session_last_error(session), "");
}

} // namespace
