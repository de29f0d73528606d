//===- CApiSessionTest.cpp - C API sessions against the executor ----------===//
//
// The C API is a thin layer: a session trained through it must be bitwise
// the PipelineExecutor driven directly with the same bundle file and seed
// (losses, parameters, gradients, evaluation, checkpoints); its queries
// describe the bundle, its trace and memory; sessions on distinct threads are
// independent. The C++ wrapper (Runtime.hpp) is checked the same way.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/Runtime.hpp"

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
#include <thread>
#include <unistd.h>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;
using namespace gpipe::runtime::testing::capitest;

namespace {

//===----------------------------------------------------------------------===//
// Equivalence with the executor
//===----------------------------------------------------------------------===//

// Training through the C API is bitwise the executor's: losses, every
// parameter and every gradient after each of five Adam steps.
TEST_F(CApiTest, TrainStepsMatchExecutorBitwise) {
  std::unique_ptr<PipelineExecutor> direct = directExecutor();
  ASSERT_TRUE(direct);
  for (const ParamSpec &spec : direct->bundle().params)
    ASSERT_TRUE(
        bitwiseEqual(parameter(spec.name), *direct->parameter(spec.name)))
        << "initial " << spec.name;
  for (uint64_t step = 1; step <= 5; ++step) {
    Data data = makeData(kBatch, step);
    std::vector<gpipe_input_t> inputs = toInputs(data);
    double loss = -1;
    ASSERT_EQ(
        gpipe_session_train_step(session, inputs.data(), inputs.size(), &loss),
        GPIPE_OK)
        << gpipe_last_error();
    EXPECT_STREQ(gpipe_last_error(), "");
    EXPECT_STREQ(gpipe_session_last_error(session), "");
    StepResult expected = direct->trainStep(toBatch(data));
    ASSERT_TRUE(expected.ok()) << expected.error;
    EXPECT_EQ(std::memcmp(&loss, &expected.loss, sizeof(double)), 0)
        << "step " << step << ": " << loss << " vs " << expected.loss;
    for (const ParamSpec &spec : direct->bundle().params) {
      EXPECT_TRUE(
          bitwiseEqual(parameter(spec.name), *direct->parameter(spec.name)))
          << "step " << step << ": parameter " << spec.name;
      EXPECT_TRUE(bitwiseEqual(parameter(spec.name, /*gradient=*/true),
                               *direct->gradient(spec.name)))
          << "step " << step << ": gradient " << spec.name;
    }
  }
  int64_t steps = 0;
  ASSERT_EQ(gpipe_session_steps_done(session, &steps), GPIPE_OK);
  EXPECT_EQ(steps, 5);
}

// A checkpoint saved through the C API resumes another session: the same
// parameters, steps done, and the next step's loss bit for bit; a corrupted
// checkpoint is refused with the tensor's name and changes nothing.
TEST_F(CApiTest, CheckpointsResumeAnotherSessionBitwise) {
  for (uint64_t step = 1; step <= 2; ++step) {
    std::vector<gpipe_input_t> inputs;
    Data data = makeData(kBatch, step);
    inputs = toInputs(data);
    double loss;
    ASSERT_EQ(
        gpipe_session_train_step(session, inputs.data(), inputs.size(), &loss),
        GPIPE_OK)
        << gpipe_last_error();
  }
  const std::string dir = tempPath("capi-checkpoints");
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
  ASSERT_EQ(gpipe_session_save_checkpoint(session, dir.c_str(), 1), GPIPE_OK)
      << gpipe_last_error();

  gpipe_session_options_t options = adamOptions();
  options.seed = 1234; // other initial parameters, overwritten by the load
  gpipe_session_t *resumed = nullptr;
  ASSERT_EQ(
      gpipe_session_create_from_file(bundlePath.c_str(), &options, &resumed),
      GPIPE_OK);
  ASSERT_EQ(gpipe_session_load_checkpoint(resumed, dir.c_str()), GPIPE_OK)
      << gpipe_last_error();
  int64_t steps = 0;
  ASSERT_EQ(gpipe_session_steps_done(resumed, &steps), GPIPE_OK);
  EXPECT_EQ(steps, 2);
  Data data = makeData(kBatch, 3);
  std::vector<gpipe_input_t> inputs = toInputs(data);
  double expected = 0, actual = 0;
  ASSERT_EQ(gpipe_session_train_step(session, inputs.data(), inputs.size(),
                                     &expected),
            GPIPE_OK);
  ASSERT_EQ(
      gpipe_session_train_step(resumed, inputs.data(), inputs.size(), &actual),
      GPIPE_OK);
  EXPECT_EQ(std::memcmp(&actual, &expected, sizeof(double)), 0);

  // A flipped byte in the tensor file: refused, naming the tensor.
  std::string tensorsPath = dir + "/step-0000000002/tensors.safetensors";
  std::string bytes;
  {
    std::ifstream in(tensorsPath, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() - 1] ^= 0x10;
  writeFile(tensorsPath, bytes);
  gpipe_status_t status = gpipe_session_load_checkpoint(resumed, dir.c_str());
  EXPECT_EQ(status, GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gpipe_last_error()).find("fails its checksum"),
            std::string::npos)
      << gpipe_last_error();
  ASSERT_EQ(gpipe_session_steps_done(resumed, &steps), GPIPE_OK);
  EXPECT_EQ(steps, 3);

  EXPECT_EQ(gpipe_session_save_checkpoint(resumed, nullptr, 0),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gpipe_session_load_checkpoint(nullptr, dir.c_str()),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gpipe_session_load_checkpoint(resumed, (dir + "/none").c_str()),
            GPIPE_ERROR_IO);
  gpipe_session_destroy(resumed);
}

// The session options pick the backend: the device executor on the host
// emulation trains like the CPU session (within float summation order);
// `cuda` without a CUDA backend or GPU is GPIPE_ERROR_UNAVAILABLE naming the
// missing device; a device outside the enum is an invalid argument.
TEST_F(CApiTest, SessionOptionsSelectTheDevice) {
  gpipe_session_options_t options = adamOptions();
  options.device = GPIPE_DEVICE_HOST_EMULATION;
  gpipe_session_t *emulated = nullptr;
  ASSERT_EQ(
      gpipe_session_create_from_file(bundlePath.c_str(), &options, &emulated),
      GPIPE_OK)
      << gpipe_last_error();
  for (uint64_t step = 1; step <= 3; ++step) {
    Data data = makeData(kBatch, step);
    std::vector<gpipe_input_t> inputs = toInputs(data);
    double expected = -1, actual = -2;
    ASSERT_EQ(gpipe_session_train_step(session, inputs.data(), inputs.size(),
                                       &expected),
              GPIPE_OK)
        << gpipe_last_error();
    ASSERT_EQ(gpipe_session_train_step(emulated, inputs.data(), inputs.size(),
                                       &actual),
              GPIPE_OK)
        << gpipe_last_error();
    EXPECT_NEAR(actual, expected, 1e-5 * std::fabs(expected));
  }
  std::vector<float> weights = parameter("l1.w");
  std::vector<float> emulatedWeights(weights.size());
  ASSERT_EQ(gpipe_session_get_parameter(emulated, "l1.w", weights.size(),
                                        emulatedWeights.data()),
            GPIPE_OK);
  for (size_t i = 0; i < weights.size(); ++i)
    EXPECT_NEAR(emulatedWeights[i], weights[i], 1e-4) << i;
  gpipe_session_destroy(emulated);

  options.device = GPIPE_DEVICE_CUDA;
  gpipe_session_t *cuda = nullptr;
  EXPECT_EQ(gpipe_session_create_from_file(bundlePath.c_str(), &options, &cuda),
            GPIPE_ERROR_UNAVAILABLE);
  EXPECT_EQ(cuda, nullptr);
  EXPECT_EQ(std::string(gpipe_last_error())
                .rfind("gpipe_session_create_from_file: no CUDA device", 0),
            0u)
      << gpipe_last_error();

  options.device = gpipe_device_t(7);
  EXPECT_EQ(gpipe_session_create_from_file(bundlePath.c_str(), &options, &cuda),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_create_from_file: options->device: expected "
               "GPIPE_DEVICE_CPU, _CUDA or _HOST_EMULATION (0 to 2), got 7");
}

// Evaluation on a row count other than the batch writes the executor's
// prediction (the logits) and loss, bitwise, and changes nothing.
TEST_F(CApiTest, EvaluateMatchesExecutorBitwise) {
  std::unique_ptr<PipelineExecutor> direct = directExecutor();
  ASSERT_TRUE(direct);
  Data train = makeData(kBatch, 1);
  std::vector<gpipe_input_t> trainInputs = toInputs(train);
  double loss;
  ASSERT_EQ(gpipe_session_train_step(session, trainInputs.data(),
                                     trainInputs.size(), &loss),
            GPIPE_OK);
  ASSERT_TRUE(direct->trainStep(toBatch(train)).ok());

  const int64_t rows = 7;
  gpipe_tensor_info_t info;
  ASSERT_EQ(gpipe_session_prediction_info(session, rows, &info), GPIPE_OK);
  EXPECT_STREQ(info.name, "softmax_cross_entropy");
  EXPECT_EQ(info.type, GPIPE_ELEMENT_F32);
  EXPECT_EQ(info.batched, 1);
  ASSERT_EQ(info.rank, 2u);
  EXPECT_EQ(info.shape[0], rows);
  EXPECT_EQ(info.shape[1], kClasses);
  EXPECT_EQ(info.element_count, size_t(rows * kClasses));

  Data test = makeData(rows, 99);
  std::vector<gpipe_input_t> inputs = toInputs(test);
  std::vector<float> prediction(info.element_count, -1.0f);
  double evalLoss = -1;
  ASSERT_EQ(gpipe_session_evaluate(session, rows, inputs.data(), inputs.size(),
                                   prediction.size(), prediction.data(),
                                   &evalLoss),
            GPIPE_OK)
      << gpipe_last_error();
  EvalResult expected = direct->evaluate(toBatch(test), rows);
  ASSERT_TRUE(expected.ok()) << expected.error;
  EXPECT_TRUE(bitwiseEqual(prediction, expected.prediction.f32));
  EXPECT_EQ(std::memcmp(&evalLoss, &expected.loss, sizeof(double)), 0);

  // Loss only: no buffer.
  double lossOnly = -1;
  ASSERT_EQ(gpipe_session_evaluate(session, rows, inputs.data(), inputs.size(),
                                   0, nullptr, &lossOnly),
            GPIPE_OK)
      << gpipe_last_error();
  EXPECT_EQ(lossOnly, evalLoss);
  int64_t steps = 0;
  gpipe_session_steps_done(session, &steps);
  EXPECT_EQ(steps, 1);
  for (const ParamSpec &spec : direct->bundle().params)
    EXPECT_TRUE(
        bitwiseEqual(parameter(spec.name), *direct->parameter(spec.name)))
        << spec.name;
}

// A session created from the JSON text is the one created from the file.
TEST_F(CApiTest, CreateFromJsonMatchesFile) {
  gpipe_session_options_t options = adamOptions();
  gpipe_session_t *fromJson = nullptr;
  ASSERT_EQ(gpipe_session_create_from_json(bundleText.data(), bundleText.size(),
                                           "mlp", &options, &fromJson),
            GPIPE_OK)
      << gpipe_last_error();
  Data data = makeData(kBatch, 3);
  std::vector<gpipe_input_t> inputs = toInputs(data);
  double a = 0, b = 1;
  ASSERT_EQ(gpipe_session_train_step(session, inputs.data(), inputs.size(), &a),
            GPIPE_OK);
  ASSERT_EQ(
      gpipe_session_train_step(fromJson, inputs.data(), inputs.size(), &b),
      GPIPE_OK);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof(double)), 0);
  std::vector<float> w(kFeatures * 16), v(kFeatures * 16);
  ASSERT_EQ(gpipe_session_get_parameter(session, "l1.w", w.size(), w.data()),
            GPIPE_OK);
  ASSERT_EQ(gpipe_session_get_parameter(fromJson, "l1.w", v.size(), v.data()),
            GPIPE_OK);
  EXPECT_TRUE(bitwiseEqual(w, v));
  gpipe_session_destroy(fromJson);
}

// Setting the parameters (a checkpoint restore) is the executor's
// setParameter: the following steps stay bitwise equal.
TEST_F(CApiTest, SetParameterMatchesExecutor) {
  std::unique_ptr<PipelineExecutor> direct = directExecutor();
  ASSERT_TRUE(direct);
  std::vector<float> w(16 * kClasses);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = 0.01f * float(int(i % 13) - 6);
  ASSERT_EQ(gpipe_session_set_parameter(session, "l3.w", w.data(), w.size()),
            GPIPE_OK)
      << gpipe_last_error();
  EXPECT_STREQ(gpipe_session_last_error(session), "");
  ASSERT_EQ(direct->setParameter("l3.w", w), "");
  EXPECT_TRUE(bitwiseEqual(parameter("l3.w"), w));
  for (uint64_t step = 1; step <= 2; ++step) {
    Data data = makeData(kBatch, 10 + step);
    std::vector<gpipe_input_t> inputs = toInputs(data);
    double loss;
    ASSERT_EQ(
        gpipe_session_train_step(session, inputs.data(), inputs.size(), &loss),
        GPIPE_OK);
    StepResult expected = direct->trainStep(toBatch(data));
    EXPECT_EQ(loss, expected.loss);
    for (const ParamSpec &spec : direct->bundle().params)
      EXPECT_TRUE(
          bitwiseEqual(parameter(spec.name), *direct->parameter(spec.name)))
          << spec.name;
  }
}

//===----------------------------------------------------------------------===//
// Queries, trace and memory
//===----------------------------------------------------------------------===//

// The session describes the bundle: model, batch, pipeline, inputs,
// parameters.
TEST_F(CApiTest, QueriesDescribeTheBundle) {
  gpipe_session_info_t info;
  ASSERT_EQ(gpipe_session_query_info(session, &info), GPIPE_OK);
  EXPECT_STREQ(info.model, "test");
  EXPECT_EQ(info.batch_size, kBatch);
  EXPECT_EQ(info.device_count, 3u);
  EXPECT_EQ(info.microbatch_count, 4u);
  EXPECT_EQ(info.input_count, 2u);
  EXPECT_EQ(info.parameter_count, 6u);

  gpipe_tensor_info_t x, labels, w2;
  ASSERT_EQ(gpipe_session_input_info(session, 0, &x), GPIPE_OK);
  ASSERT_EQ(gpipe_session_input_info(session, 1, &labels), GPIPE_OK);
  EXPECT_STREQ(x.name, "x");
  EXPECT_EQ(x.type, GPIPE_ELEMENT_F32);
  EXPECT_EQ(x.batched, 1);
  ASSERT_EQ(x.rank, 2u);
  EXPECT_EQ(x.shape[0], kBatch);
  EXPECT_EQ(x.shape[1], kFeatures);
  EXPECT_EQ(x.element_count, size_t(kBatch * kFeatures));
  EXPECT_STREQ(labels.name, "labels");
  EXPECT_EQ(labels.type, GPIPE_ELEMENT_I32);
  ASSERT_EQ(labels.rank, 1u);
  EXPECT_EQ(labels.shape[0], kBatch);

  ASSERT_EQ(gpipe_session_parameter_info(session, 2, &w2), GPIPE_OK);
  EXPECT_STREQ(w2.name, "l2.w");
  EXPECT_EQ(w2.type, GPIPE_ELEMENT_F32);
  EXPECT_EQ(w2.batched, 0);
  ASSERT_EQ(w2.rank, 2u);
  EXPECT_EQ(w2.shape[0], 16);
  EXPECT_EQ(w2.shape[1], 16);
  EXPECT_EQ(w2.element_count, 256u);
  size_t size = 0;
  ASSERT_EQ(gpipe_session_parameter_size(session, "l2.w", &size), GPIPE_OK);
  EXPECT_EQ(size, 256u);
}

// Per-device peak memory is the executor's, before and after a step; the
// trace and the bubble fraction exist after a step only.
TEST_F(CApiTest, MemoryTraceAndBubble) {
  std::unique_ptr<PipelineExecutor> direct = directExecutor();
  ASSERT_TRUE(direct);
  std::string tracePath = tempPath("trace.json");
  std::string noTimeline =
      "no timeline: no training step has run yet, or the session was "
      "created with record_timeline = 0";
  expectError(gpipe_session_write_trace(session, tracePath.c_str()),
              GPIPE_ERROR_FAILED_PRECONDITION,
              "gpipe_session_write_trace: " + noTimeline);
  double bubble = -1;
  expectError(gpipe_session_bubble_fraction(session, &bubble),
              GPIPE_ERROR_FAILED_PRECONDITION,
              "gpipe_session_bubble_fraction: " + noTimeline);
  for (size_t d = 0; d < 3; ++d) {
    int64_t bytes = -1;
    ASSERT_EQ(gpipe_session_peak_memory_bytes(session, d, &bytes), GPIPE_OK);
    EXPECT_EQ(bytes, direct->peakMemoryBytes()[d]) << "device " << d;
  }

  Data data = makeData(kBatch, 5);
  std::vector<gpipe_input_t> inputs = toInputs(data);
  double loss;
  ASSERT_EQ(
      gpipe_session_train_step(session, inputs.data(), inputs.size(), &loss),
      GPIPE_OK);
  ASSERT_TRUE(direct->trainStep(toBatch(data)).ok());
  for (size_t d = 0; d < 3; ++d) {
    int64_t bytes = -1;
    ASSERT_EQ(gpipe_session_peak_memory_bytes(session, d, &bytes), GPIPE_OK);
    EXPECT_EQ(bytes, direct->peakMemoryBytes()[d]) << "device " << d;
    EXPECT_GT(bytes, 0);
  }
  int64_t bytes;
  expectError(gpipe_session_peak_memory_bytes(session, 3, &bytes),
              GPIPE_ERROR_INVALID_ARGUMENT,
              "gpipe_session_peak_memory_bytes: device 3 out of range: the "
              "pipeline has 3 devices");

  ASSERT_EQ(gpipe_session_bubble_fraction(session, &bubble), GPIPE_OK);
  EXPECT_GE(bubble, 0.0);
  EXPECT_LT(bubble, 1.0);
  ASSERT_EQ(gpipe_session_write_trace(session, tracePath.c_str()), GPIPE_OK)
      << gpipe_last_error();
  std::string trace = readFile(tracePath);
  EXPECT_NE(trace.find("\"forward\""), std::string::npos) << trace;
  EXPECT_NE(trace.find("\"ph\""), std::string::npos);
  std::remove(tracePath.c_str());

  expectError(gpipe_session_write_trace(session, "/nonexistent-dir/trace.json"),
              GPIPE_ERROR_IO,
              "gpipe_session_write_trace: cannot write the trace to "
              "'/nonexistent-dir/trace.json': No such file or directory");
}

// record_timeline = 0 trains the same but leaves no trace.
TEST_F(CApiTest, NoTimelineWhenNotRecorded) {
  gpipe_session_options_t options = adamOptions();
  options.record_timeline = 0;
  gpipe_session_t *quiet = nullptr;
  ASSERT_EQ(
      gpipe_session_create_from_file(bundlePath.c_str(), &options, &quiet),
      GPIPE_OK);
  Data data = makeData(kBatch, 2);
  std::vector<gpipe_input_t> inputs = toInputs(data);
  double a, b;
  ASSERT_EQ(gpipe_session_train_step(quiet, inputs.data(), inputs.size(), &a),
            GPIPE_OK);
  ASSERT_EQ(gpipe_session_train_step(session, inputs.data(), inputs.size(), &b),
            GPIPE_OK);
  EXPECT_EQ(a, b);
  double bubble;
  EXPECT_EQ(gpipe_session_bubble_fraction(quiet, &bubble),
            GPIPE_ERROR_FAILED_PRECONDITION);
  gpipe_session_destroy(quiet);
}

//===----------------------------------------------------------------------===//
// Sessions on threads
//===----------------------------------------------------------------------===//

// Distinct sessions on distinct threads are independent: equal bundles and
// seeds train to equal losses, and each thread reads its own last error.
TEST_F(CApiTest, SessionsOnThreadsAreIndependent) {
  struct Run {
    std::vector<double> losses;
    std::string error;
    gpipe_status_t status = GPIPE_OK;
  } runs[2];
  auto work = [&](Run &run, bool failFirst) {
    gpipe_session_options_t options = adamOptions();
    gpipe_session_t *own = nullptr;
    run.status =
        gpipe_session_create_from_file(bundlePath.c_str(), &options, &own);
    if (run.status != GPIPE_OK)
      return;
    double loss;
    if (failFirst)
      gpipe_session_train_step(own, nullptr, 1, &loss);
    for (uint64_t step = 1; step <= 3; ++step) {
      Data data = makeData(kBatch, step);
      std::vector<gpipe_input_t> inputs = toInputs(data);
      run.status =
          gpipe_session_train_step(own, inputs.data(), inputs.size(), &loss);
      if (run.status != GPIPE_OK)
        break;
      run.losses.push_back(loss);
    }
    gpipe_session_train_step(own, nullptr, failFirst ? 1 : 2, &loss);
    run.error = gpipe_last_error();
    gpipe_session_destroy(own);
  };
  std::thread a(work, std::ref(runs[0]), true);
  std::thread b(work, std::ref(runs[1]), false);
  a.join();
  b.join();
  ASSERT_EQ(runs[0].status, GPIPE_OK);
  ASSERT_EQ(runs[1].status, GPIPE_OK);
  EXPECT_EQ(runs[0].losses, runs[1].losses);
  EXPECT_EQ(runs[0].losses.size(), 3u);
  EXPECT_EQ(runs[0].error, "gpipe_session_train_step: inputs is null but "
                           "input_count is 1");
  EXPECT_EQ(runs[1].error, "gpipe_session_train_step: inputs is null but "
                           "input_count is 2");
}

//===----------------------------------------------------------------------===//
// The C++ wrapper
//===----------------------------------------------------------------------===//

// gpipe::Session trains bitwise as the C API does and returns errors as
// values.
TEST_F(CApiTest, CppWrapper) {
  gpipe::Session::Options options = gpipe::Session::defaultOptions();
  options = adamOptions();
  gpipe::Result<gpipe::Session> wrapped =
      gpipe::Session::open(bundlePath, options);
  ASSERT_TRUE(wrapped.ok()) << wrapped.status().toString();
  gpipe::Session cpp = std::move(wrapped).value();
  EXPECT_EQ(cpp.model(), "test");
  EXPECT_EQ(cpp.batchSize(), kBatch);
  EXPECT_EQ(cpp.deviceCount(), 3u);
  EXPECT_EQ(cpp.microbatchCount(), 4u);
  std::vector<gpipe::TensorInfo> inputs = cpp.inputs();
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[1].name, "labels");
  EXPECT_EQ(inputs[1].shape, std::vector<int64_t>{kBatch});
  EXPECT_EQ(cpp.parameters().size(), 6u);

  for (uint64_t step = 1; step <= 2; ++step) {
    Data data = makeData(kBatch, step);
    gpipe::Result<double> loss =
        cpp.trainStep({gpipe::Input::f32("x", data.x),
                       gpipe::Input::i32("labels", data.labels)});
    ASSERT_TRUE(loss.ok()) << loss.status().toString();
    std::vector<gpipe_input_t> c = toInputs(data);
    double expected;
    ASSERT_EQ(gpipe_session_train_step(session, c.data(), c.size(), &expected),
              GPIPE_OK);
    EXPECT_EQ(*loss, expected);
  }
  gpipe::Result<std::vector<float>> w = cpp.parameter("l1.w");
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(bitwiseEqual(*w, parameter("l1.w")));
  EXPECT_EQ(cpp.stepsDone(), 2);
  EXPECT_EQ(cpp.peakMemoryBytes().size(), 3u);
  ASSERT_TRUE(cpp.bubbleFraction().ok());

  Data test = makeData(3, 5);
  gpipe::Result<gpipe::Evaluation> eval =
      cpp.evaluate(3, {gpipe::Input::f32("x", test.x),
                       gpipe::Input::i32("labels", test.labels)});
  ASSERT_TRUE(eval.ok()) << eval.status().toString();
  EXPECT_EQ(eval->shape, (std::vector<int64_t>{3, kClasses}));
  EXPECT_EQ(eval->prediction.size(), size_t(3 * kClasses));

  // Errors come back as values with the C API's status and message.
  gpipe::Result<double> bad = cpp.trainStep({gpipe::Input::f32("x", test.x)});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bad.status().toString(),
            "GPIPE_ERROR_INVALID_ARGUMENT: gpipe_session_train_step: input "
            "'x': expected 120 f32 elements (shape [10, 12]), got 36");
  gpipe::Result<std::vector<float>> missing = cpp.gradient("zz");
  EXPECT_EQ(missing.status().code(), GPIPE_ERROR_NOT_FOUND);
  EXPECT_EQ(cpp.setParameter("l1.b", {1.0f}).code(),
            GPIPE_ERROR_INVALID_ARGUMENT);
  gpipe::Result<gpipe::Session> none =
      gpipe::Session::open("/nonexistent/x.json");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().toString(),
            "GPIPE_ERROR_IO: gpipe_session_create_from_file: cannot open "
            "'/nonexistent/x.json': No such file or directory");

  // Moving transfers ownership; the moved-from Session is empty.
  gpipe::Session moved = std::move(cpp);
  EXPECT_EQ(cpp.get(), nullptr);
  EXPECT_EQ(cpp.batchSize(), 0);
  EXPECT_EQ(moved.stepsDone(), 2);
  gpipe::Result<double> onEmpty = cpp.trainStep({});
  EXPECT_EQ(onEmpty.status().toString(),
            "GPIPE_ERROR_INVALID_ARGUMENT: gpipe_session_train_step: session "
            "is null");
}

} // namespace
