//===- PlanFile.h - The compile options gpipe-tune chose --------*- C++ -*-===//
//
// gpipe-tune writes the plan it chose as JSON; gpipe-run --plan reads it and
// compiles with it:
//   {"format": "gpipe-plan", "version": 1, "stages": 2, "data_parallel": 1,
//    "microbatches": 8, "schedule": "1f1b", "remat": "none",
//    "objective": "variance", "batch_size": 512, "memory_cap": "64MiB",
//    "predicted_step_us": 41234.5}
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TUNE_PLANFILE_H
#define GPIPE_TUNE_PLANFILE_H

#include "gpipe/Tune/PlanSearch.h"

#include "llvm/ADT/StringRef.h"

#include <string>

namespace gpipe {

struct PlanFile {
  Plan plan;
  std::string memoryCap; ///< as the user wrote it; "" for none
  double predictedStepUs = 0;
};

/// The JSON of `file`.
std::string writePlanFile(const PlanFile &file);

/// Parses `text` into `file`; returns "" or what is wrong, naming the field.
std::string readPlanFile(llvm::StringRef text, PlanFile &file);

/// Sets the compile options `file` chooses: its plan's and its memory cap.
void applyPlanFile(const PlanFile &file, CompilePipelineOptions &options);

} // namespace gpipe

#endif // GPIPE_TUNE_PLANFILE_H
