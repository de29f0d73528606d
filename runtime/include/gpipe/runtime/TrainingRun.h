//===- TrainingRun.h - A whole training run, data to report -----*- C++ -*-===//
//
// What gpipe-run does after compiling, as a library: load the data, print
// the run's header, train with the loops of Training.h while a
// ConsoleReporter prints progress and results, then check the measured
// peaks against the compiler's memory plan and write the last step's
// timeline.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TRAININGRUN_H
#define GPIPE_RUNTIME_TRAININGRUN_H

#include "gpipe/runtime/TrainingReport.h"

#include <cstdio>
#include <string>

namespace gpipe::runtime {

struct ImageRun {
  std::string title;   ///< the header's first words ("gpipe-run: m.mlir")
  std::string dataDir; ///< the Fashion-MNIST IDX files
  ImageTrainingOptions options;
  std::string tracePath; ///< "" for none
};

struct TextRun {
  std::string title;
  std::string corpusPath;
  TextTrainingOptions options;
  std::string tracePath;
};

/// Reports go to `out`, progress to `progress` when it is a terminal. A peak
/// above the plan is FailedPrecondition, after the line that shows it.
Status runImageTraining(Engine &engine, const ImageRun &run, std::FILE *out,
                        std::FILE *progress);
/// `seq`: characterModelWindow(engine.bundle()).
Status runTextTraining(Engine &engine, int64_t seq, const TextRun &run,
                       std::FILE *out, std::FILE *progress);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_TRAININGRUN_H
