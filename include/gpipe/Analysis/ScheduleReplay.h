//===- ScheduleReplay.h - Predicted timeline of a pipeline schedule -*- C++ -*-===//
//
// Replays a verified schedule with a duration for each forward and backward
// (transfers take no time and never block the sender) to predict its
// makespan and bubble fraction from the real cell costs.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_ANALYSIS_SCHEDULEREPLAY_H
#define GPIPE_ANALYSIS_SCHEDULEREPLAY_H

#include "gpipe/Analysis/PipelineSchedule.h"

#include <functional>
#include <optional>
#include <vector>

namespace gpipe::schedule {

struct ReplayResult {
  double makespan = 0;
  std::vector<double> busy; ///< per device: time spent in forward/backward
  /// 1 - sum(busy) / (devices * makespan): the idle share of the devices.
  double bubbleFraction = 0;
};

/// `duration(instr)` gives the time of a Forward or Backward. Returns nothing
/// if the program cannot run to completion (it deadlocks).
std::optional<ReplayResult>
replaySchedule(const Program &program,
               const std::function<double(const Instr &)> &duration);

/// (K - 1) / (M + K - 1): the bubble of K balanced stages and M micro-batches.
double balancedBubbleFraction(unsigned numStages, unsigned numMicrobatches);

} // namespace gpipe::schedule

#endif // GPIPE_ANALYSIS_SCHEDULEREPLAY_H
