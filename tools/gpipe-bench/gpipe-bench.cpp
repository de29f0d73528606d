//===- gpipe-bench.cpp - Time a model's training step -----------------===//
//
//   gpipe-bench MODEL.mlir --stages K --microbatches M --batch-size B
//               --remat P --steps N [--warmup W] [--device D] [--json]
//
// Compiles the model as gpipe-run does, then times N training steps (after W
// untimed ones) on fixed synthetic inputs (SyntheticBatch.h: no data set is
// read): the median, fastest and slowest step, samples/s, and the measured
// bubble (the timeline's idle share of device time) against GPipe's ideal
// (K-1)/(VM+K-1). Then it profiles a few more steps on a second engine that
// marks every op (two clock marks per op), so the timed steps carry no
// profiling: per device, the time of each op kind per step, and what is left
// (transfers, waiting, idle). With --json one JSON object goes to stdout and
// the text to stderr. Exit status 0, 1 on an error, 2 for an unavailable
// device.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Tools/PipelineFlags.h"
#include "gpipe/runtime/kernels/BlasLibrary.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/Engine.h"
#include "gpipe/runtime/data/SyntheticBatch.h"
#include "gpipe/runtime/report/StepTiming.h"
#ifdef GPIPE_HAVE_CUDA
#include "gpipe/cuda/CudaBackend.h"
#endif

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>

namespace cl = llvm::cl;
namespace rt = gpipe::runtime;
namespace tools = gpipe::tools;

static cl::OptionCategory benchCategory("Benchmark");
static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir>"),
                                      cl::cat(tools::pipelineCategory));
static gpipe::Count steps("steps", cl::init(20),
                          cl::desc("timed training steps"),
                          cl::cat(benchCategory));
static gpipe::Whole<int64_t> warmup("warmup", cl::init(3),
                                    cl::desc("untimed steps before them"),
                                    cl::cat(benchCategory));
static gpipe::Whole<int64_t>
    profileSteps("profile-steps", cl::init(3),
                 cl::desc("steps of the per-op profile (0: none)"),
                 cl::cat(benchCategory));
static gpipe::Count topOps("top", cl::init(12),
                           cl::desc("op kinds listed per device"),
                           cl::cat(benchCategory));
static cl::opt<std::string>
    optimizerName("optimizer", cl::init("adam"),
                  cl::desc("sgd, momentum, rmsprop, adam or adamw"),
                  cl::cat(benchCategory));
// gpipe-run's guard and clipping (TrainingFlags.h), off by default here: a
// step as PyTorch's, and their cost measured side by side.
static cl::opt<bool> checkFinite(
    "check-finite", cl::init(false),
    cl::desc("the non-finite guard of gpipe-run (on there): each step checks "
             "the losses, gradients and parameters"),
    cl::cat(benchCategory));
static gpipe::Real<float> clipGradNorm(
    "clip-grad-norm", cl::init(0.0f),
    cl::desc("clip the gradients by their global L2 norm (0: off)"),
    cl::cat(benchCategory));
static cl::opt<bool> json("json", cl::init(false),
                          cl::desc("one JSON object on stdout, the text on "
                                   "stderr"),
                          cl::cat(benchCategory));

static int fail(const rt::Status &status) {
  return tools::reportError("gpipe-bench", status);
}
static int fail(const std::string &message) {
  return fail(rt::Status(rt::StatusCode::InvalidArgument, message));
}

static int run() {
  if (steps == 0)
    return fail("--steps expects at least one timed step, got 0");
  rt::EngineOptions engineOptions;
  rt::StatusOr<rt::OptimizerKind> optimizer =
      tools::optimizerFromName(optimizerName);
  if (!optimizer.ok())
    return fail(optimizer.status());
  engineOptions.optimizer.kind = *optimizer;
  rt::StatusOr<rt::DeviceKind> device = tools::deviceFromFlags();
  if (!device.ok())
    return fail(device.status());
  gpipe::CompilePipelineOptions options;
  tools::applyCompileFlags(options);
  options.optimizerSlots = rt::optimizerSlots(engineOptions.optimizer.kind);
  std::string bundleText, openError;
  if (mlir::failed(gpipe::compileFileToBundle(modelPath, options, bundleText,
                                              openError)))
    return openError.empty() ? 1 : fail(openError); // diagnostics printed
  rt::StatusOr<rt::Bundle> bundle = rt::parseBundle(bundleText, modelPath);
  if (!bundle.ok())
    return fail(bundle.status());

  engineOptions.device = *device;
  engineOptions.optimizer.learningRate = 1e-3f;
  engineOptions.optimizer.checkFinite = checkFinite;
  engineOptions.optimizer.clipGradNorm = clipGradNorm;
  if (std::string error = rt::checkOptimizerConfig(engineOptions.optimizer);
      !error.empty())
    return fail(error);
  engineOptions.seed = 1;
  engineOptions.timeout = std::chrono::milliseconds(tools::timeoutMs);
  engineOptions.cpuThreading = tools::cpuThreadingFromFlags();
#ifdef GPIPE_HAVE_CUDA
  gpipe::cuda::registerCudaBackend();
#endif
  const rt::Bundle profiledBundle = *bundle;
  const rt::Batch batch = rt::syntheticBatch(*bundle, 1);
  rt::StatusOr<std::unique_ptr<rt::Engine>> engine =
      rt::createEngine(std::move(*bundle), engineOptions);
  if (!engine.ok())
    return fail(engine.status());
  rt::Engine &timed = **engine;
  rt::StepTiming timing;
  if (std::string error = rt::timeSteps(timed, batch, warmup, nullptr);
      !error.empty())
    return fail(error);
  if (std::string error = rt::timeSteps(timed, batch, steps, &timing);
      !error.empty())
    return fail(error);

  std::vector<rt::DeviceOpProfile> devices;
  if (profileSteps > 0) {
    engineOptions.profileOps = true;
    rt::StatusOr<std::unique_ptr<rt::Engine>> profiled =
        rt::createEngine(profiledBundle, engineOptions);
    if (!profiled.ok())
      return fail(profiled.status());
    if (std::string error = rt::timeSteps(**profiled, batch, 1, nullptr);
        !error.empty())
      return fail(error);
    if (std::string error =
            rt::profileOps(**profiled, batch, profileSteps, devices);
        !error.empty())
      return fail(error);
  }

  const rt::Bundle &b = timed.bundle();
  const unsigned k = b.numDevices(), m = b.microbatchRows.size();
  const unsigned v = b.stages.size() / std::max(k, 1u);
  const bool fillDrain =
      options.schedule != gpipe::schedule::ScheduleKind::ZeroBubbleH1;
  const double ideal = double(k - 1) / double(v * m + k - 1);
  const double stepMs = rt::median(timing.stepMs);
  const double samples = double(b.batch) / (stepMs / 1000.0);
  const double bubble = rt::median(timing.bubble);

  llvm::raw_ostream &text = json ? llvm::errs() : llvm::outs();
  text << "gpipe-bench: " << modelPath << ", K=" << k << " M=" << m
       << (v > 1 ? " V=" + std::to_string(v) : std::string()) << " "
       << gpipe::schedule::scheduleKindName(options.schedule)
       << " remat=" << gpipe::stringifyRematPolicy(options.remat)
       << " batch=" << b.batch << ", " << timed.describe() << ", "
       << timing.stepMs.size() << " steps after " << int64_t(warmup)
       << " warm-up\n";
  text << llvm::formatv(
      "step: median {0:f2} ms, fastest {1:f2} ms, slowest "
      "{2:f2} ms; {3:f0} samples/s\n",
      stepMs, *std::min_element(timing.stepMs.begin(), timing.stepMs.end()),
      *std::max_element(timing.stepMs.begin(), timing.stepMs.end()), samples);
  const double hostMs = rt::median(timing.hostMs);
  text << llvm::formatv("host: {0:f2} ms of the step outside the devices' "
                        "span (issue, inputs, synchronisation)\n",
                        hostMs);
  if (k > 1) {
    text << llvm::formatv("bubble: measured {0:f3}", bubble);
    if (fillDrain)
      text << llvm::formatv(", ideal (K-1)/(VM+K-1) = {0:f3} (measured / "
                            "ideal {1:f2})",
                            ideal, ideal > 0 ? bubble / ideal : 0.0);
    text << "\n";
  }
  llvm::json::Array opRows;
  for (unsigned d = 0; d < devices.size(); ++d) {
    const rt::DeviceOpProfile &p = devices[d];
    double perStep = 1.0 / double(profileSteps);
    double stepUs = p.stepUs * perStep, opsUs = 0;
    for (const rt::OpTotal &op : p.ops)
      opsUs += op.us * perStep;
    text << llvm::formatv("device {0}: {1:f2} ms per profiled step; compute "
                          "{2:f1}%, ops {3:f1}%\n",
                          d, stepUs / 1000,
                          100 * p.computeUs * perStep / stepUs,
                          100 * opsUs / stepUs);
    text << llvm::formatv("  {0,-36} {1,7} {2,10} {3,8}\n", "op", "calls",
                          "ms/step", "% step");
    for (size_t i = 0; i < p.ops.size(); ++i) {
      const rt::OpTotal &op = p.ops[i];
      double us = op.us * perStep;
      if (i < size_t(topOps))
        text << llvm::formatv("  {0,-36} {1,7} {2,10:f3} {3,8:f1}\n", op.name,
                              op.calls / profileSteps, us / 1000,
                              100 * us / stepUs);
      opRows.push_back(llvm::json::Object{{"device", d},
                                          {"op", op.name},
                                          {"calls", op.calls / profileSteps},
                                          {"ms_per_step", us / 1000}});
    }
    if (p.ops.size() > size_t(topOps))
      text << "  (" << p.ops.size() - size_t(topOps) << " more op kinds)\n";
    text << llvm::formatv("  {0,-36} {1,7} {2,10:f3} {3,8:f1}\n",
                          "other (transfers, waits, idle)", "",
                          (stepUs - opsUs) / 1000,
                          100 * (stepUs - opsUs) / stepUs);
  }
  if (json) {
    llvm::json::Object out{
        {"model", modelPath},
        {"device", timed.describe()},
        {"blas", rt::cpu::blas().name},
        {"stages", k},
        {"virtual_stages", v},
        {"microbatches", m},
        {"batch", b.batch},
        {"remat", gpipe::stringifyRematPolicy(options.remat)},
        {"schedule", gpipe::schedule::scheduleKindName(options.schedule)},
        {"check_finite", bool(checkFinite)},
        {"clip_grad_norm", double(clipGradNorm)},
        {"steps", int64_t(timing.stepMs.size())},
        {"step_ms_median", stepMs},
        {"step_ms_min",
         *std::min_element(timing.stepMs.begin(), timing.stepMs.end())},
        {"step_ms_max",
         *std::max_element(timing.stepMs.begin(), timing.stepMs.end())},
        {"samples_per_s", samples},
        {"host_ms", hostMs},
        {"bubble", k > 1 ? llvm::json::Value(bubble) : llvm::json::Value(0.0)},
        {"ideal_bubble",
         fillDrain ? llvm::json::Value(ideal) : llvm::json::Value(nullptr)},
        {"ops", std::move(opRows)}};
    llvm::outs() << llvm::json::Value(std::move(out)) << "\n";
  }
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&tools::pipelineCategory, &benchCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "gpipe-bench: compile a model into a GPipe pipeline and time its "
      "training step on synthetic data: step time, samples/s, bubble, and "
      "each device's time per op kind (--help-hidden also lists the CPU "
      "tuning, partition and timeout options)\n");
  return run();
}
