//===- ScheduleSimulator.h - Predicted timeline of a step -------*- C++ -*-===//
//
// Predicts when every instruction of a schedule runs, under the runtime's
// execution model (docs/Schedules.md, "Simulator"): each device has a compute
// stream, which runs its program's loads, forwards, backwards, receives and
// optimizer step in order, and a copy stream, which runs its sends as soon as
// the value is computed. A receive completes once the matching send has
// completed and the transfer latency has passed. Devices may share a number
// of processors (CPU threads on fewer cores). Costs come from the cost
// model or from a profile measured by gpipe-run --profile.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_ANALYSIS_SCHEDULESIMULATOR_H
#define GPIPE_ANALYSIS_SCHEDULESIMULATOR_H

#include "gpipe/Analysis/MemoryPlanner.h"
#include "gpipe/Analysis/PipelineSchedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gpipe::schedule {

/// What the instructions of one stage cost on its device, in microseconds
/// (with one stage per device, what the device's cost).
struct StageCosts {
  double forwardPerRow = 0;  ///< a forward of its stage, per micro-batch row
  double backwardPerRow = 0; ///< a backward, without recomputation, per row
  /// What a forward (a recomputation too) and a backward cost whatever
  /// their rows: kernel launches, hand-offs, small GEMMs' inefficiency.
  double forwardFixed = 0, backwardFixed = 0;
  /// Of a backward's cost (per row and fixed), the share of the parameter
  /// gradients: what a BackwardWeights runs when the program splits its
  /// backwards (its Backward then costs the rest, plus any recomputation).
  /// A dense layer's two gradient GEMMs cost the same, hence one half.
  double weightShare = 0.5;
  /// The recomputation of the forward a backward runs first when the
  /// micro-batch kept nothing (`SimulationCosts::keep`), per row.
  double recomputePerRow = 0;
  double loadPerRow = 0; ///< one model-input load, per row
  double optimizerStep = 0; ///< a device's step: the sum over its stages
  double sendFixed = 0, sendPerByte = 0; ///< on the copy stream
  double recvFixed = 0, recvPerByte = 0; ///< once the data is there
};

struct SimulationCosts {
  /// One per stage of the program (Program: stage s runs on device s mod K).
  std::vector<StageCosts> stages;
  /// Which micro-batches keep their forward values (remat none: all; full:
  /// none; except-last: the one each stage forwards last); the others
  /// recompute in their backward.
  KeepPolicy keep = KeepPolicy::None;
  double latency = 0;      ///< from a send's end until it can be received
  double stepOverhead = 0; ///< host work per step outside the programs
  /// Processors the devices share (CPU threads on cores): at most this many
  /// loads, forwards, backwards and optimizer steps run at once, first come,
  /// first served. 0: each device has its own.
  unsigned processors = 0;
};

/// One instruction as the runtime's timeline records it.
struct SimulatedEvent {
  std::string name;     ///< "forward", "send activation", ... (the runtime's)
  bool compute = false; ///< forward, backward or optimizer step
  int64_t microbatch = -1;
  double startUs = 0;
  double durationUs = 0;
};

struct Simulation {
  std::vector<std::vector<SimulatedEvent>> lanes; ///< per device
  double makespanUs = 0; ///< from the first start to the last end
  double stepUs = 0;     ///< makespan + the step overhead
  /// 1 - compute time / (devices x makespan), as the runtime measures it.
  double bubbleFraction = 0;
};

struct SimulationResult {
  Simulation simulation;
  std::string error; ///< empty on success
};

/// Simulates one training step of `program` (which verifySchedule accepts).
/// Fails when `costs` has the wrong number of stages or the program cannot
/// finish.
SimulationResult simulateSchedule(const Program &program,
                                  const SimulationCosts &costs);

/// (K - 1) / (V M + K - 1): the bubble of GPipe and 1F1B (V = 1) and of
/// interleaved 1F1B (V stages per device) on K devices with balanced stages
/// and M micro-batches, when transfers take no time.
double idealBubbleFraction(unsigned numDevices, unsigned numMicrobatches,
                           unsigned numVirtualStages = 1);

/// Bytes of a transfer's tensor: the product of its shape times the size of
/// its element type (f32, f16, bf16, i32, ...; 4 when unknown).
int64_t transferBytes(const Instr &instr);

} // namespace gpipe::schedule

#endif // GPIPE_ANALYSIS_SCHEDULESIMULATOR_H
