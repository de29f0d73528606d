//===- TrainingReport.h - The lines a training run prints -------*- C++ -*-===//
//
// The standard report of a training run, shared by gpipe-run and the
// python-free examples: a progress line with an ETA on a terminal, one line
// per epoch (images) or evaluation (text), and the memory plan against the
// measured peaks.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TRAININGREPORT_H
#define GPIPE_RUNTIME_TRAININGREPORT_H

#include "gpipe/runtime/train/Training.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace gpipe::runtime {

/// "1.5 MiB".
std::string formatBytes(int64_t bytes);
/// "1.5 MiB, 2.0 MiB".
std::string formatBytesList(const std::vector<int64_t> &bytes);

/// "memory plan: peak per device [P (arena A), ...]", or "" without a plan.
std::string memoryPlanLine(const Bundle &bundle);
/// "device memory per device, resident + arena, against the plan's arena
/// [M (planned A), ...]: the compiler's placement"; "" without a plan.
std::string placementLine(const Bundle &bundle,
                          const std::vector<int64_t> &memory);
/// "K stages, M micro-batches of R rows (remat X)"; uneven splits show the
/// row range ("22-21"); interleaving, "4 stages on 2 devices (interleaved)".
std::string describePipeline(const Bundle &bundle);
/// "ideal bubble (K-1)/(M+K-1) = 0.200", GPipe's and 1F1B's; for a bundle
/// that splits its backwards (zero bubble), "(K-1)/(3M+K-1)", the bubble of
/// ZB-H1 when forward, input-gradient and weight-gradient steps cost alike;
/// for K devices running V stages each (interleaved 1F1B), "(K-1)/(VM+K-1)".
std::string idealBubbleText(const Bundle &bundle);

/// Prints reports to `out` and, when `progress` is a terminal, a progress
/// line with an ETA there every 2 s; where `out` is not a terminal (a log
/// file, a pipe), with `logEvery` > 0, a plain line on `out` every
/// `logEvery` steps of the run:
/// "step 40/100 of epoch 1/2: loss 1.2345, lr 1.000e-03, grad norm 0.5234,
/// 1234 samples/s" (no epoch for the text loop; no norm unless measured).
class ConsoleReporter final : public TrainingObserver {
public:
  /// `stop`, when given, is polled after each step: nonzero stops the run.
  ConsoleReporter(std::FILE *out, std::FILE *progress,
                  const std::atomic<int> *stop = nullptr,
                  unsigned logEvery = 0);
  void onStep(const StepProgress &progress) override;
  void onEpoch(const EpochReport &report) override;
  void onEvaluation(const TextEvaluation &evaluation) override;
  bool stopRequested() override { return stop && stop->load() != 0; }

private:
  void clearProgress();
  std::FILE *out, *progress;
  const std::atomic<int> *stop;
  bool terminal;
  unsigned logEvery;
  std::chrono::steady_clock::time_point last;
};

/// The plain log line of a step (ConsoleReporter's, without a newline).
std::string stepLogLine(const StepProgress &progress);

/// Writes one JSON object per line: after each step
///   {"event":"step","step":S,"epoch":E,"loss":L,"lr":R,"grad_norm":G,
///    "samples_per_second":X,"bubble":B,"peak_memory_bytes":[...]}
/// (S counts the run's steps from 1; "epoch" only for images; "grad_norm"
/// null where the optimizer did not measure it), and after each evaluation
///   {"event":"eval","step":S,"epoch":E,"train_loss":L,"test_accuracy":A,
///    "samples_per_second":X,"bubble":B,"peak_memory_bytes":[...]}
/// for images, {"event":"eval","step":S,"train_loss":L,"val_loss":V,
///    "unigram_entropy":H,"chars_per_second":X,"bubble":B} for text
/// (train_loss null before the first step). Each line is flushed.
class MetricsWriter final : public TrainingObserver {
public:
  /// Opens (truncates) `path`; Io naming the path when it cannot.
  static StatusOr<std::unique_ptr<MetricsWriter>> open(const std::string &path);
  ~MetricsWriter() override;
  void onStep(const StepProgress &progress) override;
  void onEpoch(const EpochReport &report) override;
  void onEvaluation(const TextEvaluation &evaluation) override;

private:
  explicit MetricsWriter(std::FILE *file) : file(file) {}
  void write(const std::string &line);
  std::FILE *file;
  int64_t runStep = 0; ///< the last step's, for the epochs' lines
};

/// Hands every report to each observer in turn; stops when any asks.
class ObserverList final : public TrainingObserver {
public:
  explicit ObserverList(std::vector<TrainingObserver *> observers)
      : observers(std::move(observers)) {}
  void onStep(const StepProgress &progress) override;
  void onEpoch(const EpochReport &report) override;
  void onEvaluation(const TextEvaluation &evaluation) override;
  bool stopRequested() override;

private:
  std::vector<TrainingObserver *> observers;
};

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_TRAININGREPORT_H
