//===- HtmlReport.h - A training run as one self-contained page -*- C++ -*-===//
//
// The picture of a run: loss, accuracy and learning-rate curves over its
// steps, the last step's timeline per device as a Gantt chart, and each
// device's planned memory against the measured. One HTML file with inline
// SVG and CSS: no script, nothing fetched, so it opens anywhere and can be
// mailed. gpipe-run --report writes it from the run it trains (a
// RunReportRecorder observing it); gpipe-report --html from the files a run
// left (--metrics, --trace, --bundle).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_HTMLREPORT_H
#define GPIPE_RUNTIME_HTMLREPORT_H

#include "gpipe/runtime/base/Status.h"
#include "gpipe/runtime/exec/Timeline.h"
#include "gpipe/runtime/train/Training.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpipe::runtime {

struct Bundle;

/// A value at a step of the run (steps count from 1 over the whole run).
struct RunPoint {
  int64_t step = 0;
  double value = 0;
};

/// One device's memory: the compiler's plan and what the run measured.
struct DeviceMemoryReport {
  bool planned = false;             ///< the bundle had a memory plan
  int64_t plannedResidentBytes = 0; ///< parameters, gradients, slots
  /// The device's whole static arena, the resident bytes included.
  int64_t plannedArenaBytes = 0;
  int64_t plannedPeakBytes = 0;         ///< live bytes at the arena's fullest
  std::optional<int64_t> measuredBytes; ///< resident + arena, high-water
};

struct RunReport {
  std::string title;    ///< "gpipe-run: mlp.mlir"
  std::string pipeline; ///< "2 stages, 4 micro-batches of 16 rows (remat full)"
  std::string idealBubble; ///< "ideal bubble (K-1)/(M+K-1) = 0.200"
  std::vector<RunPoint> loss, learningRate, gradientNorm, samplesPerSecond,
      bubble;
  /// Evaluations: the mean training loss since the last one, the validation
  /// loss (text) and the test accuracy (images).
  std::vector<RunPoint> evalTrainLoss, validationLoss, testAccuracy;
  std::optional<double> unigramEntropy; ///< text: the loss of no context
  Timeline lastStep{0};                 ///< empty: none recorded
  std::vector<DeviceMemoryReport> memory;
};

/// The plan's memory per device, with `measured` (one per device, or empty).
std::vector<DeviceMemoryReport>
memoryReport(const Bundle &bundle, const std::vector<int64_t> &measured);

/// The page.
std::string renderHtmlReport(const RunReport &report);

/// Writes renderHtmlReport(report) to `path`; Io naming the path when it
/// cannot.
Status writeHtmlReport(const std::string &path, const RunReport &report);

/// Fills a RunReport's curves from the steps and evaluations it observes.
class RunReportRecorder final : public TrainingObserver {
public:
  explicit RunReportRecorder(RunReport &report) : report(report) {}
  void onStep(const StepProgress &progress) override;
  void onEpoch(const EpochReport &report) override;
  void onEvaluation(const TextEvaluation &evaluation) override;

private:
  RunReport &report;
  int64_t runStep = 0; ///< the last step's, for the epochs
};

/// The largest metrics file or trace readMetricsFile and readChromeTrace
/// read, 1 GiB: some five million steps of metrics lines. A FIFO, a device or
/// a directory in its place is refused as well, before it is read.
constexpr uint64_t kMaxRunReportFileBytes = uint64_t(1) << 30;

/// Adds a metrics file's lines (MetricsWriter's JSON lines) to `report`'s
/// curves and takes the last step's peak memory as measured; InvalidArgument
/// naming the file and line for a line that is not such an object.
Status readMetricsFile(const std::string &path, RunReport &report);

/// The timeline of a Chrome trace that Timeline::writeChromeTrace wrote;
/// InvalidArgument naming the file for anything else.
StatusOr<Timeline> readChromeTrace(const std::string &path);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_HTMLREPORT_H
