//===- TrainingReport.cpp - The lines a training run prints ---------------===//

#include "gpipe/runtime/TrainingReport.h"
#include "gpipe/runtime/BundleReader.h"

#include <cmath>
#include <cstdarg>
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
                                 const std::atomic<int> *stop)
    : out(out), progress(progress), stop(stop),
      terminal(progress && isatty(fileno(progress))),
      last(std::chrono::steady_clock::now()) {}

void ConsoleReporter::clearProgress() {
  if (terminal)
    std::fputs("\r\033[K", progress);
}

void ConsoleReporter::onStep(const StepProgress &p) {
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
  std::fprintf(out,
               "epoch %u/%u: train loss %.4f, test accuracy %.2f%%, %.0f "
               "samples/s, bubble %.3f, peak memory per device [%s]\n",
               r.epoch, r.epochs, r.trainLoss, 100.0 * r.testAccuracy,
               r.samplesPerSecond, r.bubble,
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
