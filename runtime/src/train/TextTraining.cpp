//===- TextTraining.cpp - Steps of a character language model ------------===//

#include "gpipe/runtime/train/Training.h"

#include "train/TrainingCheckpoints.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>

using namespace gpipe::runtime;

namespace {

/// A character model's inputs: its ids (`ids`, or Hugging Face's
/// `input_ids`), `targets`, and `positions` where it reads them (an
/// imported model computes its own).
struct TextInputs {
  std::string ids = "ids";
  bool positions = true;
};

const ModelInputSpec *inputNamed(const Bundle &bundle,
                                 const std::string &name) {
  auto it = std::find_if(
      bundle.inputs.begin(), bundle.inputs.end(),
      [&](const ModelInputSpec &input) { return input.name == name; });
  return it == bundle.inputs.end() ? nullptr : &*it;
}

TextInputs textInputsOf(const Bundle &bundle) {
  TextInputs inputs;
  if (!inputNamed(bundle, "ids") && inputNamed(bundle, "input_ids"))
    inputs.ids = "input_ids";
  inputs.positions = inputNamed(bundle, "positions") != nullptr;
  return inputs;
}

} // namespace

StatusOr<int64_t> gpipe::runtime::characterModelWindow(const Bundle &bundle) {
  const TextInputs names = textInputsOf(bundle);
  std::vector<std::string> wanted = {names.ids, "targets"};
  if (names.positions)
    wanted.push_back("positions");
  std::vector<int64_t> shape;
  bool match = bundle.inputs.size() == wanted.size();
  for (const std::string &name : wanted) {
    const ModelInputSpec *input = inputNamed(bundle, name);
    if (!input || input->type != ElementType::I32 ||
        input->shape.size() != 2 || (!shape.empty() && input->shape != shape)) {
      match = false;
      break;
    }
    shape = input->shape;
  }
  if (match)
    return shape[1];
  return Status(StatusCode::InvalidArgument,
                "the model's inputs do not match a character language model: "
                "expected i32 inputs ids (or input_ids), targets and, where "
                "the model reads them, positions, of one shape [batch, seq], "
                "found " +
                    describeModelInputs(bundle));
}

/// The loop state's fields, with the warmup where there is one (a run
/// without keeps the checkpoints of before).
static nlohmann::json withWarmup(nlohmann::json fields, int64_t warmup) {
  if (warmup > 0)
    fields["warmup_steps"] = warmup;
  return fields;
}

static Batch textBatch(const Bundle &bundle, TextWindows windows) {
  const TextInputs names = textInputsOf(bundle);
  std::vector<int64_t> shape = {windows.rows, windows.seq};
  Batch batch;
  batch[names.ids] = HostTensor::ints(shape, std::move(windows.ids));
  if (names.positions)
    batch["positions"] = HostTensor::ints(shape, std::move(windows.positions));
  batch["targets"] = HostTensor::ints(shape, std::move(windows.targets));
  return batch;
}

std::vector<int64_t>
gpipe::runtime::validationWindows(const Engine &engine,
                                  const TextCorpus &corpus, int64_t seq,
                                  const TextTrainingOptions &options) {
  return evenlySpacedWindows(sequentialWindowCount(corpus.validation, seq),
                             int64_t(options.evalBatches) * engine.batchRows());
}

/// The mean next-character loss (nats) over `windows` of the validation
/// text, in batches of at most the engine's batch.
static StatusOr<double> validationLoss(Engine &engine,
                                       const std::vector<int32_t> &validation,
                                       int64_t seq,
                                       const std::vector<int64_t> &windows) {
  int64_t batch = engine.batchRows();
  double sum = 0;
  for (size_t first = 0; first < windows.size(); first += batch) {
    size_t last = std::min(windows.size(), first + batch);
    std::vector<int64_t> part(windows.begin() + first, windows.begin() + last);
    int64_t rows = int64_t(part.size());
    EvalResult result = engine.evaluate(
        textBatch(engine.bundle(), sequentialWindows(validation, seq, part)),
        rows);
    if (!result.ok())
      return Status(result.nonFinite ? StatusCode::NonFinite
                                     : StatusCode::DeviceFailure,
                    result.error);
    sum += result.loss * double(rows);
  }
  return sum / double(windows.size());
}

Status gpipe::runtime::trainCharacterModel(Engine &engine,
                                           const TextCorpus &corpus,
                                           int64_t seq,
                                           const TextTrainingOptions &options,
                                           TrainingObserver &observer,
                                           TextRunSummary &summary) {
  if (Status status = checkOptions(options); !status.ok())
    return status;
  using Clock = std::chrono::steady_clock;
  std::string error =
      checkTextFitsWindow(corpus.validation, seq, "the validation text");
  if (!error.empty())
    return Status(StatusCode::InvalidArgument, error);
  std::unique_ptr<TextSampler> sampler =
      TextSampler::create(corpus.train, seq, options.seed, error);
  if (!sampler)
    return Status(StatusCode::InvalidArgument, error);
  const int64_t batch = engine.batchRows();
  const int64_t steps = options.steps;
  summary.unigramEntropy = unigramEntropyNats(corpus.train);
  summary.peakMemoryBytes.assign(engine.numDevices(), 0);
  std::vector<int64_t> windows =
      validationWindows(engine, corpus, seq, options);
  // What fixes the windows drawn and the schedule: a checkpoint resumes only
  // a run with the same.
  const std::string loopState =
      detail::loopStateOf(withWarmup(nlohmann::json{{"loop", "text"},
                                                    {"seed", options.seed},
                                                    {"steps", steps}},
                                     options.warmupSteps),
                          options.learningRate, options.schedule);
  const CheckpointOptions &checkpoints = options.checkpoints;
  StatusOr<int64_t> resumed =
      detail::resumeTraining(engine, checkpoints, loopState, steps);
  if (!resumed.ok())
    return resumed.status();
  const int64_t resumeAt = *resumed;
  // The windows the steps before drew: the uninterrupted run's sequence.
  for (int64_t step = 0; step < resumeAt; ++step)
    (void)sampler->next(batch);

  const Clock::time_point start = Clock::now();
  double trainSeconds = 0, lossSum = 0, bubbleSum = 0;
  int64_t lossSteps = 0;
  auto evaluate = [&](int64_t step) -> Status {
    StatusOr<double> loss =
        validationLoss(engine, corpus.validation, seq, windows);
    if (!loss.ok())
      return loss.status();
    summary.validationLoss = *loss;
    TextEvaluation report;
    report.step = step;
    report.steps = steps;
    if (lossSteps)
      report.trainLoss = lossSum / double(lossSteps);
    report.validationLoss = *loss;
    report.unigramEntropy = summary.unigramEntropy;
    report.charsPerSecond =
        trainSeconds > 0
            ? double((step - resumeAt) * batch * seq) / trainSeconds
            : 0.0;
    report.bubble = lossSteps ? bubbleSum / double(lossSteps) : 0.0;
    report.elapsedSeconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    observer.onEvaluation(report);
    lossSum = bubbleSum = 0;
    lossSteps = 0;
    return Status();
  };

  if (options.evalEvery > 0 && resumeAt == 0) {
    Status status = evaluate(0);
    if (!status.ok())
      return status;
  }
  for (int64_t step = resumeAt; step < steps; ++step) {
    const float rate =
        scheduledLearningRate(options.learningRate, options.schedule, step,
                              steps, options.warmupSteps);
    engine.setLearningRate(rate);
    Batch data = textBatch(engine.bundle(), sampler->next(batch));
    const Clock::time_point stepStart = Clock::now();
    StepResult result = engine.trainStep(data);
    if (!result.ok())
      return stepFailure(result);
    const double stepSeconds =
        std::chrono::duration<double>(Clock::now() - stepStart).count();
    trainSeconds += stepSeconds;
    lossSum += result.loss;
    const double bubble = engine.timeline().bubbleFraction();
    bubbleSum += bubble;
    ++lossSteps;
    std::vector<int64_t> peak = engine.peakMemoryBytes();
    for (size_t d = 0; d < peak.size(); ++d)
      summary.peakMemoryBytes[d] =
          std::max(summary.peakMemoryBytes[d], peak[d]);
    double elapsed =
        std::chrono::duration<double>(Clock::now() - start).count();
    StepProgress progress;
    progress.step = progress.runStep = step + 1;
    progress.steps = steps;
    progress.meanLoss = lossSum / double(lossSteps);
    progress.elapsedSeconds = elapsed;
    progress.etaSeconds =
        elapsed / double(step + 1 - resumeAt) * double(steps - step - 1);
    progress.loss = result.loss;
    progress.learningRate = rate;
    progress.gradientNorm = result.gradientNorm;
    progress.samplesPerSecond =
        stepSeconds > 0 ? double(batch) / stepSeconds : 0;
    progress.bubble = bubble;
    progress.peakMemoryBytes = summary.peakMemoryBytes;
    observer.onStep(progress);
    const bool stop = observer.stopRequested();
    if (Status status = detail::saveIfDue(engine, checkpoints, loopState,
                                          step + 1, stop || step + 1 == steps);
        !status.ok())
      return status;
    if (stop) {
      summary.elapsedSeconds = elapsed;
      return Status(StatusCode::Cancelled, "stopped on request after step " +
                                               std::to_string(step + 1) +
                                               " of " + std::to_string(steps) +
                                               "; the timeline is that step's");
    }
    bool last = step + 1 == steps;
    if ((options.evalEvery > 0 && (step + 1) % options.evalEvery == 0) ||
        (last && lossSteps > 0)) {
      Status status = evaluate(step + 1);
      if (!status.ok())
        return status;
    }
  }
  summary.elapsedSeconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  return Status();
}
