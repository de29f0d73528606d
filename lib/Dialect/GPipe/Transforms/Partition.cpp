//===- Partition.cpp - Assign layers to balanced contiguous cells ---------===//
//
// Under a memory cap, candidate cells are sized by the memory planner: the
// model is compiled once more, inside a scratch module, with one layer per
// stage (form-stages, differentiate, rematerialize, insert-send-recv), and
// CellMemoryPlanner joins those one-layer stages into any cell and plans it
// as gpipe-plan-memory will plan the device that gets it.
//
//===----------------------------------------------------------------------===//

#include "MemoryCapOption.h"
#include "StageMemoryDescription.h"
#include "gpipe/Analysis/ByteCount.h"
#include "gpipe/Analysis/CellMemoryPlanner.h"
#include "gpipe/Analysis/LayerSequence.h"
#include "gpipe/Analysis/Partitioner.h"
#include "gpipe/Analysis/StageWeights.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/OptionAliases.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#define DEBUG_TYPE "gpipe-partition"

namespace gpipe {
#define GEN_PASS_DEF_PARTITIONPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;

static StringRef objectiveName(PartitionObjective objective) {
  return objective == PartitionObjective::Variance ? "variance" : "bottleneck";
}

static KeepPolicy keepPolicyOf(RematPolicy policy) {
  return keepPolicyOf(stringifyRematPolicy(policy));
}

namespace {
struct PartitionPass : public gpipe::impl::PartitionPassBase<PartitionPass> {
  using Base::Base;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(Pass::initializeOptions(options, errorHandler)) ||
        failed(resolveOptionAlias(numStages, numStagesAlias, errorHandler)))
      return failure();
    return resolveOptionAlias(numMicrobatches, numMicrobatchesAlias,
                              errorHandler);
  }

  CellSchedule cellSchedule() const {
    return {schedule, numStages, sendWindow};
  }

  void runOnOperation() override {
    std::optional<uint64_t> cap;
    if (failed(parseMemoryCapOption(getOperation(), memoryCap, cap)))
      return signalPassFailure();
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(partitionModel(model, cap)))
        return signalPassFailure();
  }

  LogicalResult partitionModel(ModelOp model, std::optional<uint64_t> cap) {
    if (!model.getBody().front().getOps<StageOp>().empty())
      return model.emitOpError()
             << "is already split into stages; partition runs before "
                "gpipe-form-stages";
    if (numStages == 0)
      return model.emitOpError() << "expects stages >= 1, got 0";
    FailureOr<LayerSequence> sequence = buildLayerSequence(model);
    if (failed(sequence))
      return failure();

    PartitionProblem problem;
    problem.layers = sequence->costs;
    problem.cutBytes = sequence->cutBytes;
    problem.joined = sequence->joined;
    problem.numCells = numStages;
    problem.objective = objective;
    problem.memoryCap = cap;
    problem.memoryModel.paramCopies = 2 + optimizerSlots;
    problem.memoryModel.numMicrobatches = std::max(1u, unsigned(numMicrobatches));
    problem.memoryModel.rematerialize = plannedRemat() == RematPolicy::Full;
    std::optional<PipelineShape> shape;
    if (balance == PartitionBalance::Work) {
      FailureOr<PipelineShape> known = pipelineShape(model);
      if (failed(known))
        return failure();
      shape = *known;
    }
    std::optional<CellMemoryPlanner> planner;
    if (cap && memoryModel == CellMemoryEstimate::Plan) {
      FailureOr<std::vector<PlannedStage>> layerStages =
          describeLayersAlone(model);
      if (failed(layerStages))
        return failure();
      planner.emplace(std::move(*layerStages), model.getBatch(),
                      std::max(1u, unsigned(numMicrobatches)),
                      keepPolicyOf(plannedRemat()), cellSchedule());
    }

    auto solve = [&](const PartitionProblem &problem) {
      return planner ? partitionWithPlannedMemory(problem, *planner)
                     : partitionLayers(problem);
    };
    PartitionOutcome outcome = solve(problem);
    // Whether a split fits does not depend on the weights: only a split
    // that fits is weighed again.
    if (shape && outcome.succeeded())
      outcome = balanceWork(problem, *shape, std::move(outcome), solve);
    if (planner && !planner->error().empty())
      return model.emitOpError()
             << "cannot be partitioned: " << planner->error();
    if (!outcome.succeeded()) {
      InFlightDiagnostic diag = model.emitOpError()
                                << "cannot be partitioned: " << outcome.error;
      if (planner)
        diag << explainMisfit(problem, outcome, *sequence, *planner, *cap);
      return diag;
    }
    const Partition &partition = *outcome.partition;

    Builder builder(model.getContext());
    for (unsigned cell = 0; cell < numStages; ++cell) {
      unsigned end = cell + 1 < numStages ? partition.cellStarts[cell + 1]
                                          : sequence->layers.size();
      for (unsigned i = partition.cellStarts[cell]; i < end; ++i)
        sequence->layers[i].setCell(cell);
    }
    SmallVector<int64_t> memory(partition.cellMemory.begin(),
                                partition.cellMemory.end());
    bool planned = memoryModel == CellMemoryEstimate::Plan;
    SmallVector<NamedAttribute> summary = {
        builder.getNamedAttr("objective",
                             builder.getStringAttr(objectiveName(objective))),
        builder.getNamedAttr("num_cells", builder.getI64IntegerAttr(numStages)),
        builder.getNamedAttr("memory_model",
                             builder.getStringAttr(planned ? "plan" : "cost")),
        builder.getNamedAttr("num_microbatches",
                             builder.getI64IntegerAttr(numMicrobatches)),
        builder.getNamedAttr(
            "remat", builder.getStringAttr(remat == RematPolicy::Full ? "full"
                                                                      : "none")),
    };
    // Set only where a split weighed by the devices' work won.
    const std::vector<uint64_t> &weights = problem.cellWeights;
    if (!weights.empty())
      summary.push_back(builder.getNamedAttr(
          "cell_weights", builder.getDenseI64ArrayAttr(SmallVector<int64_t>(
                              weights.begin(), weights.end()))));
    if (cap)
      summary.push_back(builder.getNamedAttr(
          "memory_cap", builder.getI64IntegerAttr(static_cast<int64_t>(*cap))));
    // Without a cap nothing was planned; gpipe-plan-memory reports the
    // devices' memory later.
    if (!planned || planner)
      summary.push_back(builder.getNamedAttr(
          "cell_memory", builder.getDenseI64ArrayAttr(memory)));
    model->setAttr("gpipe.partition", builder.getDictionaryAttr(summary));
    return success();
  }

  /// The policy the cells are weighed and sized under. Remat selective
  /// recomputes only cheap ops, and holds at most what none holds with a
  /// micro-batch or more in flight (its kept results for each, the rest for
  /// the one recomputing): its cells are weighed and sized as under none.
  RematPolicy plannedRemat() const {
    return remat == RematPolicy::Selective ? RematPolicy::None
                                           : RematPolicy(remat);
  }

  /// The pipeline the cells will form, for their weights.
  FailureOr<PipelineShape> pipelineShape(ModelOp model) {
    PipelineShape shape;
    shape.kind = schedule;
    shape.numVirtualStages =
        schedule == schedule::ScheduleKind::Interleaved ? numVirtualStages : 1;
    if (shape.numVirtualStages == 0 || numStages % shape.numVirtualStages != 0)
      return model.emitOpError()
             << "expects stages to be a multiple of virtual-stages under "
                "schedule=interleaved (each device runs virtual-stages "
                "stages), got stages="
             << unsigned(numStages)
             << " and virtual-stages=" << unsigned(numVirtualStages);
    shape.numDevices = numStages / shape.numVirtualStages;
    shape.numMicrobatches = std::max(1u, unsigned(numMicrobatches));
    shape.keep = keepPolicyOf(plannedRemat());
    return shape;
  }

  /// `compute`, balanced on the compute alone, or a split balanced with
  /// recomputes priced at half a forward or a whole one, whichever step
  /// the cost model simulates shortest (the earlier on ties). Leaves the
  /// chosen weights in `problem`.
  template <typename Solve>
  PartitionOutcome balanceWork(PartitionProblem &problem,
                               const PipelineShape &shape,
                               PartitionOutcome compute, Solve solve) {
    std::vector<unsigned> recomputes = recomputesPerStage(shape);
    if (std::adjacent_find(recomputes.begin(), recomputes.end(),
                           std::not_equal_to<unsigned>()) == recomputes.end())
      return compute; // every stage recomputes alike: nothing to rebalance
    PartitionOutcome best = std::move(compute);
    double bestStep = simulatedStepOfCells(shape, best.partition->cellCompute);
    std::vector<uint64_t> bestWeights;
    for (unsigned recomputeHalves : {1u, 2u}) {
      problem.cellWeights = stageWorkWeights(shape, recomputeHalves);
      PartitionOutcome weighed = solve(problem);
      if (!weighed.succeeded())
        continue;
      double step = simulatedStepOfCells(shape, weighed.partition->cellCompute);
      if (step >= 0 && (bestStep < 0 || step < bestStep)) {
        best = std::move(weighed);
        bestStep = step;
        bestWeights = problem.cellWeights;
      }
    }
    problem.cellWeights = std::move(bestWeights);
    return best;
  }

  /// Where the best split falls short of `cap` and what would fit: another
  /// remat policy or micro-batch count with these stages, else more stages.
  std::string explainMisfit(PartitionProblem problem,
                            const PartitionOutcome &outcome,
                            const LayerSequence &sequence,
                            const CellMemoryPlanner &planner, uint64_t cap) {
    std::string text;
    if (outcome.smallestFittingCap > 0) {
      problem.memoryCap = outcome.smallestFittingCap;
      CellMemoryPlanner same(planner.stages(), planner.batchSize(),
                             std::max(1u, unsigned(numMicrobatches)),
                             keepPolicyOf(plannedRemat()), cellSchedule());
      PartitionOutcome best = partitionWithPlannedMemory(problem, same);
      if (best.succeeded()) {
        const Partition &split = *best.partition;
        size_t device = std::max_element(split.cellMemory.begin(),
                                         split.cellMemory.end()) -
                        split.cellMemory.begin();
        unsigned first = split.cellStarts[device];
        unsigned last = device + 1 < split.cellStarts.size()
                            ? split.cellStarts[device + 1] - 1
                            : sequence.layers.size() - 1;
        uint64_t need = split.cellMemory[device];
        text += "; the best split needs " + formatBytes(need) + " (" +
                std::to_string(need) + " bytes) on device " +
                std::to_string(device) + " (layers '" +
                sequence.costs[first].name + "' to '" +
                sequence.costs[last].name + "'), short by " +
                formatBytes(need - cap);
      }
    }
    problem.memoryCap = cap;
    const int64_t batch = planner.batchSize();
    // The same search, in the same order, as gpipe-plan-memory's advice.
    using schedule::ScheduleKind;
    for (KeepPolicy keep :
         {KeepPolicy::All, KeepPolicy::Last, KeepPolicy::None})
      for (int64_t m = 1; m <= batch; m *= 2)
        for (ScheduleKind kind :
             {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
          CellMemoryPlanner other(planner.stages(), batch, unsigned(m), keep,
                                  CellSchedule{kind, numStages, sendWindow});
          PartitionOutcome fits = partitionWithPlannedMemory(problem, other);
          if (!fits.succeeded() || !other.error().empty())
            continue;
          std::string withSchedule =
              kind == ScheduleKind::GPipe
                  ? ""
                  : "schedule " + std::string(scheduleKindName(kind)) + ", ";
          return text + "; it fits with " + withSchedule + "remat " +
                 rematNameOf(keep).str() + " and " + std::to_string(m) +
                 " micro-batches (largest device " +
                 formatBytes(
                     *std::max_element(fits.partition->cellMemory.begin(),
                                       fits.partition->cellMemory.end())) +
                 ")";
        }
    // More stages, with this remat policy and micro-batch count: fitting is
    // monotone in the number of cells, so bisect it.
    CellMemoryPlanner same(planner.stages(), batch,
                           std::max(1u, unsigned(numMicrobatches)),
                           keepPolicyOf(plannedRemat()), cellSchedule());
    unsigned lo = problem.numCells + 1, hi = sequence.layers.size();
    problem.numCells = hi;
    if (lo > hi || !partitionWithPlannedMemory(problem, same).succeeded())
      return text +
             "; no schedule, remat policy, micro-batch count or number of "
             "stages fits";
    while (lo < hi) {
      problem.numCells = lo + (hi - lo) / 2;
      if (partitionWithPlannedMemory(problem, same).succeeded())
        hi = problem.numCells;
      else
        lo = problem.numCells + 1;
    }
    return text +
           "; no schedule, remat policy or micro-batch count fits with " +
           std::to_string(numStages) + (numStages == 1 ? " stage" : " stages") +
           "; " + std::to_string(lo) + " stages fit";
  }

  /// Each layer of `model` compiled as a stage of its own, as the memory
  /// planner sees it. Runs in a scratch module that is erased afterwards.
  FailureOr<std::vector<PlannedStage>> describeLayersAlone(ModelOp model) {
    OpBuilder builder = OpBuilder::atBlockEnd(getOperation().getBody());
    auto scratch = ModuleOp::create(builder, model.getLoc());
    builder.setInsertionPointToEnd(scratch.getBody());
    auto alone = cast<ModelOp>(builder.clone(*model));
    alone->removeAttr("gpipe.partition");
    unsigned index = 0;
    for (LayerOp layer : alone.getBody().front().getOps<LayerOp>())
      layer.setCell(index++);

    OpPassManager pm(ModuleOp::getOperationName());
    pm.addPass(createFormStagesPass());
    pm.addPass(createDifferentiatePass());
    RematerializePassOptions rematerialize;
    rematerialize.policy = plannedRemat();
    pm.addPass(createRematerializePass(rematerialize));
    pm.addPass(createInsertSendRecvPass());
    FailureOr<std::vector<PlannedStage>> stages = failure();
    if (succeeded(runPipeline(pm, scratch))) {
      KeepPolicy keep;
      stages = describeModelStages(alone, optimizerSlots, keep);
    }
    scratch.erase();
    if (failed(stages))
      return model.emitOpError()
             << "cannot be compiled with one layer per stage to plan the "
                "memory of its cells; pass memory-model=cost to size cells "
                "by their cost attributes";
    return stages;
  }
};
} // namespace
