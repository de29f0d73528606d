//===- PlanFlags.h - A training tool's --plan option ------------*- C++ -*-===//
//
// --plan FILE compiles with the plan gpipe-tune chose (gpipe/Tune/PlanFile.h)
// in place of the pipeline options it sets, which may then not be given as
// well. The tool reads it before its processes start: the plan's
// data-parallel replicas decide how they are grouped. Header-only: it
// defines the option, so exactly one source file of a tool includes it.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TOOLS_PLANFLAGS_H
#define GPIPE_TOOLS_PLANFLAGS_H

#include "gpipe/Tools/DistributedFlags.h"
#include "gpipe/Tools/PipelineFlags.h"
#include "gpipe/Tune/PlanFile.h"
#include "gpipe/runtime/report/TrainingRun.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"

#include <optional>
#include <string>

namespace gpipe::tools {

static llvm::cl::opt<std::string> planPath(
    "plan", llvm::cl::init(""),
    llvm::cl::desc("compile with the plan gpipe-tune chose (stages, "
                   "data-parallel replicas, micro-batches, schedule, remat, "
                   "objective, batch size, memory cap); those options may "
                   "not be given too"),
    llvm::cl::cat(pipelineCategory));

/// Reads --plan into `plan` (left empty without it) and sets --data-parallel
/// to its replicas; an option the plan sets may not be given as well. "" or
/// the error, with its exit status in `exit`.
inline std::string readPlanFlag(std::optional<PlanFile> &plan, int &exit) {
  exit = runtime::kExitUsage;
  if (planPath.empty())
    return "";
  std::string openError;
  std::unique_ptr<llvm::MemoryBuffer> file =
      mlir::openInputFile(planPath, &openError);
  exit = runtime::kExitBadInput;
  if (!file)
    return openError;
  PlanFile read;
  std::string error = readPlanFile(file->getBuffer(), read);
  if (!error.empty())
    return "cannot use the plan '" + planPath + "': " + error;
  exit = runtime::kExitUsage;
  const llvm::cl::Option *given[] = {
      &numStages,    &numMicrobatches, &remat,        &objective,
      &batchSize,    &memoryCap,       &scheduleKind, &scheduleFile,
      &dataParallel, &virtualStages};
  for (const llvm::cl::Option *option : given)
    if (option->getNumOccurrences() > 0)
      return "--" + option->ArgStr.str() +
             " conflicts with --plan, which "
             "sets it: give one or the other";
  dataParallel.setValue(read.plan.replicas);
  plan = std::move(read);
  return "";
}

} // namespace gpipe::tools

#endif // GPIPE_TOOLS_PLANFLAGS_H
