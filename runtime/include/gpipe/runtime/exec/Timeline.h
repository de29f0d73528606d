//===- Timeline.h - Per-device op timeline and Chrome trace -----*- C++ -*-===//
//
// Records when every op of every device ran, writes it in the Chrome trace
// event format (open it in Perfetto or chrome://tracing: one row per device)
// and computes the measured bubble fraction.
//
// Thread safety: each device records into its own lane (`record(device, ...)`
// from that device's thread only); reading and writing the trace happen after
// the devices have joined.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TIMELINE_H
#define GPIPE_RUNTIME_TIMELINE_H

#include <cstdint>
#include <string>
#include <vector>

namespace gpipe::runtime {

struct TimelineEvent {
  std::string name;     ///< e.g. "forward", "recv activation"
  bool compute = false; ///< forward/backward/optimizer work, not waiting
  int64_t microbatch = -1;
  double startUs = 0;
  double durationUs = 0;
  /// The stage it served (-1: the optimizer step, the device's): a device
  /// runs several under interleaving.
  int64_t stage = -1;
};

/// One kind of op's time on one device in a step (profiled steps only).
struct OpTotal {
  std::string name; ///< section and op: "forward dense", "backward dense+relu"
  int64_t calls = 0;
  double us = 0;
};

/// The Chrome trace category of a device's side work (Timeline::sideWork).
inline constexpr const char *kSideWorkCategory = "side work";

class Timeline {
public:
  explicit Timeline(unsigned numDevices)
      : lanes(numDevices), sideWorkLanes(numDevices) {}

  void record(unsigned device, TimelineEvent event) {
    lanes[device].push_back(std::move(event));
  }
  const std::vector<TimelineEvent> &lane(unsigned device) const {
    return lanes[device];
  }
  /// Work of the step that is no instruction of the device's program: the
  /// CPU backend's packing of weights ahead, inside a wait; the executor's
  /// zeroing of the gradients, before the device's first wait. Compute, kept
  /// apart from the lane of instructions.
  void recordSideWork(unsigned device, TimelineEvent event) {
    event.compute = true;
    sideWorkLanes[device].push_back(std::move(event));
  }
  const std::vector<TimelineEvent> &sideWork(unsigned device) const {
    return sideWorkLanes[device];
  }
  unsigned numDevices() const { return lanes.size(); }

  /// Per op kind, the time its kernels took on `device` (empty unless the
  /// executor profiles ops), largest first.
  const std::vector<OpTotal> &opTotals(unsigned device) const {
    static const std::vector<OpTotal> none;
    return device < ops.size() ? ops[device] : none;
  }
  void setOpTotals(unsigned device, std::vector<OpTotal> totals) {
    if (ops.size() < lanes.size())
      ops.resize(lanes.size());
    ops[device] = std::move(totals);
  }

  /// The step's wall time, host work included (0 when not measured).
  double stepUs() const { return wallUs; }
  void setStepUs(double us) { wallUs = us; }

  /// From the first event's start to the last event's end (0 when empty).
  double spanUs() const;

  /// 1 - (compute time of all devices) / (devices x span), where the span
  /// runs from the first event's start to the last event's end: the share of
  /// device time spent idle or waiting. Side work is compute. 0 for an empty
  /// timeline.
  double bubbleFraction() const;

  /// The Chrome trace event JSON ("X" complete events, tid = device; the
  /// side work has category "side work").
  std::string toChromeTrace() const;

  /// Writes toChromeTrace() to `path`; returns an error message or "".
  std::string writeChromeTrace(const std::string &path) const;

private:
  std::vector<std::vector<TimelineEvent>> lanes;
  std::vector<std::vector<TimelineEvent>> sideWorkLanes;
  std::vector<std::vector<OpTotal>> ops;
  double wallUs = 0;
};

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_TIMELINE_H
