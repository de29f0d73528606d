//===- ScheduleKinds.h - Pipeline schedules beyond GPipe --------*- C++ -*-===//
//
// A schedule is decided by one thing: the order in which each device runs
// its stage's forwards and backwards (its compute order). GPipe runs every
// forward, then every backward; 1F1B (PipeDream-flush) runs K-s-1 forwards on
// device s, then alternates one forward and one backward, so that device s
// holds at most K-s micro-batches in flight instead of M. ZB-H1 (zero bubble,
// Qi et al. 2023) is 1F1B with each backward split into B (the input
// gradients, which go back at once) and W (the parameter gradients), device
// s deferring its W's by s micro-batches so that they fill the cool-down
// bubble while no device holds more than K micro-batches, 1F1B's peak. A
// user may write a compute order of their own (ScheduleText.h).
//
// buildFromComputeOrder turns any consistent compute order into device
// programs whose transfers can never deadlock, even when every send blocks
// until it is received: it simulates the devices (a backward costing twice a
// forward) and places each send and its receive at the same point of one
// global order, which is then an execution of the programs. An inconsistent
// order is refused with the cycle of devices that would wait on each other.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_ANALYSIS_SCHEDULEKINDS_H
#define GPIPE_ANALYSIS_SCHEDULEKINDS_H

#include "gpipe/Analysis/PipelineSchedule.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpipe::schedule {

enum class ScheduleKind {
  GPipe,    ///< fill-drain: all forwards, then all backwards (reversed)
  OneFOneB, ///< PipeDream-flush: warm-up forwards, then one forward, one
            ///< backward
  /// 1F1B with split backwards (B, then W deferred by s on device s).
  ZeroBubbleH1,
  /// Interleaved 1F1B (Narayanan et al. 2021): each device runs V stages
  /// (virtual stages, round-robin), each group of K micro-batches going
  /// through a device's stages in turn, which cuts the bubble by V.
  Interleaved,
};

/// "gpipe", "1f1b", "zb-h1" or "interleaved".
const char *scheduleKindName(ScheduleKind kind);
/// The kind named `name`, if any.
std::optional<ScheduleKind> parseScheduleKind(std::string_view name);
/// Whether the kind splits each backward into B and W (BackwardWeights).
bool splitsBackward(ScheduleKind kind);

/// One forward, backward or weight-gradient backward of a device's stage.
struct ComputeStep {
  InstrKind kind = InstrKind::Forward; ///< Forward, Backward, BackwardWeights
  unsigned microbatch = 0;
  /// Which of the device's stages: device d of K runs stage d + v * K.
  unsigned virtualStage = 0;
};

/// "forward of micro-batch 2", "backward of micro-batch 0" or
/// "weight-gradient backward of micro-batch 1" (of its stage).
std::string describe(const ComputeStep &step);

/// order[d]: the forwards and backwards device d runs, in order (device d
/// runs stage d, and under interleaving d + K, d + 2K, ...).
using ComputeOrder = std::vector<std::vector<ComputeStep>>;

/// The compute order of `kind` for K devices, M micro-batches and, for
/// Interleaved, V stages per device (Interleaved with V = 1 is 1F1B; the
/// other kinds take V = 1 only).
ComputeOrder computeOrderOf(ScheduleKind kind, unsigned numDevices,
                            unsigned numMicrobatches,
                            unsigned numVirtualStages = 1);

struct ScheduleBuild {
  Program program;
  std::string error; ///< empty on success
};

/// The device programs that run `order` (see the file comment): each forward
/// preceded by its activation receives and input loads, each send right where
/// the global order puts it, one optimizer step last. Fails, naming the
/// device, its action and the micro-batch, when `order` has the wrong number
/// of devices, misses or repeats a forward or backward, runs a backward
/// before its forward, names a micro-batch out of range, or deadlocks (the
/// message then names every device of the wait cycle). A device that runs
/// any weight-gradient backward must run one per micro-batch, after its
/// backward.
ScheduleBuild buildFromComputeOrder(const PipelineSpec &spec,
                                    const ComputeOrder &order);

/// The programs of `kind`: buildGPipeSchedule for GPipe, otherwise
/// buildFromComputeOrder(computeOrderOf(kind)). Same preconditions as
/// buildGPipeSchedule, and spec.numVirtualStages is 1 unless `kind` is
/// Interleaved (checkVirtualStages); the built-in orders never fail.
Program buildSchedule(const PipelineSpec &spec, ScheduleKind kind);

/// "" or why `kind` cannot run `numStages` stages as `numVirtualStages` per
/// device: only Interleaved runs more than one, on at least 2 devices, and V
/// must divide the stages.
std::string checkVirtualStages(ScheduleKind kind, unsigned numStages,
                               unsigned numVirtualStages);

} // namespace gpipe::schedule

#endif // GPIPE_ANALYSIS_SCHEDULEKINDS_H
