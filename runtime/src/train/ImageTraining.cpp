//===- ImageTraining.cpp - Epochs of image classification -----------------===//

#include "gpipe/runtime/kernels/Optimizers.h"
#include "gpipe/runtime/train/Training.h"

#include "train/TrainingCheckpoints.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

using namespace gpipe::runtime;

/// "" or why `rate` cannot be a learning rate.
static std::string checkLearningRate(float rate) {
  if (std::isfinite(rate) && rate > 0)
    return {};
  char text[32];
  std::snprintf(text, sizeof text, "%g", double(rate));
  return std::string("the learning rate must be a finite positive number, "
                     "got ") +
         text;
}

Status gpipe::runtime::checkOptions(const ImageTrainingOptions &options) {
  std::string error = checkLearningRate(options.learningRate);
  if (error.empty() && options.epochs < 1)
    error = "expected at least 1 epoch, got 0";
  if (error.empty() && options.maxStepsPerEpoch < 0)
    error = "expected at least 0 steps per epoch (0: all), got " +
            std::to_string(options.maxStepsPerEpoch);
  if (error.empty() && options.warmupSteps < 0)
    error = checkWarmup(options.warmupSteps, 0);
  if (error.empty() && options.testBatches < 0)
    error = "expected at least 0 test batches (0: the whole test set), got " +
            std::to_string(options.testBatches);
  return error.empty() ? Status() : Status(StatusCode::InvalidArgument, error);
}

Status gpipe::runtime::checkOptions(const TextTrainingOptions &options) {
  std::string error = checkLearningRate(options.learningRate);
  if (error.empty() && options.steps < 1)
    error = "expected at least 1 step, got " + std::to_string(options.steps);
  if (error.empty())
    error = checkWarmup(options.warmupSteps, options.steps);
  return error.empty() ? Status() : Status(StatusCode::InvalidArgument, error);
}

std::string gpipe::runtime::checkWarmup(int64_t warmupSteps,
                                        int64_t totalSteps) {
  if (warmupSteps < 0)
    return "expected at least 0 warmup steps, got " +
           std::to_string(warmupSteps);
  if (warmupSteps > 0 && warmupSteps >= totalSteps)
    return "expected fewer warmup steps than the run's " +
           std::to_string(totalSteps) + " steps, got " +
           std::to_string(warmupSteps);
  return {};
}

Status gpipe::runtime::stepFailure(const StepResult &result) {
  return Status(result.nonFinite ? StatusCode::NonFinite
                                 : StatusCode::DeviceFailure,
                result.error);
}

float gpipe::runtime::scheduledLearningRate(float peak,
                                            LearningRateSchedule schedule,
                                            int64_t step, int64_t total,
                                            int64_t warmup) {
  if (step < warmup)
    return float(double(peak) * double(step + 1) / double(warmup));
  if (schedule != LearningRateSchedule::Cosine || total - warmup <= 0)
    return peak;
  double progress = double(step - warmup) / double(total - warmup);
  return float(0.5 * peak * (1.0 + std::cos(M_PI * progress)));
}

std::string gpipe::runtime::describeModelInputs(const Bundle &bundle) {
  std::string found;
  for (const ModelInputSpec &input : bundle.inputs) {
    found += (found.empty() ? "" : ", ") + input.name + " [";
    for (size_t i = 0; i < input.shape.size(); ++i)
      found += (i ? "x" : "") + std::to_string(input.shape[i]);
    found += input.type == ElementType::F32 ? "] f32" : "] i32";
  }
  return found;
}

StatusOr<ImageInputs> gpipe::runtime::bindImageInputs(const Bundle &bundle,
                                                      int64_t pixels) {
  ImageInputs inputs;
  for (const ModelInputSpec &input : bundle.inputs) {
    int64_t perExample = 1;
    for (size_t i = 1; i < input.shape.size(); ++i)
      perExample *= input.shape[i];
    if (input.type == ElementType::F32 && perExample == pixels)
      inputs.images = input.name;
    else if (input.type == ElementType::I32 && input.shape.size() == 1)
      inputs.labels = input.name;
  }
  if (inputs.images.empty() || inputs.labels.empty() ||
      bundle.inputs.size() != 2)
    return Status(StatusCode::InvalidArgument,
                  "the model's inputs do not match Fashion-MNIST: expected an "
                  "f32 input of " +
                      std::to_string(pixels) +
                      " values per example and an i32 label input of shape "
                      "[batch], found " +
                      describeModelInputs(bundle));
  return inputs;
}

/// Rows [first, first + rows) of the data in `order` as a batch.
static Batch imageBatch(const ImageDataset &data,
                        const std::vector<int64_t> &order, int64_t first,
                        int64_t rows, const Bundle &bundle,
                        const ImageInputs &inputs) {
  // Without pixels (this process's devices do not read the images), the
  // batch has the labels alone.
  const bool withImages = !data.images.empty();
  int64_t pixels = data.height * data.width;
  std::vector<float> images(withImages ? rows * pixels : 0);
  std::vector<int32_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t example = order[first + r];
    if (withImages)
      std::copy_n(data.images.begin() + example * pixels, pixels,
                  images.begin() + r * pixels);
    labels[r] = data.labels[example];
  }
  std::vector<int64_t> imageShape;
  for (const ModelInputSpec &input : bundle.inputs)
    if (input.name == inputs.images)
      imageShape = input.shape;
  imageShape[0] = rows;
  Batch batch;
  if (withImages)
    batch[inputs.images] = HostTensor::floats(imageShape, std::move(images));
  batch[inputs.labels] = HostTensor::ints({rows}, std::move(labels));
  return batch;
}

int64_t gpipe::runtime::testExamplesRead(const Engine &engine,
                                         const ImageDataset &test,
                                         int64_t maxBatches) {
  const int64_t batch = engine.bundle().batch;
  if (maxBatches <= 0 || maxBatches > test.count / batch)
    return test.count;
  return maxBatches * batch;
}

StatusOr<double> gpipe::runtime::testAccuracy(Engine &engine,
                                              const ImageDataset &test,
                                              const ImageInputs &inputs,
                                              int64_t maxBatches) {
  const Bundle &bundle = engine.bundle();
  const int64_t count = testExamplesRead(engine, test, maxBatches);
  std::vector<int64_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  int64_t correct = 0;
  for (int64_t first = 0; first < count; first += bundle.batch) {
    int64_t rows = std::min<int64_t>(bundle.batch, count - first);
    EvalResult result = engine.evaluate(
        imageBatch(test, order, first, rows, bundle, inputs), rows);
    if (!result.ok())
      return Status(result.nonFinite ? StatusCode::NonFinite
                                     : StatusCode::DeviceFailure,
                    result.error);
    int64_t classes = result.prediction.shape.back();
    for (int64_t r = 0; r < rows; ++r) {
      const float *logits = result.prediction.f32.data() + r * classes;
      int64_t best = std::max_element(logits, logits + classes) - logits;
      correct += best == test.labels[first + r];
    }
  }
  return double(correct) / double(count);
}

int64_t
gpipe::runtime::imageStepsPerEpoch(const Engine &engine,
                                   const ImageDataset &train,
                                   const ImageTrainingOptions &options) {
  int64_t steps = train.count / engine.batchRows();
  if (options.maxStepsPerEpoch > 0)
    steps = std::min(steps, options.maxStepsPerEpoch);
  return steps;
}

Status gpipe::runtime::trainImageClassifier(
    Engine &engine, const ImageDataset &train, const ImageDataset &test,
    const ImageInputs &inputs, const ImageTrainingOptions &options,
    TrainingObserver &observer, std::vector<int64_t> &peakMemoryBytes) {
  if (Status status = checkOptions(options); !status.ok())
    return status;
  using Clock = std::chrono::steady_clock;
  const Bundle &bundle = engine.bundle();
  const int64_t batch = engine.batchRows();
  const int64_t stepsPerEpoch = imageStepsPerEpoch(engine, train, options);
  // Zero steps would "train" without a word and report a NaN accuracy.
  if (stepsPerEpoch == 0)
    return Status(StatusCode::InvalidArgument,
                  "the training set has " + std::to_string(train.count) +
                      " examples, fewer than one mini-batch of " +
                      std::to_string(batch) + " rows");
  if (test.count == 0)
    return Status(StatusCode::InvalidArgument,
                  "the test set has no examples: the accuracy after each "
                  "epoch needs at least one");
  if (stepsPerEpoch > kMaxStepsDone / int64_t(options.epochs))
    return Status(StatusCode::InvalidArgument,
                  std::to_string(options.epochs) + " epochs of " +
                      std::to_string(stepsPerEpoch) +
                      " steps are more steps than a run counts (" +
                      std::to_string(kMaxStepsDone) + ")");
  const int64_t totalSteps = int64_t(options.epochs) * stepsPerEpoch;
  // What fixes the data order and the schedule: a checkpoint resumes only
  // a run with the same.
  nlohmann::json fields{{"loop", "images"},
                        {"shuffle_seed", options.shuffleSeed},
                        {"steps_per_epoch", stepsPerEpoch},
                        {"epochs", options.epochs}};
  if (options.warmupSteps > 0) // without, the checkpoints of before resume
    fields["warmup_steps"] = options.warmupSteps;
  const std::string loopState = detail::loopStateOf(
      std::move(fields), options.learningRate, options.schedule);
  if (std::string error = checkWarmup(options.warmupSteps, totalSteps);
      !error.empty())
    return Status(StatusCode::InvalidArgument, error);
  const CheckpointOptions &checkpoints = options.checkpoints;
  StatusOr<int64_t> resumed =
      detail::resumeTraining(engine, checkpoints, loopState, totalSteps);
  if (!resumed.ok())
    return resumed.status();
  const int64_t resumeAt = *resumed;
  std::mt19937_64 shuffler(options.shuffleSeed);
  std::vector<int64_t> order(train.count);
  std::iota(order.begin(), order.end(), 0);
  peakMemoryBytes.assign(engine.numDevices(), 0);
  const Clock::time_point runStart = Clock::now();
  for (unsigned epoch = 1; epoch <= options.epochs; ++epoch) {
    // Every epoch's shuffle, also those a resumed run skips: the order is
    // the uninterrupted run's.
    std::shuffle(order.begin(), order.end(), shuffler);
    const int64_t epochStart = int64_t(epoch - 1) * stepsPerEpoch;
    if (epochStart + stepsPerEpoch <= resumeAt)
      continue;
    const int64_t firstStep = std::max<int64_t>(0, resumeAt - epochStart);
    double lossSum = 0, bubbleSum = 0;
    const Clock::time_point start = Clock::now();
    for (int64_t step = firstStep; step < stepsPerEpoch; ++step) {
      int64_t done = epochStart + step;
      const float rate =
          scheduledLearningRate(options.learningRate, options.schedule, done,
                                totalSteps, options.warmupSteps);
      engine.setLearningRate(rate);
      Batch data =
          imageBatch(train, order, step * batch, batch, bundle, inputs);
      const Clock::time_point stepStart = Clock::now();
      StepResult result = engine.trainStep(data);
      const double stepSeconds =
          std::chrono::duration<double>(Clock::now() - stepStart).count();
      if (!result.ok())
        return stepFailure(result);
      lossSum += result.loss;
      const double bubble = engine.timeline().bubbleFraction();
      bubbleSum += bubble;
      std::vector<int64_t> peak = engine.peakMemoryBytes();
      for (size_t d = 0; d < peak.size(); ++d)
        peakMemoryBytes[d] = std::max(peakMemoryBytes[d], peak[d]);
      const int64_t run = done + 1 - resumeAt; // steps of this process
      double elapsed =
          std::chrono::duration<double>(Clock::now() - runStart).count();
      StepProgress progress;
      progress.epoch = epoch;
      progress.epochs = options.epochs;
      progress.step = step + 1;
      progress.steps = stepsPerEpoch;
      progress.meanLoss = lossSum / double(step + 1 - firstStep);
      progress.elapsedSeconds = elapsed;
      progress.etaSeconds =
          elapsed / double(run) * double(totalSteps - done - 1);
      progress.runStep = done + 1;
      progress.loss = result.loss;
      progress.learningRate = rate;
      progress.gradientNorm = result.gradientNorm;
      progress.samplesPerSecond =
          stepSeconds > 0 ? double(batch) / stepSeconds : 0;
      progress.bubble = bubble;
      progress.peakMemoryBytes = peakMemoryBytes;
      observer.onStep(progress);
      const bool stop = observer.stopRequested();
      if (Status status =
              detail::saveIfDue(engine, checkpoints, loopState, done + 1,
                                stop || done + 1 == totalSteps);
          !status.ok())
        return status;
      if (stop)
        return Status(StatusCode::Cancelled, "stopped on request after step " +
                                                 std::to_string(step + 1) +
                                                 " of epoch " +
                                                 std::to_string(epoch) +
                                                 "; the timeline is that "
                                                 "step's");
    }
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    StatusOr<double> accuracy =
        testAccuracy(engine, test, inputs, options.testBatches);
    if (!accuracy.ok())
      return accuracy.status();
    EpochReport report;
    report.epoch = epoch;
    report.epochs = options.epochs;
    const int64_t ran = stepsPerEpoch - firstStep;
    report.steps = stepsPerEpoch;
    report.trainLoss = ran ? lossSum / double(ran) : 0;
    report.testAccuracy = *accuracy;
    report.testExamples = testExamplesRead(engine, test, options.testBatches);
    report.testSetExamples = test.count;
    report.samplesPerSecond = seconds > 0 ? double(ran * batch) / seconds : 0;
    report.bubble = ran ? bubbleSum / double(ran) : 0;
    report.peakMemoryBytes = peakMemoryBytes;
    observer.onEpoch(report);
  }
  return Status();
}
