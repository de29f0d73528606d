//===- gpipe-run.cpp - Compile a model and train it with GPipe on the CPU -===//
//
//   gpipe-run MODEL.mlir --stages K --microbatches M [--epochs N] ...
//
// Compiles the model (gpipe-compile), writes it as a program bundle, loads the
// bundle into the runtime with K CPU devices and trains it on the real
// Fashion-MNIST, reporting per epoch the training loss, the test accuracy,
// samples/s, the measured bubble fraction and each device's peak memory.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/BundleReader.h"
#include "gpipe/runtime/Dataset.h"
#include "gpipe/runtime/Executor.h"

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
    cl::desc("stop each epoch after this many steps (0: the whole set)"));
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
static cl::opt<std::string>
    dataDir("data", cl::init("/usr/share/datasets/fashion-mnist"),
            cl::desc("directory of the Fashion-MNIST IDX files"));
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
    std::string found;
    for (const rt::ModelInputSpec &input : bundle.inputs) {
      found += (found.empty() ? "" : ", ") + input.name + " [";
      for (size_t i = 0; i < input.shape.size(); ++i)
        found += (i ? "x" : "") + std::to_string(input.shape[i]);
      found += input.type == rt::ElementType::F32 ? "] f32" : "] i32";
    }
    return "the model's inputs do not match Fashion-MNIST: expected an f32 "
           "input of " +
           std::to_string(pixels) +
           " values per example and an i32 label input of shape [batch], "
           "found " +
           found;
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

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv,
      "gpipe-run: compile a model into a GPipe pipeline and train it on "
      "Fashion-MNIST with CPU devices\n");

  rt::OptimizerConfig optimizer;
  if (!rt::parseOptimizerKind(optimizerName, optimizer.kind))
    return fail("unknown optimizer '" + optimizerName +
                "': expected sgd, momentum, rmsprop or adam");
  optimizer.learningRate = learningRate;

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
  rt::BundleLoad load = rt::parseBundle(bundleText, modelPath);
  if (!load.ok())
    return fail(load.error);

  // Data.
  rt::DatasetLoad train = rt::loadFashionMnist(dataDir, /*train=*/true);
  if (!train.ok())
    return fail(train.error);
  rt::DatasetLoad test = rt::loadFashionMnist(dataDir, /*train=*/false);
  if (!test.ok())
    return fail(test.error);
  DataBinding binding;
  std::string error =
      bindInputs(load.bundle, train.data.height * train.data.width, binding);
  if (!error.empty())
    return fail(error);

  // Devices.
  rt::ExecutorConfig config;
  config.optimizer = optimizer;
  config.seed = seed;
  config.recvTimeout = std::chrono::milliseconds(timeoutMs);
  std::unique_ptr<rt::PipelineExecutor> executor =
      rt::PipelineExecutor::create(load.bundle, config, error);
  if (!executor)
    return fail(error);
  const rt::Bundle &bundle = executor->bundle();
  int64_t batch = bundle.batch;
  int64_t stepsPerEpoch = train.data.count / batch;
  if (maxSteps > 0)
    stepsPerEpoch = std::min<int64_t>(stepsPerEpoch, maxSteps);
  unsigned k = executor->numDevices(), m = bundle.microbatchRows.size();
  // Uneven splits differ by one row: the first micro-batches take the extra.
  int64_t mostRows = bundle.microbatchRows.front();
  int64_t fewestRows = bundle.microbatchRows.back();
  std::string rows = std::to_string(mostRows);
  if (fewestRows != mostRows)
    rows += "-" + std::to_string(fewestRows);
  llvm::outs() << llvm::formatv(
      "gpipe-run: {0}: {1} stages, {2} micro-batches of {3} rows (remat {4}), "
      "{5} steps of {6} examples per epoch; ideal bubble (K-1)/(M+K-1) = "
      "{7:f3}\n",
      modelPath, k, m, rows, gpipe::stringifyRematPolicy(remat),
      stepsPerEpoch, batch, double(k - 1) / double(m + k - 1));
  llvm::outs().flush();

  std::mt19937_64 shuffler(seed);
  std::vector<int64_t> order(train.data.count);
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> peak(k, 0);
  for (unsigned epoch = 1; epoch <= epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), shuffler);
    double lossSum = 0, bubbleSum = 0;
    auto start = std::chrono::steady_clock::now();
    auto lastProgress = start;
    for (int64_t step = 0; step < stepsPerEpoch; ++step) {
      if (lrSchedule == Schedule::Cosine) {
        double progress = double((epoch - 1) * stepsPerEpoch + step) /
                          double(epochs * stepsPerEpoch);
        executor->setLearningRate(
            float(0.5 * learningRate * (1.0 + std::cos(M_PI * progress))));
      }
      rt::StepResult result = executor->trainStep(
          makeBatch(train.data, order, step * batch, batch, bundle, binding));
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
        testAccuracy(*executor, test.data, binding, error);
    if (failed(accuracy))
      return fail(error);
    std::string memory;
    for (unsigned d = 0; d < k; ++d)
      memory += (d ? ", " : "") + formatBytes(peak[d]);
    llvm::errs() << "\r";
    llvm::outs() << llvm::formatv(
        "epoch {0}/{1}: train loss {2:f4}, test accuracy {3:f2}%, {4:f0} "
        "samples/s, bubble {5:f3}, peak memory per device [{6}]\n",
        epoch, epochs, lossSum / stepsPerEpoch, 100.0 * *accuracy,
        stepsPerEpoch * batch / seconds, bubbleSum / stepsPerEpoch, memory);
    llvm::outs().flush();
  }
  if (!tracePath.empty()) {
    std::string traceError = executor->timeline().writeChromeTrace(tracePath);
    if (!traceError.empty())
      return fail(traceError);
    llvm::outs() << "timeline of the last step: " << tracePath << "\n";
  }
  return 0;
}
