//===- Partitioner.cpp - Exact contiguous partitioning of layers ----------===//
//
// Both objectives are solved as suffix dynamic programs: level k holds, for
// every layer i, the best way to split the suffix [i, L) into k cells, and the
// argmin is the end of the first cell. Breaking ties on equal (objective, cut
// bytes) towards the smallest first-cell end, level by level from the front,
// yields the lexicographically smallest vector of cell starts among the
// optima, because both (sum of squares, cut bytes) and cut bytes alone add up
// cell by cell and their lexicographic order is translation invariant.
//
// Variance (sum of squared cell compute), O(K L log L) time without a cap:
//   the cost of the first cell (S[j] - S[i])^2 plus anything that depends
//   only on j is a Monge matrix, so the leftmost argmin is nondecreasing in i
//   and divide-and-conquer DP optimisation finds all of a level's argmins with
//   O(L log L) evaluations. This needs a "staircase" (ends (i, end(i)] with
//   end() nondecreasing in i), but under a memory cap the last end R(i) of a
//   cell starting at i is not monotone: cutBytes[i] counts in that cell. The
//   search therefore peels rows (see solveVariance): two rounds on the running
//   max of R, which settle every row whose relaxed argmin fits its own R, then
//   one on the running min of R for the rest, plus a direct scan of their
//   ends beyond it. Each round is O(L log L); the scan is small unless many
//   rows are left whose R drops far below a later row's, and is bounded by
//   O(L W) per level (W the most layers a cell can hold), the plain windowed
//   DP. E.g. a near-cap cut every 50 layers only leaves the rows starting at
//   those cuts for the later rounds, and their windows are short.
//
// Bottleneck (largest cell compute), O(L log W log C + K L log W) time:
//   binary search on the bottleneck B over the compute range C. A cell
//   starting at i may end anywhere in (i, E(i)], E(i) the last end within both
//   B and the cap; with such interval transitions the achievable cell counts
//   of [0, L) form an interval (see splitsExactly), so "exactly K cells" is
//   decided by the fewest and the most cells. Then one DP over K levels
//   minimises the cut bytes among partitions whose cells all stay within B*.
//
// Windows (i, E(i)] with arbitrary E(i) are answered by WindowBest, a
// monotone stack with binary search (O(log W) per query).
//
// The argmin tables take 4 * (K - 1) * (L - K + 1) bytes (51 MB at K = 128,
// L = 100,000); the values take O(L) per level, two levels at a time.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/Partitioner.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>

using namespace gpipe;

namespace {

__extension__ typedef unsigned __int128 U128;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr U128 kU128Max = ~U128(0);
constexpr unsigned kNone = std::numeric_limits<unsigned>::max();

U128 saturatingAdd(U128 a, U128 b) {
  U128 sum = a + b;
  return sum < a ? kU128Max : sum;
}

U128 saturatingMul(U128 a, U128 b) {
  if (a == 0 || b == 0)
    return 0;
  return a > kU128Max / b ? kU128Max : a * b;
}

U128 ceilDiv(U128 value, uint64_t divisor) {
  // 128-bit division is a slow library call; realistic sizes fit 64 bits.
  if ((value >> 64) == 0) {
    uint64_t v = static_cast<uint64_t>(value);
    return v / divisor + (v % divisor != 0);
  }
  return value / divisor + (value % divisor != 0);
}

uint64_t saturateToU64(U128 value) {
  return value > kU64Max ? kU64Max : static_cast<uint64_t>(value);
}

std::string toString(U128 value) {
  if (value == 0)
    return "0";
  std::string digits;
  while (value != 0) {
    digits.push_back(static_cast<char>('0' + static_cast<int>(value % 10)));
    value /= 10;
  }
  return std::string(digits.rbegin(), digits.rend());
}

/// "1 layer", "3 layers".
std::string countOf(U128 count, const std::string &noun,
                    const std::string &plural = "") {
  return toString(count) + " " +
         (count == 1       ? noun
          : plural.empty() ? noun + "s"
                           : plural);
}

uint64_t microbatchesOf(const CellMemoryModel &model) {
  // Zero micro-batches means no pipelining at all: treat it as one.
  return std::max<uint64_t>(model.numMicrobatches, 1);
}

U128 activationMemory(const CellMemoryModel &model, U128 activationBytes) {
  return model.rematerialize ? ceilDiv(activationBytes, microbatchesOf(model))
                             : activationBytes;
}

/// Prefix sums of the layer arrays, so that a cell's compute and memory cost
/// O(1). Requires the total compute to fit in 64 bits.
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
  }

  unsigned numLayers() const {
    return static_cast<unsigned>(computePrefix.size() - 1);
  }
  const std::vector<uint64_t> &computeSums() const { return computePrefix; }
  uint64_t cut(unsigned i) const { return cutBytes[i]; }

  uint64_t compute(unsigned begin, unsigned end) const {
    return computePrefix[end] - computePrefix[begin];
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
  std::vector<unsigned> reach(U128 cap) const {
    unsigned numLayers = this->numLayers();
    std::vector<unsigned> last(numLayers);
    unsigned previous = 0;
    for (unsigned i = 0; i < numLayers; ++i) {
      if ((!memoryFunction && cutBytes[i] > cap) || memory(i, i + 1) > cap) {
        last[i] = i;
        continue;
      }
      // Galloping search from the previous row's end, which neighbouring
      // rows mostly share: O(log |last - previous|) probes. Each probe of a
      // caller's memory function may plan a whole cell, so probes count.
      unsigned fits = i + 1, tooFar = numLayers + 1;
      if (previous > fits) {
        if (fitsIn(i, previous, cap))
          fits = previous;
        else
          tooFar = previous;
      }
      if (tooFar == numLayers + 1) {
        for (uint64_t step = 1; fits < numLayers; step *= 2) {
          unsigned probe = numLayers - fits <= step
                               ? numLayers
                               : fits + static_cast<unsigned>(step);
          if (!fitsIn(i, probe, cap)) {
            tooFar = probe;
            break;
          }
          fits = probe;
        }
      } else {
        for (uint64_t step = 1; tooFar - fits > 1; step *= 2) {
          unsigned probe = tooFar - fits <= step
                               ? fits
                               : tooFar - static_cast<unsigned>(step);
          if (probe == fits || fitsIn(i, probe, cap)) {
            fits = probe;
            break;
          }
          tooFar = probe;
        }
      }
      while (tooFar - fits > 1) {
        unsigned mid = fits + (tooFar - fits) / 2;
        if (fitsIn(i, mid, cap))
          fits = mid;
        else
          tooFar = mid;
      }
      last[i] = previous = fits;
    }
    return last;
  }

private:
  CellMemoryModel model;
  const std::vector<uint64_t> &cutBytes;
  std::vector<uint64_t> computePrefix;
  std::vector<U128> paramPrefix;
  std::vector<U128> activationPrefix;
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
bool splitsExactly(const std::vector<unsigned> &ends, unsigned numCells) {
  unsigned numLayers = static_cast<unsigned>(ends.size());
  std::vector<unsigned> fewest(numLayers + 1, kNone),
      most(numLayers + 1, kNone);
  fewest[numLayers] = most[numLayers] = 0;
  auto fewestBest = makeWindowBest(
      [&](unsigned a, unsigned b) { return fewest[a] < fewest[b]; });
  auto mostBest =
      makeWindowBest([&](unsigned a, unsigned b) { return most[a] > most[b]; });
  for (unsigned i = numLayers; i-- > 0;) {
    if (fewest[i + 1] != kNone) {
      fewestBest.push(i + 1);
      mostBest.push(i + 1);
    }
    if (ends[i] <= i)
      continue;
    unsigned a = fewestBest.query(ends[i]);
    if (a == kNone)
      continue;
    fewest[i] = fewest[a] + 1;
    most[i] = most[mostBest.query(ends[i])] + 1;
  }
  return fewest[0] != kNone && fewest[0] <= numCells && numCells <= most[0];
}

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

/// Value of a suffix split for the variance objective, ordered
/// lexicographically. `infeasible` is a column-only penalty rather than an
/// infinity so that every row of the Monge matrix keeps a finite minimum,
/// which the monotone-argmin argument needs.
struct VarianceValue {
  U128 sumSquares;
  uint64_t cutBytes;
  bool infeasible;

  bool operator<(const VarianceValue &other) const {
    if (infeasible != other.infeasible)
      return !infeasible;
    if (sumSquares != other.sumSquares)
      return sumSquares < other.sumSquares;
    return cutBytes < other.cutBytes;
  }
};

/// Row minima on a staircase by divide and conquer: for each rows[n]
/// (increasing), the column argminOf picks in [rows[n] + 1, ends[n]], where
/// ends is nondecreasing and ends[n] > rows[n]. Exact when the leftmost
/// argmin is nondecreasing down the rows, as for a Monge cost with a
/// column-only term. An explicit stack replaces recursion (depth log L).
template <typename ArgminOf>
void staircaseRowMinima(const std::vector<unsigned> &rows,
                        const std::vector<unsigned> &ends,
                        std::vector<unsigned> &argmins, ArgminOf argminOf) {
  struct Task {
    size_t rowLo, rowHi;
    unsigned colLo, colHi;
  };
  argmins.resize(rows.size());
  if (rows.empty())
    return;
  std::vector<Task> tasks{{0, rows.size() - 1, rows.front() + 1, ends.back()}};
  while (!tasks.empty()) {
    Task task = tasks.back();
    tasks.pop_back();
    size_t mid = task.rowLo + (task.rowHi - task.rowLo) / 2;
    unsigned lo = std::max(task.colLo, rows[mid] + 1);
    unsigned hi = std::min(task.colHi, ends[mid]);
    assert(lo <= hi && "staircase rows always have a column");
    unsigned best = argminOf(rows[mid], lo, hi);
    argmins[mid] = best;
    if (mid > task.rowLo)
      tasks.push_back({task.rowLo, mid - 1, task.colLo, best});
    if (mid < task.rowHi)
      tasks.push_back({mid + 1, task.rowHi, best, task.colHi});
  }
}

std::vector<unsigned> solveVariance(const CellCosts &costs, unsigned numCells,
                                    const std::vector<unsigned> &reach) {
  unsigned numLayers = costs.numLayers();
  const std::vector<uint64_t> &sums = costs.computeSums();
  if (numCells == 1)
    return {0};
  // Cells can start only where the layer alone fits.
  std::vector<unsigned> liveStarts;
  for (unsigned i = 0; i < numLayers; ++i)
    if (reach[i] > i)
      liveStarts.push_back(i);

  // Level k - 1 for the current level k, turned into the column term
  // h(j) = best(k - 1, j) + cutBytes[j].
  std::vector<VarianceValue> prev(numLayers + 1), cur(numLayers + 1);
  for (unsigned i = numCells - 1; i < numLayers; ++i) {
    uint64_t cost = costs.compute(i, numLayers);
    prev[i] = {static_cast<U128>(cost) * cost, 0, reach[i] < numLayers};
  }

  ArgminTable argmins(numLayers, numCells);
  std::vector<unsigned> rows, pending, ends, rowArgmins;
  for (unsigned level = 2; level <= numCells; ++level) {
    unsigned rowLo = numCells - level;
    unsigned rowHi = level == numCells ? 0 : numLayers - level;
    unsigned colLo = rowLo + 1, colHi = numLayers - level + 1;
    for (unsigned j = colLo; j <= colHi; ++j) {
      VarianceValue &h = prev[j];
      h = h.infeasible
              ? VarianceValue{0, 0, true}
              : VarianceValue{h.sumSquares, h.cutBytes + costs.cut(j), false};
    }
    auto candidate = [&](unsigned i, unsigned j) {
      uint64_t cost = sums[j] - sums[i];
      const VarianceValue &h = prev[j];
      return VarianceValue{static_cast<U128>(cost) * cost + h.sumSquares,
                           h.cutBytes, h.infeasible};
    };
    auto argminOf = [&](unsigned i, unsigned lo, unsigned hi) {
      unsigned bestEnd = lo;
      VarianceValue best = candidate(i, lo);
      for (unsigned j = lo + 1; j <= hi; ++j) {
        VarianceValue value = candidate(i, j);
        if (value < best) {
          best = value;
          bestEnd = j;
        }
      }
      return bestEnd;
    };
    auto limit = [&](unsigned i) { return std::min(reach[i], colHi); };
    auto settle = [&](unsigned i, unsigned end) {
      argmins.at(level, i) = end;
      cur[i] = candidate(i, end);
    };

    for (unsigned i = rowLo; i <= rowHi; ++i)
      cur[i] = {0, 0, true};
    rows.assign(std::lower_bound(liveStarts.begin(), liveStarts.end(), rowLo),
                std::upper_bound(liveStarts.begin(), liveStarts.end(), rowHi));
    // The divide and conquer needs ends nondecreasing down the rows, which
    // limit() is not. First peel: relax each row to the running max of
    // limit(); a row whose relaxed argmin is within its own limit is solved
    // (a leftmost argmin over a superset that lies in the subset). Without
    // a cap every row is solved here. A huge cutBytes[i] shortens only the
    // rows starting at i, so the leftover rows are few; peel once more among
    // them, then finish on the running min (a subset of every row's window)
    // plus a direct scan of each row's ends beyond it.
    constexpr unsigned kPeelRounds = 2;
    for (unsigned round = 0; !rows.empty(); ++round) {
      bool finish = round == kPeelRounds;
      ends.resize(rows.size());
      if (!finish) {
        for (size_t n = 0; n < rows.size(); ++n)
          ends[n] = std::max(limit(rows[n]), n ? ends[n - 1] : 0);
      } else {
        for (size_t n = rows.size(); n-- > 0;)
          ends[n] = std::min(limit(rows[n]),
                             n + 1 < rows.size() ? ends[n + 1] : colHi);
      }
      staircaseRowMinima(rows, ends, rowArgmins, argminOf);
      pending.clear();
      for (size_t n = 0; n < rows.size(); ++n) {
        unsigned i = rows[n], end = rowArgmins[n];
        if (!finish) {
          if (end <= limit(i))
            settle(i, end);
          else
            pending.push_back(i);
          continue;
        }
        // Ends beyond the staircase lie right of it: only a strictly better
        // value displaces the staircase's leftmost argmin.
        if (ends[n] < limit(i)) {
          unsigned beyond = argminOf(i, ends[n] + 1, limit(i));
          if (candidate(i, beyond) < candidate(i, end))
            end = beyond;
        }
        settle(i, end);
      }
      rows.swap(pending);
    }
    std::swap(prev, cur);
  }
  assert(!prev[0].infeasible && "feasibility was checked up front");
  return argmins.cellStarts();
}

/// For every start i, the last end j with compute(i, j) <= bound (two
/// pointers: it is nondecreasing in i), capped by `reach`.
std::vector<unsigned> boundedEnds(const CellCosts &costs, uint64_t bound,
                                  const std::vector<unsigned> &reach) {
  unsigned numLayers = costs.numLayers();
  const std::vector<uint64_t> &sums = costs.computeSums();
  std::vector<unsigned> ends(numLayers);
  unsigned end = 0;
  for (unsigned i = 0; i < numLayers; ++i) {
    end = std::max(end, i);
    while (end < numLayers && sums[end + 1] - sums[i] <= bound)
      ++end;
    ends[i] = std::min(end, reach[i]);
  }
  return ends;
}

std::vector<unsigned> solveBottleneck(const CellCosts &costs, unsigned numCells,
                                      const std::vector<unsigned> &reach,
                                      bool hasCap) {
  unsigned numLayers = costs.numLayers();
  uint64_t total = costs.compute(0, numLayers);
  uint64_t largestLayer = 0;
  for (unsigned i = 0; i < numLayers; ++i)
    largestLayer = std::max(largestLayer, costs.compute(i, i + 1));
  uint64_t average = total / numCells + (total % numCells != 0);
  uint64_t lo = std::max(largestLayer, average), hi = total;
  // Without a cap, closing each cell as soon as it reaches the average gives
  // at most K cells within average - 1 + largestLayer, and splitting cells
  // further (K <= L) never raises the bottleneck.
  U128 greedyBound = static_cast<U128>(average) + largestLayer;
  if (!hasCap && average > 0 && greedyBound - 1 < hi)
    hi = static_cast<uint64_t>(greedyBound - 1);
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (splitsExactly(boundedEnds(costs, mid, reach), numCells))
      hi = mid;
    else
      lo = mid + 1;
  }
  std::vector<unsigned> ends = boundedEnds(costs, lo, reach);
  assert(splitsExactly(ends, numCells) && "the bound search overshot");

  // Least cut bytes among partitions whose cells all fit in `ends`.
  constexpr uint64_t kInfeasible = kU64Max;
  std::vector<uint64_t> prev(numLayers + 1, kInfeasible),
      cur(numLayers + 1, kInfeasible);
  for (unsigned i = numCells - 1; i < numLayers; ++i)
    prev[i] = ends[i] >= numLayers ? 0 : kInfeasible;
  ArgminTable argmins(numLayers, numCells);
  for (unsigned level = 2; level <= numCells; ++level) {
    unsigned rowLo = numCells - level, rowHi = numLayers - level;
    unsigned colHi = rowHi + 1;
    for (unsigned j = rowLo + 1; j <= colHi; ++j)
      if (prev[j] != kInfeasible)
        prev[j] += costs.cut(j);
    auto best = makeWindowBest(
        [&](unsigned a, unsigned b) { return prev[a] < prev[b]; });
    for (unsigned i = rowHi + 1; i-- > rowLo;) {
      if (prev[i + 1] != kInfeasible)
        best.push(i + 1);
      unsigned end =
          ends[i] <= i ? kNone : best.query(std::min(ends[i], colHi));
      argmins.at(level, i) = end;
      cur[i] = end == kNone ? kInfeasible : prev[end];
    }
    std::swap(prev, cur);
  }
  return argmins.cellStarts();
}

/// The smallest cap under which [0, L) splits into `numCells` cells, known
/// to be above `infeasibleCap`.
U128 smallestFittingCap(const CellCosts &costs, unsigned numCells,
                        U128 infeasibleCap) {
  unsigned numLayers = costs.numLayers();
  // Singleton cells and then the rest always form a valid split.
  U128 hi = costs.memory(numCells - 1, numLayers);
  for (unsigned i = 0; i + 1 < numCells; ++i)
    hi = std::max(hi, costs.memory(i, i + 1));
  U128 lo = infeasibleCap + 1;
  while (lo < hi) {
    U128 mid = lo + (hi - lo) / 2;
    if (splitsExactly(costs.reach(mid), numCells))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

PartitionOutcome failure(std::string message) {
  PartitionOutcome outcome;
  outcome.error = std::move(message);
  return outcome;
}

} // namespace

uint64_t gpipe::cellMemory(const PartitionProblem &problem, unsigned begin,
                           unsigned end) {
  assert(begin < end && end <= problem.layers.size());
  if (problem.cellMemoryFunction)
    return problem.cellMemoryFunction(begin, end);
  U128 params = 0, activations = 0;
  for (unsigned i = begin; i < end; ++i) {
    params += problem.layers[i].paramBytes;
    activations += problem.layers[i].activationBytes;
  }
  const CellMemoryModel &model = problem.memoryModel;
  U128 memory = saturatingAdd(saturatingMul(model.paramCopies, params),
                              problem.cutBytes[begin]);
  return saturateToU64(
      saturatingAdd(memory, activationMemory(model, activations)));
}

Partition gpipe::evaluatePartition(const PartitionProblem &problem,
                                   std::vector<unsigned> cellStarts) {
  unsigned numLayers = static_cast<unsigned>(problem.layers.size());
  assert(!cellStarts.empty() && cellStarts[0] == 0 &&
         std::adjacent_find(cellStarts.begin(), cellStarts.end(),
                            std::greater_equal<unsigned>()) ==
             cellStarts.end() &&
         cellStarts.back() < numLayers && "invalid cell starts");
  Partition partition;
  partition.cellStarts = std::move(cellStarts);
  U128 sumSquares = 0, cutTotal = 0;
  size_t numCells = partition.cellStarts.size();
  for (size_t c = 0; c < numCells; ++c) {
    unsigned begin = partition.cellStarts[c];
    unsigned end = c + 1 < numCells ? partition.cellStarts[c + 1] : numLayers;
    U128 compute = 0;
    for (unsigned i = begin; i < end; ++i)
      compute += problem.layers[i].compute;
    uint64_t cellCompute = saturateToU64(compute);
    partition.cellCompute.push_back(cellCompute);
    partition.cellMemory.push_back(cellMemory(problem, begin, end));
    partition.maxCellCompute = std::max(partition.maxCellCompute, cellCompute);
    sumSquares =
        saturatingAdd(sumSquares, saturatingMul(cellCompute, cellCompute));
    if (c > 0)
      cutTotal += problem.cutBytes[begin];
  }
  partition.sumSquaredCompute = sumSquares;
  partition.totalCutBytes = saturateToU64(cutTotal);
  return partition;
}

PartitionOutcome gpipe::partitionLayers(const PartitionProblem &problem) {
  size_t numLayers = problem.layers.size();
  unsigned numCells = problem.numCells;
  if (numCells == 0)
    return failure("cannot split " + countOf(numLayers, "layer") +
                   " into 0 cells: expected at least 1 cell");
  if (numCells > numLayers)
    return failure("cannot split " + countOf(numLayers, "layer") + " into " +
                   countOf(numCells, "cell") + ": expected at most " +
                   countOf(numLayers, "cell"));
  if (numLayers >= kNone)
    return failure("cannot split " + countOf(numLayers, "layer") +
                   ": expected fewer than " + toString(kNone));
  if (problem.cutBytes.size() != numLayers + 1)
    return failure(
        "cutBytes has " + countOf(problem.cutBytes.size(), "entry", "entries") +
        " for " + countOf(numLayers, "layer") + ": expected " +
        toString(numLayers + 1) + ", one per cut position including both ends");
  // Internal sums are 64-bit (squares 128-bit); reject inputs that overflow.
  U128 totalCompute = 0, totalCut = 0;
  for (const LayerCost &layer : problem.layers)
    totalCompute += layer.compute;
  for (size_t i = 1; i < numLayers; ++i)
    totalCut += problem.cutBytes[i];
  if (totalCompute > kU64Max)
    return failure("the total compute of the " + countOf(numLayers, "layer") +
                   " is " + toString(totalCompute) +
                   ", more than 64 bits can hold");
  if (totalCut > kU64Max)
    return failure("the total of cutBytes between the layers is " +
                   toString(totalCut) + ", more than 64 bits can hold");

  CellCosts costs(problem);
  unsigned count = static_cast<unsigned>(numLayers);
  std::vector<unsigned> reach(count, count);
  if (problem.memoryCap) {
    uint64_t cap = *problem.memoryCap;
    reach = costs.reach(cap);
    // A layer whose own cell is too big may still fit inside a cell that
    // starts earlier (fewer cut bytes), so it is only hopeless when no cell
    // holding it fits: no start b <= i reaches past it.
    for (unsigned i = 0, farthest = 0; i < count; ++i) {
      farthest = std::max(farthest, reach[i]);
      if (farthest <= i)
        return failure("layer '" + problem.layers[i].name + "' (#" +
                       toString(i) + ") needs " +
                       toString(cellMemory(problem, i, i + 1)) +
                       " bytes on its own, more than the memory cap of " +
                       toString(cap) + " bytes");
    }
    if (!splitsExactly(reach, numCells)) {
      U128 smallest = smallestFittingCap(costs, numCells, cap);
      PartitionOutcome outcome =
          failure("no partition into " + countOf(numCells, "cell") +
                  " fits the memory cap of " + toString(cap) +
                  " bytes; the smallest cap that fits is " +
                  toString(smallest) + " bytes");
      outcome.smallestFittingCap = saturateToU64(smallest);
      return outcome;
    }
  }

  std::vector<unsigned> starts =
      problem.objective == PartitionObjective::Variance
          ? solveVariance(costs, numCells, reach)
          : solveBottleneck(costs, numCells, reach,
                            problem.memoryCap.has_value());
  PartitionOutcome outcome;
  outcome.partition = evaluatePartition(problem, std::move(starts));
  return outcome;
}
