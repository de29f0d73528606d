//===- CompilePipeline.cpp - The gpipe-compile pipeline -------------------===//

#include "gpipe/Dialect/GPipe/Transforms/OptionAliases.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace gpipe;

void gpipe::buildCompilePipeline(OpPassManager &pm,
                                 const CompilePipelineOptions &options) {
  if (options.batchSize > 0 || options.dataParallel > 1) {
    SetBatchPassOptions rebatch;
    rebatch.batch = options.batchSize;
    rebatch.replicas = options.dataParallel;
    pm.addPass(createSetBatchPass(rebatch));
  }
  if (!options.precision.empty()) {
    SetPrecisionPassOptions precision;
    precision.precision = options.precision;
    pm.addPass(createSetPrecisionPass(precision));
  }
  pm.addPass(createEstimateCostPass());
  if (options.splitLayers)
    pm.addPass(createSplitLayersPass());
  PartitionPassOptions partition;
  // Interleaving cuts V stages per device; the devices run them round-robin.
  partition.numStages = options.numStages * options.numVirtualStages;
  partition.numVirtualStages = options.numVirtualStages;
  partition.objective = options.objective;
  partition.balance = options.balance;
  partition.memoryCap = options.memoryCap;
  partition.numMicrobatches = options.numMicrobatches;
  partition.remat = options.remat;
  partition.optimizerSlots = options.optimizerSlots;
  partition.sendWindow = options.sendWindow;
  // A user order holds at most M micro-batches per device, as GPipe does:
  // GPipe's memory bounds it.
  partition.schedule = options.scheduleFile.empty()
                           ? options.schedule.getValue()
                           : schedule::ScheduleKind::GPipe;
  pm.addPass(createPartitionPass(partition));
  pm.addPass(createFormStagesPass());
  pm.addPass(createDifferentiatePass());
  RematerializePassOptions rematerialize;
  rematerialize.policy = options.remat;
  pm.addPass(createRematerializePass(rematerialize));
  pm.addPass(createInsertSendRecvPass());
  UnrollSchedulePassOptions unroll;
  unroll.numMicrobatches = options.numMicrobatches;
  unroll.schedule = options.schedule;
  unroll.scheduleFile = options.scheduleFile;
  unroll.numVirtualStages = options.numVirtualStages;
  unroll.sendWindow = options.sendWindow;
  pm.addPass(createUnrollSchedulePass(unroll));
  pm.addPass(createVerifySchedulePass());
  PlanMemoryPassOptions plan;
  plan.optimizerSlots = options.optimizerSlots;
  plan.memoryCap = options.memoryCap;
  pm.addPass(createPlanMemoryPass(plan));
}

LogicalResult CompilePipelineOptions::resolveAliases(
    function_ref<LogicalResult(const Twine &)> errorHandler) {
  if (failed(resolveOptionAlias(numStages, numStagesAlias, errorHandler)) ||
      failed(resolveOptionAlias(numMicrobatches, numMicrobatchesAlias,
                                errorHandler)))
    return failure();
  return resolveOptionAlias(numVirtualStages, numVirtualStagesAlias,
                            errorHandler);
}

void gpipe::registerGPipePassesAndPipelines() {
  registerGPipePasses();
  // PassPipelineRegistration's, with the aliases resolved before building.
  registerPassPipeline(
      "gpipe-compile",
      "partition, outline stages, differentiate, choose what to recompute, "
      "insert channels, unroll and verify the schedule, plan each "
      "device's memory",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        CompilePipelineOptions options;
        if (failed(options.parseFromString(text)) ||
            failed(options.resolveAliases(errorHandler)))
          return failure();
        buildCompilePipeline(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optionsHandler) {
        optionsHandler(CompilePipelineOptions());
      });
}
