//===- ByteCount.cpp - Byte counts as users write and read them -----------===//

#include "gpipe/Analysis/ByteCount.h"

#include <cctype>
#include <cstdio>
#include <iterator>
#include <utility>

using namespace gpipe;

static std::string trim(const std::string &text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin])))
    ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1])))
    --end;
  return text.substr(begin, end - begin);
}

bool gpipe::parseByteCount(const std::string &input,
                           std::optional<uint64_t> &count) {
  std::string text = trim(input);
  count.reset();
  if (text.empty())
    return true;
  size_t digits = 0;
  uint64_t value = 0;
  while (digits < text.size() &&
         std::isdigit(static_cast<unsigned char>(text[digits]))) {
    uint64_t digit = text[digits] - '0';
    if (value > (UINT64_MAX - digit) / 10)
      return false;
    value = value * 10 + digit;
    ++digits;
  }
  if (digits == 0)
    return false;
  std::string unit = trim(text.substr(digits));
  static const std::pair<const char *, uint64_t> units[] = {
      {"", 1},
      {"B", 1},
      {"KiB", 1ull << 10},
      {"MiB", 1ull << 20},
      {"GiB", 1ull << 30},
      {"TiB", 1ull << 40},
      {"KB", 1000ull},
      {"MB", 1000ull * 1000},
      {"GB", 1000ull * 1000 * 1000},
      {"TB", 1000ull * 1000 * 1000 * 1000}};
  for (const auto &[name, scale] : units)
    if (unit == name) {
      if (value > UINT64_MAX / scale)
        return false;
      count = value * scale;
      return true;
    }
  return false;
}

std::string gpipe::formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  unsigned unit = 0;
  while (bytes >= 1024.0 && unit + 1 < std::size(units)) {
    bytes /= 1024.0;
    ++unit;
  }
  char buffer[64];
  if (unit == 0)
    std::snprintf(buffer, sizeof(buffer), "%llu B",
                  static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buffer, sizeof(buffer), "%.1f %s", bytes, units[unit]);
  return buffer;
}
