//===- Timeline.cpp - Per-device op timeline and Chrome trace -------------===//

#include "gpipe/runtime/exec/Timeline.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

using namespace gpipe::runtime;

double Timeline::spanUs() const {
  double first = std::numeric_limits<double>::infinity();
  double last = -std::numeric_limits<double>::infinity();
  for (const auto &lane : lanes)
    for (const TimelineEvent &event : lane) {
      first = std::min(first, event.startUs);
      last = std::max(last, event.startUs + event.durationUs);
    }
  return last > first ? last - first : 0.0;
}

double Timeline::bubbleFraction() const {
  double busy = 0;
  for (const auto &lane : lanes)
    for (const TimelineEvent &event : lane)
      if (event.compute)
        busy += event.durationUs;
  for (const auto &work : sideWorkLanes)
    for (const TimelineEvent &event : work)
      busy += event.durationUs;
  double span = spanUs();
  if (!(span > 0) || lanes.empty())
    return 0.0;
  return 1.0 - busy / (double(lanes.size()) * span);
}

/// Escapes a string for a JSON string literal.
static std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
      out += buffer;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Timeline::toChromeTrace() const {
  std::ostringstream os;
  os.precision(3);
  os << std::fixed << "{\"traceEvents\":[";
  bool firstEvent = true;
  for (unsigned device = 0; device < lanes.size(); ++device) {
    // Name each row after its device.
    os << (firstEvent ? "" : ",")
       << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" << device
       << ",\"args\":{\"name\":\"device " << device << "\"}}";
    firstEvent = false;
    auto write = [&](const TimelineEvent &event, const char *category) {
      os << ",{\"name\":" << jsonString(event.name) << ",\"cat\":\"" << category
         << "\",\"ph\":\"X\",\"ts\":" << event.startUs
         << ",\"dur\":" << event.durationUs << ",\"pid\":0,\"tid\":" << device;
      // The stage tells interleaved stages apart (gpipe-report reads it).
      if (event.microbatch >= 0 || event.stage >= 0) {
        os << ",\"args\":{";
        if (event.microbatch >= 0)
          os << "\"microbatch\":" << event.microbatch;
        if (event.stage >= 0)
          os << (event.microbatch >= 0 ? "," : "")
             << "\"stage\":" << event.stage;
        os << "}";
      }
      os << "}";
    };
    for (const TimelineEvent &event : lanes[device])
      write(event, event.compute ? "compute" : "wait");
    for (const TimelineEvent &event : sideWorkLanes[device])
      write(event, kSideWorkCategory);
  }
  os << "],\"displayTimeUnit\":\"ms\"";
  // The step's wall time, host work included, for gpipe-report.
  if (wallUs > 0)
    os << ",\"otherData\":{\"step_us\":" << wallUs << "}";
  os << "}\n";
  return os.str();
}

std::string Timeline::writeChromeTrace(const std::string &path) const {
  std::ofstream file(path);
  if (!file)
    return "cannot write the trace to '" + path + "': " + std::strerror(errno);
  file << toChromeTrace();
  file.close();
  if (!file)
    return "cannot write the trace to '" + path + "': " + std::strerror(errno);
  return {};
}
