//===- SimulationCosts.h - Where the simulator's costs come from -*- C++
//-*-===//
//
// Two sources: the cost model (each stage's forward FLOPs at a device rate,
// a backward twice its forward, transfers over a link of given bandwidth and
// latency), or a profile measured by gpipe-run --profile (docs/Schedules.md,
// "Profiles").
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_ANALYSIS_SIMULATIONCOSTS_H
#define GPIPE_ANALYSIS_SIMULATIONCOSTS_H

#include "gpipe/Analysis/ScheduleSimulator.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace gpipe {

/// The machine the cost model prices a schedule on.
struct MachineModel {
  double deviceGflops = 10;    ///< sustained GFLOP/s of one device
  double linkGBPerSecond = 10; ///< bandwidth between adjacent devices
  double linkLatencyUs = 5;    ///< per transfer
};

/// Costs of devices whose stages have `forwardFlops` (at the full `batch`):
/// a forward takes flops / rate, its backward twice that (two GEMMs per
/// forward GEMM) and its recomputation once more; sends move bytes at the
/// link's bandwidth; loads and the optimizer step are free.
schedule::SimulationCosts costsFromModel(llvm::ArrayRef<uint64_t> forwardFlops,
                                         int64_t batch,
                                         const MachineModel &machine);

/// Reads a profile (the JSON gpipe-run --profile writes: one entry per
/// stage) for a schedule of `numStages` stages into `costs` (its `keep` is
/// left as it is). Returns "" or what is wrong, naming the field.
std::string readProfile(llvm::StringRef json, unsigned numStages,
                        schedule::SimulationCosts &costs);

} // namespace gpipe

#endif // GPIPE_ANALYSIS_SIMULATIONCOSTS_H
