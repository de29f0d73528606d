//===- Profile.cpp - Measured instruction costs for the simulator ---------===//

#include "gpipe/runtime/report/Profile.h"
#include "bundle/BundleJson.h"
#include "gpipe/runtime/verify/ProgramAnalysis.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

using namespace gpipe::runtime;

namespace {
/// Sums of one kind of event on one device.
struct Tally {
  double us = 0;
  double rows = 0;
  int64_t events = 0;
  double perRow() const { return rows > 0 ? us / rows : 0.0; }
  double perEvent() const { return events > 0 ? us / double(events) : 0.0; }
};

const char *rematName(RematPolicy remat) {
  for (const auto &[policy, name] : bundlejson::kRemats)
    if (policy == remat)
      return name;
  return "unknown";
}
} // namespace

std::string gpipe::runtime::profileJson(const Bundle &bundle,
                                        const Timeline &timeline) {
  double first = std::numeric_limits<double>::infinity(), last = 0;
  for (unsigned d = 0; d < timeline.numDevices(); ++d)
    for (const TimelineEvent &event : timeline.lane(d)) {
      first = std::min(first, event.startUs);
      last = std::max(last, event.startUs + event.durationUs);
    }
  // One entry per stage, from the events of its device that served it; the
  // device's optimizer step is shared among its stages (the simulator sums
  // them back).
  const unsigned numDevices = bundle.numDevices();
  const unsigned perDevice = std::max(1u, bundle.stagesPerDevice());
  nlohmann::json devices = nlohmann::json::array();
  for (unsigned s = 0; s < bundle.stages.size(); ++s) {
    const unsigned d = bundle.deviceOfStage(s);
    if (d >= timeline.numDevices() || numDevices == 0)
      break;
    auto rowsOf = [&](int64_t m) {
      return m >= 0 && size_t(m) < bundle.microbatchRows.size()
                 ? double(bundle.microbatchRows[m])
                 : 0.0;
    };
    // Events without a stage (a timeline written before they had one)
    // belong to the device's only stage.
    auto serves = [&](const TimelineEvent &event) {
      return event.stage == int64_t(s) || (event.stage < 0 && perDevice == 1);
    };
    Tally forward, backward, recompute, load, optimizer, send;
    double recv = std::numeric_limits<double>::infinity();
    const std::vector<TimelineEvent> &lane = timeline.lane(d);
    for (const TimelineEvent &event : lane) {
      if (event.name == "optimizer step") {
        optimizer.us += event.durationUs / perDevice;
        ++optimizer.events;
        continue;
      }
      if (!serves(event))
        continue;
      Tally *tally = event.name == "forward"            ? &forward
                     : event.name == "recompute"        ? &recompute
                     : event.name == "load input"       ? &load
                     : event.name.rfind("send", 0) == 0 ? &send
                                                        : nullptr;
      if (event.name.rfind("recv", 0) == 0)
        recv = std::min(recv, event.durationUs);
      if (!tally)
        continue;
      tally->us += event.durationUs;
      tally->rows += rowsOf(event.microbatch);
      ++tally->events;
    }
    // A recompute is an event of its own, priced apart so that the
    // simulator can price any remat policy. A split backward's W
    // (zero-bubble schedules) is the rest of the backward: its time counts
    // there, its rows were counted with B, and its share is written apart.
    double weightsUs = 0;
    for (const TimelineEvent &event : lane) {
      if (!serves(event))
        continue;
      if (event.name == "backward weights") {
        backward.us += event.durationUs;
        weightsUs += event.durationUs;
        continue;
      }
      if (event.name != "backward")
        continue;
      backward.us += event.durationUs;
      backward.rows += rowsOf(event.microbatch);
    }
    nlohmann::json device = {
        {"forward_us_per_row", forward.perRow()},
        {"backward_us_per_row", backward.perRow()},
        // No recompute ran (remat none): as much as a forward.
        {"recompute_us_per_row",
         recompute.events ? recompute.perRow() : forward.perRow()},
        {"load_us_per_row", load.perRow()},
        {"optimizer_us", optimizer.perEvent()},
        {"send_us", send.perEvent()},
        {"recv_us", std::isfinite(recv) ? recv : 0.0},
    };
    if (weightsUs > 0 && backward.us > 0)
      device["weight_share"] = weightsUs / backward.us;
    devices.push_back(std::move(device));
  }
  double makespan = last > first ? last - first : 0.0;
  nlohmann::json profile = {
      {"format", "gpipe-profile"},
      {"version", 1},
      {"model", bundle.model},
      {"stages", bundle.stages.size()},
      {"virtual_stages", perDevice},
      {"microbatch_rows", bundle.microbatchRows},
      {"remat", rematName(bundle.remat)},
      {"step_us", timeline.stepUs()},
      {"makespan_us", makespan},
      {"devices", devices},
  };
  return profile.dump(2) + "\n";
}

std::string gpipe::runtime::writeProfile(const std::string &path,
                                         const Bundle &bundle,
                                         const Timeline &timeline) {
  std::ofstream file(path);
  if (!file)
    return "cannot write the profile to '" + path +
           "': " + std::strerror(errno);
  file << profileJson(bundle, timeline);
  file.close();
  if (!file)
    return "cannot write the profile to '" + path +
           "': " + std::strerror(errno);
  return "";
}
