//===- TrainingOptionsTest.cpp - Warmup, log lines, metrics, exit codes ---===//
//
// The training options gpipe-run exposes, through the shared loops: the
// learning-rate sequence of a linear warmup before the cosine or constant
// schedule (against the formulas, computed here); the plain log line every N
// steps off a terminal; the metrics file, parsed back and compared with what
// an observer of the same run saw; a divergence the guard stops, as
// StatusCode::NonFinite; and the exit statuses of a run's outcome.
//
//===----------------------------------------------------------------------===//

#include "TestBundles.h"
#include "TestModels.h"

#include "gpipe/runtime/report/TrainingReport.h"
#include "gpipe/runtime/report/TrainingRun.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

struct Recorder final : TrainingObserver {
  std::vector<StepProgress> steps;
  std::vector<EpochReport> epochs;
  void onStep(const StepProgress &p) override { steps.push_back(p); }
  void onEpoch(const EpochReport &r) override { epochs.push_back(r); }
};

std::string readFile(std::FILE *file) {
  std::rewind(file);
  std::string text;
  char buffer[256];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, file))
    text.append(buffer, n);
  return text;
}

} // namespace

// Warmup: peak (step + 1) / warmup up to the peak at step warmup - 1, then
// the schedule over the remaining steps.
TEST(TrainingOptions, WarmupThenCosine) {
  const int64_t total = 10, warmup = 4;
  for (int64_t step = 0; step < total; ++step) {
    double expected = step < warmup
                          ? double(step + 1) / warmup
                          : 0.5 * (1 + std::cos(M_PI * double(step - warmup) /
                                                double(total - warmup)));
    EXPECT_NEAR(scheduledLearningRate(1.0f, LearningRateSchedule::Cosine, step,
                                      total, warmup),
                expected, 1e-7)
        << "step " << step;
  }
  // The first steps: 0.25, 0.5, 0.75, then the peak, twice.
  EXPECT_EQ(scheduledLearningRate(2.0f, LearningRateSchedule::Cosine, 0, total,
                                  warmup),
            0.5f);
  EXPECT_EQ(scheduledLearningRate(2.0f, LearningRateSchedule::Cosine, 3, total,
                                  warmup),
            2.0f);
  EXPECT_EQ(scheduledLearningRate(2.0f, LearningRateSchedule::Cosine, 4, total,
                                  warmup),
            2.0f);
}

TEST(TrainingOptions, WarmupThenConstant) {
  const float expected[] = {0.1f, 0.2f, 0.3f, 0.3f, 0.3f};
  for (int64_t step = 0; step < 5; ++step)
    EXPECT_FLOAT_EQ(
        scheduledLearningRate(0.3f, LearningRateSchedule::Constant, step, 5, 3),
        expected[step]);
}

// Without warmup the cosine schedule is the one of before.
TEST(TrainingOptions, NoWarmupKeepsTheCosine) {
  for (int64_t step = 0; step < 8; ++step)
    EXPECT_FLOAT_EQ(
        scheduledLearningRate(1e-3f, LearningRateSchedule::Cosine, step, 8),
        float(0.5 * double(1e-3f) * (1 + std::cos(M_PI * double(step) / 8))));
}

TEST(TrainingOptions, WarmupMessages) {
  EXPECT_EQ(checkWarmup(0, 5), "");
  EXPECT_EQ(checkWarmup(4, 5), "");
  EXPECT_EQ(checkWarmup(-1, 5), "expected at least 0 warmup steps, got -1");
  EXPECT_EQ(checkWarmup(5, 5),
            "expected fewer warmup steps than the run's 5 steps, got 5");
  TextTrainingOptions text;
  text.steps = 10;
  text.warmupSteps = 10;
  EXPECT_EQ(checkOptions(text).message(),
            "expected fewer warmup steps than the run's 10 steps, got 10");
  ImageTrainingOptions images;
  images.warmupSteps = -3;
  EXPECT_EQ(checkOptions(images).message(),
            "expected at least 0 warmup steps, got -3");
}

TEST(TrainingOptions, StepLogLine) {
  StepProgress p;
  p.step = 40;
  p.steps = 100;
  p.runStep = 140;
  p.loss = 1.23456;
  p.learningRate = 1e-3f;
  p.samplesPerSecond = 1234.4;
  EXPECT_EQ(stepLogLine(p),
            "step 40/100: loss 1.2346, lr 1.000e-03, 1234 samples/s");
  p.epoch = 2;
  p.epochs = 3;
  p.gradientNorm = 0.52341;
  EXPECT_EQ(stepLogLine(p), "step 40/100 of epoch 2/3: loss 1.2346, lr "
                            "1.000e-03, grad norm 0.5234, 1234 samples/s");
}

// Off a terminal (a file), a plain line every logEvery steps of the run.
TEST(TrainingOptions, LogEveryPrintsPlainLinesOffATerminal) {
  std::FILE *out = std::tmpfile();
  ASSERT_TRUE(out);
  ConsoleReporter reporter(out, out, nullptr, 3);
  for (int64_t step = 1; step <= 7; ++step) {
    StepProgress p;
    p.step = p.runStep = step;
    p.steps = 7;
    p.loss = 0.5;
    p.learningRate = 0.25f;
    p.samplesPerSecond = 100;
    reporter.onStep(p);
  }
  EXPECT_EQ(readFile(out),
            "step 3/7: loss 0.5000, lr 2.500e-01, 100 samples/s\n"
            "step 6/7: loss 0.5000, lr 2.500e-01, 100 samples/s\n");
  std::fclose(out);
}

// The metrics file of a clipped run with warmup, parsed: one line per step
// and per epoch, with the losses, rates, norms and memory the loop reported.
TEST(TrainingOptions, MetricsFileParsesBack) {
  ImageDataset train = brightestPixelSet(100, 1),
               test = brightestPixelSet(40, 2);
  EngineOptions options;
  options.optimizer.kind = OptimizerKind::AdamW;
  options.optimizer.weightDecay = 0.01f;
  options.optimizer.clipGradNorm = 0.5f;
  options.seed = 3;
  auto engine = createEngine(
      buildBundle(mlpGraph(20), mlpSplit(2), 4, RematPolicy::Full), options);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  StatusOr<ImageInputs> inputs = bindImageInputs((*engine)->bundle(), 12);
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  ImageTrainingOptions training;
  training.epochs = 2;
  training.learningRate = 0.02f;
  training.warmupSteps = 3;
  const std::string path = ::testing::TempDir() + "/gpipe-metrics.jsonl";
  StatusOr<std::unique_ptr<MetricsWriter>> metrics = MetricsWriter::open(path);
  ASSERT_TRUE(metrics.ok()) << metrics.status().message();
  Recorder recorder;
  ObserverList both({&recorder, metrics->get()});
  std::vector<int64_t> peak;
  Status status = trainImageClassifier(**engine, train, test, *inputs, training,
                                       both, peak);
  ASSERT_TRUE(status.ok()) << status.message();
  metrics->reset(); // closes the file

  std::ifstream file(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(file, line);)
    lines.push_back(nlohmann::json::parse(line));
  const size_t steps = recorder.steps.size();
  ASSERT_EQ(steps, 10u); // 2 epochs of 100 / 20
  ASSERT_EQ(lines.size(), steps + 2);
  size_t step = 0, eval = 0;
  for (const nlohmann::json &line : lines) {
    if (line["event"] == "eval") {
      const EpochReport &r = recorder.epochs.at(eval++);
      EXPECT_EQ(line["epoch"], r.epoch);
      EXPECT_EQ(line["step"], int64_t(r.epoch) * 5);
      EXPECT_DOUBLE_EQ(line["test_accuracy"].get<double>(), r.testAccuracy);
      EXPECT_DOUBLE_EQ(line["train_loss"].get<double>(), r.trainLoss);
      continue;
    }
    ASSERT_EQ(line["event"], "step");
    const StepProgress &p = recorder.steps.at(step);
    EXPECT_EQ(line["step"], int64_t(step + 1));
    EXPECT_EQ(line["epoch"], p.epoch);
    EXPECT_DOUBLE_EQ(line["loss"].get<double>(), p.loss);
    EXPECT_FLOAT_EQ(line["lr"].get<float>(),
                    scheduledLearningRate(0.02f, LearningRateSchedule::Cosine,
                                          int64_t(step), 10, 3));
    ASSERT_TRUE(line["grad_norm"].is_number()) << line.dump();
    EXPECT_GT(line["grad_norm"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(line["grad_norm"].get<double>(), *p.gradientNorm);
    EXPECT_GT(line["samples_per_second"].get<double>(), 0.0);
    EXPECT_GE(line["bubble"].get<double>(), 0.0);
    EXPECT_EQ(line["peak_memory_bytes"].get<std::vector<int64_t>>(), peak);
    ++step;
  }
  EXPECT_EQ(eval, 2u);
}

TEST(TrainingOptions, MetricsFileThatCannotBeWritten) {
  StatusOr<std::unique_ptr<MetricsWriter>> metrics =
      MetricsWriter::open("/nonexistent-dir/m.jsonl");
  ASSERT_FALSE(metrics.ok());
  EXPECT_EQ(metrics.status().code(), StatusCode::Io);
  EXPECT_EQ(metrics.status().message(),
            "cannot write the metrics to '/nonexistent-dir/m.jsonl': No such "
            "file or directory");
}

// A learning rate of 1e30 diverges at step 2; the loop ends with NonFinite
// and the guard's message.
TEST(TrainingOptions, DivergenceEndsWithNonFinite) {
  ImageDataset train = brightestPixelSet(100, 1),
               test = brightestPixelSet(40, 2);
  EngineOptions options;
  options.optimizer.kind = OptimizerKind::Sgd;
  options.optimizer.checkFinite = true;
  auto engine = createEngine(
      buildBundle(mlpGraph(20), mlpSplit(2), 4, RematPolicy::Full), options);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  StatusOr<ImageInputs> inputs = bindImageInputs((*engine)->bundle(), 12);
  ASSERT_TRUE(inputs.ok());
  ImageTrainingOptions training;
  training.epochs = 1;
  training.learningRate = 1e30f;
  training.schedule = LearningRateSchedule::Constant;
  Recorder recorder;
  std::vector<int64_t> peak;
  Status status = trainImageClassifier(**engine, train, test, *inputs, training,
                                       recorder, peak);
  EXPECT_EQ(status.code(), StatusCode::NonFinite);
  EXPECT_EQ(status.message().rfind("step 2: ", 0), 0u) << status.message();
  std::atomic<int> noSignal{0};
  EXPECT_EQ(exitStatusOf(status, noSignal), 4);
}

TEST(TrainingOptions, ExitStatuses) {
  std::atomic<int> noSignal{0}, interrupted{2};
  auto exitOf = [&](StatusCode code) {
    return exitStatusOf(Status(code, "x"), noSignal);
  };
  EXPECT_EQ(exitStatusOf(Status(), noSignal), 0);
  EXPECT_EQ(exitOf(StatusCode::NonFinite), 4);
  EXPECT_EQ(exitOf(StatusCode::InvalidArgument), 3);
  EXPECT_EQ(exitOf(StatusCode::Io), 3);
  EXPECT_EQ(exitOf(StatusCode::NotFound), 3);
  EXPECT_EQ(exitOf(StatusCode::InvalidBundle), 3);
  EXPECT_EQ(exitOf(StatusCode::Unavailable), 2);
  EXPECT_EQ(exitOf(StatusCode::FailedPrecondition), 2);
  EXPECT_EQ(exitOf(StatusCode::DeviceFailure), 1);
  EXPECT_EQ(exitOf(StatusCode::DeadlineExceeded), 1);
  EXPECT_EQ(exitStatusOf(Status(StatusCode::Cancelled, "x"), interrupted), 130);
}
