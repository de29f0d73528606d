//===- Training.h - The training loops every front end shares ---*- C++ -*-===//
//
// The two ways gpipe trains a bundle on real data, whatever runs it (an
// Engine: CPU devices, CUDA, the host emulation), written once for gpipe-run,
// the C API and applications:
//   - image classification (Fashion-MNIST or any IDX set): epochs over a
//     shuffled training set, test accuracy after each;
//   - a character language model on a text corpus: steps of random windows,
//     validation loss every few steps against the corpus's unigram entropy.
// A loop reports through a TrainingObserver and prints nothing.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TRAINING_H
#define GPIPE_RUNTIME_TRAINING_H

#include "gpipe/runtime/data/Dataset.h"
#include "gpipe/runtime/exec/Engine.h"
#include "gpipe/runtime/base/Status.h"
#include "gpipe/runtime/data/TextCorpus.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpipe::runtime {

enum class LearningRateSchedule { Constant, Cosine };

/// The learning rate of step `step` (from 0) of `total`: first a linear
/// warmup over `warmup` steps, peak (step + 1) / warmup, so that step
/// warmup - 1 reaches the peak; then `peak` throughout, or a cosine decay
/// from `peak` to 0 over the remaining total - warmup steps.
float scheduledLearningRate(float peak, LearningRateSchedule schedule,
                            int64_t step, int64_t total, int64_t warmup = 0);

/// Where a run is, for a progress line with an ETA, and what its last step
/// measured, for a log line or the metrics file.
struct StepProgress {
  unsigned epoch = 0, epochs = 0; ///< 0 for the text loop
  int64_t step = 0, steps = 0;    ///< done, and in the epoch or the run
  double meanLoss = 0;            ///< since the last report
  double elapsedSeconds = 0;      ///< since the run started
  double etaSeconds = 0;          ///< to the end of the run, at this pace
  int64_t runStep = 0;            ///< steps done in the whole run
  double loss = 0;                ///< of this step
  float learningRate = 0;         ///< this step's
  /// The global gradient norm before clipping (StepResult::gradientNorm),
  /// when the optimizer measured it.
  std::optional<double> gradientNorm;
  double samplesPerSecond = 0; ///< examples (images, windows) of this step
  double bubble = 0;           ///< this step's measured bubble fraction
  std::vector<int64_t> peakMemoryBytes; ///< per device, so far
};

struct EpochReport {
  unsigned epoch = 0, epochs = 0;
  int64_t steps = 0;
  double trainLoss = 0, testAccuracy = 0, samplesPerSecond = 0, bubble = 0;
  std::vector<int64_t> peakMemoryBytes; ///< per device, so far
  /// The test examples the accuracy counts, of the test set's.
  int64_t testExamples = 0, testSetExamples = 0;
};

struct TextEvaluation {
  int64_t step = 0, steps = 0;
  std::optional<double> trainLoss; ///< mean since the last evaluation
  double validationLoss = 0;       ///< nats per character
  double unigramEntropy = 0;       ///< nats per character
  double charsPerSecond = 0, bubble = 0, elapsedSeconds = 0;
};

class TrainingObserver {
public:
  virtual ~TrainingObserver() = default;
  /// After every step.
  virtual void onStep(const StepProgress &) {}
  virtual void onEpoch(const EpochReport &) {}
  virtual void onEvaluation(const TextEvaluation &) {}
  /// Asked after every step: true stops the run there, with Cancelled.
  virtual bool stopRequested() { return false; }
};

//===-- image classification
//------------------------------------------------===//

/// "ids [32x32] i32, positions [32x32] i32, ...": the model's inputs, for
/// messages that say what was found.
std::string describeModelInputs(const Bundle &bundle);

/// The model inputs that take the images and the labels.
struct ImageInputs {
  std::string images, labels;
};

/// An f32 input of `pixels` values per example and an i32 label input of
/// shape [batch], and nothing else; InvalidArgument naming what was found.
StatusOr<ImageInputs> bindImageInputs(const Bundle &bundle, int64_t pixels);

/// Checkpoints of a training loop (Checkpoint.h). A loop resumes from the
/// engine's stepsDone(): after loading `resumeFrom` it replays the data order
/// up to there (the shuffles of the epochs before, the windows drawn), so a
/// resumed run continues bit for bit as the uninterrupted one.
struct CheckpointOptions {
  std::string saveDir;    ///< "" saves nothing
  int64_t saveEvery = 0;  ///< steps between saves; 0: only at the end
  unsigned keep = 0;      ///< checkpoints kept; 0: all
  std::string resumeFrom; ///< a checkpoint or a save directory; "" starts anew
};

struct ImageTrainingOptions {
  unsigned epochs = 10;
  int64_t maxStepsPerEpoch = 0; ///< 0: the whole training set
  float learningRate = 1e-3f;
  LearningRateSchedule schedule = LearningRateSchedule::Cosine;
  int64_t warmupSteps = 0; ///< linear warmup before the schedule
  uint64_t shuffleSeed = 1;
  CheckpointOptions checkpoints;
  /// Batches of the test set, from its start, that each epoch's accuracy
  /// reads; 0: the whole test set.
  int64_t testBatches = 0;
};

/// InvalidArgument naming the option that cannot train: a learning rate
/// that is not finite and positive (nan, inf and -1 would train to a loss of
/// nan or away from the minimum), no epochs, negative warmup steps.
Status checkOptions(const ImageTrainingOptions &options);

/// Steps per epoch for `options` on `train` with the engine's batch.
int64_t imageStepsPerEpoch(const Engine &engine, const ImageDataset &train,
                           const ImageTrainingOptions &options);

/// The share of `test` whose largest logit is the label, in batches of the
/// engine's batch: of its first `maxBatches` batches (0: of all of it).
StatusOr<double> testAccuracy(Engine &engine, const ImageDataset &test,
                              const ImageInputs &inputs,
                              int64_t maxBatches = 0);

/// The test examples that `maxBatches` batches of the engine's read.
int64_t testExamplesRead(const Engine &engine, const ImageDataset &test,
                         int64_t maxBatches);

/// "" or why `warmupSteps` cannot start a run of `totalSteps` steps: negative,
/// or every step of the run (the schedule would never reach its peak).
std::string checkWarmup(int64_t warmupSteps, int64_t totalSteps);

/// The Status of a failed step: NonFinite for the optimizer's guard
/// (StepResult::nonFinite), else DeviceFailure.
Status stepFailure(const StepResult &result);

/// Trains epoch after epoch; stops at the first failed step or evaluation.
/// `peakMemoryBytes` gets each device's high-water mark over the run.
Status trainImageClassifier(Engine &engine, const ImageDataset &train,
                            const ImageDataset &test, const ImageInputs &inputs,
                            const ImageTrainingOptions &options,
                            TrainingObserver &observer,
                            std::vector<int64_t> &peakMemoryBytes);

//===-- character language model
//--------------------------------------------===//

/// The window length of a character language model: i32 inputs ids,
/// positions and targets of one shape [batch, seq]; InvalidArgument naming
/// what was found.
StatusOr<int64_t> characterModelWindow(const Bundle &bundle);

struct TextTrainingOptions {
  int64_t steps = 1000;
  unsigned evalEvery = 100; ///< 0: only at the end
  unsigned evalBatches = 8; ///< validation batches per evaluation; 0: all
  float learningRate = 1e-3f;
  LearningRateSchedule schedule = LearningRateSchedule::Cosine;
  int64_t warmupSteps = 0; ///< linear warmup before the schedule
  uint64_t seed = 1;
  CheckpointOptions checkpoints;
};

/// As for images: a learning rate that is not finite and positive, no steps,
/// negative warmup steps or as many as the run's steps.
Status checkOptions(const TextTrainingOptions &options);

/// The validation windows an evaluation reads.
std::vector<int64_t> validationWindows(const Engine &engine,
                                       const TextCorpus &corpus, int64_t seq,
                                       const TextTrainingOptions &options);

struct TextRunSummary {
  double validationLoss = 0, unigramEntropy = 0, elapsedSeconds = 0;
  std::vector<int64_t> peakMemoryBytes;
};

/// Trains for options.steps steps, evaluating before the first, every
/// evalEvery steps and after the last.
Status trainCharacterModel(Engine &engine, const TextCorpus &corpus,
                           int64_t seq, const TextTrainingOptions &options,
                           TrainingObserver &observer, TextRunSummary &summary);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_TRAINING_H
