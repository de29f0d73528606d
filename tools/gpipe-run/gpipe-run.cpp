//===- gpipe-run.cpp - Compile a model and train it with GPipe on the CPU -===//
//
//   gpipe-run MODEL.mlir --stages K --microbatches M [--epochs N] ...
//
// Compiles the model (gpipe-compile), writes it as a program bundle, loads the
// bundle into the runtime with K CPU devices and trains it on a real data set
// chosen by the model's inputs (or --dataset):
// - an image input of 784 values per example and a label input: Fashion-MNIST,
//   reporting per epoch the training loss, the test accuracy, samples/s, the
//   measured bubble fraction and each device's peak memory;
// - i32 inputs "ids", "positions" and "targets" of shape [batch, seq]: a
//   character language model on a text corpus (the Debian fortunes by
//   default), trained by steps and reporting every --eval-every steps the
//   training loss, the validation loss in nats and bits per character and
//   the corpus's unigram entropy, the loss of the best context-free model.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/BundleReader.h"
#include "gpipe/runtime/Dataset.h"
#include "gpipe/runtime/Executor.h"
#include "gpipe/runtime/TextCorpus.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <numeric>
#include <random>

using namespace mlir;
namespace cl = llvm::cl;
namespace rt = gpipe::runtime;

static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir>"));
static cl::opt<unsigned> numStages("stages", cl::init(4),
                                   cl::desc("pipeline stages K (devices)"));
static cl::opt<unsigned>
    numMicrobatches("microbatches", cl::init(8),
                    cl::desc("micro-batches M per mini-batch"));
static cl::opt<unsigned> epochs("epochs", cl::init(10),
                                cl::desc("passes over the training set"));
static cl::opt<unsigned> maxSteps(
    "max-steps", cl::init(0),
    cl::desc("Fashion-MNIST: stop each epoch after this many steps (0: the "
             "whole set); text: the number of training steps (0: 1000)"));
static cl::opt<std::string>
    optimizerName("optimizer", cl::init("adam"),
                  cl::desc("sgd, momentum, rmsprop or adam"));
static cl::opt<float> learningRate("lr", cl::init(1e-3f),
                                   cl::desc("(peak) learning rate"));
enum class Schedule { Constant, Cosine };
static cl::opt<Schedule> lrSchedule(
    "lr-schedule", cl::desc("learning-rate schedule over the whole run"),
    cl::init(Schedule::Cosine),
    cl::values(clEnumValN(Schedule::Constant, "constant", "--lr throughout"),
               clEnumValN(Schedule::Cosine, "cosine",
                          "cosine decay from --lr to 0")));
static cl::opt<gpipe::PartitionObjective> objective(
    "objective", cl::desc("partition objective"),
    cl::init(gpipe::PartitionObjective::Variance),
    cl::values(clEnumValN(gpipe::PartitionObjective::Variance, "variance",
                          "even cell costs (GPipe)"),
               clEnumValN(gpipe::PartitionObjective::Bottleneck,
                          "bottleneck", "smallest largest cell")));
static cl::opt<gpipe::RematPolicy> remat(
    "remat", cl::desc("rematerialisation policy"),
    cl::init(gpipe::RematPolicy::Full),
    cl::values(clEnumValN(gpipe::RematPolicy::None, "none", "keep everything"),
               clEnumValN(gpipe::RematPolicy::Full, "full",
                          "recompute each stage's forward (GPipe)"),
               clEnumValN(gpipe::RematPolicy::ExceptLast, "except-last",
                          "recompute but for the last micro-batch")));
static cl::opt<std::string> memoryCap("memory-cap", cl::init(""),
                                      cl::desc("per-device memory cap"));
static cl::opt<uint64_t> seed("seed", cl::init(1),
                              cl::desc("parameter and shuffling seed"));
enum class DatasetKind { Auto, FashionMnist, Text };
static cl::opt<DatasetKind> datasetKind(
    "dataset", cl::desc("what to train on"), cl::init(DatasetKind::Auto),
    cl::values(clEnumValN(DatasetKind::Auto, "auto",
                          "text when the model has i32 inputs ids, positions "
                          "and targets, else fashion-mnist"),
               clEnumValN(DatasetKind::FashionMnist, "fashion-mnist",
                          "image classification (--data)"),
               clEnumValN(DatasetKind::Text, "text",
                          "character language model (--corpus)")));
static cl::opt<std::string>
    dataDir("data", cl::init("/usr/share/datasets/fashion-mnist"),
            cl::desc("directory of the Fashion-MNIST IDX files"));
static cl::opt<std::string> corpusPath(
    "corpus", cl::init("/usr/share/games/fortunes"),
    cl::desc("text corpus: a directory of fortune files or one file"));
static cl::opt<unsigned>
    evalEvery("eval-every", cl::init(100),
              cl::desc("text: evaluate the validation loss every this many "
                       "steps (and before the first and after the last)"));
static cl::opt<unsigned> evalBatches(
    "eval-batches", cl::init(8),
    cl::desc("text: validation batches per evaluation, their windows spread "
             "evenly over the validation text (0: every window)"));
static cl::opt<std::string> tracePath(
    "trace", cl::init(""),
    cl::desc("write the last step's timeline (Chrome trace JSON) here"));
static cl::opt<std::string>
    bundlePath("bundle", cl::init(""),
               cl::desc("also write the compiled program bundle here"));
static cl::opt<unsigned> timeoutMs(
    "timeout-ms", cl::init(60000),
    cl::desc("how long a device waits for a peer before failing"));

static int fail(const std::string &message) {
  llvm::errs() << "gpipe-run: error: " << message << "\n";
  return 1;
}

static std::string formatBytes(int64_t bytes) {
  double value = bytes;
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  unsigned unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  return llvm::formatv("{0:f1} {1}", value, units[unit]).str();
}

/// "ids [32x32] i32, ..." for error messages.
static std::string describeInputs(const rt::Bundle &bundle) {
  std::string found;
  for (const rt::ModelInputSpec &input : bundle.inputs) {
    found += (found.empty() ? "" : ", ") + input.name + " [";
    for (size_t i = 0; i < input.shape.size(); ++i)
      found += (i ? "x" : "") + std::to_string(input.shape[i]);
    found += input.type == rt::ElementType::F32 ? "] f32" : "] i32";
  }
  return found;
}

/// Which model inputs take the images and the labels.
struct DataBinding {
  std::string images, labels;
};

static std::string bindInputs(const rt::Bundle &bundle, int64_t pixels,
                              DataBinding &binding) {
  for (const rt::ModelInputSpec &input : bundle.inputs) {
    int64_t perExample = 1;
    for (size_t i = 1; i < input.shape.size(); ++i)
      perExample *= input.shape[i];
    if (input.type == rt::ElementType::F32 && perExample == pixels)
      binding.images = input.name;
    else if (input.type == rt::ElementType::I32 && input.shape.size() == 1)
      binding.labels = input.name;
  }
  if (binding.images.empty() || binding.labels.empty() ||
      bundle.inputs.size() != 2) {
    return "the model's inputs do not match Fashion-MNIST: expected an f32 "
           "input of " +
           std::to_string(pixels) +
           " values per example and an i32 label input of shape [batch], "
           "found " +
           describeInputs(bundle);
  }
  return {};
}

/// Rows [first, first + rows) of the data in `order` as a batch.
static rt::Batch makeBatch(const rt::ImageDataset &data,
                           const std::vector<int64_t> &order, int64_t first,
                           int64_t rows, const rt::Bundle &bundle,
                           const DataBinding &binding) {
  int64_t pixels = data.height * data.width;
  std::vector<float> images(rows * pixels);
  std::vector<int32_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t example = order[first + r];
    std::copy_n(data.images.begin() + example * pixels, pixels,
                images.begin() + r * pixels);
    labels[r] = data.labels[example];
  }
  std::vector<int64_t> imageShape;
  for (const rt::ModelInputSpec &input : bundle.inputs)
    if (input.name == binding.images)
      imageShape = input.shape;
  imageShape[0] = rows;
  rt::Batch batch;
  batch[binding.images] = rt::HostTensor::floats(imageShape, std::move(images));
  batch[binding.labels] = rt::HostTensor::ints({rows}, std::move(labels));
  return batch;
}

/// Fraction of test examples whose largest logit is the label.
static FailureOr<double> testAccuracy(rt::PipelineExecutor &executor,
                                      const rt::ImageDataset &test,
                                      const DataBinding &binding,
                                      std::string &error) {
  const rt::Bundle &bundle = executor.bundle();
  std::vector<int64_t> order(test.count);
  std::iota(order.begin(), order.end(), 0);
  int64_t correct = 0;
  for (int64_t first = 0; first < test.count; first += bundle.batch) {
    int64_t rows = std::min<int64_t>(bundle.batch, test.count - first);
    rt::EvalResult result = executor.evaluate(
        makeBatch(test, order, first, rows, bundle, binding), rows);
    if (!result.ok()) {
      error = result.error;
      return failure();
    }
    int64_t classes = result.prediction.shape.back();
    for (int64_t r = 0; r < rows; ++r) {
      const float *logits = result.prediction.f32.data() + r * classes;
      int64_t best = std::max_element(logits, logits + classes) - logits;
      correct += best == test.labels[first + r];
    }
  }
  return double(correct) / double(test.count);
}

/// The learning rate of step `step` (0-based) of `total` under --lr-schedule.
static float scheduledLearningRate(int64_t step, int64_t total) {
  if (lrSchedule != Schedule::Cosine)
    return learningRate;
  double progress = double(step) / double(total);
  return float(0.5 * learningRate * (1.0 + std::cos(M_PI * progress)));
}

static std::string formatPeakMemory(const std::vector<int64_t> &peak) {
  std::string memory;
  for (size_t d = 0; d < peak.size(); ++d)
    memory += (d ? ", " : "") + formatBytes(peak[d]);
  return memory;
}

/// The compiler's plan, printed before anything runs.
static void printMemoryPlan(const rt::Bundle &bundle) {
  const rt::MemoryPlan &plan = bundle.memoryPlan;
  if (plan.devices.empty())
    return;
  std::string devices;
  for (size_t d = 0; d < plan.devices.size(); ++d)
    devices += (d ? ", " : "") + formatBytes(plan.devices[d].peakBytes) +
               " (arena " + formatBytes(plan.devices[d].arenaBytes) + ")";
  llvm::outs() << "memory plan: peak per device [" << devices << "]\n";
}

/// The measured high-water marks against the plan; an excess is an error.
static bool checkMemoryPlan(const rt::Bundle &bundle,
                            const std::vector<int64_t> &peak) {
  const rt::MemoryPlan &plan = bundle.memoryPlan;
  if (plan.devices.size() != peak.size())
    return true;
  std::string devices;
  bool within = true;
  for (size_t d = 0; d < peak.size(); ++d) {
    devices += (d ? ", " : "") + formatBytes(peak[d]) + " of " +
               formatBytes(plan.devices[d].peakBytes);
    within &= peak[d] <= plan.devices[d].peakBytes;
  }
  llvm::outs() << "measured peak per device against the plan [" << devices
               << "]: " << (within ? "within the plan" : "EXCEEDS THE PLAN")
               << "\n";
  return within;
}

static std::unique_ptr<rt::PipelineExecutor>
createExecutor(const rt::Bundle &bundle, std::string &error) {
  rt::ExecutorConfig config;
  config.optimizer.learningRate = learningRate;
  rt::parseOptimizerKind(optimizerName, config.optimizer.kind);
  config.seed = seed;
  config.recvTimeout = std::chrono::milliseconds(timeoutMs);
  return rt::PipelineExecutor::create(bundle, config, error);
}

/// "K stages, M micro-batches of R rows (remat X)" for the header line.
static std::string describePipeline(const rt::PipelineExecutor &executor) {
  const rt::Bundle &bundle = executor.bundle();
  // Uneven splits differ by one row: the first micro-batches take the extra.
  int64_t mostRows = bundle.microbatchRows.front();
  int64_t fewestRows = bundle.microbatchRows.back();
  std::string rows = std::to_string(mostRows);
  if (fewestRows != mostRows)
    rows += "-" + std::to_string(fewestRows);
  return llvm::formatv("{0} stages, {1} micro-batches of {2} rows (remat {3})",
                       executor.numDevices(), bundle.microbatchRows.size(),
                       rows, gpipe::stringifyRematPolicy(remat))
      .str();
}

static double idealBubble(const rt::PipelineExecutor &executor) {
  double k = executor.numDevices();
  double m = executor.bundle().microbatchRows.size();
  return (k - 1) / (m + k - 1);
}

//===----------------------------------------------------------------------===//
// Fashion-MNIST
//===----------------------------------------------------------------------===//

static int trainFashionMnist(const rt::Bundle &loaded) {
  rt::StatusOr<rt::ImageDataset> train =
      rt::loadFashionMnist(dataDir, /*train=*/true);
  if (!train.ok())
    return fail(train.status().message());
  rt::StatusOr<rt::ImageDataset> test =
      rt::loadFashionMnist(dataDir, /*train=*/false);
  if (!test.ok())
    return fail(test.status().message());
  DataBinding binding;
  std::string error =
      bindInputs(loaded, (*train).height * (*train).width, binding);
  if (!error.empty())
    return fail(error);

  std::unique_ptr<rt::PipelineExecutor> executor =
      createExecutor(loaded, error);
  if (!executor)
    return fail(error);
  const rt::Bundle &bundle = executor->bundle();
  int64_t batch = bundle.batch;
  int64_t stepsPerEpoch = (*train).count / batch;
  if (maxSteps > 0)
    stepsPerEpoch = std::min<int64_t>(stepsPerEpoch, maxSteps);
  unsigned k = executor->numDevices();
  llvm::outs() << llvm::formatv(
      "gpipe-run: {0}: {1}, {2} steps of {3} examples per epoch; ideal bubble "
      "(K-1)/(M+K-1) = {4:f3}\n",
      modelPath, describePipeline(*executor), stepsPerEpoch, batch,
      idealBubble(*executor));
  llvm::outs().flush();

  std::mt19937_64 shuffler(seed);
  std::vector<int64_t> order((*train).count);
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> peak(k, 0);
  for (unsigned epoch = 1; epoch <= epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), shuffler);
    double lossSum = 0, bubbleSum = 0;
    auto start = std::chrono::steady_clock::now();
    auto lastProgress = start;
    for (int64_t step = 0; step < stepsPerEpoch; ++step) {
      if (lrSchedule == Schedule::Cosine)
        executor->setLearningRate(scheduledLearningRate(
            (epoch - 1) * stepsPerEpoch + step, epochs * stepsPerEpoch));
      rt::StepResult result = executor->trainStep(
          makeBatch((*train), order, step * batch, batch, bundle, binding));
      if (!result.ok())
        return fail(result.error);
      lossSum += result.loss;
      bubbleSum += executor->timeline().bubbleFraction();
      for (unsigned d = 0; d < k; ++d)
        peak[d] = std::max(peak[d], executor->peakMemoryBytes()[d]);
      auto now = std::chrono::steady_clock::now();
      if (now - lastProgress > std::chrono::seconds(2)) {
        lastProgress = now;
        llvm::errs() << llvm::formatv(
            "\r  epoch {0}/{1}: step {2}/{3}, loss {4:f4}   ", epoch, epochs,
            step + 1, stepsPerEpoch, lossSum / (step + 1));
      }
    }
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    FailureOr<double> accuracy =
        testAccuracy(*executor, (*test), binding, error);
    if (failed(accuracy))
      return fail(error);
    llvm::errs() << "\r";
    llvm::outs() << llvm::formatv(
        "epoch {0}/{1}: train loss {2:f4}, test accuracy {3:f2}%, {4:f0} "
        "samples/s, bubble {5:f3}, peak memory per device [{6}]\n",
        epoch, epochs, lossSum / stepsPerEpoch, 100.0 * *accuracy,
        stepsPerEpoch * batch / seconds, bubbleSum / stepsPerEpoch,
        formatPeakMemory(peak));
    llvm::outs().flush();
  }
  if (!checkMemoryPlan(loaded, peak))
    return 1;
  if (!tracePath.empty()) {
    std::string traceError = executor->timeline().writeChromeTrace(tracePath);
    if (!traceError.empty())
      return fail(traceError);
    llvm::outs() << "timeline of the last step: " << tracePath << "\n";
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Character language model
//===----------------------------------------------------------------------===//

/// The window length of a character language model: its inputs are i32
/// "ids", "positions" and "targets" of one shape [batch, seq]. Returns an
/// error message when the inputs differ.
static std::string bindTextInputs(const rt::Bundle &bundle, int64_t &seq) {
  const char *names[] = {"ids", "positions", "targets"};
  std::vector<int64_t> shape;
  bool match = bundle.inputs.size() == 3;
  for (const char *name : names) {
    auto it = std::find_if(
        bundle.inputs.begin(), bundle.inputs.end(),
        [&](const rt::ModelInputSpec &input) { return input.name == name; });
    if (it == bundle.inputs.end() || it->type != rt::ElementType::I32 ||
        it->shape.size() != 2 || (!shape.empty() && it->shape != shape)) {
      match = false;
      break;
    }
    shape = it->shape;
  }
  if (match) {
    seq = shape[1];
    return {};
  }
  return "the model's inputs do not match a character language model: "
         "expected i32 inputs ids, positions and targets of one shape "
         "[batch, seq], found " +
         describeInputs(bundle);
}

static rt::Batch textBatch(rt::TextWindows windows) {
  std::vector<int64_t> shape = {windows.rows, windows.seq};
  rt::Batch batch;
  batch["ids"] = rt::HostTensor::ints(shape, std::move(windows.ids));
  batch["positions"] =
      rt::HostTensor::ints(shape, std::move(windows.positions));
  batch["targets"] = rt::HostTensor::ints(shape, std::move(windows.targets));
  return batch;
}

/// The mean next-character loss (nats) over the validation windows
/// `windows`, in batches of at most bundle().batch windows.
static FailureOr<double>
validationLoss(rt::PipelineExecutor &executor,
               const std::vector<int32_t> &validation, int64_t seq,
               const std::vector<int64_t> &windows, std::string &error) {
  int64_t batch = executor.bundle().batch;
  double sum = 0;
  for (size_t first = 0; first < windows.size(); first += batch) {
    size_t last = std::min(windows.size(), first + batch);
    std::vector<int64_t> part(windows.begin() + first, windows.begin() + last);
    int64_t rows = int64_t(part.size());
    rt::EvalResult result = executor.evaluate(
        textBatch(rt::sequentialWindows(validation, seq, part)), rows);
    if (!result.ok()) {
      error = result.error;
      return failure();
    }
    sum += result.loss * double(rows);
  }
  return sum / double(windows.size());
}

static int trainText(const rt::Bundle &loaded) {
  int64_t seq = 0;
  std::string error = bindTextInputs(loaded, seq);
  if (!error.empty())
    return fail(error);
  rt::StatusOr<rt::TextCorpus> load = rt::loadTextCorpus(corpusPath);
  if (!load.ok())
    return fail(load.status().message());
  const rt::TextCorpus &corpus = (*load);
  error = rt::checkTextFitsWindow(corpus.validation, seq,
                                  "the validation text of '" + corpusPath +
                                      "'");
  if (!error.empty())
    return fail(error);
  std::unique_ptr<rt::TextSampler> sampler =
      rt::TextSampler::create(corpus.train, seq, seed, error);
  if (!sampler)
    return fail(error);

  std::unique_ptr<rt::PipelineExecutor> executor =
      createExecutor(loaded, error);
  if (!executor)
    return fail(error);
  const rt::Bundle &bundle = executor->bundle();
  const int64_t batch = bundle.batch;
  const int64_t steps = maxSteps > 0 ? int64_t(maxSteps) : 1000;
  const double entropy = rt::unigramEntropyNats(corpus.train);
  std::vector<int64_t> windows = rt::evenlySpacedWindows(
      rt::sequentialWindowCount(corpus.validation, seq),
      int64_t(evalBatches) * batch);
  llvm::outs() << llvm::formatv(
      "gpipe-run: {0}: {1}, {2} steps of {3} windows of {4} characters; "
      "ideal bubble (K-1)/(M+K-1) = {5:f3}\n",
      modelPath, describePipeline(*executor), steps, batch, seq,
      idealBubble(*executor));
  llvm::outs() << llvm::formatv(
      "corpus {0}: {1} files, {2} documents for training ({3} characters) "
      "and {4} for validation ({5} characters), {6} bytes outside the "
      "vocabulary dropped\n",
      corpusPath, corpus.files.size(), corpus.trainDocuments,
      corpus.train.size(), corpus.validationDocuments,
      corpus.validation.size(), corpus.droppedBytes);
  llvm::outs() << llvm::formatv(
      "unigram entropy of the training text: {0:f4} nats/char ({1:f4} "
      "bits/char); validation loss over {2} windows ({3} characters)\n",
      entropy, entropy / M_LN2, windows.size(),
      int64_t(windows.size()) * seq);
  llvm::outs().flush();

  const auto start = std::chrono::steady_clock::now();
  double trainSeconds = 0, lossSum = 0, bubbleSum = 0, lastVal = 0;
  int64_t lossSteps = 0;
  std::vector<int64_t> peak(executor->numDevices(), 0);
  auto report = [&](int64_t step) -> LogicalResult {
    FailureOr<double> val =
        validationLoss(*executor, corpus.validation, seq, windows, error);
    if (failed(val))
      return failure();
    lastVal = *val;
    double elapsed = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    llvm::errs() << "\r";
    std::string train = lossSteps ? llvm::formatv("{0:f4}", lossSum / lossSteps)
                                        .str()
                                  : std::string("-");
    llvm::outs() << llvm::formatv(
        "step {0}/{1}: train loss {2}, val loss {3:f4} nats/char ({4:f4} "
        "bits/char, {5:f3} x unigram entropy), {6:f0} chars/s, bubble "
        "{7:f3}, {8:f1} s\n",
        step, steps, train, *val, *val / M_LN2, *val / entropy,
        trainSeconds > 0 ? double(step * batch * seq) / trainSeconds : 0.0,
        lossSteps ? bubbleSum / lossSteps : 0.0, elapsed);
    llvm::outs().flush();
    lossSum = bubbleSum = 0;
    lossSteps = 0;
    return success();
  };

  if (evalEvery > 0 && failed(report(0)))
    return fail(error);
  auto lastProgress = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < steps; ++step) {
    if (lrSchedule == Schedule::Cosine)
      executor->setLearningRate(scheduledLearningRate(step, steps));
    rt::Batch data = textBatch(sampler->next(batch));
    auto stepStart = std::chrono::steady_clock::now();
    rt::StepResult result = executor->trainStep(data);
    if (!result.ok())
      return fail(result.error);
    auto now = std::chrono::steady_clock::now();
    trainSeconds += std::chrono::duration<double>(now - stepStart).count();
    lossSum += result.loss;
    bubbleSum += executor->timeline().bubbleFraction();
    ++lossSteps;
    for (size_t d = 0; d < peak.size(); ++d)
      peak[d] = std::max(peak[d], executor->peakMemoryBytes()[d]);
    bool last = step + 1 == steps;
    if ((evalEvery > 0 && (step + 1) % evalEvery == 0) ||
        (last && lossSteps > 0)) {
      if (failed(report(step + 1)))
        return fail(error);
    } else if (now - lastProgress > std::chrono::seconds(2)) {
      lastProgress = now;
      llvm::errs() << llvm::formatv("\r  step {0}/{1}, loss {2:f4}   ",
                                    step + 1, steps, lossSum / lossSteps);
    }
  }
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  llvm::outs() << llvm::formatv(
      "after {0} steps ({1} characters) in {2:f1} s: validation loss {3:f4} "
      "nats/char ({4:f4} bits/char) vs unigram entropy {5:f4} nats/char "
      "({6:f4} bits/char); peak memory per device [{7}]\n",
      steps, steps * batch * seq, elapsed, lastVal, lastVal / M_LN2, entropy,
      entropy / M_LN2, formatPeakMemory(peak));
  if (!checkMemoryPlan(loaded, peak))
    return 1;
  if (!tracePath.empty()) {
    std::string traceError = executor->timeline().writeChromeTrace(tracePath);
    if (!traceError.empty())
      return fail(traceError);
    llvm::outs() << "timeline of the last step: " << tracePath << "\n";
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv,
      "gpipe-run: compile a model into a GPipe pipeline and train it with CPU "
      "devices on Fashion-MNIST or, as a character language model, on a text "
      "corpus\n");

  rt::OptimizerKind optimizerKind;
  if (!rt::parseOptimizerKind(optimizerName, optimizerKind))
    return fail("unknown optimizer '" + optimizerName +
                "': expected sgd, momentum, rmsprop or adam");

  // Compile.
  DialectRegistry registry;
  registry.insert<gpipe::GPipeDialect>();
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::string openError;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(modelPath, &openError);
  if (!file)
    return fail(openError);
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1; // the parser printed why
  gpipe::CompilePipelineOptions options;
  options.numStages = numStages;
  options.numMicrobatches = numMicrobatches;
  options.objective = objective;
  options.memoryCap = memoryCap;
  options.remat = remat;
  options.optimizerSlots = rt::optimizerSlots(optimizerKind);
  std::string bundleText;
  llvm::raw_string_ostream bundleStream(bundleText);
  if (failed(gpipe::compileModuleToBundle(*module, options, bundleStream)))
    return 1; // the passes printed why
  if (!bundlePath.empty()) {
    std::unique_ptr<llvm::ToolOutputFile> out =
        openOutputFile(bundlePath, &openError);
    if (!out)
      return fail(openError);
    out->os() << bundleText;
    out->keep();
  }
  rt::StatusOr<rt::Bundle> load = rt::parseBundle(bundleText, modelPath);
  if (!load.ok())
    return fail(load.status().message());
  printMemoryPlan((*load));

  DatasetKind kind = datasetKind;
  if (kind == DatasetKind::Auto) {
    int64_t seq;
    kind = bindTextInputs((*load), seq).empty() ? DatasetKind::Text
                                                : DatasetKind::FashionMnist;
  }
  return kind == DatasetKind::Text ? trainText((*load))
                                   : trainFashionMnist((*load));
}
