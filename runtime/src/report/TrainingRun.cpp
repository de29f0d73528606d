//===- TrainingRun.cpp - A whole training run, data to report -------------===//

#include "gpipe/runtime/report/TrainingRun.h"
#include "gpipe/runtime/report/HtmlReport.h"
#include "gpipe/runtime/report/Profile.h"

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <unistd.h>

using namespace gpipe::runtime;

namespace {
std::atomic<int> stopSignal{0};

void recordStop(int signal) {
  int none = 0;
  if (!stopSignal.compare_exchange_strong(none, signal)) {
    // A second signal: the default action, at once.
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

/// "" or why `path` cannot be written: the file must be writable, or its
/// directory must accept a new one. `what` names the file ("the trace").
std::string checkWritable(const std::string &path, const char *what) {
  if (path.empty() || ::access(path.c_str(), W_OK) == 0)
    return {};
  if (errno == ENOENT) {
    size_t slash = path.find_last_of('/');
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    if (::access(dir.empty() ? "/" : dir.c_str(), W_OK) == 0)
      return {};
  }
  return std::string("cannot write ") + what + " to '" + path +
         "': " + std::strerror(errno);
}

/// checkWritable for a run's trace, profile, metrics and report.
template <class Run> std::string checkOutputs(const Run &run) {
  std::string error = checkWritable(run.tracePath, "the trace");
  if (error.empty())
    error = checkWritable(run.profilePath, "the profile");
  if (error.empty())
    error = checkWritable(run.metricsPath, "the metrics");
  return error.empty() ? checkWritable(run.reportPath, "the report") : error;
}

/// The run's console reporter, and its metrics file and HTML report where
/// it has them (only the process that leads writes those).
struct Reporters {
  ConsoleReporter console;
  std::unique_ptr<MetricsWriter> metrics;
  std::unique_ptr<RunReport> report;
  std::unique_ptr<RunReportRecorder> recorder;
  std::unique_ptr<ObserverList> all;
  TrainingObserver &observer() {
    return all ? static_cast<TrainingObserver &>(*all) : console;
  }
};

template <class Run>
StatusOr<std::unique_ptr<Reporters>>
makeReporters(const Engine &engine, const Run &run, std::FILE *out,
              std::FILE *progress) {
  auto reporters = std::unique_ptr<Reporters>(
      new Reporters{ConsoleReporter(out, progress, run.stop, run.logEvery),
                    nullptr, nullptr, nullptr, nullptr});
  if (!engine.leads())
    return reporters;
  std::vector<TrainingObserver *> observers{&reporters->console};
  if (!run.metricsPath.empty()) {
    StatusOr<std::unique_ptr<MetricsWriter>> metrics =
        MetricsWriter::open(run.metricsPath);
    if (!metrics.ok())
      return metrics.status();
    reporters->metrics = std::move(*metrics);
    observers.push_back(reporters->metrics.get());
  }
  if (!run.reportPath.empty()) {
    reporters->report = std::make_unique<RunReport>();
    reporters->report->title = run.title;
    reporters->report->pipeline = describePipeline(engine.bundle());
    reporters->report->idealBubble = idealBubbleText(engine.bundle());
    reporters->recorder =
        std::make_unique<RunReportRecorder>(*reporters->report);
    observers.push_back(reporters->recorder.get());
  }
  if (observers.size() > 1)
    reporters->all = std::make_unique<ObserverList>(std::move(observers));
  return reporters;
}
} // namespace

const std::atomic<int> &gpipe::runtime::stopOnSignals() {
  struct sigaction action = {};
  action.sa_handler = recordStop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  return stopSignal;
}

int gpipe::runtime::exitStatusOf(const Status &status,
                                 const std::atomic<int> &stop) {
  if (status.ok())
    return kExitOk;
  switch (status.code()) {
  case StatusCode::Cancelled:
    return stop.load() != 0 ? 128 + stop.load() : kExitInternal;
  case StatusCode::NonFinite:
    return kExitNonFinite;
  case StatusCode::Unavailable:
  case StatusCode::FailedPrecondition:
    return kExitUsage;
  case StatusCode::InvalidArgument:
  case StatusCode::NotFound:
  case StatusCode::Io:
  case StatusCode::InvalidBundle:
    return kExitBadInput;
  default:
    return kExitInternal;
  }
}

/// The pipeline, and its data-parallel replicas when there are several.
static std::string describeRun(const Engine &engine) {
  std::string text = describePipeline(engine.bundle());
  const int64_t replicas = engine.batchRows() / engine.bundle().batch;
  if (replicas > 1)
    text += ", " + std::to_string(replicas) + " data-parallel replicas";
  return text;
}

/// The device memory against the plan, then the last step's timeline; a run
/// stopped on request (`ended` Cancelled) writes them too, then says so.
/// The HTML report, where the run asked for one; without the timeline of a
/// step that did not finish (`timeline` false).
template <class Run>
static Status writeReport(const Engine &engine,
                          const std::vector<int64_t> &peak, const Run &run,
                          Reporters &reporters, std::FILE *out, bool timeline) {
  if (!reporters.report)
    return Status();
  RunReport &report = *reporters.report;
  if (timeline)
    report.lastStep = engine.timeline();
  report.memory = memoryReport(engine.bundle(), peak);
  if (Status written = writeHtmlReport(run.reportPath, report); !written.ok())
    return written;
  std::fprintf(out, "report: %s\n", run.reportPath.c_str());
  std::fflush(out);
  return Status();
}

template <class Run>
static Status finish(const Engine &engine, const std::vector<int64_t> &peak,
                     const Run &run, Reporters &reporters, std::FILE *out,
                     Status ended = Status()) {
  if (!ended.ok() && ended.code() != StatusCode::Cancelled) {
    // A diverged run's curves show how it diverged.
    if (ended.code() == StatusCode::NonFinite && engine.leads())
      if (Status written =
              writeReport(engine, peak, run, reporters, out, false);
          !written.ok())
        return written;
    return ended;
  }
  std::string check = placementLine(engine.bundle(), peak);
  if (!check.empty())
    std::fprintf(out, "%s\n", check.c_str());
  std::fflush(out);
  if (!engine.leads()) // one file each, with every device's lane
    return ended;
  if (!run.tracePath.empty()) {
    std::string error = engine.timeline().writeChromeTrace(run.tracePath);
    if (!error.empty())
      return Status(StatusCode::Io, error);
    std::fprintf(out, "timeline of the last step: %s\n", run.tracePath.c_str());
  }
  if (!run.profilePath.empty()) {
    std::string error =
        writeProfile(run.profilePath, engine.bundle(), engine.timeline());
    if (!error.empty())
      return Status(StatusCode::Io, error);
    std::fprintf(out, "profile of the last step: %s\n",
                 run.profilePath.c_str());
  }
  if (Status written = writeReport(engine, peak, run, reporters, out, true);
      !written.ok())
    return written;
  std::fflush(out);
  return ended;
}

Status gpipe::runtime::runImageTraining(Engine &engine, const ImageRun &run,
                                        std::FILE *out, std::FILE *progress) {
  if (std::string error = checkOutputs(run); !error.empty())
    return Status(StatusCode::Io, error);
  // Across processes, only the ranks whose devices read the images keep
  // their pixels; every rank keeps the labels (docs/Distributed.md).
  bool keepPixels = false;
  for (const ModelInputSpec &input : engine.bundle().inputs)
    keepPixels |=
        input.type == ElementType::F32 && engine.usesInput(input.name);
  StatusOr<ImageDataset> train =
      loadFashionMnist(run.dataDir, true, keepPixels);
  if (!train.ok())
    return train.status();
  StatusOr<ImageDataset> test =
      loadFashionMnist(run.dataDir, false, keepPixels);
  if (!test.ok())
    return test.status();
  StatusOr<ImageInputs> inputs =
      bindImageInputs(engine.bundle(), train->height * train->width);
  if (!inputs.ok())
    return inputs.status();
  std::fprintf(out, "%s: %s, %lld steps of %lld examples per epoch; %s\n",
               run.title.c_str(), describeRun(engine).c_str(),
               (long long)imageStepsPerEpoch(engine, *train, run.options),
               (long long)engine.batchRows(),
               idealBubbleText(engine.bundle()).c_str());
  std::fflush(out);
  StatusOr<std::unique_ptr<Reporters>> reporters =
      makeReporters(engine, run, out, progress);
  if (!reporters.ok())
    return reporters.status();
  std::vector<int64_t> peak;
  Status status =
      trainImageClassifier(engine, *train, *test, *inputs, run.options,
                           (*reporters)->observer(), peak);
  return finish(engine, peak, run, **reporters, out, status);
}

Status gpipe::runtime::runTextTraining(Engine &engine, int64_t seq,
                                       const TextRun &run, std::FILE *out,
                                       std::FILE *progress) {
  if (std::string error = checkOutputs(run); !error.empty())
    return Status(StatusCode::Io, error);
  StatusOr<TextCorpus> corpus = loadTextCorpus(run.corpusPath);
  if (!corpus.ok())
    return corpus.status();
  std::string error =
      checkTextFitsWindow(corpus->validation, seq,
                          "the validation text of '" + run.corpusPath + "'");
  if (!error.empty())
    return Status(StatusCode::InvalidArgument, error);
  const int64_t batch = engine.batchRows(), steps = run.options.steps;
  const double entropy = unigramEntropyNats(corpus->train);
  size_t windows = validationWindows(engine, *corpus, seq, run.options).size();
  std::fprintf(out,
               "%s: %s, %lld steps of %lld windows of %lld characters; %s\n",
               run.title.c_str(), describeRun(engine).c_str(), (long long)steps,
               (long long)batch, (long long)seq,
               idealBubbleText(engine.bundle()).c_str());
  std::fprintf(out,
               "corpus %s: %zu files, %lld documents for training (%zu "
               "characters) and %lld for validation (%zu characters), %lld "
               "bytes outside the vocabulary dropped\n",
               run.corpusPath.c_str(), corpus->files.size(),
               (long long)corpus->trainDocuments, corpus->train.size(),
               (long long)corpus->validationDocuments,
               corpus->validation.size(), (long long)corpus->droppedBytes);
  std::fprintf(out,
               "unigram entropy of the training text: %.4f nats/char (%.4f "
               "bits/char); validation loss over %zu windows (%lld "
               "characters)\n",
               entropy, entropy / M_LN2, windows,
               (long long)(int64_t(windows) * seq));
  std::fflush(out);
  StatusOr<std::unique_ptr<Reporters>> reporters =
      makeReporters(engine, run, out, progress);
  if (!reporters.ok())
    return reporters.status();
  TextRunSummary summary;
  Status status = trainCharacterModel(engine, *corpus, seq, run.options,
                                      (*reporters)->observer(), summary);
  if (!status.ok())
    return finish(engine, summary.peakMemoryBytes, run, **reporters, out,
                  status);
  double val = summary.validationLoss;
  std::fprintf(out,
               "after %lld steps (%lld characters) in %.1f s: validation loss "
               "%.4f nats/char (%.4f bits/char) vs unigram entropy %.4f "
               "nats/char (%.4f bits/char); peak memory per device [%s]\n",
               (long long)steps, (long long)(steps * batch * seq),
               summary.elapsedSeconds, val, val / M_LN2, entropy,
               entropy / M_LN2,
               formatBytesList(summary.peakMemoryBytes).c_str());
  return finish(engine, summary.peakMemoryBytes, run, **reporters, out);
}
