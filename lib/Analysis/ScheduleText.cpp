//===- ScheduleText.cpp - Compute orders written as text ------------------===//

#include "gpipe/Analysis/ScheduleText.h"

#include <cctype>

using namespace gpipe;
using namespace gpipe::schedule;

namespace {
bool isSpace(char c) { return std::isspace(static_cast<unsigned char>(c)); }
bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)); }

std::string_view trim(std::string_view text) {
  while (!text.empty() && isSpace(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && isSpace(text.back()))
    text.remove_suffix(1);
  return text;
}

/// A non-negative decimal that fits an unsigned, all of `digits`.
bool parseNumber(std::string_view digits, unsigned &value) {
  if (digits.empty() || digits.size() > 9)
    return false;
  value = 0;
  for (char c : digits) {
    if (!isDigit(c))
      return false;
    value = value * 10 + unsigned(c - '0');
  }
  return true;
}
} // namespace

std::string schedule::parseComputeOrder(std::string_view text,
                                        ComputeOrder &order) {
  order.clear();
  unsigned lineNumber = 0;
  // Per device: its line and, per step, the stage it names after '@' (the
  // device's own stage when none); turned into virtual stages once the
  // number of devices is known.
  std::vector<unsigned> lineOf;
  std::vector<std::vector<unsigned>> stagesNamed;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    ++lineNumber;
    std::string where = "line " + std::to_string(lineNumber) + ": ";
    if (std::size_t hash = line.find('#'); hash != std::string_view::npos)
      line = line.substr(0, hash);
    line = trim(line);
    if (line.empty())
      continue;

    constexpr std::string_view keyword = "device";
    std::size_t colon = line.find(':');
    unsigned device = 0;
    if (line.substr(0, keyword.size()) != keyword ||
        colon == std::string_view::npos ||
        !parseNumber(trim(line.substr(keyword.size(), colon - keyword.size())),
                     device))
      return where + "expected 'device N: F0 B0 ...', got '" +
             std::string(line) + "'";
    if (device != order.size())
      return where + "expected device " + std::to_string(order.size()) +
             " (devices are listed in order), got device " +
             std::to_string(device);

    std::vector<ComputeStep> &steps = order.emplace_back();
    lineOf.push_back(lineNumber);
    std::vector<unsigned> &stages = stagesNamed.emplace_back();
    std::string_view rest = line.substr(colon + 1);
    while (!(rest = trim(rest)).empty()) {
      std::size_t length = 0;
      while (length < rest.size() && !isSpace(rest[length]))
        ++length;
      std::string_view token = rest.substr(0, length);
      rest.remove_prefix(length);
      ComputeStep step;
      char kind = token.front();
      std::size_t at = token.find('@');
      unsigned stage = device;
      if ((kind != 'F' && kind != 'B' && kind != 'W') ||
          !parseNumber(token.substr(1, at - 1), step.microbatch) ||
          (at != std::string_view::npos &&
           !parseNumber(token.substr(at + 1), stage)))
        return where +
               "expected an action such as F0 (forward of "
               "micro-batch 0), B3 (backward of micro-batch 3), W3 (its "
               "weight-gradient backward, when B and W are split) or F0@2 "
               "(forward of micro-batch 0 in stage 2, when devices run "
               "several), got '" +
               std::string(token) + "'";
      stages.push_back(stage);
      step.kind = kind == 'F'   ? InstrKind::Forward
                  : kind == 'B' ? InstrKind::Backward
                                : InstrKind::BackwardWeights;
      steps.push_back(step);
    }
  }
  if (order.empty())
    return "expected at least one line 'device N: ...', got none";
  const unsigned numDevices = order.size();
  for (unsigned d = 0; d < numDevices; ++d)
    for (std::size_t i = 0; i < order[d].size(); ++i) {
      unsigned stage = stagesNamed[d][i];
      if (stage % numDevices != d)
        return "line " + std::to_string(lineOf[d]) + ": device " +
               std::to_string(d) + " does not run stage " +
               std::to_string(stage) + ": " + std::to_string(numDevices) +
               " devices run the stages round-robin, device " +
               std::to_string(d) + " runs stages " + std::to_string(d) + ", " +
               std::to_string(d + numDevices) + ", ...";
      order[d][i].virtualStage = stage / numDevices;
    }
  return "";
}

std::string schedule::printComputeOrder(const ComputeOrder &order) {
  bool interleaved = false;
  for (const std::vector<ComputeStep> &steps : order)
    for (const ComputeStep &step : steps)
      interleaved |= step.virtualStage > 0;
  std::string text;
  for (std::size_t d = 0; d < order.size(); ++d) {
    text += "device " + std::to_string(d) + ":";
    for (const ComputeStep &step : order[d]) {
      text += std::string(step.kind == InstrKind::Forward    ? " F"
                          : step.kind == InstrKind::Backward ? " B"
                                                             : " W") +
              std::to_string(step.microbatch);
      if (interleaved)
        text += "@" + std::to_string(d + step.virtualStage * order.size());
    }
    text += "\n";
  }
  return text;
}
