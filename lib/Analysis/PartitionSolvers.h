//===- PartitionSolvers.h - The partitioner's shared machinery --*- C++ -*-===//
//
// What the variance and bottleneck solvers share (Partitioner.cpp, the
// public entry points; PartitionVariance.cpp; PartitionBottleneck.cpp).
//
// Both objectives are solved as suffix dynamic programs: level k holds, for
// every layer i, the best way to split the suffix [i, L) into k cells, and the
// argmin is the end of the first cell. Breaking ties on equal (objective, cut
// bytes) towards the smallest first-cell end, level by level from the front,
// yields the lexicographically smallest vector of cell starts among the
// optima, because both (sum of squares, cut bytes) and cut bytes alone add up
// cell by cell and their lexicographic order is translation invariant.
//
// Windows (i, E(i)] with arbitrary E(i) are answered by WindowBest, a
// monotone stack with binary search (O(log W) per query).
//
// The argmin tables take 4 * (K - 1) * (L - K + 1) bytes (51 MB at K = 128,
// L = 100,000); the values take O(L) per level, two levels at a time.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_ANALYSIS_PARTITIONSOLVERS_H
#define GPIPE_LIB_ANALYSIS_PARTITIONSOLVERS_H

#include "gpipe/Analysis/Partitioner.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

namespace gpipe::partition_detail {

__extension__ typedef unsigned __int128 U128;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr U128 kU128Max = ~U128(0);
constexpr unsigned kNone = std::numeric_limits<unsigned>::max();

inline U128 saturatingAdd(U128 a, U128 b) {
  U128 sum = a + b;
  return sum < a ? kU128Max : sum;
}

inline U128 saturatingMul(U128 a, U128 b) {
  if (a == 0 || b == 0)
    return 0;
  return a > kU128Max / b ? kU128Max : a * b;
}

inline U128 ceilDiv(U128 value, uint64_t divisor) {
  // 128-bit division is a slow library call; realistic sizes fit 64 bits.
  if ((value >> 64) == 0) {
    uint64_t v = static_cast<uint64_t>(value);
    return v / divisor + (v % divisor != 0);
  }
  return value / divisor + (value % divisor != 0);
}

inline uint64_t saturateToU64(U128 value) {
  return value > kU64Max ? kU64Max : static_cast<uint64_t>(value);
}

inline uint64_t microbatchesOf(const CellMemoryModel &model) {
  // Zero micro-batches means no pipelining at all: treat it as one.
  return std::max<uint64_t>(model.numMicrobatches, 1);
}

inline U128 activationMemory(const CellMemoryModel &model,
                             U128 activationBytes) {
  return model.rematerialize ? ceilDiv(activationBytes, microbatchesOf(model))
                             : activationBytes;
}

/// Prefix sums of the layer arrays, so that a cell's compute and memory cost
/// O(1), and the cells' weights. Requires the total compute times the
/// largest weight to fit in 64 bits.
class CellCosts {
public:
  explicit CellCosts(const PartitionProblem &problem)
      : model(problem.memoryModel), cutBytes(problem.cutBytes),
        memoryFunction(problem.cellMemoryFunction ? &problem.cellMemoryFunction
                                                  : nullptr) {
    size_t numLayers = problem.layers.size();
    computePrefix.assign(numLayers + 1, 0);
    paramPrefix.assign(numLayers + 1, 0);
    activationPrefix.assign(numLayers + 1, 0);
    for (size_t i = 0; i < numLayers; ++i) {
      const LayerCost &layer = problem.layers[i];
      computePrefix[i + 1] = computePrefix[i] + layer.compute;
      paramPrefix[i + 1] = paramPrefix[i] + layer.paramBytes;
      activationPrefix[i + 1] = activationPrefix[i] + layer.activationBytes;
    }
    // Divided by their greatest common divisor: equal weights become 1,
    // and the uniform case runs the faster search.
    weights = problem.cellWeights;
    weights.resize(problem.numCells, 1);
    uint64_t divisor = 0;
    for (uint64_t weight : weights)
      divisor = std::gcd(divisor, weight);
    for (uint64_t &weight : weights)
      weight /= std::max<uint64_t>(divisor, 1);
  }

  unsigned numLayers() const {
    return static_cast<unsigned>(computePrefix.size() - 1);
  }
  const std::vector<uint64_t> &computeSums() const { return computePrefix; }
  uint64_t cut(unsigned i) const { return cutBytes[i]; }

  uint64_t compute(unsigned begin, unsigned end) const {
    return computePrefix[end] - computePrefix[begin];
  }

  /// Cell `cell`'s weight, divided by the weights' common divisor.
  uint64_t weight(unsigned cell) const { return weights[cell]; }
  bool uniformWeights() const {
    return std::all_of(weights.begin(), weights.end(),
                       [](uint64_t weight) { return weight == 1; });
  }

  /// Memory of [begin, end) without cutBytes[begin]; it only grows when the
  /// cell grows on either side.
  U128 bodyMemory(unsigned begin, unsigned end) const {
    U128 params =
        saturatingMul(model.paramCopies, paramPrefix[end] - paramPrefix[begin]);
    return saturatingAdd(params,
                         activationMemory(model, activationPrefix[end] -
                                                     activationPrefix[begin]));
  }

  U128 memory(unsigned begin, unsigned end) const {
    if (memoryFunction)
      return (*memoryFunction)(begin, end);
    return saturatingAdd(bodyMemory(begin, end), cutBytes[begin]);
  }

  /// Whether [begin, end) fits in `cap`, given that [begin, begin + 1) does.
  bool fitsIn(unsigned begin, unsigned end, U128 cap) const {
    if (memoryFunction)
      return (*memoryFunction)(begin, end) <= cap;
    return bodyMemory(begin, end) <= cap - cutBytes[begin];
  }

  /// For every start i, the last end j such that [i, j) fits in `cap`, or i
  /// when not even [i, i + 1) does.
  std::vector<unsigned> reach(U128 cap) const;

private:
  CellMemoryModel model;
  const std::vector<uint64_t> &cutBytes;
  std::vector<uint64_t> computePrefix;
  std::vector<U128> paramPrefix;
  std::vector<U128> activationPrefix;
  std::vector<uint64_t> weights;
  const std::function<uint64_t(unsigned, unsigned)> *memoryFunction;
};

/// Leftmost best column over windows [i + 1, end] for rows i visited in
/// decreasing order, column i + 1 pushed just before row i is queried.
/// `better(a, b)` says column a's value is strictly better than column b's.
/// Only columns strictly better than every column to their left are kept:
/// indices decrease and values strictly improve from back to front, so the
/// answer is the front-most kept column not past `end`. A dropped column
/// loses to a column on its left that every window holding it also holds.
template <typename Better> class WindowBest {
public:
  explicit WindowBest(Better better) : better(better) {}

  void push(unsigned column) {
    while (!kept.empty() && !better(kept.back(), column))
      kept.pop_back();
    kept.push_back(column);
  }

  /// The leftmost best pushed column <= end, or kNone.
  unsigned query(unsigned end) const {
    auto it = std::partition_point(kept.begin(), kept.end(),
                                   [&](unsigned c) { return c > end; });
    return it == kept.end() ? kNone : *it;
  }

private:
  Better better;
  std::vector<unsigned> kept;
};

template <typename Better> WindowBest<Better> makeWindowBest(Better better) {
  return WindowBest<Better>(better);
}

/// Whether [0, L) splits into exactly `numCells` cells when a cell starting
/// at i may end anywhere in (i, ends[i]] (none when ends[i] <= i).
///
/// With such interval transitions the achievable counts form an interval, so
/// comparing with the fewest and the most cells is exact. Proof: take a
/// split a_0 < ... < a_p = L and one with more cells b_0 < ... < b_q = L.
/// For s >= 1 let t(s) be the last a_t < b_s; a_t -> b_s is a valid cell as
/// b_s <= a_{t+1} <= ends[a_t], so a_0..a_t, b_s..b_q is a split with
/// f(s) = t(s) + 1 + q - s cells. f(1) >= q, f(q) = p, and f drops by at most
/// one per step, so it takes every count in [p, q].
bool splitsExactly(const std::vector<unsigned> &ends, unsigned numCells);

/// For every start i, the fewest and the most cells (transitions as for
/// splitsExactly) that split [i, L); kNone where none do. By the argument
/// above, every count between the two splits it too.
void suffixCellCounts(const std::vector<unsigned> &ends,
                      std::vector<unsigned> &fewest,
                      std::vector<unsigned> &most);

/// Argmins of levels 2..K: the end of the first cell of the best split of
/// suffix [i, L) into k cells, for i in [K - k, L - k].
class ArgminTable {
public:
  ArgminTable(unsigned numLayers, unsigned numCells)
      : numCells(numCells), width(numLayers - numCells + 1),
        table(static_cast<size_t>(numCells - 1) * width, kNone) {}

  unsigned &at(unsigned level, unsigned start) {
    assert(level >= 2 && level <= numCells && start >= numCells - level);
    return table[static_cast<size_t>(level - 2) * width +
                 (start - (numCells - level))];
  }

  std::vector<unsigned> cellStarts() {
    std::vector<unsigned> starts{0};
    for (unsigned level = numCells, start = 0; level >= 2; --level) {
      start = at(level, start);
      assert(start != kNone && "level K has no feasible split");
      starts.push_back(start);
    }
    return starts;
  }

private:
  unsigned numCells;
  size_t width;
  std::vector<unsigned> table;
};

/// The lexicographically smallest cell starts among the splits of least
/// sum of squared cell costs whose cells end within `reach` (feasible).
std::vector<unsigned> solveVariance(const CellCosts &costs, unsigned numCells,
                                    const std::vector<unsigned> &reach);

/// The lexicographically smallest cell starts among the splits of least
/// cut bytes among those of least largest cell cost whose cells end within
/// `reach` (feasible).
std::vector<unsigned> solveBottleneck(const CellCosts &costs, unsigned numCells,
                                      const std::vector<unsigned> &reach,
                                      bool hasCap);

} // namespace gpipe::partition_detail

#endif // GPIPE_LIB_ANALYSIS_PARTITIONSOLVERS_H
