//===- TrainingCheckpoints.cpp - Resuming and saving inside the loops -----===//

#include "train/TrainingCheckpoints.h"

#include "gpipe/runtime/train/Checkpoint.h"

#include <nlohmann/json.hpp>

using namespace gpipe::runtime;
using Json = nlohmann::json;

std::string detail::loopStateOf(Json fields, float learningRate,
                                LearningRateSchedule schedule) {
  fields["learning_rate"] = learningRate;
  fields["schedule"] =
      schedule == LearningRateSchedule::Cosine ? "cosine" : "constant";
  return fields.dump();
}

StatusOr<int64_t> detail::resumeTraining(Engine &engine,
                                         const CheckpointOptions &options,
                                         const std::string &loopState,
                                         int64_t totalSteps) {
  if (!options.saveDir.empty())
    if (Status status = createSaveDirectory(options.saveDir); !status.ok())
      return status;
  if (options.resumeFrom.empty())
    return int64_t(0);
  CheckpointInfo info;
  if (Status status = loadCheckpoint(engine, options.resumeFrom, &info);
      !status.ok())
    return status;
  Json saved = Json::parse(info.loopState, nullptr, false);
  Json expected = Json::parse(loopState, nullptr, false);
  for (const auto &[key, value] : expected.items()) {
    Json had = saved.is_object() && saved.contains(key) ? saved[key] : Json();
    if (had != value)
      return Status(StatusCode::InvalidArgument,
                    "cannot resume from '" + options.resumeFrom +
                        "': the checkpoint's run had " + key + " " +
                        (had.is_null() ? std::string("none") : had.dump()) +
                        ", this run has " + value.dump());
  }
  const int64_t resumeAt = engine.stepsDone();
  if (resumeAt >= totalSteps)
    return Status(StatusCode::FailedPrecondition,
                  "nothing left to train: the checkpoint is at step " +
                      std::to_string(resumeAt) + " of the run's " +
                      std::to_string(totalSteps));
  return resumeAt;
}

Status detail::saveIfDue(Engine &engine, const CheckpointOptions &options,
                         const std::string &loopState, int64_t done,
                         bool last) {
  if (options.saveDir.empty() || done == 0)
    return {};
  if (!last && (options.saveEvery <= 0 || done % options.saveEvery != 0))
    return {};
  StatusOr<std::string> saved =
      saveCheckpoint(engine, options.saveDir, loopState, options.keep);
  return saved.ok() ? Status() : saved.status();
}
