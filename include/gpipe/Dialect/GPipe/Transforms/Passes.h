//===- Passes.h - gpipe passes ----------------------------------*- C++ -*-===//

#ifndef GPIPE_DIALECT_GPIPE_TRANSFORMS_PASSES_H
#define GPIPE_DIALECT_GPIPE_TRANSFORMS_PASSES_H

#include "gpipe/Analysis/Partitioner.h"
#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Support/OptionParsers.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <string>

namespace gpipe {

/// What the backward keeps of a stage's forward activations.
enum class RematPolicy {
  None, ///< keep every activation of every micro-batch
  Full, ///< keep only the stage's boundary inputs; recompute the rest (GPipe)
  ExceptLast, ///< as Full, but the last micro-batch (first back) keeps all
  /// as Full, but the products' results stay (RecomputeCopies.h): the
  /// recompute reruns the cheap ops alone
  Selective,
};

/// "none", "full", "except-last" or "selective".
llvm::StringRef stringifyRematPolicy(RematPolicy policy);

/// How gpipe-partition sizes a candidate cell against the memory cap.
enum class CellMemoryEstimate {
  Plan, ///< gpipe-plan-memory's plan of the device holding the cell
  Cost, ///< the closed form from the layers' cost attributes
};

/// What gpipe-partition balances across the devices.
enum class PartitionBalance {
  /// Each cell's compute times the work its device runs per unit of it:
  /// forwards, backwards and recomputes, as the schedule and remat decide
  /// (StageWeights.h).
  Work,
  Compute, ///< the layers' cost attributes alone
};

#define GEN_PASS_DECL
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"

/// Options of the `gpipe-compile` pipeline.
/// What the element-wise ops of a bundle run: the runtime's library kernels,
/// one op at a time, or kernels the compiler generates for their fused runs
/// (native x86-64 code carried in the bundle; docs/Architecture.md).
enum class KernelCodegen { None, Native };

struct CompilePipelineOptions
    : public mlir::PassPipelineOptions<CompilePipelineOptions> {
  Option<int64_t, WholeParser<int64_t>> batchSize{
      *this, "batch-size",
      llvm::cl::desc("rebatch the model to this mini-batch first (0: keep "
                     "the model's)"),
      llvm::cl::init(0)};
  Option<unsigned, WholeParser<unsigned>> dataParallel{
      *this, "data-parallel",
      llvm::cl::desc("data-parallel replicas R: each replica's program gets "
                     "1/R of the mini-batch"),
      llvm::cl::init(1)};
  Option<unsigned, WholeParser<unsigned>> numStages{
      *this, "stages", llvm::cl::desc("number of pipeline stages (K)"),
      llvm::cl::init(1)};
  Option<unsigned, WholeParser<unsigned>> numMicrobatches{
      *this, "microbatches", llvm::cl::desc("micro-batches per mini-batch (M)"),
      llvm::cl::init(1)};
  Option<PartitionObjective> objective{
      *this, "objective", llvm::cl::desc("partition objective"),
      llvm::cl::init(PartitionObjective::Variance),
      llvm::cl::values(
          clEnumValN(PartitionObjective::Variance, "variance",
                     "minimise the variance of cell costs (GPipe)"),
          clEnumValN(PartitionObjective::Bottleneck, "bottleneck",
                     "minimise the largest cell cost"))};
  Option<PartitionBalance> balance{
      *this, "balance", llvm::cl::desc("what the partition balances"),
      llvm::cl::init(PartitionBalance::Work),
      llvm::cl::values(
          clEnumValN(PartitionBalance::Work, "work",
                     "each cell's compute times its device's forwards, "
                     "backwards and recomputes"),
          clEnumValN(PartitionBalance::Compute, "compute",
                     "the layers' cost attributes alone"))};
  Option<KernelCodegen> codegen{
      *this, "codegen",
      llvm::cl::desc("what runs the element-wise ops when the bundle is "
                     "written"),
      llvm::cl::init(KernelCodegen::None),
      llvm::cl::values(
          clEnumValN(KernelCodegen::None, "none",
                     "the runtime's library kernels, one op at a time"),
          clEnumValN(KernelCodegen::Native, "native",
                     "kernels generated through MLIR for each run of "
                     "element-wise ops, as native CPU code in the bundle"))};
  Option<bool> ptx{
      *this, "ptx",
      llvm::cl::desc("also write the bundle's generated kernels as PTX for "
                     "CUDA (sm_90), code.cuda beside code.cpu"),
      llvm::cl::init(false)};
  Option<bool> splitLayers{
      *this, "split-layers",
      llvm::cl::desc("cut layers with several heavy ops (two products, two "
                     "convolutions) into finer layers before partitioning "
                     "(gpipe-split-layers)"),
      llvm::cl::init(true)};
  Option<std::string> memoryCap{
      *this, "memory-cap",
      llvm::cl::desc("per-device memory cap, e.g. 512MiB or 2GiB"),
      llvm::cl::init("")};
  Option<RematPolicy> remat{
      *this, "remat", llvm::cl::desc("rematerialisation policy"),
      llvm::cl::init(RematPolicy::Full),
      llvm::cl::values(
          clEnumValN(RematPolicy::None, "none", "no recompute"),
          clEnumValN(RematPolicy::Full, "full",
                     "recompute each stage's forward (GPipe)"),
          clEnumValN(RematPolicy::ExceptLast, "except-last",
                     "recompute but for the last micro-batch"),
          clEnumValN(RematPolicy::Selective, "selective",
                     "keep the products' results, recompute the rest"))};
  Option<::gpipe::schedule::ScheduleKind> schedule{
      *this, "schedule",
      llvm::cl::desc("the order of forwards and backwards on each device"),
      llvm::cl::init(::gpipe::schedule::ScheduleKind::GPipe),
      llvm::cl::values(
          clEnumValN(::gpipe::schedule::ScheduleKind::GPipe, "gpipe",
                     "fill, then drain (GPipe)"),
          clEnumValN(::gpipe::schedule::ScheduleKind::OneFOneB, "1f1b",
                     "warm up, then one forward and one backward in turn: at "
                     "most K-s micro-batches in flight on device s"),
          clEnumValN(::gpipe::schedule::ScheduleKind::ZeroBubbleH1, "zb-h1",
                     "1F1B with each backward split into input gradients (B) "
                     "and weight gradients (W), W deferred into the bubble"),
          clEnumValN(::gpipe::schedule::ScheduleKind::Interleaved,
                     "interleaved",
                     "1F1B with virtual-stages stages per device, "
                     "round-robin: the bubble shrinks by that factor"))};
  Option<unsigned, WholeParser<unsigned>> numVirtualStages{
      *this, "virtual-stages",
      llvm::cl::desc("stages per device (V) under schedule=interleaved: the "
                     "model is cut into stages x V stages, stage s on "
                     "device s mod stages"),
      llvm::cl::init(1)};
  Option<std::string> scheduleFile{
      *this, "schedule-file",
      llvm::cl::desc("read each device's order of forwards and backwards "
                     "from this file ('device 0: F0 F1 B0 ...')"),
      llvm::cl::init("")};
  Option<unsigned, WholeParser<unsigned>> sendWindow{
      *this, "send-window",
      llvm::cl::desc("sends complete in the background, at most this many "
                     "in flight to each peer, each awaited where the "
                     "compiler places its wait_send (the sent buffer is kept "
                     "until then); 0: a send is done when it is issued, "
                     "copied or held until received"),
      llvm::cl::init(2)};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("the precision the products read their operands in: "
                     "f32, tf32 or bf16 (accumulation f32); the bundle "
                     "records it (default: none, the runtime's f32)"),
      llvm::cl::init("")};
  Option<unsigned, WholeParser<unsigned>> optimizerSlots{
      *this, "optimizer-slots",
      llvm::cl::desc("optimizer state tensors per parameter (Adam: 2, "
                     "momentum and RMSProp: 1, SGD: 0)"),
      llvm::cl::init(2)};
  // The first spellings, documented before they matched the tools'
  // (OptionAliases.h); 0: not given.
  Option<unsigned, WholeParser<unsigned>> numStagesAlias{
      *this, "num-stages",
      llvm::cl::desc("the old spelling of stages, still accepted"),
      llvm::cl::init(0)};
  Option<unsigned, WholeParser<unsigned>> numMicrobatchesAlias{
      *this, "num-microbatches",
      llvm::cl::desc("the old spelling of microbatches, still accepted"),
      llvm::cl::init(0)};
  Option<unsigned, WholeParser<unsigned>> numVirtualStagesAlias{
      *this, "num-virtual-stages",
      llvm::cl::desc("the old spelling of virtual-stages, still accepted"),
      llvm::cl::init(0)};

  /// Moves the counts given by their old spellings into numStages,
  /// numMicrobatches and numVirtualStages; fails through `errorHandler` where
  /// both spellings were given different values.
  mlir::LogicalResult
  resolveAliases(llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)>
                     errorHandler);
};

/// Adds estimate-cost, partition, form-stages, differentiate, rematerialize,
/// insert-send-recv, unroll-schedule, verify-schedule and plan-memory to `pm`.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompilePipelineOptions &options);

/// What gpipe-verify-schedule proves of one unrolled schedule (transfers
/// matched, no deadlock under rendezvous sends, dependences, rows, stages
/// and channel types against the model), with its diagnostics. The bundle
/// writer runs it too: no bundle leaves the compiler unproven.
class ScheduleOp;
mlir::LogicalResult verifyUnrolledSchedule(ScheduleOp schedule);

#define GEN_PASS_REGISTRATION
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"

/// Registers every gpipe pass and the `gpipe-compile` pipeline.
void registerGPipePassesAndPipelines();

} // namespace gpipe

#endif // GPIPE_DIALECT_GPIPE_TRANSFORMS_PASSES_H
