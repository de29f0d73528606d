//===- HtmlReportTest.cpp - The run's HTML page: geometry, text, safety ---===//
//
// The page is checked by what a reader sees in it: the Gantt bars lie where
// their times put them on the lane, the loss curve rises and falls with the
// losses, bar heights keep the bytes' proportions, and nothing in the page
// can run or fetch anything.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/report/HtmlReport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

using namespace gpipe::runtime;

namespace {
/// The text of the <svg> whose aria-label is `label`.
std::string chart(const std::string &page, const std::string &label) {
  size_t start = page.find("aria-label=\"" + label + "\"");
  if (start == std::string::npos)
    return {};
  return page.substr(start, page.find("</svg>", start) - start);
}

/// The numeric attribute `name` of an element's text.
double attribute(const std::string &element, const std::string &name) {
  std::smatch match;
  std::regex pattern(" " + name + "=\"([-0-9.e]+)\"");
  if (!std::regex_search(element, match, pattern))
    return NAN;
  return std::stod(match[1]);
}

/// Every element "<tag ..." of `text` whose start matches `prefix`.
std::vector<std::string> elements(const std::string &text,
                                  const std::string &prefix) {
  std::vector<std::string> found;
  for (size_t at = text.find(prefix); at != std::string::npos;
       at = text.find(prefix, at + 1))
    found.push_back(text.substr(at, text.find('>', at) - at));
  return found;
}

struct Point {
  double x, y;
};

/// The points of the first polyline of series `cssClass`.
std::vector<Point> polyline(const std::string &svg,
                            const std::string &cssClass) {
  size_t series = svg.find("class=\"series " + cssClass + "\"");
  size_t line = svg.find("points=\"", series);
  if (series == std::string::npos || line == std::string::npos)
    return {};
  std::string text = svg.substr(line + 8, svg.find('"', line + 8) - (line + 8));
  std::vector<Point> points;
  std::regex pair("([-0-9.]+),([-0-9.]+)");
  for (std::sregex_iterator it(text.begin(), text.end(), pair), end; it != end;
       ++it)
    points.push_back({std::stod((*it)[1]), std::stod((*it)[2])});
  return points;
}

TimelineEvent event(const char *name, bool compute, int64_t mb, int64_t stage,
                    double start, double duration) {
  TimelineEvent e{name, compute, mb, start, duration};
  e.stage = stage;
  return e;
}

/// K=2, M=2 fill and drain, starting at 5000 us (the page starts at 0).
RunReport pipelineRun() {
  RunReport report;
  report.title = "gpipe-run: mlp.mlir";
  report.lastStep = Timeline(2);
  Timeline &t = report.lastStep;
  t.record(0, event("forward", true, 0, 0, 5000, 100));
  t.record(0, event("forward", true, 1, 0, 5100, 100));
  t.record(1, event("recv activation", false, 0, 1, 5000, 100));
  t.record(1, event("forward", true, 0, 1, 5100, 100));
  t.record(1, event("forward", true, 1, 1, 5200, 100));
  t.record(1, event("backward", true, 1, 1, 5300, 200));
  t.record(1, event("backward", true, 0, 1, 5500, 200));
  t.record(0, event("backward", true, 1, 0, 5500, 200));
  t.record(0, event("backward", true, 0, 0, 5700, 200));
  t.record(0, event("optimizer step", true, -1, -1, 5900, 100));
  return report;
}
} // namespace

// Each instruction is one bar on its device's lane: x and width in
// proportion to its start and duration over the step's 1000 us, the first
// at the lane's left edge and the last ending at its right edge.
TEST(HtmlReport, GanttBarsLieWhereTheirTimesPutThem) {
  std::string gantt =
      chart(renderHtmlReport(pipelineRun()), "The last step, per device");
  ASSERT_FALSE(gantt.empty());
  std::vector<std::string> lanes = elements(gantt, "<rect class=\"lane\"");
  ASSERT_EQ(lanes.size(), 2u);
  const double left = attribute(lanes[0], "x");
  const double right = left + attribute(lanes[0], "width");
  std::vector<std::string> bars = elements(gantt, "<rect class=\"bar ");
  ASSERT_EQ(bars.size(), 10u);
  const double perUs = (right - left) / 1000.0;
  struct Expected {
    const char *cls;
    double start, duration;
    int lane;
  };
  // In the order recorded: device 0's lane first.
  const Expected expected[] = {
      {"c-forward", 0, 100, 0},     {"c-forward", 100, 100, 0},
      {"c-backward", 500, 200, 0},  {"c-backward", 700, 200, 0},
      {"c-optimizer", 900, 100, 0}, {"c-recv", 0, 100, 1},
      {"c-forward", 100, 100, 1},   {"c-forward", 200, 100, 1},
      {"c-backward", 300, 200, 1},  {"c-backward", 500, 200, 1}};
  const double lane1Top = attribute(lanes[1], "y");
  for (size_t i = 0; i < bars.size(); ++i) {
    SCOPED_TRACE(bars[i]);
    EXPECT_NE(bars[i].find(expected[i].cls), std::string::npos);
    EXPECT_NEAR(attribute(bars[i], "x"), left + expected[i].start * perUs,
                0.11);
    EXPECT_NEAR(attribute(bars[i], "width"), expected[i].duration * perUs,
                0.11);
    EXPECT_EQ(attribute(bars[i], "y") > lane1Top, expected[i].lane == 1);
  }
  EXPECT_NEAR(attribute(bars[0], "x"), left, 0.05);
  EXPECT_NEAR(attribute(bars[4], "x") + attribute(bars[4], "width"), right,
              0.11);
  EXPECT_NE(gantt.find("<title>backward, micro-batch 1, stage 1: 0.200 ms "
                       "from 0.300</title>"),
            std::string::npos);
  EXPECT_NE(gantt.find("time (ms)"), std::string::npos);
}

// Side work is a bar of its own on its device's lane, over the wait or
// before the instruction it preceded, and counts as compute in the bubble.
TEST(HtmlReport, SideWorkIsDrawnOnItsLane) {
  RunReport report = pipelineRun();
  report.lastStep.recordSideWork(
      1, event("pack weights ahead", true, -1, -1, 5020, 50));
  report.lastStep.recordSideWork(
      0, event("zero gradients", true, -1, -1, 5200, 30));
  std::string gantt =
      chart(renderHtmlReport(report), "The last step, per device");
  std::vector<std::string> lanes = elements(gantt, "<rect class=\"lane\"");
  ASSERT_EQ(lanes.size(), 2u);
  const double left = attribute(lanes[0], "x");
  const double perUs = attribute(lanes[0], "width") / 1000.0;
  const double lane1Top = attribute(lanes[1], "y");
  std::vector<std::string> pack = elements(gantt, "<rect class=\"bar c-pack");
  std::vector<std::string> zero = elements(gantt, "<rect class=\"bar c-zero");
  ASSERT_EQ(pack.size(), 1u);
  ASSERT_EQ(zero.size(), 1u);
  EXPECT_NEAR(attribute(pack[0], "x"), left + 20 * perUs, 0.11);
  EXPECT_NEAR(attribute(pack[0], "width"), 50 * perUs, 0.11);
  EXPECT_GT(attribute(pack[0], "y"), lane1Top);
  EXPECT_NEAR(attribute(zero[0], "x"), left + 200 * perUs, 0.11);
  EXPECT_LT(attribute(zero[0], "y"), lane1Top);
  EXPECT_NE(gantt.find("<title>zero gradients: 0.030 ms from 0.200</title>"),
            std::string::npos);
  // 1 - (1300 of instructions + 80 of side work) / (2 x 1000).
  EXPECT_NE(renderHtmlReport(report).find("Measured bubble 0.310"),
            std::string::npos);
}

// The loss curve's highest loss is its highest point and its lowest the
// lowest; steps run left to right; a nan loss leaves a gap, not a point.
TEST(HtmlReport, LossCurveFollowsTheLosses) {
  RunReport report;
  const double losses[] = {2.3, 1.9, 2.5, 1.2, NAN, 0.7, 0.9, 0.4};
  for (int64_t step = 1; step <= 8; ++step)
    report.loss.push_back({step, losses[step - 1]});
  std::vector<Point> points =
      polyline(chart(renderHtmlReport(report), "Loss"), "c-loss");
  ASSERT_EQ(points.size(), 7u);
  for (size_t i = 1; i < points.size(); ++i)
    EXPECT_GT(points[i].x, points[i - 1].x);
  auto highest = std::min_element(
      points.begin(), points.end(),
      [](const Point &a, const Point &b) { return a.y < b.y; });
  auto lowest = std::max_element(
      points.begin(), points.end(),
      [](const Point &a, const Point &b) { return a.y < b.y; });
  EXPECT_EQ(highest - points.begin(), 2); // 2.5 at step 3
  EXPECT_EQ(lowest - points.begin(), 6);  // 0.4 at step 8 (nan skipped)
  // Heights in proportion: (2.5 - 0.4) / (2.3 - 0.4) between the extremes.
  EXPECT_NEAR((lowest->y - highest->y) / (lowest->y - points[0].y),
              (2.5 - 0.4) / (2.3 - 0.4), 1e-3);
}

// A run of 2500 steps is drawn as the means of 3 steps per point: 834.
TEST(HtmlReport, LongRunsAreThinnedToMeans) {
  RunReport report;
  for (int64_t step = 1; step <= 2500; ++step)
    report.loss.push_back({step, step % 3 == 0 ? 3.0 : 0.0});
  std::string loss = chart(renderHtmlReport(report), "Loss");
  std::vector<Point> points = polyline(loss, "c-loss");
  ASSERT_EQ(points.size(), 834u);
  EXPECT_NE(loss.find("training loss, mean of 3 steps per point"),
            std::string::npos);
  // Every full run of 3 steps means 1.0; only the last (step 2500) is 0.
  for (size_t i = 1; i + 1 < points.size(); ++i)
    EXPECT_NEAR(points[i].y, points[0].y, 0.05);
  EXPECT_GT(points.back().y, points[0].y);
}

// Evaluations are drawn as dots: the validation loss and the accuracy, on
// the run's axis of steps.
TEST(HtmlReport, EvaluationsAreDots) {
  RunReport report;
  report.loss = {{1, 3.0}, {2, 2.0}, {3, 1.5}};
  report.validationLoss = {{0, 4.5}, {3, 2.1}};
  report.unigramEntropy = 3.28;
  report.testAccuracy = {{3, 0.8125}};
  std::string page = renderHtmlReport(report);
  EXPECT_EQ(elements(chart(page, "Loss"), "<circle").size(), 2u);
  std::vector<std::string> accuracy =
      elements(chart(page, "Test accuracy"), "<circle");
  ASSERT_EQ(accuracy.size(), 1u);
  // The charts share the run's steps: the one evaluation, at the last step,
  // is at the right end, where the loss curve ends.
  std::vector<Point> loss = polyline(chart(page, "Loss"), "c-loss");
  ASSERT_EQ(loss.size(), 3u);
  EXPECT_NEAR(attribute(accuracy[0], "cx"), loss.back().x, 0.05);
  EXPECT_NE(page.find("<th>test accuracy</th><td>81.25%</td>"),
            std::string::npos);
  EXPECT_NE(page.find("2.1000 (unigram entropy 3.2800)"), std::string::npos);
}

// Planned (the resident bytes under the rest of the arena) and measured bars
// keep the bytes' proportions from a zero baseline, and the table gives the
// measured bytes over the arena.
TEST(HtmlReport, MemoryBarsKeepTheBytesProportions) {
  RunReport report;
  report.memory.resize(2);
  report.memory[0] = {true, 1000, 4000, 3500, 5000};
  report.memory[1] = {true, 2000, 4000, 3000, 3000};
  std::string page = renderHtmlReport(report);
  std::string bars = chart(page, "Memory per device");
  std::vector<std::string> resident =
      elements(bars, "<rect class=\"bar c-resident\"");
  std::vector<std::string> arena =
      elements(bars, "<rect class=\"bar c-arena\"");
  std::vector<std::string> measured =
      elements(bars, "<rect class=\"bar c-measured\"");
  ASSERT_EQ(resident.size(), 2u);
  ASSERT_EQ(arena.size(), 2u);
  ASSERT_EQ(measured.size(), 2u);
  const double perByte = attribute(measured[0], "height") / 5000.0;
  EXPECT_NEAR(attribute(resident[0], "height"), 1000 * perByte, 0.1);
  EXPECT_NEAR(attribute(arena[0], "height"), 3000 * perByte, 0.1);
  EXPECT_NEAR(attribute(measured[1], "height"), 3000 * perByte, 0.1);
  // Stacked: the arena sits on the resident bytes; all share a baseline.
  EXPECT_NEAR(attribute(arena[0], "y") + attribute(arena[0], "height"),
              attribute(resident[0], "y"), 0.1);
  EXPECT_NEAR(attribute(resident[0], "y") + attribute(resident[0], "height"),
              attribute(measured[0], "y") + attribute(measured[0], "height"),
              0.1);
  EXPECT_NE(page.find("<td>4.9 KiB</td><td>1.250</td>"), std::string::npos);
  EXPECT_NE(page.find("<td>2.9 KiB</td><td>0.750</td>"), std::string::npos);
}

// Text from the run (a title, an event's name) is escaped; the page has no
// script, loads nothing from anywhere and says what it lacks.
TEST(HtmlReport, PageIsInertAndSelfContained) {
  RunReport report = pipelineRun();
  report.title = "<script>alert(\"x\")</script> & co";
  report.lastStep.record(1, event("<img src=x>", false, -1, -1, 5000, 1));
  std::string page = renderHtmlReport(report);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; "
                      "&amp; co"),
            std::string::npos);
  std::string plain = renderHtmlReport(pipelineRun());
  for (const char *fetch : {"://", "src=", "href=", "url(", "@import"})
    EXPECT_EQ(plain.find(fetch), std::string::npos) << fetch;
  EXPECT_NE(page.find("<p>No steps were recorded.</p>"), std::string::npos);
  EXPECT_NE(page.find("<p>No memory was recorded.</p>"), std::string::npos);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
}

// The recorder turns a run's reports into curves at the run's steps.
TEST(HtmlReport, RecorderCollectsCurves) {
  RunReport report;
  RunReportRecorder recorder(report);
  StepProgress step;
  step.runStep = 1;
  step.loss = 2.5;
  step.learningRate = 0.5f;
  step.gradientNorm = 3.0;
  step.samplesPerSecond = 100;
  step.bubble = 0.25;
  recorder.onStep(step);
  step.runStep = 2;
  step.loss = 2.0;
  step.gradientNorm.reset();
  recorder.onStep(step);
  EpochReport epoch;
  epoch.trainLoss = 2.25;
  epoch.testAccuracy = 0.5;
  recorder.onEpoch(epoch);
  TextEvaluation eval;
  eval.step = 2;
  eval.validationLoss = 1.75;
  eval.unigramEntropy = 3.0;
  recorder.onEvaluation(eval);
  ASSERT_EQ(report.loss.size(), 2u);
  EXPECT_EQ(report.loss[1].step, 2);
  EXPECT_EQ(report.loss[1].value, 2.0);
  ASSERT_EQ(report.gradientNorm.size(), 1u);
  EXPECT_EQ(report.gradientNorm[0].value, 3.0);
  ASSERT_EQ(report.testAccuracy.size(), 1u);
  EXPECT_EQ(report.testAccuracy[0].step, 2);
  ASSERT_EQ(report.evalTrainLoss.size(), 1u); // text: none before a step
  EXPECT_EQ(report.validationLoss[0].value, 1.75);
  EXPECT_EQ(report.unigramEntropy, 3.0);
}

// Values far from zero that differ by less than their axis' tick step can
// resolve (1e16 and 1e16 + 2: a step of 0.5 is below their precision) still
// draw, in bounded time, with a tick at each end.
TEST(HtmlReport, AxesOfValuesBeyondTheirPrecision) {
  RunReport report;
  report.loss = {{1, 1e16}, {2, 1e16 + 2}};
  std::string loss = chart(renderHtmlReport(report), "Loss");
  EXPECT_EQ(polyline(loss, "c-loss").size(), 2u);
  EXPECT_GE(elements(loss, "<line class=\"grid\"").size(), 2u);
}
