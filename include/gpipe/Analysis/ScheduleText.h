//===- ScheduleText.h - Compute orders written as text ----------*- C++ -*-===//
//
// A user schedule: one line per device listing its forwards (F) and
// backwards (B) in order, each with its micro-batch, and, for a device that
// splits its backwards (zero bubble), their weight-gradient halves (W). '#'
// starts a comment.
//
//   # 1F1B, K = 2, M = 3
//   device 0: F0 F1 B0 F2 B1 B2
//   device 1: F0 B0 F1 B1 F2 B2
//
// The devices must be listed in order 0, 1, ... When each device runs more
// than one stage (interleaving: K devices run stage s on device s mod K), an
// action names its stage after '@': F0@2 is the forward of micro-batch 0 in
// stage 2; without one it is the device's first stage. The text only says
// the order; buildFromComputeOrder checks it and places the transfers.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_ANALYSIS_SCHEDULETEXT_H
#define GPIPE_ANALYSIS_SCHEDULETEXT_H

#include "gpipe/Analysis/ScheduleKinds.h"

#include <string>
#include <string_view>

namespace gpipe::schedule {

/// Parses `text` into `order`. Returns "" or "line N: ..." saying what was
/// expected and what was found.
std::string parseComputeOrder(std::string_view text, ComputeOrder &order);

/// Writes `order` in the form parseComputeOrder reads.
std::string printComputeOrder(const ComputeOrder &order);

} // namespace gpipe::schedule

#endif // GPIPE_ANALYSIS_SCHEDULETEXT_H
