//===- Capacity.h - How big a Transformer fits a memory budget --*- C++ -*-===//
//
// The spirit of the GPipe paper's Table 1, with the compiler's memory
// planner as the judge: Transformers of a fixed width, written as gpipe text
// (TransformerBuilder.h), are compiled by gpipe-compile, and the
// `gpipe.memory` dictionary that gpipe-plan-memory writes on every device's
// program says whether the model fits. gpipe-capacity prints what these
// functions compute.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_MODELS_CAPACITY_H
#define GPIPE_MODELS_CAPACITY_H

#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Models/TransformerBuilder.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpipe {

//===-- Compiling models (CapacityCompiler.cpp) ---------------------------===//

/// The `gpipe.memory` dictionary of one device's program.
struct DeviceMemoryUse {
  int64_t resident = 0, peak = 0, arena = 0, buffers = 0;
};

/// What every compile of a study shares.
struct CapacityCompileOptions {
  PartitionObjective objective = PartitionObjective::Variance;
  unsigned optimizerSlots = 2;
};

/// Compiles generated models in one MLIR context and reads their plans.
class CapacityCompiler {
public:
  explicit CapacityCompiler(CapacityCompileOptions options);
  ~CapacityCompiler();
  /// Every device's memory, in device order, or nothing with `error` (the
  /// compiler's diagnostics included).
  std::optional<std::vector<DeviceMemoryUse>>
  compile(const TransformerConfig &model, int64_t stages, int64_t microbatches,
          RematPolicy remat, std::string &error);
  unsigned numCompiles = 0;
  double compileSeconds = 0;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

//===-- Searches (CapacitySearch.cpp) -------------------------------------===//

/// The largest model of one (remat, K) cell of the table.
struct Capacity {
  int64_t blocks = 0;        ///< 0: not even the smallest splittable model fits
  int64_t smallestArena = 0; ///< arena of the smallest model, when none fits
  int64_t arena = 0;         ///< the largest arena at `blocks`
  bool capped = false;       ///< still fits at `most`
};

/// The most blocks in [fewest, most] whose arena (`arenaOf`, assumed to grow
/// with the blocks) fits `budget`: an exponential, then a binary search.
/// Nothing if `arenaOf` fails.
std::optional<Capacity>
findLargestFitting(llvm::function_ref<std::optional<int64_t>(int64_t)> arenaOf,
                   int64_t fewest, int64_t most, uint64_t budget);

/// Fewest blocks whose 2B + 3 layers can be split in `stages` cells.
int64_t minBlocksFor(int64_t stages);

/// y ~ a*x1 + b*x2 (+ c*x3) by least squares, without intercept; unsolvable
/// when a column is (nearly) a combination of the others.
struct LinearFit {
  bool solvable = false;
  bool hasC = false; ///< the fit has the third term
  double a = 0, b = 0, c = 0;
};
LinearFit fitThroughOrigin(const std::vector<double> &x1,
                           const std::vector<double> &x2,
                           const std::vector<double> &y);
/// The three-term fit, or nothing solvable.
LinearFit fitThroughOrigin(const std::vector<double> &x1,
                           const std::vector<double> &x2,
                           const std::vector<double> &x3,
                           const std::vector<double> &y);

//===-- The two studies (Capacity.cpp) ------------------------------------===//

/// The studies' limits on K (1..64) and M (1..batch): an error or nothing.
std::optional<std::string> checkStageCount(int64_t stages);
std::optional<std::string> checkMicrobatchCount(int64_t microbatches,
                                                int64_t batch);

struct CapacityTableRequest {
  TransformerConfig model; ///< all but `blocks`
  int64_t microbatches = 8;
  std::vector<int64_t> stages;
  std::vector<RematPolicy> policies;
  uint64_t budget = 0;
  int64_t maxBlocks = 4096;
  CapacityCompileOptions compile;
};
struct CapacityTable {
  std::vector<std::vector<Capacity>> cells; ///< [policy][stage]
  unsigned compiles = 0;
  double seconds = 0, compileSeconds = 0;
};
/// The largest model for each policy and K: a search per cell, each probe a
/// compile; nothing with `error` if a compile fails.
std::optional<CapacityTable>
computeCapacityTable(const CapacityTableRequest &request, std::string &error);

struct MicrobatchSweepRequest {
  TransformerConfig model; ///< all but `blocks` and `batch`
  std::vector<int64_t> batches, blockCounts, microbatches;
  int64_t stages = 4;
  RematPolicy remat = RematPolicy::Full;
  CapacityCompileOptions compile;
};
struct SweepPoint {
  int64_t batch = 0, blocks = 0, microbatches = 0, device = 0;
  DeviceMemoryUse memory; ///< of the device with the largest peak
};
struct MicrobatchSweep {
  std::vector<SweepPoint> points;
  /// activation ~ a*N + b*(L/K)*(N/M) + c*(L/K)*N; the last term only where
  /// the sweep separates it (two block counts or more, and two M).
  LinearFit fit;
  unsigned compiles = 0;
  double seconds = 0;
};
/// Refuses block counts below 0 or too few to split in `stages`.
std::optional<MicrobatchSweep>
computeMicrobatchSweep(const MicrobatchSweepRequest &request,
                       std::string &error);

//===-- Markdown reports (CapacityReport.cpp) -----------------------------===//

/// The markdown table and its notes; `model` describes the fixed model.
void printCapacityTable(llvm::raw_ostream &os,
                        const CapacityTableRequest &request,
                        const CapacityTable &table, const std::string &model);
/// The sweep's markdown table and its fit; `model` describes the fixed model.
void printMicrobatchSweep(llvm::raw_ostream &os,
                          const MicrobatchSweepRequest &request,
                          const MicrobatchSweep &sweep,
                          const std::string &model);

/// "1.5 MiB", with a choice of decimals; negative values keep their sign.
std::string formatSize(double bytes, unsigned decimals = 1);

} // namespace gpipe

#endif // GPIPE_MODELS_CAPACITY_H
