//===- CellMemoryPlanner.h - Planned memory of any cell of layers -*- C++ -*-===//
//
// The partitioner asks "how much memory does the device holding layers
// [begin, end) need?" for many candidate cells. CellMemoryPlanner answers
// with the memory planner itself: it joins the stages of the model compiled
// with one layer per stage into the stage the cell would be and replays that
// device's GPipe program. So the partitioner's memory cap and
// gpipe-plan-memory use one model of memory.
//
// The search sizes cells by their planned peak (the replay: cheap), then
// checks the arenas of the cells it chose (the peak plus the fragmentation of
// static offsets: the placement is quadratic in the buffers) and searches
// again under a cap lowered by the excess until the arenas fit.
//
// Kept free of MLIR: the gpipe-partition pass builds the one-layer stages.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_ANALYSIS_CELLMEMORYPLANNER_H
#define GPIPE_ANALYSIS_CELLMEMORYPLANNER_H

#include "gpipe/Analysis/MemoryPlanner.h"
#include "gpipe/Analysis/Partitioner.h"
#include "gpipe/Analysis/ScheduleKinds.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpipe {

/// Joins consecutive stages [begin, end) of a pipeline into one stage: the
/// activations stage s sends on channel c become the values stage s + 1
/// received on c, the gradients stage s + 1 sends back become the output
/// gradients stage s received, and model inputs read by several of them are
/// loaded once. Inputs keep the channel numbers of stage `begin`, outputs
/// those of stage `end - 1`.
PlannedStage joinStages(const std::vector<PlannedStage> &stages,
                        unsigned begin, unsigned end);

/// Each device's instructions under schedule `kind` for `stages` (stage s
/// on device s, or on device s mod K when K = stages / numVirtualStages
/// devices run them round-robin), `numMicrobatches` of `batch` rows, with
/// the waits of a send window of `sendWindow` (0: none). Returns an empty
/// vector when the batch cannot be split that way.
std::vector<std::vector<PlannedInstr>> pipelineInstructions(
    const std::vector<PlannedStage> &stages, int64_t batch,
    unsigned numMicrobatches,
    schedule::ScheduleKind kind = schedule::ScheduleKind::GPipe,
    unsigned numVirtualStages = 1, unsigned sendWindow = 0);

/// The stages device `device` of `numDevices` runs, in the order of its
/// programs' stage indices (stage d + vK is the v-th).
std::vector<PlannedStage>
stagesOfDevice(const std::vector<PlannedStage> &stages, unsigned device,
               unsigned numDevices);

/// The schedule a cell is planned under. Under GPipe every device holds every
/// micro-batch, wherever it is; under 1F1B device s of K holds up to K - s,
/// so a cell is planned at the most demanding position it can have: the
/// first cell at device 0, the last at device K - 1, any other at device 1.
struct CellSchedule {
  schedule::ScheduleKind kind = schedule::ScheduleKind::GPipe;
  unsigned numStages = 1; ///< K of the pipeline the cell will be part of
  /// The pipeline's send window (Program::sendWindow): its waits keep sent
  /// values.
  unsigned sendWindow = 0;
};

class CellMemoryPlanner {
public:
  /// `layerStages[i]` is layer i compiled as a stage of its own.
  CellMemoryPlanner(std::vector<PlannedStage> layerStages, int64_t batch,
                    unsigned numMicrobatches, KeepPolicy keep,
                    CellSchedule schedule = {});

  unsigned numLayers() const { return unsigned(layerStages.size()); }
  const std::vector<PlannedStage> &stages() const { return layerStages; }
  int64_t batchSize() const { return batch; }

  /// The planned peak (resident bytes included) of the device that holds
  /// layers [begin, end), sends completing as issued. Memoized. Returns
  /// UINT64_MAX and sets error() if the cell cannot be planned. The
  /// partitioner's search reads it; it leaves the send window out, since
  /// what a cell keeps for its sends depends on the boundary it sends
  /// across, not on its layers, and would make a cell's memory
  /// non-monotone in its extent (the exact partitioner's reach needs it
  /// monotone).
  uint64_t peakBytes(unsigned begin, unsigned end);

  /// Its arena, as gpipe-plan-memory would plan it (>= the peak), send
  /// window included: partitionWithPlannedMemory tightens the search until
  /// every cell's arena fits the cap. Memoized.
  uint64_t arenaBytes(unsigned begin, unsigned end);

  /// The full plan of that device (not memoized); `placeBuffers` false
  /// leaves the offsets, arenaBytes and the send window out (peakBytes).
  std::string plan(unsigned begin, unsigned end, DeviceMemoryPlan &plan,
                   bool placeBuffers = true) const;

  /// The first planning failure, a full sentence; empty if none.
  const std::string &error() const { return firstError; }

private:
  std::vector<PlannedStage> layerStages;
  int64_t batch;
  unsigned numMicrobatches;
  KeepPolicy keep;
  CellSchedule cellSchedule;
  uint64_t memoized(std::map<std::pair<unsigned, unsigned>, uint64_t> &memo,
                    unsigned begin, unsigned end, bool arena);

  std::map<std::pair<unsigned, unsigned>, uint64_t> peaks, arenas;
  std::string firstError;
};

/// Partitions `problem` under its memory cap with cells sized by `planner`
/// (the problem's memory function and model are ignored). On success the
/// partition's cellMemory are the cells' planned arenas, all within the cap.
/// On failure smallestFittingCap is the largest arena of the best split
/// under the smallest cap its peaks fit: a cap that fits.
PartitionOutcome partitionWithPlannedMemory(PartitionProblem problem,
                                            CellMemoryPlanner &planner);

} // namespace gpipe

#endif // GPIPE_ANALYSIS_CELLMEMORYPLANNER_H
