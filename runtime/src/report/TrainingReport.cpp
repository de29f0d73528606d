//===- TrainingReport.cpp - The lines a training run prints ---------------===//

#include "gpipe/runtime/report/TrainingReport.h"
#include "gpipe/runtime/bundle/BundleReader.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <iterator>
#include <unistd.h>

using namespace gpipe::runtime;

static std::string format(const char *pattern, ...)
    __attribute__((format(printf, 1, 2)));
static std::string format(const char *pattern, ...) {
  char buffer[512];
  va_list args;
  va_start(args, pattern);
  vsnprintf(buffer, sizeof(buffer), pattern, args);
  va_end(args);
  return buffer;
}

std::string gpipe::runtime::formatBytes(int64_t bytes) {
  double value = double(bytes);
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  for (; value >= 1024.0 && unit + 1 < std::size(units); ++unit)
    value /= 1024.0;
  return format("%.1f %s", value, units[unit]);
}

std::string gpipe::runtime::formatBytesList(const std::vector<int64_t> &bytes) {
  std::string text;
  for (size_t d = 0; d < bytes.size(); ++d)
    text += (d ? ", " : "") + formatBytes(bytes[d]);
  return text;
}

std::string gpipe::runtime::memoryPlanLine(const Bundle &bundle) {
  const MemoryPlan &plan = bundle.memoryPlan;
  if (plan.devices.empty())
    return {};
  std::string devices;
  for (size_t d = 0; d < plan.devices.size(); ++d)
    devices += (d ? ", " : "") + formatBytes(plan.devices[d].peakBytes) +
               " (arena " + formatBytes(plan.devices[d].arenaBytes) + ")";
  return "memory plan: peak per device [" + devices + "]";
}

std::string gpipe::runtime::placementLine(const Bundle &bundle,
                                          const std::vector<int64_t> &memory) {
  const MemoryPlan &plan = bundle.memoryPlan;
  if (plan.devices.size() != memory.size())
    return {};
  std::string devices;
  for (size_t d = 0; d < memory.size(); ++d)
    devices += (d ? ", " : "") + formatBytes(memory[d]) + " (planned " +
               formatBytes(plan.devices[d].arenaBytes) + ")";
  return "device memory per device, resident + arena, against the plan's "
         "arena [" +
         devices + "]: the compiler's placement";
}

std::string gpipe::runtime::describePipeline(const Bundle &bundle) {
  const std::vector<int64_t> &rows = bundle.microbatchRows;
  // Uneven splits differ by one row: the first micro-batches take the extra.
  std::string sizes = std::to_string(rows.front());
  if (rows.back() != rows.front())
    sizes += "-" + std::to_string(rows.back());
  std::string stages = std::to_string(bundle.stages.size()) + " stages";
  if (bundle.stagesPerDevice() > 1)
    stages +=
        " on " + std::to_string(bundle.numDevices()) + " devices (interleaved)";
  return format("%s, %zu micro-batches of %s rows (remat %s)", stages.c_str(),
                rows.size(), sizes.c_str(), rematPolicyName(bundle.remat));
}

std::string gpipe::runtime::idealBubbleText(const Bundle &bundle) {
  double k = double(bundle.numDevices());
  double m = double(bundle.microbatchRows.size());
  if (bundle.stagesPerDevice() > 1)
    return format("ideal bubble (K-1)/(VM+K-1) = %.3f",
                  (k - 1) / (bundle.stagesPerDevice() * m + k - 1));
  bool split = false;
  for (const std::vector<Instr> &program : bundle.programs)
    for (const Instr &instr : program)
      split |= instr.kind == InstrKind::BackwardWeights;
  if (split)
    return format("ideal bubble (K-1)/(3M+K-1) = %.3f",
                  (k - 1) / (3 * m + k - 1));
  return format("ideal bubble (K-1)/(M+K-1) = %.3f", (k - 1) / (m + k - 1));
}

ConsoleReporter::ConsoleReporter(std::FILE *out, std::FILE *progress,
                                 const std::atomic<int> *stop,
                                 unsigned logEvery)
    : out(out), progress(progress), stop(stop),
      terminal(progress && isatty(fileno(progress))), logEvery(logEvery),
      last(std::chrono::steady_clock::now()) {}

std::string gpipe::runtime::stepLogLine(const StepProgress &p) {
  std::string line =
      format("step %lld/%lld", (long long)p.step, (long long)p.steps);
  if (p.epochs)
    line += format(" of epoch %u/%u", p.epoch, p.epochs);
  line += format(": loss %.4f, lr %.3e", p.loss, double(p.learningRate));
  if (p.gradientNorm)
    line += format(", grad norm %.4f", *p.gradientNorm);
  return line + format(", %.0f samples/s", p.samplesPerSecond);
}

void ConsoleReporter::clearProgress() {
  if (terminal)
    std::fputs("\r\033[K", progress);
}

void ConsoleReporter::onStep(const StepProgress &p) {
  // Plain lines where `out` is a file or a pipe (a log), whatever stderr is.
  if (logEvery > 0 && p.runStep % logEvery == 0 && !isatty(fileno(out))) {
    std::fprintf(out, "%s\n", stepLogLine(p).c_str());
    std::fflush(out);
  }
  auto now = std::chrono::steady_clock::now();
  if (!terminal || now - last < std::chrono::seconds(2))
    return;
  last = now;
  std::string epoch =
      p.epochs ? format("epoch %u/%u: ", p.epoch, p.epochs) : std::string();
  std::fprintf(progress,
               "\r  %sstep %lld/%lld, loss %.4f, %.0f s elapsed, ETA %.0f s   ",
               epoch.c_str(), (long long)p.step, (long long)p.steps, p.meanLoss,
               p.elapsedSeconds, p.etaSeconds);
  std::fflush(progress);
}

void ConsoleReporter::onEpoch(const EpochReport &r) {
  clearProgress();
  // A bounded evaluation says so: its accuracy is not the test set's.
  std::string share;
  if (r.testExamples < r.testSetExamples)
    share = " (first " + std::to_string(r.testExamples) + " of " +
            std::to_string(r.testSetExamples) + " test examples)";
  std::fprintf(out,
               "epoch %u/%u: train loss %.4f, test accuracy %.2f%%%s, %.0f "
               "samples/s, bubble %.3f, peak memory per device [%s]\n",
               r.epoch, r.epochs, r.trainLoss, 100.0 * r.testAccuracy,
               share.c_str(), r.samplesPerSecond, r.bubble,
               formatBytesList(r.peakMemoryBytes).c_str());
  std::fflush(out);
}

void ConsoleReporter::onEvaluation(const TextEvaluation &e) {
  clearProgress();
  std::string train =
      e.trainLoss ? format("%.4f", *e.trainLoss) : std::string("-");
  std::fprintf(out,
               "step %lld/%lld: train loss %s, val loss %.4f nats/char (%.4f "
               "bits/char, %.3f x unigram entropy), %.0f chars/s, bubble "
               "%.3f, %.1f s\n",
               (long long)e.step, (long long)e.steps, train.c_str(),
               e.validationLoss, e.validationLoss / M_LN2,
               e.validationLoss / e.unigramEntropy, e.charsPerSecond, e.bubble,
               e.elapsedSeconds);
  std::fflush(out);
}

//===----------------------------------------------------------------------===//
// The metrics file
//===----------------------------------------------------------------------===//

StatusOr<std::unique_ptr<MetricsWriter>>
MetricsWriter::open(const std::string &path) {
  std::FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    return Status(StatusCode::Io, "cannot write the metrics to '" + path +
                                      "': " + std::strerror(errno));
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(file));
}

MetricsWriter::~MetricsWriter() { std::fclose(file); }

void MetricsWriter::write(const std::string &line) {
  std::fprintf(file, "%s\n", line.c_str());
  std::fflush(file);
}

/// A number, or null where it is not finite (JSON has no nan).
static nlohmann::json number(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
}

void MetricsWriter::onStep(const StepProgress &p) {
  runStep = p.runStep;
  nlohmann::ordered_json line{{"event", "step"}, {"step", p.runStep}};
  if (p.epochs)
    line["epoch"] = p.epoch;
  line["loss"] = number(p.loss);
  line["lr"] = number(p.learningRate);
  line["grad_norm"] = p.gradientNorm ? number(*p.gradientNorm) : nullptr;
  line["samples_per_second"] = number(p.samplesPerSecond);
  line["bubble"] = number(p.bubble);
  line["peak_memory_bytes"] = p.peakMemoryBytes;
  write(line.dump());
}

void MetricsWriter::onEpoch(const EpochReport &r) {
  nlohmann::ordered_json line{
      {"event", "eval"},
      {"step", runStep},
      {"epoch", r.epoch},
      {"train_loss", number(r.trainLoss)},
      {"test_accuracy", number(r.testAccuracy)},
      {"test_examples", r.testExamples},
      {"samples_per_second", number(r.samplesPerSecond)},
      {"bubble", number(r.bubble)},
      {"peak_memory_bytes", r.peakMemoryBytes}};
  write(line.dump());
}

void MetricsWriter::onEvaluation(const TextEvaluation &e) {
  nlohmann::ordered_json line{
      {"event", "eval"},
      {"step", e.step},
      {"train_loss", e.trainLoss ? number(*e.trainLoss) : nullptr},
      {"val_loss", number(e.validationLoss)},
      {"unigram_entropy", number(e.unigramEntropy)},
      {"chars_per_second", number(e.charsPerSecond)},
      {"bubble", number(e.bubble)}};
  write(line.dump());
}

void ObserverList::onStep(const StepProgress &progress) {
  for (TrainingObserver *observer : observers)
    observer->onStep(progress);
}

void ObserverList::onEpoch(const EpochReport &report) {
  for (TrainingObserver *observer : observers)
    observer->onEpoch(report);
}

void ObserverList::onEvaluation(const TextEvaluation &evaluation) {
  for (TrainingObserver *observer : observers)
    observer->onEvaluation(evaluation);
}

bool ObserverList::stopRequested() {
  bool stop = false;
  for (TrainingObserver *observer : observers)
    stop |= observer->stopRequested();
  return stop;
}
