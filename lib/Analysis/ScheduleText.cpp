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
    std::string_view rest = line.substr(colon + 1);
    while (!(rest = trim(rest)).empty()) {
      std::size_t length = 0;
      while (length < rest.size() && !isSpace(rest[length]))
        ++length;
      std::string_view token = rest.substr(0, length);
      rest.remove_prefix(length);
      ComputeStep step;
      char kind = token.front();
      if ((kind != 'F' && kind != 'B' && kind != 'W') ||
          !parseNumber(token.substr(1), step.microbatch))
        return where +
               "expected an action such as F0 (forward of "
               "micro-batch 0), B3 (backward of micro-batch 3) or W3 (its "
               "weight-gradient backward, when B and W are split), got '" +
               std::string(token) + "'";
      step.kind = kind == 'F'   ? InstrKind::Forward
                  : kind == 'B' ? InstrKind::Backward
                                : InstrKind::BackwardWeights;
      steps.push_back(step);
    }
  }
  if (order.empty())
    return "expected at least one line 'device N: ...', got none";
  return "";
}

std::string schedule::printComputeOrder(const ComputeOrder &order) {
  std::string text;
  for (std::size_t d = 0; d < order.size(); ++d) {
    text += "device " + std::to_string(d) + ":";
    for (const ComputeStep &step : order[d])
      text += std::string(step.kind == InstrKind::Forward    ? " F"
                          : step.kind == InstrKind::Backward ? " B"
                                                             : " W") +
              std::to_string(step.microbatch);
    text += "\n";
  }
  return text;
}
