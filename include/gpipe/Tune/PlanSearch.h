//===- PlanSearch.h - The plan that trains fastest under a cap --*- C++ -*-===//
//
// gpipe-tune's search. For N devices, a per-device memory cap and a
// mini-batch, every plan is tried: K stages (a divisor of N) with R = N / K
// data-parallel replicas, M micro-batches, schedule, remat policy and
// partition objective. Each plan is compiled by gpipe-compile (which sizes
// cells against the cap and plans every device's memory: a plan that does
// not fit is rejected with the compiler's reason) and its step simulated
// (ScheduleSimulator.h) with costs from the cost model or calibrated on a
// measured profile.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TUNE_PLANSEARCH_H
#define GPIPE_TUNE_PLANSEARCH_H

#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/Analysis/SimulationCosts.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpipe {

/// What a step's pieces cost, per unit of the model: the tuner prices every
/// plan from these.
struct TuneCosts {
  double forwardUsPerFlop = 0; ///< a forward, per forward FLOP
  double backwardUsPerFlop =
      0; ///< a backward (no recomputation), per forward FLOP
  /// What a forward and a backward of a stage cost per byte of the stage's
  /// parameters, whatever the rows: reading the weights (a GEMM of few rows
  /// is bound by them), so that the cost follows the layers a stage holds,
  /// and cutting the model finer (interleaving) adds none.
  double forwardUsPerParamByte = 0, backwardUsPerParamByte = 0;
  double optimizerUsPerParamByte = 0;
  double sendUs = 0, sendUsPerByte = 0, recvUs = 0, latencyUs = 0;
  double hostUs = 0; ///< per step, around the devices' programs
  /// Bytes per microsecond of the link gradients are averaged over between
  /// data-parallel replicas (ring all-reduce).
  double allReduceBytesPerUs = 0;
  std::string source; ///< "cost model: ..." or "profile ..."
};

/// From the cost model: a forward at `machine.deviceGflops`, a backward
/// twice that, transfers and all-reduces over the link, a free optimizer.
TuneCosts tuneCostsFromMachine(const MachineModel &machine);

struct TuneRequest {
  std::string modelSource; ///< the gpipe text of the model
  unsigned devices = 1;
  uint64_t memoryCap = 0; ///< bytes per device; 0 for none
  int64_t batchSize = 0;  ///< the mini-batch (0: the model's)
  unsigned optimizerSlots = 2;
  unsigned maxMicrobatches = 64;
  /// Processors the devices share (CPU threads on fewer cores); 0: one per
  /// device.
  unsigned processors = 0;
  TuneCosts costs;
};

struct Plan {
  unsigned stages = 1, replicas = 1, microbatches = 1;
  schedule::ScheduleKind schedule = schedule::ScheduleKind::GPipe;
  RematPolicy remat = RematPolicy::Full;
  PartitionObjective objective = PartitionObjective::Variance;
  int64_t batchSize = 0; ///< the whole mini-batch, over all replicas
  /// Stages per device under the interleaved schedule (1 otherwise).
  unsigned virtualStages = 1;
};

/// "K=2 R=1 M=8 1f1b remat=none variance" ("interleaved V=2" for
/// interleaving).
std::string describePlan(const Plan &plan);

/// Sets the compile options `plan` chooses (the memory cap and the optimizer
/// slots are the caller's).
void applyPlan(const Plan &plan, CompilePipelineOptions &options);

struct PlanOutcome {
  Plan plan;
  std::string rejection;          ///< why it cannot run; empty if it can
  double stepUs = 0;              ///< predicted
  double bubble = 0;              ///< predicted
  std::vector<int64_t> peakBytes; ///< the plan's arena per device
  int64_t largestPeak() const;
};

struct TuneResult {
  std::vector<PlanOutcome> outcomes; ///< every plan tried, in search order
  std::vector<size_t> pareto;        ///< fitting plans no other beats on both
                              ///< step time and largest peak, fastest first
  std::optional<size_t> chosen; ///< the fastest fitting plan
  /// No plan can be faster: the model's forward and backward work (no
  /// recomputation) and optimizer step spread over every device, with no
  /// bubble, transfer or host time.
  double lowerBoundUs = 0;
  std::string error; ///< the model does not parse or compile at all
};

/// Tries every plan of `request`.
TuneResult searchPlans(const TuneRequest &request);

/// Calibrates `costs` on profiles that gpipe-run --profile measured for
/// `modelSource` (each compiled the way it says: its stages, micro-batches
/// and remat). A forward's time is fitted as a x FLOPs + b per forward by
/// least squares over the profiles, a backward's likewise; with one profile,
/// or profiles that cannot tell the two terms apart, b is 0. Returns "" or
/// what is wrong, naming the profile.
std::string calibrateOnProfiles(const std::string &modelSource,
                                const std::vector<std::string> &profiles,
                                unsigned optimizerSlots, TuneCosts &costs);

} // namespace gpipe

#endif // GPIPE_TUNE_PLANSEARCH_H
