//===- TrainingTest.cpp - The shared training loops learn, on every engine ===//
//
// The image loop of Training.h trains the test MLP on a synthetic image set
// whose label is a known function of the pixels (the brightest of the first
// five), so the test accuracy it reports can be checked against a count made
// here, and it must learn the rule. The same run on the CPU engine and the
// device executor's host emulation.
//
//===----------------------------------------------------------------------===//

#include "TestBundles.h"
#include "TestModels.h"

#include "gpipe/runtime/train/Training.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

struct Recorder final : TrainingObserver {
  std::vector<EpochReport> epochs;
  int64_t steps = 0;
  void onStep(const StepProgress &) override { ++steps; }
  void onEpoch(const EpochReport &report) override { epochs.push_back(report); }
};

/// The share of the first `examples` of the 97 test images (12 pixels, 5
/// classes) whose argmax logit is the label, counted from the engine's own
/// predictions on the whole set at once; -1 if it cannot evaluate.
double recountedAccuracy(Engine &engine, const ImageInputs &inputs,
                         const ImageDataset &test, int64_t examples) {
  EvalResult eval = engine.evaluate(
      {{inputs.images, HostTensor::floats({97, 12}, test.images)},
       {inputs.labels, HostTensor::ints({97}, test.labels)}},
      97);
  EXPECT_TRUE(eval.ok()) << eval.error;
  if (!eval.ok())
    return -1;
  int64_t correct = 0;
  for (int64_t r = 0; r < examples; ++r) {
    const float *logits = eval.prediction.f32.data() + r * 5;
    correct += std::max_element(logits, logits + 5) - logits == test.labels[r];
  }
  return double(correct) / double(examples);
}

TEST(Training, ImageLoopLearnsTheRuleOnEveryEngine) {
  ImageDataset train = brightestPixelSet(400, 1),
               test = brightestPixelSet(97, 2);
  for (DeviceKind device : {DeviceKind::Cpu, DeviceKind::HostEmulation}) {
    EngineOptions options;
    options.device = device;
    options.optimizer.kind = OptimizerKind::Adam;
    options.seed = 3;
    auto engine = createEngine(
        buildBundle(mlpGraph(20), mlpSplit(2), 4, RematPolicy::Full), options);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    StatusOr<ImageInputs> inputs = bindImageInputs((*engine)->bundle(), 12);
    ASSERT_TRUE(inputs.ok()) << inputs.status().message();

    StatusOr<double> before = testAccuracy(**engine, test, *inputs);
    ASSERT_TRUE(before.ok());
    ImageTrainingOptions training;
    training.epochs = 25;
    training.learningRate = 0.02f;
    Recorder recorder;
    std::vector<int64_t> peak;
    Status status = trainImageClassifier(**engine, train, test, *inputs,
                                         training, recorder, peak);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_EQ(recorder.epochs.size(), 25u);
    EXPECT_EQ(recorder.steps, 25 * 20);
    EXPECT_EQ(recorder.epochs.back().steps, 20);
    EXPECT_EQ(peak.size(), 2u);
    EXPECT_LT(recorder.epochs.back().trainLoss,
              recorder.epochs.front().trainLoss);

    // The reported accuracy is the share of test images whose argmax logit
    // is the label, recounted here from the engine's predictions.
    EXPECT_DOUBLE_EQ(recorder.epochs.back().testAccuracy,
                     recountedAccuracy(**engine, *inputs, test, 97));
    EXPECT_GT(recorder.epochs.back().testAccuracy, 0.75)
        << deviceKindName(device) << ": accuracy " << *before << " before";
  }
}

// testBatches bounds each epoch's accuracy to the test set's first batches:
// the report counts those examples and the accuracy is theirs, recounted here
// from the engine's predictions; more batches than the set holds read all of
// it, and a negative count is refused.
TEST(Training, TestBatchesBoundTheAccuracyToTheFirstBatches) {
  ImageDataset train = brightestPixelSet(40, 1), test = brightestPixelSet(97, 2);
  auto engine = createEngine(
      buildBundle(mlpGraph(20), mlpSplit(2), 4, RematPolicy::Full), {});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  StatusOr<ImageInputs> inputs = bindImageInputs((*engine)->bundle(), 12);
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  ImageTrainingOptions training;
  training.epochs = 2;
  training.testBatches = 3;
  Recorder recorder;
  std::vector<int64_t> peak;
  Status status = trainImageClassifier(**engine, train, test, *inputs,
                                       training, recorder, peak);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(recorder.epochs.size(), 2u);
  EXPECT_EQ(recorder.epochs.back().testExamples, 60);
  EXPECT_EQ(recorder.epochs.back().testSetExamples, 97);

  EXPECT_DOUBLE_EQ(recorder.epochs.back().testAccuracy,
                   recountedAccuracy(**engine, *inputs, test, 60));

  EXPECT_EQ(testExamplesRead(**engine, test, 4), 80);
  EXPECT_EQ(testExamplesRead(**engine, test, 5), 97);
  EXPECT_EQ(testExamplesRead(**engine, test, 0), 97);
  training.testBatches = -1;
  EXPECT_EQ(checkOptions(training).message(),
            "expected at least 0 test batches (0: the whole test set), got -1");
}

TEST(Training, BindingNamesWhatItFound) {
  Bundle bundle = buildBundle(mlpGraph(4), mlpSplit(1), 1, RematPolicy::Full);
  EXPECT_EQ(bindImageInputs(bundle, 784).status().message(),
            "the model's inputs do not match Fashion-MNIST: expected an f32 "
            "input of 784 values per example and an i32 label input of shape "
            "[batch], found x [4x12] f32, labels [4] i32");
  EXPECT_EQ(characterModelWindow(bundle).status().code(),
            StatusCode::InvalidArgument);
}

TEST(Training, CosineScheduleDecaysToZero) {
  EXPECT_FLOAT_EQ(
      scheduledLearningRate(0.1f, LearningRateSchedule::Cosine, 0, 100), 0.1f);
  EXPECT_NEAR(
      scheduledLearningRate(0.1f, LearningRateSchedule::Cosine, 50, 100), 0.05f,
      1e-7);
  EXPECT_NEAR(
      scheduledLearningRate(0.1f, LearningRateSchedule::Cosine, 100, 100), 0.0f,
      1e-7);
  EXPECT_FLOAT_EQ(
      scheduledLearningRate(0.1f, LearningRateSchedule::Constant, 70, 100),
      0.1f);
}

TEST(Training, UnavailableCudaSaysNoCudaDevice) {
  EngineOptions options;
  options.device = DeviceKind::Cuda;
  auto engine = createEngine(
      buildBundle(mlpGraph(4), mlpSplit(1), 1, RematPolicy::Full), options);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::Unavailable);
  EXPECT_EQ(engine.status().message().rfind("no CUDA device", 0), 0u);
}

} // namespace
