//===- PlanSearch.cpp - The plan that trains fastest under a cap ----------===//

#include "gpipe/Tune/PlanSearch.h"

#include "gpipe/Analysis/CostModel.h"
#include "gpipe/Analysis/LayerSequence.h"
#include "gpipe/Analysis/ScheduleIR.h"
#include "gpipe/Analysis/ScheduleSimulator.h"
#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/RecomputeCopies.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <limits>
#include <tuple>

using namespace mlir;
using namespace gpipe;
namespace sched = gpipe::schedule;

TuneCosts gpipe::tuneCostsFromMachine(const MachineModel &machine) {
  TuneCosts costs;
  costs.forwardUsPerFlop = 1.0 / (machine.deviceGflops * 1e3);
  costs.backwardUsPerFlop = 2 * costs.forwardUsPerFlop;
  costs.sendUsPerByte = 1.0 / (machine.linkGBPerSecond * 1e3);
  costs.latencyUs = machine.linkLatencyUs;
  costs.allReduceBytesPerUs = machine.linkGBPerSecond * 1e3;
  char text[160];
  std::snprintf(text, sizeof text,
                "cost model: %g GFLOP/s per device, links %g GB/s + %g us",
                machine.deviceGflops, machine.linkGBPerSecond,
                machine.linkLatencyUs);
  costs.source = text;
  return costs;
}

void gpipe::applyPlan(const Plan &plan, CompilePipelineOptions &options) {
  options.batchSize = plan.batchSize;
  options.dataParallel = plan.replicas;
  options.numStages = plan.stages;
  options.numMicrobatches = plan.microbatches;
  options.objective = plan.objective;
  options.remat = plan.remat;
  options.schedule = plan.schedule;
  options.numVirtualStages = plan.virtualStages;
}

std::string gpipe::describePlan(const Plan &plan) {
  return "K=" + std::to_string(plan.stages) +
         " R=" + std::to_string(plan.replicas) +
         " M=" + std::to_string(plan.microbatches) + " " +
         sched::scheduleKindName(plan.schedule) +
         (plan.virtualStages > 1 ? " V=" + std::to_string(plan.virtualStages)
                                 : std::string()) +
         " remat=" + stringifyRematPolicy(plan.remat).str() + " " +
         (plan.objective == PartitionObjective::Variance ? "variance"
                                                         : "bottleneck");
}

int64_t PlanOutcome::largestPeak() const {
  return peakBytes.empty()
             ? 0
             : *std::max_element(peakBytes.begin(), peakBytes.end());
}

namespace {
/// One plan compiled: what the simulation and the report need of it.
struct CompiledPlan {
  std::vector<uint64_t> stageFlops; ///< forward, at the replica's batch
  /// The share of each stage's forward FLOPs its recompute reruns.
  std::vector<double> stageRerunShare;
  std::vector<uint64_t> stageParamBytes;
  std::vector<int64_t> arenaBytes; ///< per device
  sched::Program program;
  int64_t replicaBatch = 0;
};

KeepPolicy keepOf(RematPolicy remat) {
  switch (remat) {
  case RematPolicy::None:
    return KeepPolicy::All;
  case RematPolicy::Full:
  case RematPolicy::Selective:
    return KeepPolicy::None;
  case RematPolicy::ExceptLast:
    return KeepPolicy::Last;
  }
  return KeepPolicy::None;
}

/// Compiles plans of one model in one MLIR context.
class PlanCompiler {
public:
  explicit PlanCompiler(unsigned optimizerSlots)
      : optimizerSlots(optimizerSlots) {
    DialectRegistry registry;
    registry.insert<GPipeDialect>();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    context.disableMultithreading();
  }

  /// The compiled plan, or nothing with `error` (the first diagnostic).
  std::optional<CompiledPlan> compile(const std::string &source,
                                      const Plan &plan, uint64_t memoryCap,
                                      std::string &error) {
    std::string first;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (first.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
        first = diag.str();
      return success();
    });
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, &context);
    if (!module) {
      error = "the model does not parse: " + first;
      return std::nullopt;
    }
    CompilePipelineOptions options;
    applyPlan(plan, options);
    options.optimizerSlots = optimizerSlots;
    if (memoryCap > 0)
      options.memoryCap = std::to_string(memoryCap);
    PassManager pm(&context);
    buildCompilePipeline(pm, options);
    if (failed(pm.run(*module))) {
      error = first.empty() ? "gpipe-compile failed" : first;
      return std::nullopt;
    }
    return read(*module, error);
  }

private:
  std::optional<CompiledPlan> read(ModuleOp module, std::string &error) {
    auto models = llvm::to_vector(module.getOps<ModelOp>());
    auto schedules = llvm::to_vector(module.getOps<ScheduleOp>());
    if (models.size() != 1 || schedules.size() != 1) {
      error = "expected one model and one schedule after gpipe-compile";
      return std::nullopt;
    }
    ModelOp model = models.front();
    FailureOr<ScheduleInIR> read = readSchedule(schedules.front(), model);
    if (failed(read)) {
      error = "the compiled schedule cannot be read";
      return std::nullopt;
    }
    CompiledPlan out;
    out.program = std::move(read->program);
    out.replicaBatch = model.getBatch();
    for (StageOp stage : getStages(model)) {
      uint64_t flops = 0, params = 0;
      for (LayerOp layer : stage.getBody().front().getOps<LayerOp>()) {
        if (CostAttr cost = getCost(layer))
          flops += cost.getFlops();
        params += layerParamBytes(layer);
      }
      out.stageFlops.push_back(flops);
      out.stageParamBytes.push_back(params);
      double share = 1.0;
      for (StageBackwardOp backward :
           model.getBody().front().getOps<StageBackwardOp>())
        if (backward.getStage() == stage.getSymName())
          share = rerunFlopShare(stage, backward);
      out.stageRerunShare.push_back(share);
    }
    for (ProgramOp program :
         schedules.front().getBody().front().getOps<ProgramOp>()) {
      auto memory = program->getAttrOfType<DictionaryAttr>("gpipe.memory");
      auto arena = memory ? memory.getAs<IntegerAttr>("arena_bytes") : nullptr;
      if (!arena) {
        error = "device " + std::to_string(program.getDevice()) +
                " has no memory plan";
        return std::nullopt;
      }
      out.arenaBytes.push_back(arena.getInt());
    }
    return out;
  }

  unsigned optimizerSlots;
  MLIRContext context;
};

/// The simulator's costs of a compiled plan.
sched::SimulationCosts simulationCosts(const CompiledPlan &compiled,
                                       const Plan &plan,
                                       const TuneCosts &costs) {
  sched::SimulationCosts out;
  double rows = double(std::max<int64_t>(compiled.replicaBatch, 1));
  for (size_t s = 0; s < compiled.stageFlops.size(); ++s) {
    sched::StageCosts &device = out.stages.emplace_back();
    double flopsPerRow = double(compiled.stageFlops[s]) / rows;
    device.forwardPerRow = flopsPerRow * costs.forwardUsPerFlop;
    device.backwardPerRow = flopsPerRow * costs.backwardUsPerFlop;
    device.forwardFixed =
        double(compiled.stageParamBytes[s]) * costs.forwardUsPerParamByte;
    device.backwardFixed =
        double(compiled.stageParamBytes[s]) * costs.backwardUsPerParamByte;
    // Full remat's recompute is priced as the forward it mostly is; a
    // selective one as the share of the forward's FLOPs it reruns.
    device.recomputePerRow =
        plan.remat == RematPolicy::Selective
            ? device.forwardPerRow * compiled.stageRerunShare[s]
            : device.forwardPerRow;
    double params = double(compiled.stageParamBytes[s]);
    device.optimizerStep = params * costs.optimizerUsPerParamByte;
    if (plan.replicas > 1 && costs.allReduceBytesPerUs > 0) {
      // A ring all-reduce moves 2 (R - 1) / R of the gradients each way.
      double r = double(plan.replicas);
      device.optimizerStep +=
          2 * (r - 1) / r * params / costs.allReduceBytesPerUs +
          2 * (r - 1) * costs.latencyUs;
    }
    device.sendFixed = costs.sendUs;
    device.sendPerByte = costs.sendUsPerByte;
    device.recvFixed = costs.recvUs;
  }
  out.latency = costs.latencyUs;
  out.stepOverhead = costs.hostUs;
  out.keep = keepOf(plan.remat);
  return out;
}

/// Divisors of n, increasing.
std::vector<unsigned> divisors(unsigned n) {
  std::vector<unsigned> out;
  for (unsigned d = 1; d <= n; ++d)
    if (n % d == 0)
      out.push_back(d);
  return out;
}
} // namespace

/// Each replica is a pipeline of its own devices and gets its share of the
/// processors; with fewer processors than replicas, each replica's one
/// processor runs at processors / replicas of its speed (time-sliced).
static void shareProcessors(sched::SimulationCosts &costs, unsigned processors,
                            unsigned replicas) {
  costs.processors = std::max(1u, processors / replicas);
  if (processors >= replicas)
    return;
  const double slowdown = double(replicas) / double(processors);
  for (sched::StageCosts &device : costs.stages)
    for (double *cost :
         {&device.forwardPerRow, &device.backwardPerRow, &device.forwardFixed,
          &device.backwardFixed, &device.recomputePerRow, &device.loadPerRow,
          &device.optimizerStep})
      *cost *= slowdown;
}

TuneResult gpipe::searchPlans(const TuneRequest &request) {
  TuneResult result;
  PlanCompiler compiler(request.optimizerSlots);

  // The whole model on one device: its batch, work and parameters.
  Plan whole;
  whole.batchSize = request.batchSize;
  whole.remat = RematPolicy::None;
  std::optional<CompiledPlan> single =
      compiler.compile(request.modelSource, whole, 0, result.error);
  if (!single)
    return result;
  const int64_t batch = single->replicaBatch;
  uint64_t modelFlops = 0, modelParams = 0;
  for (size_t s = 0; s < single->stageFlops.size(); ++s) {
    modelFlops += single->stageFlops[s];
    modelParams += single->stageParamBytes[s];
  }
  const TuneCosts &costs = request.costs;
  // Spread over the devices, or over the processors they share.
  unsigned workers = request.processors > 0
                         ? std::min(request.processors, request.devices)
                         : request.devices;
  result.lowerBoundUs =
      (double(modelFlops) * (costs.forwardUsPerFlop + costs.backwardUsPerFlop) +
       double(modelParams) * costs.optimizerUsPerParamByte) /
      double(std::max(1u, workers));

  using sched::ScheduleKind;
  for (unsigned stages : divisors(request.devices)) {
    unsigned replicas = request.devices / stages;
    int64_t replicaRows = batch / replicas;
    for (unsigned m = 1; m <= request.maxMicrobatches &&
                         int64_t(m) <= std::max<int64_t>(replicaRows, 1);
         m *= 2)
      for (ScheduleKind kind :
           {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
            ScheduleKind::ZeroBubbleH1, ScheduleKind::Interleaved})
        for (RematPolicy remat : {RematPolicy::None, RematPolicy::ExceptLast,
                                  RematPolicy::Full, RematPolicy::Selective})
          for (PartitionObjective objective :
               {PartitionObjective::Variance, PartitionObjective::Bottleneck}) {
            if (stages == 1 && objective != PartitionObjective::Variance)
              continue; // one cell: nothing to balance
            // Interleaving needs 2 devices or more; 2 stages each halve the
            // bubble (more cut the stages finer than most models' layers).
            unsigned virtualStages = kind == ScheduleKind::Interleaved ? 2 : 1;
            if (virtualStages > 1 && stages < 2)
              continue;
            PlanOutcome &outcome = result.outcomes.emplace_back();
            outcome.plan = {stages, replicas,  m,     kind,
                            remat,  objective, batch, virtualStages};
            std::optional<CompiledPlan> compiled =
                compiler.compile(request.modelSource, outcome.plan,
                                 request.memoryCap, outcome.rejection);
            if (!compiled)
              continue;
            outcome.peakBytes = compiled->arenaBytes;
            sched::SimulationCosts planCosts =
                simulationCosts(*compiled, outcome.plan, costs);
            if (request.processors > 0)
              shareProcessors(planCosts, request.processors, replicas);
            sched::SimulationResult simulation =
                sched::simulateSchedule(compiled->program, planCosts);
            if (!simulation.error.empty()) {
              outcome.rejection = simulation.error;
              continue;
            }
            outcome.stepUs = simulation.simulation.stepUs;
            outcome.bubble = simulation.simulation.bubbleFraction;
          }
  }

  std::vector<size_t> fitting;
  for (size_t i = 0; i < result.outcomes.size(); ++i)
    if (result.outcomes[i].rejection.empty())
      fitting.push_back(i);
  std::stable_sort(fitting.begin(), fitting.end(), [&](size_t a, size_t b) {
    const PlanOutcome &x = result.outcomes[a], &y = result.outcomes[b];
    return x.stepUs != y.stepUs ? x.stepUs < y.stepUs
                                : x.largestPeak() < y.largestPeak();
  });
  // Fastest first, a plan joins the front when it needs less memory than
  // every faster one.
  int64_t least = std::numeric_limits<int64_t>::max();
  for (size_t i : fitting)
    if (result.outcomes[i].largestPeak() < least) {
      least = result.outcomes[i].largestPeak();
      result.pareto.push_back(i);
    }
  if (!fitting.empty())
    result.chosen = fitting.front();
  return result;
}

namespace {
/// One measured step, reduced to what the calibration fits.
struct MeasuredStep {
  double flops = 0; ///< the model's forward FLOPs at the profiled batch
  /// Parameter bytes the forwards read: each stage's, once per micro-batch.
  double paramReads = 0;
  double forwardUs = 0, backwardUs = 0; ///< over all devices
  double params = 0, optimizerUs = 0, sendUs = 0, recvUs = 0, hostUs = 0;
  unsigned devices = 0;
  std::string plan;
};

/// Reads one profile and compiles the plan it measured.
std::string measureStep(PlanCompiler &compiler, const std::string &source,
                        const std::string &json, MeasuredStep &step) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json);
  if (!parsed)
    return "not JSON: " + llvm::toString(parsed.takeError());
  const llvm::json::Object *root = parsed->getAsObject();
  const llvm::json::Array *rows =
      root ? root->getArray("microbatch_rows") : nullptr;
  std::optional<int64_t> stages =
      root ? root->getInteger("stages") : std::nullopt;
  std::optional<llvm::StringRef> remat =
      root ? root->getString("remat") : std::nullopt;
  if (!rows || rows->empty() || !stages || *stages < 1 || !remat)
    return "expected 'stages', 'microbatch_rows' and 'remat' (a profile "
           "written by gpipe-run --profile)";
  Plan plan;
  plan.stages = unsigned(*stages);
  plan.microbatches = unsigned(rows->size());
  for (const llvm::json::Value &value : *rows)
    plan.batchSize += value.getAsInteger().value_or(0);
  if (*remat == "none")
    plan.remat = RematPolicy::None;
  else if (*remat == "except-last")
    plan.remat = RematPolicy::ExceptLast;
  else if (*remat == "selective")
    plan.remat = RematPolicy::Selective;
  step.plan = describePlan(plan);
  std::string error;
  std::optional<CompiledPlan> compiled =
      compiler.compile(source, plan, 0, error);
  if (!compiled)
    return "cannot compile the profiled plan (" + step.plan + "): " + error;
  sched::SimulationCosts measured;
  error = readProfile(json, plan.stages, measured);
  if (!error.empty())
    return error;
  step.devices = plan.stages;
  for (unsigned s = 0; s < plan.stages; ++s) {
    const sched::StageCosts &device = measured.stages[s];
    step.flops += double(compiled->stageFlops[s]);
    step.params += double(compiled->stageParamBytes[s]);
    step.paramReads +=
        double(compiled->stageParamBytes[s]) * double(plan.microbatches);
    step.forwardUs += device.forwardPerRow * double(plan.batchSize);
    step.backwardUs += device.backwardPerRow * double(plan.batchSize);
    step.optimizerUs += device.optimizerStep;
    step.sendUs += device.sendFixed;
    step.recvUs += device.recvFixed;
  }
  step.hostUs = measured.stepOverhead;
  return "";
}

/// Least squares of time = a x flops + b x paramReads, with a, b >= 0;
/// b = 0 when the steps cannot tell the terms apart.
std::pair<double, double> fitTime(const std::vector<MeasuredStep> &steps,
                                  double MeasuredStep::*time) {
  double ff = 0, fc = 0, cc = 0, ft = 0, ct = 0;
  for (const MeasuredStep &step : steps) {
    ff += step.flops * step.flops;
    fc += step.flops * step.paramReads;
    cc += step.paramReads * step.paramReads;
    ft += step.flops * (step.*time);
    ct += step.paramReads * (step.*time);
  }
  double determinant = ff * cc - fc * fc;
  if (determinant > 1e-9 * ff * cc) {
    double a = (ft * cc - ct * fc) / determinant;
    double b = (ff * ct - fc * ft) / determinant;
    if (a > 0 && b >= 0)
      return {a, b};
  }
  return {ff > 0 ? ft / ff : 0.0, 0.0};
}
} // namespace

std::string gpipe::calibrateOnProfiles(const std::string &modelSource,
                                       const std::vector<std::string> &profiles,
                                       unsigned optimizerSlots,
                                       TuneCosts &costs) {
  if (profiles.empty())
    return "expected at least one profile";
  PlanCompiler compiler(optimizerSlots);
  std::vector<MeasuredStep> steps(profiles.size());
  for (size_t i = 0; i < profiles.size(); ++i) {
    std::string error =
        measureStep(compiler, modelSource, profiles[i], steps[i]);
    if (!error.empty())
      return "profile " + std::to_string(i + 1) + ": " + error;
    if (!(steps[i].flops > 0))
      return "profile " + std::to_string(i + 1) +
             ": the profiled model has no FLOPs to calibrate on";
  }
  std::tie(costs.forwardUsPerFlop, costs.forwardUsPerParamByte) =
      fitTime(steps, &MeasuredStep::forwardUs);
  std::tie(costs.backwardUsPerFlop, costs.backwardUsPerParamByte) =
      fitTime(steps, &MeasuredStep::backwardUs);
  // The rest as measured, averaged over the profiles.
  double params = 0, optimizer = 0, send = 0, recv = 0, host = 0, devices = 0;
  for (const MeasuredStep &step : steps) {
    params += step.params;
    optimizer += step.optimizerUs;
    send += step.sendUs;
    recv += step.recvUs;
    host += step.hostUs;
    devices += step.devices;
  }
  costs.optimizerUsPerParamByte = params > 0 ? optimizer / params : 0;
  costs.sendUs = send / devices;
  costs.sendUsPerByte = 0;
  costs.recvUs = recv / devices;
  costs.latencyUs = 0;
  costs.hostUs = host / double(steps.size());
  costs.source = "calibrated on profiles of";
  for (size_t i = 0; i < steps.size(); ++i)
    costs.source += (i ? ", " : " ") + steps[i].plan;
  char fit[200];
  std::snprintf(
      fit, sizeof fit,
      " (forward %.3g us/MFLOP + %.3g us/MiB of its stage's "
      "parameters, backward %.3g us/MFLOP + %.3g us/MiB)",
      costs.forwardUsPerFlop * 1e6, costs.forwardUsPerParamByte * 1048576.0,
      costs.backwardUsPerFlop * 1e6, costs.backwardUsPerParamByte * 1048576.0);
  costs.source += fit;
  return "";
}
