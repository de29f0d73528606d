//===- RunReportFilesTest.cpp - A run's report read back from its files ---===//
//
// gpipe-report draws a run from the metrics and the trace gpipe-run wrote:
// lines written by hand in MetricsWriter's documented format, the files the
// writers themselves produce, and every malformed input with its message.
//
//===----------------------------------------------------------------------===//

#include "TempDir.h"
#include "gpipe/runtime/report/HtmlReport.h"
#include "gpipe/runtime/report/TrainingReport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

using namespace gpipe::runtime;
using gpipe::runtime::testing::TempDir;

namespace {
std::string write(const TempDir &dir, const char *name,
                  const std::string &text) {
  std::string path = dir.path + "/" + name;
  std::ofstream(path) << text;
  return path;
}
} // namespace

// The documented lines of an image run: steps (one without a norm) and an
// evaluation; the last peaks are the measured memory.
TEST(RunReportFiles, ReadsTheDocumentedImageLines) {
  TempDir dir;
  std::string path = write(
      dir, "m.jsonl",
      R"({"event":"step","step":1,"epoch":1,"loss":2.5,"lr":0.001,"grad_norm":1.5,"samples_per_second":640.5,"bubble":0.25,"peak_memory_bytes":[100,200]}
{"event":"step","step":2,"epoch":1,"loss":null,"lr":0.0005,"grad_norm":null,"samples_per_second":700,"bubble":0.2,"peak_memory_bytes":[150,250]}

{"event":"eval","step":2,"epoch":1,"train_loss":2.1,"test_accuracy":0.75,"samples_per_second":650,"bubble":0.22,"peak_memory_bytes":[150,260]}
)");
  RunReport report;
  ASSERT_TRUE(readMetricsFile(path, report).ok());
  ASSERT_EQ(report.loss.size(), 2u);
  EXPECT_EQ(report.loss[0].value, 2.5);
  EXPECT_TRUE(std::isnan(report.loss[1].value)); // a gap, not a zero
  ASSERT_EQ(report.gradientNorm.size(), 1u);     // null: not measured
  EXPECT_EQ(report.learningRate[1].value, 0.0005);
  EXPECT_EQ(report.samplesPerSecond[0].value, 640.5);
  ASSERT_EQ(report.testAccuracy.size(), 1u);
  EXPECT_EQ(report.testAccuracy[0].step, 2);
  EXPECT_EQ(report.evalTrainLoss[0].value, 2.1);
  ASSERT_EQ(report.memory.size(), 2u);
  EXPECT_EQ(report.memory[1].measuredBytes, 260);
  EXPECT_FALSE(report.memory[1].planned);
}

// What MetricsWriter writes for a text run reads back as its curves.
TEST(RunReportFiles, ReadsWhatTheMetricsWriterWrites) {
  TempDir dir;
  std::string path = dir.path + "/text.jsonl";
  {
    StatusOr<std::unique_ptr<MetricsWriter>> writer = MetricsWriter::open(path);
    ASSERT_TRUE(writer.ok());
    TextEvaluation first;
    first.validationLoss = 4.5;
    first.unigramEntropy = 3.25;
    (*writer)->onEvaluation(first);
    StepProgress step;
    step.runStep = 1;
    step.loss = 4.0;
    step.learningRate = 0.25f;
    step.peakMemoryBytes = {1024};
    (*writer)->onStep(step);
    TextEvaluation second = first;
    second.step = 1;
    second.trainLoss = 4.0;
    second.validationLoss = 3.5;
    (*writer)->onEvaluation(second);
  }
  RunReport report;
  ASSERT_TRUE(readMetricsFile(path, report).ok());
  ASSERT_EQ(report.validationLoss.size(), 2u);
  EXPECT_EQ(report.validationLoss[1].step, 1);
  EXPECT_EQ(report.validationLoss[1].value, 3.5);
  ASSERT_EQ(report.evalTrainLoss.size(), 1u); // null before the first step
  EXPECT_EQ(report.unigramEntropy, 3.25);
  EXPECT_EQ(report.learningRate[0].value, 0.25);
  EXPECT_EQ(report.memory[0].measuredBytes, 1024);
}

// Every malformed metrics line is named by file and line.
TEST(RunReportFiles, MetricsErrorsNameTheLine) {
  TempDir dir;
  struct Case {
    const char *text, *error;
  } cases[] = {
      {"{\"event\":\"step\",\"step\":1}\nnot json\n",
       "line 2: expected one JSON object per line"},
      {"[1,2]\n", "line 1: expected a JSON object"},
      {"{\"step\":1}\n", "line 1: expected \"event\": \"step\" or \"eval\""},
      {"{\"event\":\"stop\",\"step\":1}\n",
       "line 1: expected \"event\": \"step\" or \"eval\", got \"stop\""},
      {"{\"event\":\"step\",\"step\":-1}\n",
       "line 1: expected \"step\", a count of steps"},
      {"{\"event\":\"step\",\"step\":1,\"loss\":\"low\"}\n",
       "line 1: expected \"loss\" to be a number or null"},
      {"{\"event\":\"step\",\"step\":1,\"peak_memory_bytes\":[1,-2]}\n",
       "line 1: expected \"peak_memory_bytes\" to be an array of byte counts"},
  };
  for (const Case &c : cases) {
    std::string path = write(dir, "bad.jsonl", c.text);
    RunReport report;
    Status status = readMetricsFile(path, report);
    EXPECT_EQ(status.code(), StatusCode::InvalidArgument) << c.text;
    EXPECT_EQ(status.message(), "the metrics '" + path + "', " + c.error);
  }
  RunReport report;
  EXPECT_EQ(readMetricsFile(dir.path + "/none.jsonl", report).message(),
            "cannot read the metrics '" + dir.path +
                "/none.jsonl': No such file or directory");
  // Peaks of 3 devices against a plan of 2: not the same run.
  std::string three =
      write(dir, "three.jsonl",
            "{\"event\":\"step\",\"step\":1,\"peak_memory_bytes\":[1,2,3]}\n");
  report.memory.resize(2);
  EXPECT_EQ(readMetricsFile(three, report).message(),
            "the metrics '" + three +
                "' measured the memory of 3 devices, but the plan has 2: are "
                "they of the same run?");
}

// A trace Timeline wrote reads back event for event, stages and side work
// included.
TEST(RunReportFiles, ReadsBackTheTimelinesTrace) {
  TempDir dir;
  Timeline written(3);
  TimelineEvent forward{"forward", true, 2, 10.5, 4.25};
  forward.stage = 4;
  written.record(1, forward);
  written.record(1, {"recv gradient", false, -1, 20, 1});
  written.record(0, {"optimizer step", true, -1, 30, 2});
  written.recordSideWork(1, {"pack weights ahead", true, -1, 20.25, 0.5});
  written.setStepUs(40.5);
  std::string path = dir.path + "/trace.json";
  ASSERT_EQ(written.writeChromeTrace(path), "");
  StatusOr<Timeline> read = readChromeTrace(path);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->numDevices(), 3u); // device 2 recorded nothing
  ASSERT_EQ(read->lane(1).size(), 2u);
  const TimelineEvent &e = read->lane(1)[0];
  EXPECT_EQ(e.name, "forward");
  EXPECT_TRUE(e.compute);
  EXPECT_EQ(e.microbatch, 2);
  EXPECT_EQ(e.stage, 4);
  EXPECT_DOUBLE_EQ(e.startUs, 10.5);
  EXPECT_DOUBLE_EQ(e.durationUs, 4.25);
  EXPECT_FALSE(read->lane(1)[1].compute);
  EXPECT_EQ(read->lane(0)[0].name, "optimizer step");
  ASSERT_EQ(read->sideWork(1).size(), 1u) << "apart from the lane";
  EXPECT_EQ(read->sideWork(1)[0].name, "pack weights ahead");
  EXPECT_DOUBLE_EQ(read->sideWork(1)[0].startUs, 20.25);
  EXPECT_DOUBLE_EQ(read->sideWork(1)[0].durationUs, 0.5);
  EXPECT_DOUBLE_EQ(read->bubbleFraction(), written.bubbleFraction());
  EXPECT_DOUBLE_EQ(read->stepUs(), 40.5);
}

TEST(RunReportFiles, TraceErrorsNameTheFile) {
  TempDir dir;
  struct Case {
    const char *text, *error;
  } cases[] = {
      {"{\"traceEvents\": 3}",
       "expected a Chrome trace, a JSON object with a \"traceEvents\" array, "
       "as gpipe-run --trace writes"},
      {"{\"traceEvents\":[{\"ph\":\"X\"}]}",
       "expected every event to have an integer \"tid\""},
      {"{\"traceEvents\":[{\"ph\":\"X\",\"tid\":5000}]}",
       "expected a device \"tid\" in [0, 4096), got 5000"},
      {"{\"traceEvents\":[{\"ph\":\"X\",\"tid\":0,\"name\":\"f\"}]}",
       "expected every \"X\" event to have a \"name\", a \"ts\" and a "
       "\"dur\""},
      {"{\"traceEvents\":[{\"ph\":\"X\",\"tid\":0,\"name\":\"f\",\"ts\":0,"
       "\"dur\":-1}]}",
       "expected finite times and durations >= 0"},
  };
  for (const Case &c : cases) {
    std::string path = write(dir, "bad.json", c.text);
    StatusOr<Timeline> read = readChromeTrace(path);
    ASSERT_FALSE(read.ok()) << c.text;
    EXPECT_EQ(read.status().message(), "the trace '" + path + "': " + c.error);
  }
}
