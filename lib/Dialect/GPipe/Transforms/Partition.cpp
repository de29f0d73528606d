//===- Partition.cpp - Assign layers to balanced contiguous cells ---------===//

#include "MemoryCapOption.h"
#include "gpipe/Analysis/LayerSequence.h"
#include "gpipe/Analysis/Partitioner.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

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

namespace {
struct PartitionPass : public gpipe::impl::PartitionPassBase<PartitionPass> {
  using Base::Base;

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
      return model.emitOpError() << "expects num-stages >= 1, got 0";
    FailureOr<LayerSequence> sequence = buildLayerSequence(model);
    if (failed(sequence))
      return failure();

    PartitionProblem problem;
    problem.layers = sequence->costs;
    problem.cutBytes = sequence->cutBytes;
    problem.numCells = numStages;
    problem.objective = objective;
    problem.memoryCap = cap;
    problem.memoryModel.paramCopies = 2 + optimizerSlots;
    problem.memoryModel.numMicrobatches = std::max(1u, unsigned(numMicrobatches));
    problem.memoryModel.rematerialize = remat == RematPolicy::Full;

    PartitionOutcome outcome = partitionLayers(problem);
    if (!outcome.succeeded())
      return model.emitOpError() << "cannot be partitioned: " << outcome.error;
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
    SmallVector<NamedAttribute> summary = {
        builder.getNamedAttr("objective",
                             builder.getStringAttr(objectiveName(objective))),
        builder.getNamedAttr("num_cells", builder.getI64IntegerAttr(numStages)),
        builder.getNamedAttr("cell_memory",
                             builder.getDenseI64ArrayAttr(memory)),
        builder.getNamedAttr("num_microbatches",
                             builder.getI64IntegerAttr(numMicrobatches)),
        builder.getNamedAttr(
            "remat", builder.getStringAttr(remat == RematPolicy::Full ? "full"
                                                                      : "none")),
    };
    if (cap)
      summary.push_back(builder.getNamedAttr(
          "memory_cap", builder.getI64IntegerAttr(static_cast<int64_t>(*cap))));
    model->setAttr("gpipe.partition", builder.getDictionaryAttr(summary));
    return success();
  }
};
} // namespace
