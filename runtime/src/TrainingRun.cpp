//===- TrainingRun.cpp - A whole training run, data to report -------------===//

#include "gpipe/runtime/TrainingRun.h"

#include <cmath>

using namespace gpipe::runtime;

/// The device memory against the plan, then the last step's timeline.
static Status finish(const Engine &engine, const std::vector<int64_t> &peak,
                     const std::string &tracePath, std::FILE *out) {
  std::string check = placementLine(engine.bundle(), peak);
  if (!check.empty())
    std::fprintf(out, "%s\n", check.c_str());
  std::fflush(out);
  if (tracePath.empty())
    return Status();
  std::string error = engine.timeline().writeChromeTrace(tracePath);
  if (!error.empty())
    return Status(StatusCode::Io, error);
  std::fprintf(out, "timeline of the last step: %s\n", tracePath.c_str());
  return Status();
}

Status gpipe::runtime::runImageTraining(Engine &engine, const ImageRun &run,
                                        std::FILE *out, std::FILE *progress) {
  StatusOr<ImageDataset> train = loadFashionMnist(run.dataDir, true);
  if (!train.ok())
    return train.status();
  StatusOr<ImageDataset> test = loadFashionMnist(run.dataDir, false);
  if (!test.ok())
    return test.status();
  StatusOr<ImageInputs> inputs =
      bindImageInputs(engine.bundle(), train->height * train->width);
  if (!inputs.ok())
    return inputs.status();
  std::fprintf(out,
               "%s: %s, %lld steps of %lld examples per epoch; ideal bubble "
               "(K-1)/(M+K-1) = %.3f\n",
               run.title.c_str(), describePipeline(engine.bundle()).c_str(),
               (long long)imageStepsPerEpoch(engine, *train, run.options),
               (long long)engine.bundle().batch, idealBubble(engine.bundle()));
  std::fflush(out);
  ConsoleReporter reporter(out, progress);
  std::vector<int64_t> peak;
  Status status = trainImageClassifier(engine, *train, *test, *inputs,
                                       run.options, reporter, peak);
  return status.ok() ? finish(engine, peak, run.tracePath, out) : status;
}

Status gpipe::runtime::runTextTraining(Engine &engine, int64_t seq,
                                       const TextRun &run, std::FILE *out,
                                       std::FILE *progress) {
  StatusOr<TextCorpus> corpus = loadTextCorpus(run.corpusPath);
  if (!corpus.ok())
    return corpus.status();
  std::string error =
      checkTextFitsWindow(corpus->validation, seq,
                          "the validation text of '" + run.corpusPath + "'");
  if (!error.empty())
    return Status(StatusCode::InvalidArgument, error);
  const int64_t batch = engine.bundle().batch, steps = run.options.steps;
  const double entropy = unigramEntropyNats(corpus->train);
  size_t windows = validationWindows(engine, *corpus, seq, run.options).size();
  std::fprintf(out,
               "%s: %s, %lld steps of %lld windows of %lld characters; ideal "
               "bubble (K-1)/(M+K-1) = %.3f\n",
               run.title.c_str(), describePipeline(engine.bundle()).c_str(),
               (long long)steps, (long long)batch, (long long)seq,
               idealBubble(engine.bundle()));
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
  ConsoleReporter reporter(out, progress);
  TextRunSummary summary;
  Status status =
      trainCharacterModel(engine, *corpus, seq, run.options, reporter, summary);
  if (!status.ok())
    return status;
  double val = summary.validationLoss;
  std::fprintf(out,
               "after %lld steps (%lld characters) in %.1f s: validation loss "
               "%.4f nats/char (%.4f bits/char) vs unigram entropy %.4f "
               "nats/char (%.4f bits/char); peak memory per device [%s]\n",
               (long long)steps, (long long)(steps * batch * seq),
               summary.elapsedSeconds, val, val / M_LN2, entropy,
               entropy / M_LN2,
               formatBytesList(summary.peakMemoryBytes).c_str());
  return finish(engine, summary.peakMemoryBytes, run.tracePath, out);
}
