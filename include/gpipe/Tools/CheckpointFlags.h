//===- CheckpointFlags.h - A training tool's checkpoint options -*- C++ -*-===//
//
// --save DIR, --save-every N, --keep N and --resume PATH in their own help
// category, and the runtime's CheckpointOptions they make. Header-only: it
// defines the options, so exactly one source file of a tool includes it.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TOOLS_CHECKPOINTFLAGS_H
#define GPIPE_TOOLS_CHECKPOINTFLAGS_H

#include "gpipe/Support/OptionParsers.h"
#include "gpipe/runtime/train/Training.h"

#include "llvm/Support/CommandLine.h"

namespace gpipe::tools {

static llvm::cl::OptionCategory checkpointCategory("Checkpoints");
static llvm::cl::opt<std::string> saveDir(
    "save", llvm::cl::init(""),
    llvm::cl::desc("save checkpoints in this directory: at the end, on a "
                   "stop (SIGINT, SIGTERM) and every --save-every steps"),
    llvm::cl::cat(checkpointCategory));
static Whole<int64_t>
    saveEvery("save-every", llvm::cl::init(0),
              llvm::cl::desc("steps between checkpoints (0: at the end only)"),
              llvm::cl::cat(checkpointCategory));
static Count keepCheckpoints("keep", llvm::cl::init(0),
                             llvm::cl::desc("keep the newest N checkpoints "
                                            "(0: all)"),
                             llvm::cl::cat(checkpointCategory));
static llvm::cl::opt<std::string> resumeFrom(
    "resume", llvm::cl::init(""),
    llvm::cl::desc("resume from this checkpoint, or from the latest one of "
                   "this save directory; the run's data order and schedule "
                   "continue as if uninterrupted"),
    llvm::cl::cat(checkpointCategory));

inline runtime::CheckpointOptions checkpointOptionsFromFlags() {
  runtime::CheckpointOptions options;
  options.saveDir = saveDir;
  options.saveEvery = saveEvery;
  options.keep = keepCheckpoints;
  options.resumeFrom = resumeFrom;
  return options;
}

} // namespace gpipe::tools

#endif // GPIPE_TOOLS_CHECKPOINTFLAGS_H
