//===- HtmlReport.cpp - A training run as one self-contained page ---------===//

#include "gpipe/runtime/report/HtmlReport.h"
#include "report/SvgCharts.h"
#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/report/TrainingReport.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

using namespace gpipe::runtime;

std::vector<DeviceMemoryReport>
gpipe::runtime::memoryReport(const Bundle &bundle,
                             const std::vector<int64_t> &measured) {
  const std::vector<PlannedDeviceMemory> &plan = bundle.memoryPlan.devices;
  std::vector<DeviceMemoryReport> devices(
      std::max(plan.size(), measured.size()));
  for (size_t d = 0; d < devices.size(); ++d) {
    if (d < plan.size()) {
      devices[d].planned = true;
      devices[d].plannedResidentBytes = plan[d].residentBytes;
      devices[d].plannedArenaBytes = plan[d].arenaBytes;
      devices[d].plannedPeakBytes = plan[d].peakBytes;
    }
    if (d < measured.size())
      devices[d].measuredBytes = measured[d];
  }
  return devices;
}

//===----------------------------------------------------------------------===//
// Recording a run
//===----------------------------------------------------------------------===//

void RunReportRecorder::onStep(const StepProgress &p) {
  runStep = p.runStep;
  report.loss.push_back({p.runStep, p.loss});
  report.learningRate.push_back({p.runStep, p.learningRate});
  if (p.gradientNorm)
    report.gradientNorm.push_back({p.runStep, *p.gradientNorm});
  report.samplesPerSecond.push_back({p.runStep, p.samplesPerSecond});
  report.bubble.push_back({p.runStep, p.bubble});
}

void RunReportRecorder::onEpoch(const EpochReport &r) {
  report.evalTrainLoss.push_back({runStep, r.trainLoss});
  report.testAccuracy.push_back({runStep, r.testAccuracy});
}

void RunReportRecorder::onEvaluation(const TextEvaluation &e) {
  if (e.trainLoss)
    report.evalTrainLoss.push_back({e.step, *e.trainLoss});
  report.validationLoss.push_back({e.step, e.validationLoss});
  report.unigramEntropy = e.unigramEntropy;
}

//===----------------------------------------------------------------------===//
// The page
//===----------------------------------------------------------------------===//

namespace {
/// A curve of at most `most` points: beyond that, the mean of each run of
/// consecutive steps, placed at its last step (a long run's per-step loss
/// would otherwise be megabytes of noise).
std::vector<svg::ChartPoint> thin(const std::vector<RunPoint> &points,
                                  size_t most, size_t &perPoint) {
  perPoint = std::max<size_t>(1, (points.size() + most - 1) / most);
  std::vector<svg::ChartPoint> out;
  for (size_t i = 0; i < points.size(); i += perPoint) {
    size_t end = std::min(points.size(), i + perPoint), finite = 0;
    double sum = 0;
    for (size_t j = i; j < end; ++j)
      if (std::isfinite(points[j].value)) {
        sum += points[j].value;
        ++finite;
      }
    out.push_back(
        {double(points[end - 1].step), finite ? sum / double(finite) : NAN});
  }
  return out;
}

std::vector<svg::ChartPoint> chartPoints(const std::vector<RunPoint> &points) {
  std::vector<svg::ChartPoint> out;
  for (const RunPoint &p : points)
    out.push_back({double(p.step), p.value});
  return out;
}

/// The median of the values, NAN when there are none.
double median(const std::vector<RunPoint> &points) {
  std::vector<double> values;
  for (const RunPoint &p : points)
    if (std::isfinite(p.value))
      values.push_back(p.value);
  if (values.empty())
    return NAN;
  std::nth_element(values.begin(), values.begin() + values.size() / 2,
                   values.end());
  return values[values.size() / 2];
}

std::string number(const char *pattern, double value) {
  if (!std::isfinite(value))
    return "—";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), pattern, value);
  return buffer;
}

std::string row(const std::string &name, const std::string &value) {
  return "<tr><th>" + svg::escape(name) + "</th><td>" + svg::escape(value) +
         "</td></tr>";
}

std::string summaryTable(const RunReport &r) {
  std::string out = "<table class=\"summary\">";
  out += row("steps", r.loss.empty() ? "none recorded"
                                     : std::to_string(r.loss.back().step));
  if (!r.loss.empty())
    out += row("loss of the last step", number("%.4f", r.loss.back().value));
  if (!r.validationLoss.empty())
    out +=
        row("validation loss (nats/char)",
            number("%.4f", r.validationLoss.back().value) +
                (r.unigramEntropy ? " (unigram entropy " +
                                        number("%.4f", *r.unigramEntropy) + ")"
                                  : std::string()));
  if (!r.testAccuracy.empty())
    out += row("test accuracy",
               number("%.2f%%", 100 * r.testAccuracy.back().value));
  if (!r.samplesPerSecond.empty())
    out += row("samples/s (median step)",
               number("%.0f", median(r.samplesPerSecond)));
  if (!r.bubble.empty())
    out += row("measured bubble (median step)",
               number("%.3f", median(r.bubble)) +
                   (r.idealBubble.empty() ? "" : "; " + r.idealBubble));
  return out + "</table>";
}

std::string trainingCharts(const RunReport &r) {
  std::string out;
  size_t perPoint = 1;
  // Every chart spans the run's steps, evaluations before the first included.
  double first = INFINITY, last = -INFINITY;
  for (const std::vector<RunPoint> *curve :
       {&r.loss, &r.evalTrainLoss, &r.validationLoss, &r.testAccuracy})
    if (!curve->empty()) {
      first = std::min(first, double(curve->front().step));
      last = std::max(last, double(curve->back().step));
    }
  auto spanRun = [&](svg::LineChart chart) {
    chart.xLow = first;
    chart.xHigh = last;
    return chart;
  };
  svg::LineChart loss{"Loss", "step", "loss", {}};
  std::vector<svg::ChartPoint> steps = thin(r.loss, 1000, perPoint);
  if (!steps.empty())
    loss.series.push_back({perPoint > 1 ? "training loss, mean of " +
                                              std::to_string(perPoint) +
                                              " steps per point"
                                        : "training loss per step",
                           "c-loss", steps});
  if (!r.evalTrainLoss.empty())
    loss.series.push_back({"training loss since the last evaluation", "c-train",
                           chartPoints(r.evalTrainLoss), true});
  if (!r.validationLoss.empty())
    loss.series.push_back({"validation loss", "c-validation",
                           chartPoints(r.validationLoss), true});
  if (r.unigramEntropy && !r.loss.empty())
    loss.series.push_back({"unigram entropy",
                           "c-reference",
                           {{double(r.loss.front().step), *r.unigramEntropy},
                            {double(r.loss.back().step), *r.unigramEntropy}}});
  if (loss.series.empty())
    return "<p>No steps were recorded.</p>";
  std::vector<std::pair<std::string, std::string>> legend;
  for (const svg::ChartSeries &series : loss.series)
    legend.push_back({series.cssClass, series.label});
  out += svg::renderLineChart(spanRun(loss)) + svg::renderLegend(legend);
  if (!r.testAccuracy.empty()) {
    svg::LineChart accuracy{"Test accuracy", "step", "accuracy", {}};
    accuracy.series.push_back(
        {"test accuracy", "c-accuracy", chartPoints(r.testAccuracy), true});
    out += svg::renderLineChart(spanRun(accuracy));
  }
  std::string small;
  if (!r.learningRate.empty())
    small += svg::renderLineChart(spanRun(
        {"Learning rate",
         "step",
         "learning rate",
         {{"learning rate", "c-lr", thin(r.learningRate, 1000, perPoint)}},
         452,
         220}));
  if (!r.gradientNorm.empty())
    small += svg::renderLineChart(spanRun(
        {"Gradient norm (global, before clipping)",
         "step",
         "L2 norm",
         {{"gradient norm", "c-norm", thin(r.gradientNorm, 1000, perPoint)}},
         452,
         220}));
  if (!small.empty())
    out += "<div class=\"pair\">" + small + "</div>";
  return out;
}

/// The bar's colour class of a timeline event.
const char *eventClass(const std::string &name) {
  if (name == "forward")
    return "c-forward";
  if (name == "backward")
    return "c-backward";
  if (name == "backward weights")
    return "c-weights";
  if (name == "recompute")
    return "c-recompute";
  if (name == "optimizer step")
    return "c-optimizer";
  // A wait for a send is the send's own time, as far as the device sees it.
  if (name.rfind("send", 0) == 0 || name.rfind("wait send", 0) == 0)
    return "c-send";
  if (name.rfind("recv", 0) == 0)
    return "c-recv";
  if (name == "pack weights ahead")
    return "c-pack";
  if (name == "zero gradients")
    return "c-zero";
  return "c-other";
}

std::string timelineSection(const RunReport &r) {
  const Timeline &timeline = r.lastStep;
  double span = timeline.spanUs();
  if (timeline.numDevices() == 0 || !(span > 0))
    return "<p>No timeline was recorded.</p>";
  // Milliseconds unless the whole step is shorter than one.
  const bool ms = span >= 1000;
  const double unit = ms ? 1000.0 : 1.0;
  const char *unitName = ms ? "ms" : "µs";
  svg::GanttChart gantt;
  gantt.title = "The last step, per device";
  gantt.timeLabel = std::string("time (") + unitName + ")";
  gantt.span = span / unit;
  double origin = INFINITY;
  for (unsigned d = 0; d < timeline.numDevices(); ++d)
    for (const TimelineEvent &event : timeline.lane(d))
      origin = std::min(origin, event.startUs);
  for (unsigned d = 0; d < timeline.numDevices(); ++d) {
    gantt.rows.push_back("device " + std::to_string(d));
    std::vector<TimelineEvent> events = timeline.lane(d);
    // Drawn over the waits they filled.
    events.insert(events.end(), timeline.sideWork(d).begin(),
                  timeline.sideWork(d).end());
    for (const TimelineEvent &event : events) {
      std::string tooltip = event.name;
      if (event.microbatch >= 0)
        tooltip += ", micro-batch " + std::to_string(event.microbatch);
      if (event.stage >= 0)
        tooltip += ", stage " + std::to_string(event.stage);
      tooltip += ": " + number("%.3f", event.durationUs / unit) + " " +
                 unitName + " from " +
                 number("%.3f", (event.startUs - origin) / unit);
      gantt.bars.push_back(
          {d, (event.startUs - origin) / unit, event.durationUs / unit,
           eventClass(event.name),
           event.microbatch >= 0 ? std::to_string(event.microbatch) : "",
           tooltip});
    }
  }
  std::string caption =
      "Each bar is one instruction of the device's program, numbered by its "
      "micro-batch; hover for its stage and time. Measured bubble " +
      number("%.3f", timeline.bubbleFraction()) +
      (r.idealBubble.empty() ? "" : " against the " + r.idealBubble) +
      "; the step took " + number("%.3f", span / unit) + " " + unitName +
      " on the devices" +
      (timeline.stepUs() > 0 ? ", " + number("%.3f", timeline.stepUs() / unit) +
                                   " " + unitName + " with the host's work"
                             : std::string()) +
      ".";
  return svg::renderGanttChart(gantt) +
         svg::renderLegend({{"c-forward", "forward"},
                            {"c-backward", "backward"},
                            {"c-weights", "backward weights"},
                            {"c-recompute", "recompute"},
                            {"c-optimizer", "optimizer step"},
                            {"c-send", "send (waiting)"},
                            {"c-recv", "recv (waiting)"},
                            {"c-zero", "zeroing the gradients"},
                            {"c-pack", "packing weights ahead, in a wait"},
                            {"c-other", "load input"}}) +
         "<p class=\"caption\">" + svg::escape(caption) + "</p>";
}

std::string memorySection(const RunReport &r) {
  if (r.memory.empty())
    return "<p>No memory was recorded.</p>";
  // One binary unit for the axis, so that its ticks are round numbers of it.
  int64_t largest = 1;
  for (const DeviceMemoryReport &m : r.memory)
    largest = std::max(
        {largest, m.plannedArenaBytes, m.measuredBytes.value_or(int64_t(0))});
  const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit < 4 && double(largest) >= 2.0 * std::ldexp(1.0, 10 * unit + 10))
    ++unit;
  const double scale = std::ldexp(1.0, -10 * unit);
  svg::BarChart chart{"Memory per device", units[unit], {}};
  std::string table = "<table class=\"memory\"><tr><th>device</th><th>planned "
                      "resident</th><th>planned arena</th><th>planned "
                      "peak</th><th>measured</th><th>measured / "
                      "arena</th></tr>";
  auto bytes = [](bool known, int64_t value) {
    return known ? formatBytes(value) : std::string("—");
  };
  for (size_t d = 0; d < r.memory.size(); ++d) {
    const DeviceMemoryReport &m = r.memory[d];
    svg::BarGroup group{"device " + std::to_string(d), {}};
    // The arena holds the resident bytes at its start, the rest after them.
    const int64_t working = m.plannedArenaBytes - m.plannedResidentBytes;
    if (m.planned)
      group.bars.push_back(
          {"planned",
           {{double(m.plannedResidentBytes) * scale, "c-resident",
             "planned resident (parameters, gradients, optimizer slots): " +
                 formatBytes(m.plannedResidentBytes)},
            {double(working) * scale, "c-arena",
             "planned activations and scratch: " + formatBytes(working) +
                 " (arena " + formatBytes(m.plannedArenaBytes) +
                 ", live at its fullest " + formatBytes(m.plannedPeakBytes) +
                 ")"}}});
    if (m.measuredBytes)
      group.bars.push_back({"measured",
                            {{double(*m.measuredBytes) * scale, "c-measured",
                              "measured high-water mark, resident + arena: " +
                                  formatBytes(*m.measuredBytes)}}});
    chart.groups.push_back(group);
    table += "<tr><td>" + std::to_string(d) + "</td><td>" +
             bytes(m.planned, m.plannedResidentBytes) + "</td><td>" +
             bytes(m.planned, m.plannedArenaBytes) + "</td><td>" +
             bytes(m.planned, m.plannedPeakBytes) + "</td><td>" +
             bytes(bool(m.measuredBytes), m.measuredBytes.value_or(0)) +
             "</td><td>" +
             (m.planned && m.measuredBytes && m.plannedArenaBytes > 0
                  ? number("%.3f", double(*m.measuredBytes) /
                                       double(m.plannedArenaBytes))
                  : "—") +
             "</td></tr>";
  }
  return svg::renderBarChart(chart) +
         svg::renderLegend({{"c-resident", "planned resident"},
                            {"c-arena", "planned activations and scratch"},
                            {"c-measured", "measured"}}) +
         table + "</table>";
}

constexpr const char *kStyle = R"css(
body { font: 14px/1.4 "DejaVu Sans", Helvetica, Arial, sans-serif; color: #222;
  margin: 24px auto; max-width: 960px; padding: 0 12px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px;
  border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.sub, .caption, footer { color: #555; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { padding: 3px 10px; text-align: left; border-bottom: 1px solid #eee; }
table.memory td { text-align: right; }
.chart { display: block; margin: 8px 0; overflow: visible; }
.pair { display: flex; gap: 16px; }
.chart-title { font-weight: bold; font-size: 13px; }
.tick { font-size: 11px; fill: #555; } .axis-label { font-size: 12px; fill: #333; }
.bar-label { font-size: 10px; fill: #fff; pointer-events: none; }
.grid { stroke: #e6e6e6; } .axis { stroke: #888; } .lane { fill: #f7f7f7; }
.empty { fill: #999; }
.series .line { fill: none; stroke: var(--c); stroke-width: 1.6; }
.series .dot { fill: var(--c); }
.bar { fill: var(--c); }
.legend { display: flex; flex-wrap: wrap; gap: 14px; font-size: 12px; margin: 2px 0 6px 72px; }
.legend svg { vertical-align: middle; }
.c-loss { --c: #9fb7d4; } .c-train { --c: #4e79a7; } .c-validation { --c: #e15759; }
.c-reference { --c: #999; } .c-accuracy { --c: #59a14f; } .c-lr { --c: #b07aa1; }
.c-norm { --c: #edc948; }
.c-forward { --c: #4e79a7; } .c-backward { --c: #f28e2b; } .c-weights { --c: #e15759; }
.c-optimizer { --c: #59a14f; } .c-send { --c: #c9c2bd; } .c-recv { --c: #a59c94; }
.c-other { --c: #76b7b2; } .c-recompute { --c: #b07aa1; } .c-pack { --c: #9c755f; }
.c-zero { --c: #d4a6c8; }
.c-resident { --c: #8cd17d; } .c-arena { --c: #4e79a7; } .c-measured { --c: #f28e2b; }
)css";
} // namespace

std::string gpipe::runtime::renderHtmlReport(const RunReport &r) {
  std::string title = r.title.empty() ? "gpipe training run" : r.title;
  std::string sub = r.pipeline;
  if (!r.idealBubble.empty())
    sub += (sub.empty() ? "" : "; ") + r.idealBubble;
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta "
         "charset=\"utf-8\"><title>" +
         svg::escape(title) + "</title><style>" + kStyle +
         "</style></head><body><h1>" + svg::escape(title) +
         "</h1><p class=\"sub\">" + svg::escape(sub) + "</p>" +
         summaryTable(r) + "<h2>Training</h2>" + trainingCharts(r) +
         "<h2>Timeline</h2>" + timelineSection(r) + "<h2>Memory</h2>" +
         memorySection(r) + "<footer><p>Written by gpipe " +
         svg::escape(GPIPE_VERSION_STRING) +
         ".</p></footer></body></html>\n";
}

Status gpipe::runtime::writeHtmlReport(const std::string &path,
                                       const RunReport &report) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (file)
    file << renderHtmlReport(report);
  if (!file.flush())
    return Status(StatusCode::Io, "cannot write the report to '" + path +
                                      "': " + std::strerror(errno));
  return Status();
}
