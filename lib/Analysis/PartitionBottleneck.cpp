//===- PartitionBottleneck.cpp - The bottleneck objective, exactly --------===//
//
// Bottleneck (largest cell compute), O(L log W log C + K L log W) time:
//   binary search on the bottleneck B over the compute range C. A cell
//   starting at i may end anywhere in (i, E(i)], E(i) the last end within both
//   B and the cap; with such interval transitions the achievable cell counts
//   of [0, L) form an interval (see splitsExactly), so "exactly K cells" is
//   decided by the fewest and the most cells. Then one DP over K levels
//   minimises the cut bytes among partitions whose cells all stay within B*.
//
// With weights that differ, cell c's compute is bounded by B / w_c: the
// transitions depend on the cell, the counts no longer form an interval, and
// "exactly K cells" is decided by one reachability pass per cell, O(K L) per
// probe of B.
//
//===----------------------------------------------------------------------===//

#include "PartitionSolvers.h"

#include <map>

using namespace gpipe;
using namespace gpipe::partition_detail;

namespace {

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

/// Cell c's ends: ends(c)[i] is the last end of a cell c starting at i.
using EndsOfCell = std::function<const std::vector<unsigned> &(unsigned)>;

/// Whether [0, L) splits into exactly `numCells` cells, cell c starting at i
/// ending anywhere in (i, endsOfCell(c)[i]]. Cells are placed from the last.
bool splitsIntoCells(unsigned numLayers, unsigned numCells,
                     const EndsOfCell &endsOfCell) {
  // fits[j]: [j, L) splits into the cells placed so far.
  std::vector<char> fits(numLayers + 1, 0);
  std::vector<unsigned> fitsFrom(numLayers + 2, 0);
  fits[numLayers] = 1;
  for (unsigned cell = numCells; cell-- > 0;) {
    for (unsigned j = numLayers + 1; j-- > 0;)
      fitsFrom[j] = fitsFrom[j + 1] + fits[j];
    const std::vector<unsigned> &ends = endsOfCell(cell);
    for (unsigned i = 0; i < numLayers; ++i)
      fits[i] = ends[i] > i && fitsFrom[i + 1] > fitsFrom[ends[i] + 1];
    fits[numLayers] = 0;
  }
  return fits[0];
}

/// The least cut bytes among the splits whose cells end within
/// `endsOfCell`, known to exist.
std::vector<unsigned> leastCutSplit(const CellCosts &costs, unsigned numCells,
                                    const EndsOfCell &endsOfCell) {
  unsigned numLayers = costs.numLayers();
  constexpr uint64_t kInfeasible = kU64Max;
  std::vector<uint64_t> prev(numLayers + 1, kInfeasible),
      cur(numLayers + 1, kInfeasible);
  const std::vector<unsigned> &lastEnds = endsOfCell(numCells - 1);
  for (unsigned i = numCells - 1; i < numLayers; ++i)
    prev[i] = lastEnds[i] >= numLayers ? 0 : kInfeasible;
  ArgminTable argmins(numLayers, numCells);
  for (unsigned level = 2; level <= numCells; ++level) {
    const std::vector<unsigned> &ends = endsOfCell(numCells - level);
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

/// Cell ends under a bound on the weighted cost, one vector per distinct
/// weight (most models have two).
class WeightedEnds {
public:
  WeightedEnds(const CellCosts &costs, const std::vector<unsigned> &reach)
      : costs(costs), reach(reach) {}

  void setBound(uint64_t bound) {
    this->bound = bound;
    byWeight.clear();
  }

  const std::vector<unsigned> &operator()(unsigned cell) {
    uint64_t weight = costs.weight(cell);
    auto [it, inserted] = byWeight.try_emplace(weight);
    if (inserted)
      it->second = boundedEnds(costs, bound / weight, reach);
    return it->second;
  }

private:
  const CellCosts &costs;
  const std::vector<unsigned> &reach;
  uint64_t bound = 0;
  std::map<uint64_t, std::vector<unsigned>> byWeight;
};

std::vector<unsigned> solveWeighted(const CellCosts &costs, unsigned numCells,
                                    const std::vector<unsigned> &reach) {
  unsigned numLayers = costs.numLayers();
  uint64_t largestWeight = 0;
  for (unsigned cell = 0; cell < numCells; ++cell)
    largestWeight = std::max(largestWeight, costs.weight(cell));
  // The caller checked that this product fits 64 bits; any split that
  // fits the cap stays within it.
  uint64_t lo = 0, hi = largestWeight * costs.compute(0, numLayers);
  WeightedEnds ends(costs, reach);
  EndsOfCell endsOfCell = std::ref(ends);
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    ends.setBound(mid);
    if (splitsIntoCells(numLayers, numCells, endsOfCell))
      hi = mid;
    else
      lo = mid + 1;
  }
  ends.setBound(lo);
  assert(splitsIntoCells(numLayers, numCells, endsOfCell) &&
         "the bound search overshot");
  return leastCutSplit(costs, numCells, endsOfCell);
}

} // namespace

std::vector<unsigned> gpipe::partition_detail::solveBottleneck(
    const CellCosts &costs, unsigned numCells,
    const std::vector<unsigned> &reach, bool hasCap) {
  if (!costs.uniformWeights())
    return solveWeighted(costs, numCells, reach);
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

  return leastCutSplit(
      costs, numCells,
      [&](unsigned) -> const std::vector<unsigned> & { return ends; });
}
