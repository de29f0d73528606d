//===- StepTiming.h - Timed and profiled training steps ---------*- C++ -*-===//
//
// What gpipe-bench measures on an engine: the wall time, the measured bubble
// and the host's share of each timed step, and, on an engine that marks
// every op (EngineOptions::profileOps), each device's time per op kind
// summed over a few more steps, with the optimizer step and the side work
// (packing ahead, zeroing the gradients) listed beside the ops.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_STEPTIMING_H
#define GPIPE_RUNTIME_STEPTIMING_H

#include "gpipe/runtime/exec/Batch.h"
#include "gpipe/runtime/exec/Engine.h"
#include "gpipe/runtime/exec/Timeline.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gpipe::runtime {

/// The median of `values` (the mean of the middle two for an even count).
double median(std::vector<double> values);

/// What the timed steps measured, one entry per step.
struct StepTiming {
  std::vector<double> stepMs;
  std::vector<double> bubble;
  /// The step's wall time outside the devices' span: issuing, staging the
  /// inputs, synchronising, the losses.
  std::vector<double> hostMs;
};

/// Runs `count` training steps on `batch`, recording them into `timing`
/// unless it is null; "" or the first step's error.
std::string timeSteps(Engine &engine, const Batch &batch, int64_t count,
                      StepTiming *timing);

/// One device's time per op kind (and the optimizer step's and the side
/// work's) over the profiled steps, slowest first, and its compute time.
struct DeviceOpProfile {
  std::vector<OpTotal> ops; ///< us summed over the steps
  double computeUs = 0, stepUs = 0;
};

/// Runs `count` steps on `engine` (one with profileOps) and sums each
/// device's op times into `devices`; "" or the first step's error.
std::string profileOps(Engine &engine, const Batch &batch, int64_t count,
                       std::vector<DeviceOpProfile> &devices);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_STEPTIMING_H
