//===- TrainingCheckpoints.h - Resuming and saving inside the loops -*- C++
//-*-//
//
// Private to runtime/src: what the image and text loops of Training.h do
// with their CheckpointOptions. The loop's state is a JSON object of the
// options that fix the data order and the schedule; a checkpoint saved by
// one run resumes only a run whose state is the same.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SRC_TRAININGCHECKPOINTS_H
#define GPIPE_RUNTIME_SRC_TRAININGCHECKPOINTS_H

#include "gpipe/runtime/exec/Engine.h"
#include "gpipe/runtime/train/Training.h"

#include <nlohmann/json.hpp>

#include <string>

namespace gpipe::runtime::detail {

/// The loop state: `fields` (what fixes the loop's data order) with the
/// learning rate and the schedule, as JSON text.
std::string loopStateOf(nlohmann::json fields, float learningRate,
                        LearningRateSchedule schedule);

/// Before training: creates the save directory (if any; an error now rather
/// than at the first save), then loads `options.resumeFrom` (if any) into
/// `engine` and checks that the checkpoint's loop state is `loopState`:
/// InvalidArgument naming the first field that differs ("the checkpoint's
/// run had shuffle_seed 1, this run has 2"). Returns the step the run starts
/// at: 0, or the checkpoint's; FailedPrecondition when that leaves nothing
/// of the run's `totalSteps` to train.
StatusOr<int64_t> resumeTraining(Engine &engine,
                                 const CheckpointOptions &options,
                                 const std::string &loopState,
                                 int64_t totalSteps);

/// Saves a checkpoint after step `done` when it is a multiple of saveEvery,
/// or when `last` (the run's end or a stop); nothing without a saveDir.
Status saveIfDue(Engine &engine, const CheckpointOptions &options,
                 const std::string &loopState, int64_t done, bool last);

} // namespace gpipe::runtime::detail

#endif // GPIPE_RUNTIME_SRC_TRAININGCHECKPOINTS_H
