//===- gpipe-tune.cpp - The fastest plan that fits a memory cap -----------===//
//
//   gpipe-tune MODEL.mlir --devices N --memory-cap SIZE [--batch-size B]
//              [--profile FILE] [--plan FILE]
//
// Tries every plan (K, data-parallel replicas, M, schedule, remat,
// partition objective), rejects those over the cap with the compiler's
// reason, predicts the step of the others, prints the Pareto table of step
// time against the largest device's memory and a lower bound on the step,
// and writes the fastest plan for gpipe-run --plan. Exit status 0 when a
// plan fits, 1 otherwise.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/ByteCount.h"
#include "gpipe/Support/OptionParsers.h"
#include "gpipe/Tune/PlanFile.h"
#include "gpipe/Tune/PlanSearch.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

namespace cl = llvm::cl;

static cl::OptionCategory tuneCategory("Tuning");
static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir>"),
                                      cl::cat(tuneCategory));
static gpipe::Count devices("devices", cl::Required,
                            cl::desc("devices N to train on (K stages x R "
                                     "data-parallel replicas = N)"),
                            cl::cat(tuneCategory));
static cl::opt<std::string>
    memoryCap("memory-cap", cl::Required,
              cl::desc("memory per device, e.g. 64MiB or 2GiB"),
              cl::cat(tuneCategory));
static gpipe::Whole<int64_t> batchSize("batch-size", cl::init(0),
                                       cl::desc("mini-batch size (0: the "
                                                "model's own)"),
                                       cl::cat(tuneCategory));
static cl::opt<std::string>
    optimizerName("optimizer", cl::init("adam"),
                  cl::desc("sgd, momentum, rmsprop, adam or adamw (its state "
                           "counts in the memory)"),
                  cl::cat(tuneCategory));
static gpipe::Count maxMicrobatches("max-microbatches", cl::init(64),
                                    cl::desc("the largest M tried (1, 2, 4, "
                                             "... up to it)"),
                                    cl::cat(tuneCategory));
static cl::list<std::string> profilePaths(
    "profile",
    cl::desc("calibrate the costs on steps gpipe-run --profile measured for "
             "this model, instead of the cost model's machine (repeat with "
             "different M to fit each forward's and backward's fixed cost)"),
    cl::cat(tuneCategory));
static gpipe::Real<double> deviceGflops("device-gflops", cl::init(10.0),
                                        cl::desc("cost model: GFLOP/s of a "
                                                 "device"),
                                        cl::cat(tuneCategory));
static gpipe::Real<double> linkGBPerSecond("link-gb-per-s", cl::init(10.0),
                                           cl::desc("cost model: GB/s of a "
                                                    "link"),
                                           cl::cat(tuneCategory));
static gpipe::Real<double> linkLatencyUs("link-latency-us", cl::init(5.0),
                                         cl::desc("cost model: microseconds "
                                                  "per transfer"),
                                         cl::cat(tuneCategory));
static gpipe::Count processors(
    "processors", cl::init(0),
    cl::desc("processors the devices share, as CPU devices share cores (0: "
             "one per device)"),
    cl::cat(tuneCategory));
static cl::opt<std::string> planPath("plan", cl::init(""),
                                     cl::desc("write the chosen plan here, "
                                              "for gpipe-run --plan"),
                                     cl::cat(tuneCategory));
static cl::opt<bool> showAll("show-all", cl::init(false),
                             cl::desc("list every plan: the fitting ones "
                                      "with their prediction, fastest "
                                      "first, the others with the reason"),
                             cl::cat(tuneCategory));

static int fail(const std::string &message) {
  llvm::errs() << "gpipe-tune: error: " << message << "\n";
  return 1;
}

static std::string readFile(const std::string &path, std::string &error) {
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(path, &error);
  return file ? file->getBuffer().str() : "";
}

static std::string formatMs(double us) {
  return llvm::formatv("{0:f3}", us / 1e3).str();
}

static void printOutcome(const gpipe::PlanOutcome &outcome,
                         llvm::raw_ostream &os) {
  std::string peaks;
  for (int64_t peak : outcome.peakBytes)
    peaks += (peaks.empty() ? "" : ", ") + gpipe::formatBytes(double(peak));
  os << llvm::formatv("  {0,-46} {1,10} {2,7:f3}  [{3}]\n",
                      gpipe::describePlan(outcome.plan),
                      formatMs(outcome.stepUs), outcome.bubble, peaks);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(tuneCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "gpipe-tune: the plan (stages, data-parallel replicas, micro-batches, "
      "schedule, remat, partition) that trains fastest within a per-device "
      "memory cap\n");

  std::optional<uint64_t> cap;
  if (!gpipe::parseByteCount(memoryCap, cap) || !cap || *cap == 0)
    return fail("--memory-cap expects a byte count such as 64MiB or 2GiB, "
                "got '" +
                memoryCap + "'");
  if (devices < 1)
    return fail("--devices expects at least 1 device, got 0");
  if (batchSize < 0)
    return fail("--batch-size expects a positive number of examples, got " +
                std::to_string(batchSize));
  // State tensors per parameter, as the runtime keeps them
  // (optimizerSlots in Optimizers.h): RMSProp's mean square and momentum.
  static const std::map<std::string, unsigned> slots = {
      {"sgd", 0}, {"momentum", 1}, {"rmsprop", 2}, {"adam", 2}, {"adamw", 2}};
  auto optimizer = slots.find(optimizerName);
  if (optimizer == slots.end())
    return fail("unknown optimizer '" + optimizerName +
                "': expected sgd, momentum, rmsprop, adam or adamw");
  if (!(deviceGflops > 0) || !(linkGBPerSecond > 0) || !(linkLatencyUs >= 0))
    return fail("--device-gflops and --link-gb-per-s expect positive "
                "numbers and --link-latency-us a non-negative one");

  std::string error;
  gpipe::TuneRequest request;
  request.modelSource = readFile(modelPath, error);
  if (!error.empty())
    return fail(error);
  request.devices = devices;
  request.memoryCap = *cap;
  request.batchSize = batchSize;
  request.optimizerSlots = optimizer->second;
  request.maxMicrobatches = std::max(1u, unsigned(maxMicrobatches));
  request.processors = processors;
  request.costs = gpipe::tuneCostsFromMachine(
      {deviceGflops, linkGBPerSecond, linkLatencyUs});
  if (!profilePaths.empty()) {
    std::vector<std::string> profiles;
    for (const std::string &path : profilePaths) {
      profiles.push_back(readFile(path, error));
      if (!error.empty())
        return fail(error);
    }
    error = gpipe::calibrateOnProfiles(request.modelSource, profiles,
                                       request.optimizerSlots, request.costs);
    if (!error.empty())
      return fail("cannot calibrate on the profiles: " + error);
  }

  gpipe::TuneResult result = gpipe::searchPlans(request);
  if (!result.error.empty())
    return fail(modelPath + ": " + result.error);

  llvm::raw_ostream &os = llvm::outs();
  size_t rejected = 0;
  for (const gpipe::PlanOutcome &outcome : result.outcomes)
    rejected += !outcome.rejection.empty();
  os << "gpipe-tune: " << modelPath << " on " << unsigned(devices)
     << " devices, memory cap " << gpipe::formatBytes(double(*cap))
     << ", optimizer " << optimizerName << "; " << request.costs.source;
  if (processors > 0)
    os << "; the devices share " << unsigned(processors)
       << (processors == 1 ? " processor" : " processors");
  os << "\n";
  os << result.outcomes.size() << " plans tried, " << rejected << " rejected\n";
  if (showAll || !result.chosen)
    for (const gpipe::PlanOutcome &outcome : result.outcomes)
      if (!outcome.rejection.empty())
        os << "  rejected " << gpipe::describePlan(outcome.plan) << ": "
           << outcome.rejection << "\n";
  if (!result.chosen) {
    llvm::errs() << "gpipe-tune: error: no plan fits "
                 << gpipe::formatBytes(double(*cap))
                 << " per device; the reasons are above\n";
    return 1;
  }

  os << "Pareto plans (predicted step against the largest device's "
        "memory):\n";
  os << llvm::formatv("  {0,-46} {1,10} {2,7}  {3}\n", "plan", "step (ms)",
                      "bubble", "memory plan per device");
  for (size_t i : result.pareto)
    printOutcome(result.outcomes[i], os);
  if (showAll) {
    std::vector<const gpipe::PlanOutcome *> fitting;
    for (const gpipe::PlanOutcome &outcome : result.outcomes)
      if (outcome.rejection.empty())
        fitting.push_back(&outcome);
    std::stable_sort(
        fitting.begin(), fitting.end(),
        [](const gpipe::PlanOutcome *a, const gpipe::PlanOutcome *b) {
          return a->stepUs < b->stepUs;
        });
    os << "every plan that fits, fastest first:\n";
    for (const gpipe::PlanOutcome *outcome : fitting)
      printOutcome(*outcome, os);
  }
  const gpipe::PlanOutcome &chosen = result.outcomes[*result.chosen];
  os << "lower bound on the step: " << formatMs(result.lowerBoundUs)
     << " ms (the forward and backward work and the optimizer step spread "
        "over "
     << (processors > 0 ? std::min(unsigned(processors), unsigned(devices))
                        : unsigned(devices))
     << (processors > 0 && processors < devices
             ? (processors == 1 ? " processor" : " processors")
             : " devices")
     << ", no bubble, transfer or host time)\n";
  os << "chosen: " << gpipe::describePlan(chosen.plan) << ", predicted "
     << formatMs(chosen.stepUs) << " ms, "
     << llvm::formatv("{0:f2}", chosen.stepUs / result.lowerBoundUs)
     << "x the lower bound\n";

  if (!planPath.empty()) {
    gpipe::PlanFile file{chosen.plan, memoryCap, chosen.stepUs};
    std::unique_ptr<llvm::ToolOutputFile> out =
        mlir::openOutputFile(planPath, &error);
    if (!out)
      return fail(error);
    out->os() << gpipe::writePlanFile(file);
    out->keep();
    os << "plan written to " << planPath << " (gpipe-run --plan " << planPath
       << ")\n";
  }
  return 0;
}
