//===- StepTiming.cpp - Timed and profiled training steps -----------------===//

#include "gpipe/runtime/report/StepTiming.h"

#include <algorithm>
#include <chrono>
#include <map>

using namespace gpipe::runtime;

double gpipe::runtime::median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string gpipe::runtime::timeSteps(Engine &engine, const Batch &batch,
                                      int64_t count, StepTiming *timing) {
  for (int64_t i = 0; i < count; ++i) {
    auto start = std::chrono::steady_clock::now();
    StepResult step = engine.trainStep(batch);
    auto end = std::chrono::steady_clock::now();
    if (!step.ok())
      return step.error;
    if (timing) {
      timing->stepMs.push_back(
          std::chrono::duration<double, std::milli>(end - start).count());
      const Timeline &timeline = engine.timeline();
      timing->bubble.push_back(timeline.bubbleFraction());
      timing->hostMs.push_back(
          std::max(0.0, timeline.stepUs() - timeline.spanUs()) / 1000.0);
    }
  }
  return {};
}

std::string gpipe::runtime::profileOps(Engine &engine, const Batch &batch,
                                       int64_t count,
                                       std::vector<DeviceOpProfile> &devices) {
  devices.assign(engine.numDevices(), {});
  std::vector<std::map<std::string, OpTotal>> sums(devices.size());
  for (int64_t i = 0; i < count; ++i) {
    if (std::string error = timeSteps(engine, batch, 1, nullptr);
        !error.empty())
      return error;
    const Timeline &timeline = engine.timeline();
    for (unsigned d = 0; d < devices.size(); ++d) {
      for (const OpTotal &op : timeline.opTotals(d)) {
        OpTotal &sum = sums[d][op.name];
        sum.name = op.name;
        sum.calls += op.calls;
        sum.us += op.us;
      }
      for (const TimelineEvent &event : timeline.lane(d)) {
        if (event.compute)
          devices[d].computeUs += event.durationUs;
        // The update is an instruction, not an op: listed with them.
        if (event.name == std::string("optimizer step")) {
          OpTotal &sum = sums[d][event.name];
          sum.name = event.name;
          ++sum.calls;
          sum.us += event.durationUs;
        }
      }
      // And so is the side work (packing ahead, zeroing the gradients).
      for (const TimelineEvent &event : timeline.sideWork(d)) {
        devices[d].computeUs += event.durationUs;
        OpTotal &sum = sums[d][event.name];
        sum.name = event.name;
        ++sum.calls;
        sum.us += event.durationUs;
      }
      devices[d].stepUs += timeline.stepUs();
    }
  }
  for (unsigned d = 0; d < devices.size(); ++d) {
    for (auto &entry : sums[d])
      devices[d].ops.push_back(entry.second);
    std::stable_sort(
        devices[d].ops.begin(), devices[d].ops.end(),
        [](const OpTotal &a, const OpTotal &b) { return a.us > b.us; });
  }
  return {};
}
