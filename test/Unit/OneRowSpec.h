//===- OneRowSpec.h - A small pipeline for schedule tests -------*- C++ -*-===//

#ifndef GPIPE_TEST_UNIT_ONEROWSPEC_H
#define GPIPE_TEST_UNIT_ONEROWSPEC_H

#include "gpipe/Analysis/PipelineSchedule.h"

namespace gpipe::schedule {

/// K stages, M micro-batches of one row each, one f32 channel of 8 floats,
/// the model input "x" on stage 0.
inline PipelineSpec oneRowSpec(unsigned numStages, unsigned numMicrobatches) {
  PipelineSpec spec;
  spec.numStages = numStages;
  spec.numMicrobatches = numMicrobatches;
  spec.batchSize = numMicrobatches;
  spec.boundaries.assign(numStages - 1, {{{numMicrobatches, 8}, "f32"}});
  spec.stageInputs.assign(numStages, {});
  spec.stageInputs[0].push_back("x");
  return spec;
}

} // namespace gpipe::schedule

#endif // GPIPE_TEST_UNIT_ONEROWSPEC_H
