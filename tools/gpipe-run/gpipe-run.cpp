//===- gpipe-run.cpp - Compile a model and train it with GPipe ------------===//
//
//   gpipe-run MODEL.mlir --stages K --microbatches M [--device cpu|cuda] ...
//
// Compiles the model (gpipe-compile), loads the bundle on the chosen devices
// and trains it with the runtime's loops (gpipe/runtime/train/Training.h): images
// (Fashion-MNIST) or, for i32 inputs ids, positions and targets, a character
// language model. Under `mpirun -np K`, rank r runs device r and rank 0
// prints. Exit status (docs/Training.md): 0; 2 for a bad option or a device
// this machine does not have; 3 for a file that cannot be read or written,
// a model that cannot be compiled as asked, or data that does not fit it; 4
// when the non-finite guard stops training; 128 + the signal that stopped
// it; 1 for anything else.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Support/OptionParsers.h"
#include "gpipe/Support/Version.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/Tools/CheckpointFlags.h"
#include "gpipe/Tools/DataFlags.h"
#include "gpipe/Tools/DistributedFlags.h"
#include "gpipe/Tools/PipelineFlags.h"
#include "gpipe/Tools/PlanFlags.h"
#include "gpipe/Tools/TrainingFlags.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/report/TrainingRun.h"
#ifdef GPIPE_HAVE_CUDA
#include "gpipe/cuda/CudaBackend.h"
#endif

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>
#include <optional>

using namespace mlir;
namespace cl = llvm::cl;
namespace rt = gpipe::runtime;
namespace tools = gpipe::tools;

static cl::OptionCategory outputOptions("Output");

static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir>"),
                                      cl::cat(tools::pipelineCategory));
static cl::opt<std::string> tracePath(
    "trace", cl::init(""),
    cl::desc("write the last step's timeline (Chrome trace JSON) here"),
    cl::cat(outputOptions));
static cl::opt<std::string> profilePath(
    "profile", cl::init(""),
    cl::desc("write the last step's measured costs here, for gpipe-report "
             "--simulate (docs/Schedules.md)"),
    cl::cat(outputOptions));
static cl::opt<std::string> reportPath(
    "report", cl::init(""),
    cl::desc("write the run as one HTML page here: its loss and accuracy "
             "curves, the last step's timeline per device, each device's "
             "planned and measured memory (docs/Training.md)"),
    cl::cat(outputOptions));
static cl::opt<std::string>
    bundlePath("bundle", cl::init(""),
               cl::desc("also write the compiled program bundle here"),
               cl::cat(outputOptions));

/// Prints the error; `exit`, the exit status.
static int fail(const rt::Status &status, int exit = rt::kExitUsage) {
  tools::reportError("gpipe-run", status);
  return exit;
}
static int fail(const std::string &message, int exit = rt::kExitUsage) {
  return fail(rt::Status(rt::StatusCode::InvalidArgument, message), exit);
}

/// The plan of --plan, read before anything starts (it sets the number of
/// data-parallel replicas the processes are grouped into).
static std::optional<gpipe::PlanFile> plan;

/// Compiles and trains; the exit status.
static int run(rt::EngineOptions &engineOptions, tools::Processes &processes,
               const std::atomic<int> &stop) {
  rt::StatusOr<rt::OptimizerKind> optimizer =
      tools::optimizerFromName(tools::optimizerName);
  if (!optimizer.ok())
    return fail(optimizer.status());
  engineOptions.optimizer.kind = *optimizer;
  if (rt::Status flags = tools::applyOptimizerFlags(engineOptions.optimizer);
      !flags.ok())
    return fail(flags);
  rt::StatusOr<rt::DeviceKind> device = tools::deviceFromFlags();
  if (!device.ok())
    return fail(device.status());

  if (tools::batchSize < 0)
    return fail("--batch-size expects a positive number of examples, got " +
                std::to_string(tools::batchSize));
  gpipe::CompilePipelineOptions options;
  tools::applyCompileFlags(options);
  options.dataParallel = tools::dataParallel;
  if (plan)
    gpipe::applyPlanFile(*plan, options);
  options.optimizerSlots = rt::optimizerSlots(engineOptions.optimizer.kind);
  std::string bundleText, openError;
  if (failed(gpipe::compileFileToBundle(modelPath, options, bundleText,
                                        openError))) {
    if (openError.empty())
      return rt::kExitBadInput; // the diagnostics are printed
    return fail(openError, rt::kExitBadInput);
  }
  if (!bundlePath.empty()) {
    std::unique_ptr<llvm::ToolOutputFile> out =
        openOutputFile(bundlePath, &openError);
    if (!out)
      return fail(openError, rt::kExitBadInput);
    out->os() << bundleText;
    out->keep();
  }
  rt::StatusOr<rt::Bundle> bundle = rt::parseBundle(bundleText, modelPath);
  if (!bundle.ok())
    return fail(bundle.status(), rt::kExitInternal);
  std::string plan = rt::memoryPlanLine(*bundle);
  if (!plan.empty() && processes.leads())
    llvm::outs() << plan << "\n";
  llvm::outs().flush();

  rt::StatusOr<int64_t> seq = rt::characterModelWindow(*bundle);
  bool text = tools::datasetKind == tools::DatasetKind::Text ||
              (tools::datasetKind == tools::DatasetKind::Auto && seq.ok());
  if (text && !seq.ok())
    return fail(seq.status(), rt::kExitBadInput);
  engineOptions.device = *device;
  engineOptions.optimizer.learningRate = tools::learningRate;
  engineOptions.seed = tools::seed;
  engineOptions.timeout = std::chrono::milliseconds(tools::timeoutMs);
  engineOptions.cpuThreading = tools::cpuThreadingFromFlags();
#ifdef GPIPE_HAVE_CUDA
  gpipe::cuda::registerCudaBackend();
#endif
  rt::StatusOr<std::unique_ptr<rt::Engine>> engine =
      rt::createEngine(std::move(*bundle), engineOptions);
  if (!engine.ok())
    return fail(engine.status(),
                engine.status().code() == rt::StatusCode::Unavailable
                    ? rt::kExitUsage
                    : rt::kExitInternal);
  std::string title = "gpipe-run: " + modelPath;
  rt::Status status;
  // What a text run and an image run take alike from the flags.
  auto fillCommon = [&](auto &run) {
    run.title = title;
    run.tracePath = tracePath;
    run.profilePath = profilePath;
    run.stop = &stop;
    run.options.learningRate = tools::learningRate;
    run.options.schedule = tools::lrSchedule;
    run.options.warmupSteps = tools::warmupSteps;
    run.options.checkpoints = tools::checkpointOptionsFromFlags();
    run.metricsPath = tools::metricsPath;
    run.logEvery = tools::logEvery;
    run.reportPath = reportPath;
  };
  if (text) {
    rt::TextRun run;
    fillCommon(run);
    run.corpusPath = tools::corpusPath;
    run.options.steps = tools::maxSteps > 0 ? int64_t(tools::maxSteps) : 1000;
    run.options.evalEvery = tools::evalEvery;
    run.options.evalBatches = tools::evalBatches;
    run.options.seed = tools::seed;
    if (rt::Status valid = rt::checkOptions(run.options); !valid.ok())
      return fail(valid);
    status = rt::runTextTraining(**engine, *seq, run, processes.out(stdout),
                                 processes.out(stderr));
  } else {
    rt::ImageRun run;
    fillCommon(run);
    run.dataDir = tools::dataDir;
    run.options.epochs = tools::epochs;
    run.options.maxStepsPerEpoch = tools::maxSteps;
    if (tools::evalBatches.getNumOccurrences())
      run.options.testBatches = int64_t(tools::evalBatches);
    run.options.shuffleSeed = tools::seed;
    rt::Status valid = rt::checkOptions(run.options);
    // The epochs' steps bound the run's (the data set may hold fewer).
    if (valid.ok() && tools::maxSteps > 0)
      if (std::string error = rt::checkWarmup(run.options.warmupSteps,
                                              int64_t(tools::epochs) *
                                                  int64_t(tools::maxSteps));
          !error.empty())
        valid = rt::Status(rt::StatusCode::InvalidArgument, error);
    if (!valid.ok())
      return fail(valid);
    status = rt::runImageTraining(**engine, run, processes.out(stdout),
                                  processes.out(stderr));
  }
  if (status.code() == rt::StatusCode::Cancelled)
    llvm::errs() << "gpipe-run: " << status.message() << "\n";
  else if (!status.ok())
    fail(status);
  return rt::exitStatusOf(status, stop);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  gpipe::addVersionPrinter("gpipe-run");
  // SIGINT/SIGTERM stop training at a step boundary, files complete.
  const std::atomic<int> &stop = rt::stopOnSignals();
  cl::HideUnrelatedOptions({&tools::pipelineCategory, &tools::trainingCategory,
                            &tools::loggingCategory, &tools::dataCategory,
                            &outputOptions, &tools::checkpointCategory,
                            &tools::distributedCategory});
  // A bad option is a usage error: exit status 2, not cl's 1.
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "gpipe-run: compile a model into a GPipe pipeline and train it on "
          "Fashion-MNIST or, as a character language model, on a text "
          "corpus (--help-hidden also lists the CPU tuning, partition and "
          "timeout options)\n",
          &llvm::errs()))
    return rt::kExitUsage;
  int exit = rt::kExitUsage;
  if (std::string error = tools::readPlanFlag(plan, exit); !error.empty())
    return fail(error, exit);
  rt::EngineOptions engineOptions;
  tools::Processes processes;
  if (rt::Status started = processes.start(engineOptions, &stop); !started.ok())
    return processes.finish(
        fail(started, started.code() == rt::StatusCode::InvalidArgument
                          ? rt::kExitUsage
                          : rt::kExitInternal));
  return processes.finish(run(engineOptions, processes, stop));
}
