//===- Report.cpp - Partition and schedule report -------------------------===//

#include "gpipe/Analysis/ByteCount.h"
#include "gpipe/Analysis/CostModel.h"
#include "gpipe/Analysis/LayerSequence.h"
#include "gpipe/Analysis/ScheduleIR.h"
#include "gpipe/Analysis/ScheduleReplay.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
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
  /// gpipe-plan-memory's plan of the stage's device, when it ran.
  std::optional<int64_t> residentBytes, peakBytes, arenaBytes;
  std::string peakAt;
};

struct ModelSummary {
  std::string name;
  int64_t batch = 0;
  std::string objective;
  std::optional<int64_t> memoryCap;
  std::vector<StageSummary> stages;
  double imbalance = 1.0;
  std::optional<unsigned> numMicrobatches;
  std::vector<int64_t> rows;
  std::optional<double> balancedBubble;
  std::optional<double> predictedBubble;
};
} // namespace

static std::string formatFlops(double flops) {
  if (flops >= 1e9)
    return llvm::formatv("{0:f3} GFLOP", flops / 1e9).str();
  return llvm::formatv("{0:f3} MFLOP", flops / 1e6).str();
}

static FailureOr<ModelSummary> summarize(ModelOp model, ModuleOp module) {
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

  for (ScheduleOp schedule : module.getOps<ScheduleOp>()) {
    if (schedule.getModel() != model.getSymName())
      continue;
    FailureOr<ScheduleInIR> read = readSchedule(schedule, model);
    if (failed(read))
      return failure();
    unsigned m = schedule.getMicrobatches();
    summary.numMicrobatches = m;
    summary.rows.assign(schedule.getRows().begin(), schedule.getRows().end());
    summary.balancedBubble = sched::balancedBubbleFraction(stages.size(), m);
    // A backward costs about twice its forward (two GEMMs per forward GEMM).
    auto duration = [&](const sched::Instr &instr) {
      double forward = double(summary.stages[instr.stage].flops) * instr.rows /
                       double(summary.batch);
      return instr.kind == sched::InstrKind::Backward ? 2.0 * forward
                                                      : forward;
    };
    std::optional<sched::ReplayResult> replay =
        sched::replaySchedule(read->program, duration);
    if (!replay)
      return schedule.emitOpError()
             << "cannot run to completion; run gpipe-verify-schedule";
    summary.predictedBubble = replay->bubbleFraction;
    for (ProgramOp program : schedule.getBody().front().getOps<ProgramOp>()) {
      auto plan = program->getAttrOfType<DictionaryAttr>("gpipe.memory");
      if (!plan || program.getDevice() >= summary.stages.size())
        continue;
      StageSummary &stage = summary.stages[program.getDevice()];
      auto get = [&](StringRef key) -> std::optional<int64_t> {
        auto value = plan.getAs<IntegerAttr>(key);
        return value ? std::optional<int64_t>(value.getInt()) : std::nullopt;
      };
      stage.residentBytes = get("resident_bytes");
      stage.peakBytes = get("peak_bytes");
      stage.arenaBytes = get("arena_bytes");
      if (auto at = plan.getAs<StringAttr>("peak_at"))
        stage.peakAt = at.str();
    }
  }
  return summary;
}

static void printText(const ModelSummary &summary, llvm::raw_ostream &os) {
  os << "model @" << summary.name << ": " << summary.stages.size()
     << " stages, batch " << summary.batch;
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
    os << llvm::formatv(
        "{0,-7} {1,16} {2,6:f1}% {3,11} {4,11} {5,12} {6,12}  {7}\n", index,
        formatFlops(stage.flops),
        total > 0 ? 100.0 * stage.flops / total : 0.0,
        formatBytes(stage.paramBytes),
        stage.memoryBytes  ? formatBytes(*stage.memoryBytes)
        : stage.arenaBytes ? formatBytes(*stage.arenaBytes)
                           : "-",
        formatBytes(stage.activationBytesSent),
        formatBytes(stage.gradientBytesSent), layers);
  }
  os << llvm::formatv("imbalance (largest / mean stage cost): {0:f3}\n",
                      summary.imbalance);
  if (summary.balancedBubble)
    os << llvm::formatv("bubble fraction: {0:f3} for balanced stages "
                        "(K-1)/(M+K-1), {1:f3} predicted from the stage "
                        "costs\n",
                        *summary.balancedBubble, *summary.predictedBubble);
  bool planned = llvm::any_of(summary.stages, [](const StageSummary &stage) {
    return stage.peakBytes.has_value();
  });
  if (!planned)
    return;
  os << "memory plan (per device, before anything runs):\n";
  os << llvm::formatv("{0,-7} {1,11} {2,11} {3,11}  {4}\n", "device",
                      "resident", "peak", "arena", "peak at");
  for (auto [index, stage] : llvm::enumerate(summary.stages))
    if (stage.peakBytes)
      os << llvm::formatv("{0,-7} {1,11} {2,11} {3,11}  {4}\n", index,
                          formatBytes(stage.residentBytes.value_or(0)),
                          formatBytes(*stage.peakBytes),
                          formatBytes(stage.arenaBytes.value_or(0)),
                          stage.peakAt);
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
    if (stage.peakBytes)
      object["memory_plan"] = llvm::json::Object{
          {"resident_bytes", stage.residentBytes.value_or(0)},
          {"peak_bytes", *stage.peakBytes},
          {"arena_bytes", stage.arenaBytes.value_or(0)},
          {"peak_at", stage.peakAt}};
    stages.push_back(std::move(object));
  }
  llvm::json::Object object{
      {"model", summary.name},
      {"batch", summary.batch},
      {"num_stages", int64_t(summary.stages.size())},
      {"stages", std::move(stages)},
      {"imbalance", summary.imbalance},
  };
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
    std::vector<ModelSummary> summaries;
    for (ModelOp model : module.getOps<ModelOp>()) {
      FailureOr<ModelSummary> summary = summarize(model, module);
      if (failed(summary))
        return signalPassFailure();
      summaries.push_back(std::move(*summary));
    }

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
};
} // namespace
