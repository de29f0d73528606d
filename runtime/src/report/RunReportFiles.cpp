//===- RunReportFiles.cpp - A run's report from the files it wrote --------===//
//
// gpipe-report --html reads what gpipe-run left: the metrics file
// (MetricsWriter's JSON lines) and the last step's Chrome trace
// (Timeline::toChromeTrace). Anything else is an error naming the file and,
// for the metrics, the line.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/base/FileRead.h"
#include "gpipe/runtime/report/HtmlReport.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

using namespace gpipe::runtime;
using nlohmann::json;

namespace {
/// The text of `what` ("the metrics") at `path`, named so in an error.
StatusOr<std::string> readWhole(const std::string &path, const char *what) {
  std::string reason;
  StatusOr<std::string> text =
      readRegularFile(path, kMaxRunReportFileBytes, what, &reason);
  if (!text.ok())
    return Status(text.status().code(), std::string("cannot read ") + what +
                                            " '" + path + "': " + reason);
  return text;
}

/// `object[key]` as a number: NAN for null (a value that was not finite),
/// nullopt when the key is absent; false when it is something else.
bool readNumber(const json &object, const char *key,
                std::optional<double> &value) {
  value.reset();
  auto it = object.find(key);
  if (it == object.end())
    return true;
  if (it->is_null()) {
    value = NAN;
    return true;
  }
  if (!it->is_number())
    return false;
  value = it->get<double>();
  return true;
}

/// Appends `object[key]` at `step` to `curve` when it is there; null is a
/// gap in the curve (NAN), or nothing where it means "not measured".
bool addPoint(const json &object, const char *key, int64_t step,
              std::vector<RunPoint> &curve, bool nullIsAbsent) {
  std::optional<double> value;
  if (!readNumber(object, key, value))
    return false;
  if (value && !(nullIsAbsent && std::isnan(*value)))
    curve.push_back({step, *value});
  return true;
}

/// One metrics line into `report`; "" or what is wrong with it.
std::string addMetricsLine(const json &line, RunReport &report,
                           std::vector<int64_t> &peak) {
  if (!line.is_object())
    return "expected a JSON object";
  auto event = line.find("event");
  auto step = line.find("step");
  if (event == line.end() || !event->is_string())
    return "expected \"event\": \"step\" or \"eval\"";
  if (step == line.end() || !step->is_number_integer() ||
      step->get<int64_t>() < 0)
    return "expected \"step\", a count of steps";
  const int64_t at = step->get<int64_t>();
  const char *bad = nullptr;
  auto take = [&](const char *key, std::vector<RunPoint> &curve,
                  bool nullIsAbsent = false) {
    if (!bad && !addPoint(line, key, at, curve, nullIsAbsent))
      bad = key;
  };
  if (*event == "step") {
    take("loss", report.loss);
    take("lr", report.learningRate);
    take("grad_norm", report.gradientNorm, /*nullIsAbsent=*/true);
    take("samples_per_second", report.samplesPerSecond);
    take("bubble", report.bubble);
  } else if (*event == "eval") {
    take("train_loss", report.evalTrainLoss, /*nullIsAbsent=*/true);
    take("val_loss", report.validationLoss);
    take("test_accuracy", report.testAccuracy);
    std::optional<double> entropy;
    if (!bad && !readNumber(line, "unigram_entropy", entropy))
      bad = "unigram_entropy";
    if (entropy)
      report.unigramEntropy = *entropy;
  } else {
    return "expected \"event\": \"step\" or \"eval\", got " + event->dump();
  }
  if (bad)
    return std::string("expected \"") + bad + "\" to be a number or null";
  if (auto it = line.find("peak_memory_bytes"); it != line.end()) {
    if (!it->is_array())
      return "expected \"peak_memory_bytes\" to be an array of byte counts";
    std::vector<int64_t> bytes;
    for (const json &value : *it) {
      if (!value.is_number_integer() || value.get<int64_t>() < 0)
        return "expected \"peak_memory_bytes\" to be an array of byte counts";
      bytes.push_back(value.get<int64_t>());
    }
    peak = std::move(bytes);
  }
  return {};
}
} // namespace

Status gpipe::runtime::readMetricsFile(const std::string &path,
                                       RunReport &report) {
  StatusOr<std::string> text = readWhole(path, "the metrics");
  if (!text.ok())
    return text.status();
  std::istringstream lines(*text);
  std::string line;
  std::vector<int64_t> peak;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    json parsed = json::parse(line, nullptr, /*allow_exceptions=*/false);
    std::string error = parsed.is_discarded()
                            ? "expected one JSON object per line"
                            : addMetricsLine(parsed, report, peak);
    if (!error.empty())
      return Status(StatusCode::InvalidArgument,
                    "the metrics '" + path + "', line " +
                        std::to_string(number) + ": " + error);
  }
  if (!peak.empty() && !report.memory.empty() &&
      peak.size() != report.memory.size())
    return Status(StatusCode::InvalidArgument,
                  "the metrics '" + path + "' measured the memory of " +
                      std::to_string(peak.size()) +
                      " devices, but the plan has " +
                      std::to_string(report.memory.size()) +
                      ": are they of the same run?");
  if (report.memory.size() < peak.size())
    report.memory.resize(peak.size());
  for (size_t d = 0; d < peak.size(); ++d)
    report.memory[d].measuredBytes = peak[d];
  return Status();
}

StatusOr<Timeline> gpipe::runtime::readChromeTrace(const std::string &path) {
  StatusOr<std::string> text = readWhole(path, "the trace");
  if (!text.ok())
    return text.status();
  auto invalid = [&](const std::string &why) {
    return Status(StatusCode::InvalidArgument,
                  "the trace '" + path + "': " + why);
  };
  json trace = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded() || !trace.is_object() ||
      !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    return invalid("expected a Chrome trace, a JSON object with a "
                   "\"traceEvents\" array, as gpipe-run --trace writes");
  // Devices are rows (tid); gpipe's traces name each one, events or not.
  constexpr int64_t kMostDevices = 4096;
  int64_t devices = 0;
  for (const json &event : trace["traceEvents"]) {
    if (!event.is_object() || !event.contains("tid") ||
        !event["tid"].is_number_integer())
      return invalid("expected every event to have an integer \"tid\"");
    int64_t tid = event["tid"].get<int64_t>();
    if (tid < 0 || tid >= kMostDevices)
      return invalid("expected a device \"tid\" in [0, " +
                     std::to_string(kMostDevices) + "), got " +
                     std::to_string(tid));
    devices = std::max(devices, tid + 1);
  }
  Timeline timeline{unsigned(devices)};
  // A member of the wrong type reads as absent (json::value would throw).
  auto member = [](const json &object, const char *key) {
    auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>()
                                                 : std::string();
  };
  for (const json &event : trace["traceEvents"]) {
    if (member(event, "ph") != "X")
      continue;
    if (!event.contains("name") || !event["name"].is_string() ||
        !event.contains("ts") || !event["ts"].is_number() ||
        !event.contains("dur") || !event["dur"].is_number())
      return invalid("expected every \"X\" event to have a \"name\", a "
                     "\"ts\" and a \"dur\"");
    TimelineEvent recorded;
    recorded.name = event["name"].get<std::string>();
    recorded.compute = member(event, "cat") == "compute";
    recorded.startUs = event["ts"].get<double>();
    recorded.durationUs = event["dur"].get<double>();
    if (!std::isfinite(recorded.startUs) || !(recorded.durationUs >= 0))
      return invalid("expected finite times and durations >= 0");
    if (event.contains("args") && event["args"].is_object()) {
      const json &args = event["args"];
      if (args.contains("microbatch") && args["microbatch"].is_number_integer())
        recorded.microbatch = args["microbatch"].get<int64_t>();
      if (args.contains("stage") && args["stage"].is_number_integer())
        recorded.stage = args["stage"].get<int64_t>();
    }
    if (member(event, "cat") == kSideWorkCategory)
      timeline.recordSideWork(unsigned(event["tid"].get<int64_t>()), recorded);
    else
      timeline.record(unsigned(event["tid"].get<int64_t>()), recorded);
  }
  if (trace.contains("otherData") && trace["otherData"].is_object() &&
      trace["otherData"].contains("step_us") &&
      trace["otherData"]["step_us"].is_number())
    timeline.setStepUs(trace["otherData"]["step_us"].get<double>());
  return timeline;
}
