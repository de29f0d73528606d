//===- StageWeights.h - What each stage's device does per unit of compute -===//
//
// The partitioner balances the cells' compute times a weight per cell
// (Partitioner.h). A stage's weight is the work its device does in one step
// per unit of the stage's forward compute, counted in half forwards: each
// micro-batch's forward and its backward (twice the forward, as the cost
// model prices it), and once more for each backward that recomputes its
// forward. Which backwards recompute is the runtime's rule
// (KeptForwardValues.h): under 1F1B and ZB-H1 with remat full, every stage
// but the last recomputes all its micro-batches, so the last device should
// hold more layers; under GPipe's order every stage recomputes all but one
// and the weights are equal.
//
// The weights describe a steady state. With few micro-batches a recompute
// mostly fills time a device would spend waiting for its gradient, so the
// step itself decides: simulatedStepOfCells prices a split under the same
// cost model.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_ANALYSIS_STAGEWEIGHTS_H
#define GPIPE_ANALYSIS_STAGEWEIGHTS_H

#include "gpipe/Analysis/MemoryPlanner.h"
#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/Analysis/ScheduleSimulator.h"

#include <cstdint>
#include <vector>

namespace gpipe {

/// A pipeline whose cells are being balanced.
struct PipelineShape {
  schedule::ScheduleKind kind = schedule::ScheduleKind::GPipe;
  unsigned numDevices = 1;
  unsigned numMicrobatches = 1;
  unsigned numVirtualStages = 1; ///< > 1 only for Interleaved
  KeepPolicy keep = KeepPolicy::None;
  unsigned numStages() const;
};

/// Per stage (d + v K: device d's v-th), the micro-batches whose backward
/// recomputes the forward.
std::vector<unsigned> recomputesPerStage(const PipelineShape &shape);

/// Half-forwards a stage's device runs per unit of forward compute over a
/// step: 6 per micro-batch (its forward and a backward twice it) and
/// `recomputeHalves` per recompute (2 prices it as a forward; less counts
/// it as partly hidden in waits, 0 ignores it).
std::vector<uint64_t> stageWorkWeights(const PipelineShape &shape,
                                       unsigned recomputeHalves);

/// The step the cost model gives cells whose forwards cost `cellCompute`
/// (per micro-batch, any unit): backwards twice their forward, recomputes
/// as the runtime decides them, transfers free. Negative when the schedule
/// cannot be simulated (it always can for the built-in kinds).
double simulatedStepOfCells(const PipelineShape &shape,
                            const std::vector<uint64_t> &cellCompute);

} // namespace gpipe

#endif // GPIPE_ANALYSIS_STAGEWEIGHTS_H
