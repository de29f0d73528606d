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

#include "gpipe/runtime/report/TrainingReport.h"

#include <atomic>
#include <cstdio>
#include <string>

namespace gpipe::runtime {

struct ImageRun {
  std::string title;   ///< the header's first words ("gpipe-run: m.mlir")
  std::string dataDir; ///< the Fashion-MNIST IDX files
  ImageTrainingOptions options;
  std::string tracePath; ///< "" for none
  /// The last step's measured costs (Profile.h); "" for none.
  std::string profilePath;
  /// Nonzero stops the run at the next step boundary (stopOnSignals).
  const std::atomic<int> *stop = nullptr;
  /// One JSON line per step and per evaluation (MetricsWriter); "" for none.
  std::string metricsPath;
  /// Off a terminal, a plain line every this many steps; 0: none.
  unsigned logEvery = 0;
  /// The run as one HTML page (HtmlReport.h), written at its end; "" for none.
  std::string reportPath;
};

struct TextRun {
  std::string title;
  std::string corpusPath;
  TextTrainingOptions options;
  std::string tracePath;
  std::string profilePath;
  const std::atomic<int> *stop = nullptr;
  std::string metricsPath;
  unsigned logEvery = 0;
  std::string reportPath;
};

/// The exit statuses of gpipe-run (docs/Training.md).
enum ExitStatus : int {
  kExitOk = 0,
  /// Anything else: a device failure, a timeout, memory.
  kExitInternal = 1,
  /// A bad option or a device this machine does not have.
  kExitUsage = 2,
  /// A file that cannot be read or written, a model that cannot be compiled
  /// as asked, data or a checkpoint that does not fit the model.
  kExitBadInput = 3,
  /// The non-finite guard stopped training (StatusCode::NonFinite).
  kExitNonFinite = 4,
};

/// Installs handlers for SIGINT and SIGTERM that record the signal in the
/// returned flag (the first one; a second of either ends the process as
/// usual), so that a run stops at a step boundary with its files complete.
const std::atomic<int> &stopOnSignals();

/// The exit status of a run, its options checked, that ended with `status`:
/// 0; 128 + the signal for a run stopped by one (130 for SIGINT, 143 for
/// SIGTERM); kExitNonFinite for the guard's NonFinite; kExitUsage for an
/// unavailable device or a checkpoint that leaves nothing to train
/// (FailedPrecondition); kExitBadInput for a file or data (InvalidArgument,
/// NotFound, Io, InvalidBundle); else kExitInternal.
int exitStatusOf(const Status &status, const std::atomic<int> &stop);

/// Checks first that the trace, profile, metrics and report paths can be
/// written (a run must not train for an hour to fail at its end). Reports go
/// to `out`, progress to `progress` when it is a terminal. A run stopped on
/// request still writes the device memory line, the trace, the profile and
/// the report of its last step, then returns Cancelled; one the non-finite
/// guard stopped writes its report (without a timeline), then returns
/// NonFinite.
Status runImageTraining(Engine &engine, const ImageRun &run, std::FILE *out,
                        std::FILE *progress);
/// `seq`: characterModelWindow(engine.bundle()).
Status runTextTraining(Engine &engine, int64_t seq, const TextRun &run,
                       std::FILE *out, std::FILE *progress);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_TRAININGRUN_H
