//===- StageWeights.cpp - What each stage's device does per unit ----------===//

#include "gpipe/Analysis/StageWeights.h"
#include "gpipe/runtime/verify/KeptForwardValues.h"

using namespace gpipe;
using namespace gpipe::schedule;

unsigned PipelineShape::numStages() const {
  return numDevices *
         (kind == ScheduleKind::Interleaved ? numVirtualStages : 1);
}

std::vector<unsigned> gpipe::recomputesPerStage(const PipelineShape &shape) {
  unsigned virtualStages = shape.numStages() / shape.numDevices;
  unsigned numStages = shape.numStages(), numDevices = shape.numDevices;
  ComputeOrder order = computeOrderOf(shape.kind, numDevices,
                                      shape.numMicrobatches, virtualStages);
  runtime::KeptBeyondAdjacent beyond = keptBeyondAdjacentOf(shape.keep);
  std::vector<unsigned> recomputes(numStages, 0);
  for (unsigned d = 0; d < numDevices; ++d) {
    auto roleOf = [&](const ComputeStep &step) {
      runtime::ComputeRole role;
      role.stage = d + step.virtualStage * numDevices;
      role.microbatch = step.microbatch;
      role.kind = step.kind == InstrKind::Forward
                      ? runtime::ComputeRole::Forward
                  : step.kind == InstrKind::Backward
                      ? runtime::ComputeRole::Backward
                      : runtime::ComputeRole::OtherCompute;
      return role;
    };
    std::vector<std::vector<char>> kept = runtime::keptForwardValues(
        order[d], numStages, shape.numMicrobatches, beyond, roleOf);
    for (unsigned s = d; s < numStages; s += numDevices)
      for (char keeps : kept[s])
        recomputes[s] += keeps ? 0 : 1;
  }
  return recomputes;
}

std::vector<uint64_t> gpipe::stageWorkWeights(const PipelineShape &shape,
                                              unsigned recomputeHalves) {
  std::vector<uint64_t> weights;
  for (unsigned recomputes : recomputesPerStage(shape))
    weights.push_back(6 * uint64_t(shape.numMicrobatches) +
                      uint64_t(recomputeHalves) * recomputes);
  return weights;
}

double gpipe::simulatedStepOfCells(const PipelineShape &shape,
                                   const std::vector<uint64_t> &cellCompute) {
  PipelineSpec spec;
  spec.numStages = shape.numStages();
  spec.numVirtualStages = spec.numStages / shape.numDevices;
  spec.numMicrobatches = shape.numMicrobatches;
  spec.batchSize = shape.numMicrobatches; // one row each: costs per row
  spec.boundaries.assign(spec.numStages - 1, {{{1, 1}, "f32"}});
  spec.stageInputs.assign(spec.numStages, {});
  spec.stageInputs[0].push_back("x");
  Program program = buildSchedule(spec, shape.kind);
  SimulationCosts costs;
  costs.keep = shape.keep;
  for (uint64_t compute : cellCompute) {
    StageCosts &stage = costs.stages.emplace_back();
    stage.forwardPerRow = stage.recomputePerRow = double(compute);
    stage.backwardPerRow = 2 * double(compute);
  }
  SimulationResult result = simulateSchedule(program, costs);
  return result.error.empty() ? result.simulation.makespanUs : -1;
}
