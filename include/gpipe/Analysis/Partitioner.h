//===- Partitioner.h - Exact contiguous partitioning of a layer sequence --===//
//
// Splits a sequence of L layers into K contiguous, non-empty cells. Two
// objectives, both solved exactly (never greedily):
//   - Variance (GPipe's): minimise the variance of the cell compute costs,
//     i.e. minimise the sum of squared cell costs (K and the total are fixed).
//   - Bottleneck: minimise the largest cell compute cost.
// A cell's cost is its compute times the cell's weight: the time a unit of
// compute takes on the device holding it. The weights differ where devices
// do different work per layer, e.g. under 1F1B with rematerialisation only
// the last device never recomputes its forwards.
// Ties on the objective are broken by the smaller total of bytes crossing the
// cuts, then by the lexicographically smallest vector of cell starts, so the
// answer is deterministic.
//
// An optional per-device memory cap is a hard constraint on every cell,
// with the cell memory given by a caller's function (gpipe-partition passes
// the memory planner's) or else by the closed-form `CellMemoryModel`.
//
// This library has no MLIR dependency.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_ANALYSIS_PARTITIONER_H
#define GPIPE_ANALYSIS_PARTITIONER_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpipe {

/// Sums of squared costs need 128 bits (costs reach ~1e15).
__extension__ typedef unsigned __int128 UInt128;

enum class PartitionObjective { Variance, Bottleneck };

/// One layer of the sequence, in the units the partitioner balances.
struct LayerCost {
  std::string name;             ///< used in diagnostics only
  uint64_t compute = 0;         ///< cost to balance (FLOPs of the layer)
  uint64_t paramBytes = 0;      ///< bytes of the layer's parameters
  uint64_t activationBytes = 0; ///< bytes of activations it produces, full batch
};

/// Memory of cell [i, j) on its device:
///   paramCopies * P(i,j)                       weights, grads, optimizer state
/// + cutBytes[i]                                 received/stashed inputs, full batch
/// + (rematerialize ? ceil(A(i,j) / numMicrobatches) : A(i,j))
/// where P and A are the sums of paramBytes and activationBytes over the cell.
/// With rematerialisation only one micro-batch's activations of the cell are
/// live at once (GPipe); without it every micro-batch's are. A
/// numMicrobatches of 0 counts as 1.
struct CellMemoryModel {
  uint64_t paramCopies = 4; ///< weights + gradients + two optimizer slots
  uint64_t numMicrobatches = 1;
  bool rematerialize = true;
};

struct PartitionProblem {
  std::vector<LayerCost> layers;
  /// Size layers.size() + 1. cutBytes[i] is the number of bytes of values
  /// produced by a layer < i and used by a layer >= i (the traffic of a cut
  /// placed before layer i). cutBytes[0] and cutBytes[L] are ignored by the
  /// objective (no cut there) but cutBytes[0] still counts in cell 0's memory.
  std::vector<uint64_t> cutBytes;
  unsigned numCells = 1;
  PartitionObjective objective = PartitionObjective::Variance;
  std::optional<uint64_t> memoryCap;
  CellMemoryModel memoryModel;
  /// When set, replaces memoryModel: the memory of the device holding cell
  /// [begin, end), what it receives included. It must not decrease when
  /// `end` grows (the search for the longest fitting cell relies on it).
  std::function<uint64_t(unsigned begin, unsigned end)> cellMemoryFunction;
  /// Empty, or numCells weights >= 1: cell c costs cellWeights[c] times its
  /// compute. Empty weighs every cell 1.
  std::vector<uint64_t> cellWeights;
  /// Empty, or size layers.size() + 1: a non-empty joined[i] forbids a cut
  /// before layer i and says why (a value that no stage boundary carries,
  /// such as a mask). Layers joined this way always share a cell.
  std::vector<std::string> joined;
};

struct Partition {
  /// Size numCells; cellStarts[0] == 0, strictly increasing. Cell c spans
  /// [cellStarts[c], cellStarts[c+1]) (the last one ends at L).
  std::vector<unsigned> cellStarts;
  std::vector<uint64_t> cellCompute; ///< per cell
  std::vector<uint64_t> cellMemory;  ///< per cell, by the memory function
  /// The objectives, over the cells' costs (compute times weight).
  uint64_t maxCellCompute = 0;
  UInt128 sumSquaredCompute = 0;
  uint64_t totalCutBytes = 0; ///< sum of cutBytes[cellStarts[c]] for c >= 1
};

struct PartitionOutcome {
  std::optional<Partition> partition; ///< set on success
  std::string error;                  ///< set on failure, a full sentence
  /// When no partition fits the memory cap: the smallest cap under which
  /// one does (0 otherwise).
  uint64_t smallestFittingCap = 0;
  bool succeeded() const { return partition.has_value(); }
};

/// Solves `problem` exactly, cutting only where `joined` allows (the layers
/// between allowed cuts solved as one). Fails (with a message naming the
/// numbers) when
/// numCells is 0, numCells > number of layers, cutBytes or cellWeights has
/// the wrong size, a weight is 0, the total compute times the largest weight
/// or the total of the inner cutBytes overflows 64 bits, a
/// single layer alone exceeds the memory cap (the message names the layer;
/// reported only when no larger cell holding it fits either, since a cell
/// starting earlier may have fewer cut bytes), or no partition into numCells
/// cells fits the cap (the message gives the smallest cap that would fit).
PartitionOutcome partitionLayers(const PartitionProblem &problem);

/// Memory of cell [begin, end) under the problem's memory function or model.
uint64_t cellMemory(const PartitionProblem &problem, unsigned begin,
                    unsigned end);

/// Fills cellCompute, cellMemory, maxCellCompute, sumSquaredCompute and
/// totalCutBytes of a partition given by its cell starts.
Partition evaluatePartition(const PartitionProblem &problem,
                            std::vector<unsigned> cellStarts);

} // namespace gpipe

#endif // GPIPE_ANALYSIS_PARTITIONER_H
