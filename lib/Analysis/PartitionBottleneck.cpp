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
//===----------------------------------------------------------------------===//

#include "PartitionSolvers.h"

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

} // namespace

std::vector<unsigned> gpipe::partition_detail::solveBottleneck(
    const CellCosts &costs, unsigned numCells,
    const std::vector<unsigned> &reach, bool hasCap) {
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
