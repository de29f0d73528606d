//===- Report.cpp - Partition and schedule report -------------------------===//

#include "StageMemoryDescription.h"
#include "gpipe/Analysis/ByteCount.h"
#include "gpipe/Analysis/CostModel.h"
#include "gpipe/Analysis/LayerSequence.h"
#include "gpipe/Analysis/ScheduleIR.h"
#include "gpipe/Analysis/ScheduleSimulator.h"
#include "gpipe/Analysis/SimulationCosts.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

#define DEBUG_TYPE "gpipe-report"

namespace gpipe {
#define GEN_PASS_DEF_REPORTPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;
namespace sched = gpipe::schedule;

namespace {
struct StageSummary {
  std::string name;
  std::vector<std::string> layers;
  uint64_t flops = 0;
  uint64_t paramBytes = 0;
  std::optional<int64_t> memoryBytes;
  uint64_t activationBytesSent = 0; ///< forward, per mini-batch
  uint64_t gradientBytesSent = 0;   ///< backward, per mini-batch
};

/// gpipe-plan-memory's plan of one device, when it ran.
struct DevicePlan {
  std::optional<int64_t> residentBytes, peakBytes, arenaBytes;
  /// The most bytes kept only for sends not yet waited for.
  int64_t sendHeldBytes = 0;
  std::string peakAt;
};

struct ModelSummary {
  std::string name;
  int64_t batch = 0;
  std::string objective;
  std::optional<int64_t> memoryCap;
  std::vector<StageSummary> stages;
  /// Stages per device (interleaving), and each device's memory plan.
  unsigned virtualStages = 1;
  std::vector<DevicePlan> devices;
  double imbalance = 1.0;
  /// Where the partition weighed the cells by their devices' work
  /// (balance=work): the weights and the imbalance of the weighed costs.
  std::vector<int64_t> cellWeights;
  double workImbalance = 1.0;
  std::optional<unsigned> numMicrobatches;
  std::vector<int64_t> rows;
  std::optional<double> balancedBubble;
  std::optional<double> predictedBubble;
  /// With `simulate`: the simulated step and where its costs came from.
  std::optional<sched::Simulation> simulation;
  std::string costSource;
};

/// What the pass's simulation options ask for.
struct SimulationRequest {
  bool simulate = false;
  std::string profilePath; ///< "" for the cost model
  MachineModel machine;
  unsigned processors = 0; ///< shared by the devices; 0: one each
};
} // namespace

static std::string formatFlops(double flops) {
  if (flops >= 1e9)
    return llvm::formatv("{0:f3} GFLOP", flops / 1e9).str();
  return llvm::formatv("{0:f3} MFLOP", flops / 1e6).str();
}

/// "10", "0.016", "2.5e+06".
static std::string shortNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// The remat policy of the model's backward stages ("full" if unmarked).
static KeepPolicy keepPolicyOfModel(ModelOp model) {
  for (StageBackwardOp backward :
       model.getBody().front().getOps<StageBackwardOp>())
    return keepPolicyOf(backward.getRemat().value_or("full"));
  return KeepPolicy::None;
}

/// Simulates `program` with the costs `request` names.
static LogicalResult simulate(ScheduleOp schedule,
                              const sched::Program &program,
                              const SimulationRequest &request,
                              ModelSummary &summary, KeepPolicy keep) {
  sched::SimulationCosts costs;
  if (request.profilePath.empty()) {
    std::vector<uint64_t> flops;
    for (const StageSummary &stage : summary.stages)
      flops.push_back(stage.flops);
    costs = costsFromModel(flops, summary.batch, request.machine);
    summary.costSource =
        "cost model: " + shortNumber(request.machine.deviceGflops) +
        " GFLOP/s per device, links " +
        shortNumber(request.machine.linkGBPerSecond) + " GB/s + " +
        shortNumber(request.machine.linkLatencyUs) + " us";
  } else {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
        llvm::MemoryBuffer::getFile(request.profilePath);
    if (!file)
      return schedule.emitOpError()
             << "cannot open profile '" << request.profilePath
             << "': " << file.getError().message();
    std::string error = readProfile(
        (*file)->getBuffer(),
        unsigned(program.devices.size() * program.numVirtualStages), costs);
    if (!error.empty())
      return schedule.emitOpError()
             << "cannot use profile '" << request.profilePath << "': " << error;
    summary.costSource = "profile " + request.profilePath;
  }
  costs.keep = keep;
  costs.processors = request.processors;
  if (request.processors > 0)
    summary.costSource +=
        ", the devices sharing " + std::to_string(request.processors) +
        (request.processors == 1 ? " processor" : " processors");
  sched::SimulationResult result = sched::simulateSchedule(program, costs);
  if (!result.error.empty())
    return schedule.emitOpError() << "cannot be simulated: " << result.error;
  summary.simulation = std::move(result.simulation);
  return success();
}

static FailureOr<ModelSummary> summarize(ModelOp model, ModuleOp module,
                                         const SimulationRequest &request) {
  SmallVector<StageOp> stages = getStages(model);
  if (stages.empty())
    return model.emitOpError()
           << "has no stages to report; run gpipe-compile first";
  ModelSummary summary;
  summary.name = model.getSymName().str();
  summary.batch = model.getBatch();
  if (auto partition = model->getAttrOfType<DictionaryAttr>("gpipe.partition")) {
    if (auto objective = partition.getAs<StringAttr>("objective"))
      summary.objective = objective.str();
    if (auto cap = partition.getAs<IntegerAttr>("memory_cap"))
      summary.memoryCap = cap.getInt();
    if (auto weights = partition.getAs<DenseI64ArrayAttr>("cell_weights"))
      summary.cellWeights.assign(weights.asArrayRef().begin(),
                                 weights.asArrayRef().end());
  }

  uint64_t totalFlops = 0, maxFlops = 0;
  for (StageOp stage : stages) {
    StageSummary &out = summary.stages.emplace_back();
    out.name = stage.getSymName().str();
    for (LayerOp layer : stage.getBody().front().getOps<LayerOp>()) {
      out.layers.push_back(layer.getName().str());
      if (CostAttr cost = getCost(layer))
        out.flops += cost.getFlops();
      out.paramBytes += layerParamBytes(layer);
    }
    if (std::optional<int64_t> memory = stage.getMemoryBytes())
      out.memoryBytes = *memory;
    if (stage.getIndex() + 1 < stages.size())
      for (Type type : stage.getResultTypes())
        out.activationBytesSent += tensorBytes(type);
    for (Value input : stage.getInputs())
      if (input.getDefiningOp<RecvOp>() || input.getDefiningOp<StageOp>())
        out.gradientBytesSent += tensorBytes(input.getType());
    totalFlops += out.flops;
    maxFlops = std::max(maxFlops, out.flops);
  }
  double meanFlops = double(totalFlops) / stages.size();
  summary.imbalance = meanFlops > 0 ? maxFlops / meanFlops : 1.0;
  if (summary.cellWeights.size() == summary.stages.size()) {
    double totalWork = 0, maxWork = 0;
    for (size_t s = 0; s < summary.stages.size(); ++s) {
      double work = double(summary.stages[s].flops) * summary.cellWeights[s];
      totalWork += work;
      maxWork = std::max(maxWork, work);
    }
    double meanWork = totalWork / summary.stages.size();
    summary.workImbalance = meanWork > 0 ? maxWork / meanWork : 1.0;
  } else {
    summary.cellWeights.clear();
  }

  for (ScheduleOp schedule : module.getOps<ScheduleOp>()) {
    if (schedule.getModel() != model.getSymName())
      continue;
    FailureOr<ScheduleInIR> read = readSchedule(schedule, model);
    if (failed(read))
      return failure();
    unsigned m = schedule.getMicrobatches();
    summary.numMicrobatches = m;
    summary.rows.assign(schedule.getRows().begin(), schedule.getRows().end());
    summary.virtualStages = read->program.numVirtualStages;
    const unsigned numDevices = read->program.devices.size();
    summary.balancedBubble =
        sched::idealBubbleFraction(numDevices, m, summary.virtualStages);
    // The stage costs alone: a backward costs about twice its forward (two
    // GEMMs per forward GEMM); transfers and recomputation are free.
    std::vector<uint64_t> flops;
    for (const StageSummary &stage : summary.stages)
      flops.push_back(stage.flops);
    MachineModel unitMachine; // a FLOP per microsecond: exact small sums
    unitMachine.deviceGflops = 1e-3;
    unitMachine.linkGBPerSecond = std::numeric_limits<double>::infinity();
    unitMachine.linkLatencyUs = 0;
    sched::SimulationCosts stageCosts =
        costsFromModel(flops, summary.batch, unitMachine);
    stageCosts.keep = KeepPolicy::All;
    sched::SimulationResult replay =
        sched::simulateSchedule(read->program, stageCosts);
    if (!replay.error.empty())
      return schedule.emitOpError()
             << "cannot run to completion; run gpipe-verify-schedule";
    summary.predictedBubble = replay.simulation.bubbleFraction;
    if (request.simulate && failed(simulate(schedule, read->program, request,
                                            summary, keepPolicyOfModel(model))))
      return failure();
    summary.devices.assign(numDevices, {});
    for (ProgramOp program : schedule.getBody().front().getOps<ProgramOp>()) {
      auto plan = program->getAttrOfType<DictionaryAttr>("gpipe.memory");
      if (!plan || program.getDevice() >= numDevices)
        continue;
      DevicePlan &stage = summary.devices[program.getDevice()];
      auto get = [&](StringRef key) -> std::optional<int64_t> {
        auto value = plan.getAs<IntegerAttr>(key);
        return value ? std::optional<int64_t>(value.getInt()) : std::nullopt;
      };
      stage.residentBytes = get("resident_bytes");
      stage.peakBytes = get("peak_bytes");
      stage.arenaBytes = get("arena_bytes");
      stage.sendHeldBytes = get("send_held_bytes").value_or(0);
      if (auto at = plan.getAs<StringAttr>("peak_at"))
        stage.peakAt = at.str();
    }
  }
  return summary;
}

namespace {
/// A device's time in a simulated step, in microseconds.
struct DeviceTime {
  double forward = 0, backward = 0, optimizer = 0;
  double busy() const { return forward + backward + optimizer; }
};
} // namespace

static DeviceTime deviceTime(const std::vector<sched::SimulatedEvent> &lane) {
  DeviceTime time;
  for (const sched::SimulatedEvent &event : lane) {
    if (event.name == "forward")
      time.forward += event.durationUs;
    else if (event.name == "backward" || event.name == "backward weights" ||
             event.name == "recompute") // a backward's own work
      time.backward += event.durationUs;
    else if (event.name == "optimizer step")
      time.optimizer += event.durationUs;
  }
  return time;
}

static void printSimulation(const ModelSummary &summary,
                            llvm::raw_ostream &os) {
  const sched::Simulation &simulation = *summary.simulation;
  os << llvm::formatv("simulated step ({0}): {1:f3} ms ({2:f3} ms on the "
                      "devices + {3:f3} ms on the host), bubble {4:f3}\n",
                      summary.costSource, simulation.stepUs / 1e3,
                      simulation.makespanUs / 1e3,
                      (simulation.stepUs - simulation.makespanUs) / 1e3,
                      simulation.bubbleFraction);
  for (auto [device, lane] : llvm::enumerate(simulation.lanes)) {
    DeviceTime time = deviceTime(lane);
    os << llvm::formatv("  device {0}: busy {1:f3} ms (forward {2:f3}, "
                        "backward {3:f3}, optimizer {4:f3}), idle {5:f3} ms\n",
                        device, time.busy() / 1e3, time.forward / 1e3,
                        time.backward / 1e3, time.optimizer / 1e3,
                        (simulation.makespanUs - time.busy()) / 1e3);
  }
}

static llvm::json::Value simulationJson(const ModelSummary &summary) {
  const sched::Simulation &simulation = *summary.simulation;
  llvm::json::Array devices;
  for (const std::vector<sched::SimulatedEvent> &lane : simulation.lanes) {
    DeviceTime time = deviceTime(lane);
    devices.push_back(
        llvm::json::Object{{"busy_us", time.busy()},
                           {"forward_us", time.forward},
                           {"backward_us", time.backward},
                           {"optimizer_us", time.optimizer},
                           {"idle_us", simulation.makespanUs - time.busy()}});
  }
  return llvm::json::Object{{"source", summary.costSource},
                            {"step_us", simulation.stepUs},
                            {"makespan_us", simulation.makespanUs},
                            {"bubble_fraction", simulation.bubbleFraction},
                            {"devices", std::move(devices)}};
}

/// The simulated timelines in the Chrome trace format gpipe-run --trace
/// writes: one row (tid) per device, one process (pid) per model.
static llvm::json::Value
simulatedTrace(llvm::ArrayRef<ModelSummary> summaries) {
  llvm::json::Array events;
  for (auto [pid, summary] : llvm::enumerate(summaries)) {
    if (!summary.simulation)
      continue;
    for (auto [device, lane] : llvm::enumerate(summary.simulation->lanes)) {
      events.push_back(llvm::json::Object{
          {"name", "thread_name"},
          {"ph", "M"},
          {"pid", int64_t(pid)},
          {"tid", int64_t(device)},
          {"args",
           llvm::json::Object{{"name", "device " + std::to_string(device)}}}});
      for (const sched::SimulatedEvent &event : lane) {
        llvm::json::Object object{{"name", event.name},
                                  {"cat", event.compute ? "compute" : "wait"},
                                  {"ph", "X"},
                                  {"ts", event.startUs},
                                  {"dur", event.durationUs},
                                  {"pid", int64_t(pid)},
                                  {"tid", int64_t(device)}};
        if (event.microbatch >= 0)
          object["args"] = llvm::json::Object{{"microbatch", event.microbatch}};
        events.push_back(std::move(object));
      }
    }
  }
  return llvm::json::Object{{"traceEvents", std::move(events)},
                            {"displayTimeUnit", "ms"}};
}

static void printText(const ModelSummary &summary, llvm::raw_ostream &os) {
  os << "model @" << summary.name << ": " << summary.stages.size() << " stages";
  if (summary.virtualStages > 1)
    os << " on " << summary.devices.size() << " devices (interleaved)";
  os << ", batch " << summary.batch;
  if (summary.numMicrobatches) {
    os << " in " << *summary.numMicrobatches << " micro-batches of rows [";
    llvm::interleaveComma(summary.rows, os);
    os << "]";
  }
  if (!summary.objective.empty())
    os << ", objective " << summary.objective;
  if (summary.memoryCap)
    os << ", memory cap " << formatBytes(*summary.memoryCap);
  os << "\n";
  os << llvm::formatv("{0,-7} {1,16} {2,7} {3,11} {4,11} {5,12} {6,12}  {7}\n",
                      "stage", "forward cost", "share", "params",
                      "memory", "act. sent", "grad. sent", "layers");
  double total = 0;
  for (const StageSummary &stage : summary.stages)
    total += stage.flops;
  for (auto [index, stage] : llvm::enumerate(summary.stages)) {
    std::string layers;
    llvm::raw_string_ostream names(layers);
    llvm::interleaveComma(stage.layers, names);
    // The plan's arena is its device's: the stage's own only when the device
    // runs no other.
    std::optional<int64_t> arena;
    if (summary.virtualStages == 1 && index < summary.devices.size())
      arena = summary.devices[index].arenaBytes;
    os << llvm::formatv(
        "{0,-7} {1,16} {2,6:f1}% {3,11} {4,11} {5,12} {6,12}  {7}\n", index,
        formatFlops(stage.flops), total > 0 ? 100.0 * stage.flops / total : 0.0,
        formatBytes(stage.paramBytes),
        stage.memoryBytes ? formatBytes(*stage.memoryBytes)
        : arena           ? formatBytes(*arena)
                          : "-",
        formatBytes(stage.activationBytesSent),
        formatBytes(stage.gradientBytesSent), layers);
  }
  os << llvm::formatv("imbalance (largest / mean stage cost): {0:f3}\n",
                      summary.imbalance);
  if (!summary.cellWeights.empty())
    os << llvm::formatv(
        "imbalance of the devices' work (cost x cell weight "
        "{0}, in half forwards): {1:f3}\n",
        llvm::join(llvm::map_range(
                       summary.cellWeights,
                       [](int64_t weight) { return std::to_string(weight); }),
                   " / "),
        summary.workImbalance);
  if (summary.balancedBubble)
    os << llvm::formatv("bubble fraction: {0:f3} for balanced stages "
                        "{1}, {2:f3} predicted from the stage costs\n",
                        *summary.balancedBubble,
                        summary.virtualStages > 1 ? "(K-1)/(VM+K-1)"
                                                  : "(K-1)/(M+K-1)",
                        *summary.predictedBubble);
  if (summary.simulation)
    printSimulation(summary, os);
  bool planned = llvm::any_of(summary.devices, [](const DevicePlan &device) {
    return device.peakBytes.has_value();
  });
  if (!planned)
    return;
  os << "memory plan (per device, before anything runs):\n";
  os << llvm::formatv("{0,-7} {1,11} {2,11} {3,11} {4,11}  {5}\n", "device",
                      "resident", "peak", "arena", "for sends", "peak at");
  for (auto [index, device] : llvm::enumerate(summary.devices))
    if (device.peakBytes)
      os << llvm::formatv("{0,-7} {1,11} {2,11} {3,11} {4,11}  {5}\n", index,
                          formatBytes(device.residentBytes.value_or(0)),
                          formatBytes(*device.peakBytes),
                          formatBytes(device.arenaBytes.value_or(0)),
                          formatBytes(device.sendHeldBytes), device.peakAt);
}

static llvm::json::Object planJson(const DevicePlan &device) {
  return llvm::json::Object{
      {"resident_bytes", device.residentBytes.value_or(0)},
      {"peak_bytes", *device.peakBytes},
      {"arena_bytes", device.arenaBytes.value_or(0)},
      {"send_held_bytes", device.sendHeldBytes},
      {"peak_at", device.peakAt}};
}

static llvm::json::Value toJson(const ModelSummary &summary) {
  llvm::json::Array stages;
  for (auto [index, stage] : llvm::enumerate(summary.stages)) {
    llvm::json::Array layers;
    for (const std::string &layer : stage.layers)
      layers.push_back(layer);
    llvm::json::Object object{
        {"index", int64_t(index)},
        {"name", stage.name},
        {"layers", std::move(layers)},
        {"forward_flops", stage.flops},
        {"param_bytes", stage.paramBytes},
        {"activation_bytes_sent", stage.activationBytesSent},
        {"gradient_bytes_sent", stage.gradientBytesSent},
    };
    if (stage.memoryBytes)
      object["memory_bytes"] = *stage.memoryBytes;
    // One stage per device: its device's plan (under interleaving, see
    // "devices").
    if (summary.virtualStages == 1 && index < summary.devices.size() &&
        summary.devices[index].peakBytes)
      object["memory_plan"] = planJson(summary.devices[index]);
    stages.push_back(std::move(object));
  }
  llvm::json::Array devices;
  for (const DevicePlan &device : summary.devices)
    if (device.peakBytes)
      devices.push_back(llvm::json::Object{{"memory_plan", planJson(device)}});
  llvm::json::Object object{
      {"model", summary.name},
      {"batch", summary.batch},
      {"num_stages", int64_t(summary.stages.size())},
      {"virtual_stages", int64_t(summary.virtualStages)},
      {"stages", std::move(stages)},
      {"devices", std::move(devices)},
      {"imbalance", summary.imbalance},
  };
  if (!summary.cellWeights.empty()) {
    object["cell_weights"] = llvm::json::Array(summary.cellWeights);
    object["work_imbalance"] = summary.workImbalance;
  }
  if (!summary.objective.empty())
    object["objective"] = summary.objective;
  if (summary.memoryCap)
    object["memory_cap"] = *summary.memoryCap;
  if (summary.numMicrobatches) {
    object["num_microbatches"] = int64_t(*summary.numMicrobatches);
    object["microbatch_rows"] = llvm::json::Array(summary.rows);
    object["bubble_fraction_balanced"] = *summary.balancedBubble;
    object["bubble_fraction_predicted"] = *summary.predictedBubble;
  }
  if (summary.simulation)
    object["simulation"] = simulationJson(summary);
  return object;
}

namespace {
struct ReportPass : public gpipe::impl::ReportPassBase<ReportPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (format != "text" && format != "json") {
      module.emitError() << "invalid report format '" << format
                         << "': expected text or json";
      return signalPassFailure();
    }
    SimulationRequest request;
    request.simulate = simulate || !profile.empty() || !trace.empty();
    request.profilePath = profile;
    request.machine = {deviceGflops, linkGBPerSecond, linkLatencyUs};
    request.processors = processors;
    if (!(deviceGflops > 0) || !(linkGBPerSecond > 0) ||
        !(linkLatencyUs >= 0)) {
      module.emitError() << "expects device-gflops > 0, link-gb-per-s > 0 "
                            "and link-latency-us >= 0, got "
                         << shortNumber(deviceGflops) << ", "
                         << shortNumber(linkGBPerSecond) << " and "
                         << shortNumber(linkLatencyUs);
      return signalPassFailure();
    }
    std::vector<ModelSummary> summaries;
    for (ModelOp model : module.getOps<ModelOp>()) {
      FailureOr<ModelSummary> summary = summarize(model, module, request);
      if (failed(summary))
        return signalPassFailure();
      summaries.push_back(std::move(*summary));
    }
    if (!trace.empty() && failed(writeTrace(summaries)))
      return signalPassFailure();

    std::string errorMessage;
    std::unique_ptr<llvm::ToolOutputFile> file;
    if (output != "-") {
      file = openOutputFile(output, &errorMessage);
      if (!file) {
        module.emitError() << "cannot write the report to '" << output
                           << "': " << errorMessage;
        return signalPassFailure();
      }
    }
    llvm::raw_ostream &os = file ? file->os() : llvm::outs();
    if (format == "json") {
      llvm::json::Array models;
      for (const ModelSummary &summary : summaries)
        models.push_back(toJson(summary));
      os << llvm::formatv("{0:2}", llvm::json::Value(std::move(models)))
         << "\n";
    } else {
      for (const ModelSummary &summary : summaries)
        printText(summary, os);
    }
    os.flush();
    if (file)
      file->keep();
    markAllAnalysesPreserved();
  }

  LogicalResult writeTrace(llvm::ArrayRef<ModelSummary> summaries) {
    std::string errorMessage;
    std::unique_ptr<llvm::ToolOutputFile> file =
        openOutputFile(trace, &errorMessage);
    if (!file)
      return getOperation().emitError()
             << "cannot write the simulated trace to '" << trace
             << "': " << errorMessage;
    file->os() << llvm::formatv("{0}", simulatedTrace(summaries)) << "\n";
    file->keep();
    return success();
  }
};
} // namespace
