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
// probe of B. The schedules' weights form two runs (every cell alike but the
// last): then each run's cell counts still form an interval, read from the
// run's own end, and a probe costs O(L) without a cap, O(L log L) with one.
//
//===----------------------------------------------------------------------===//

#include "PartitionSolvers.h"

#include <deque>
#include <map>
#include <queue>

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

/// For every end p, the fewest and the most cells that split [0, p), a cell
/// starting at i ending in (i, ends[i]]; kNone where none do. From the one
/// start 0 the counts form an interval, as splitsExactly argues from the
/// end. A sweep over p keeps the starts whose cells reach p: a window of
/// starts with monotone deques where the ends never decrease (no cap), else
/// two heaps.
void prefixCellCounts(const std::vector<unsigned> &ends,
                      std::vector<unsigned> &fewest,
                      std::vector<unsigned> &most) {
  unsigned numLayers = static_cast<unsigned>(ends.size());
  fewest.assign(numLayers + 1, kNone);
  most.assign(numLayers + 1, kNone);
  fewest[0] = most[0] = 0;
  auto reachable = [&](unsigned start) {
    return fewest[start] != kNone && ends[start] > start;
  };
  if (std::is_sorted(ends.begin(), ends.end())) {
    // The starts reaching p are those in [first, p) with ends >= p: a
    // window whose front only moves forward.
    std::deque<unsigned> low, high; // fewest increasing, most decreasing
    for (unsigned p = 1; p <= numLayers; ++p) {
      unsigned start = p - 1;
      if (reachable(start)) {
        while (!low.empty() && fewest[low.back()] >= fewest[start])
          low.pop_back();
        low.push_back(start);
        while (!high.empty() && most[high.back()] <= most[start])
          high.pop_back();
        high.push_back(start);
      }
      while (!low.empty() && ends[low.front()] < p)
        low.pop_front();
      while (!high.empty() && ends[high.front()] < p)
        high.pop_front();
      if (!low.empty()) {
        fewest[p] = fewest[low.front()] + 1;
        most[p] = most[high.front()] + 1;
      }
    }
    return;
  }
  using Entry = std::pair<unsigned, unsigned>; // count, start
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> low;
  std::priority_queue<Entry> high;
  for (unsigned p = 1; p <= numLayers; ++p) {
    unsigned start = p - 1;
    if (reachable(start)) {
      low.push({fewest[start], start});
      high.push({most[start], start});
    }
    // A start that no longer reaches p never will again.
    while (!low.empty() && ends[low.top().second] < p)
      low.pop();
    while (!high.empty() && ends[high.top().second] < p)
      high.pop();
    if (!low.empty()) {
      fewest[p] = low.top().first + 1;
      most[p] = high.top().first + 1;
    }
  }
}

/// Whether [0, L) splits into `firstCells` cells ending within `first`,
/// then `lastCells` cells ending within `last`.
bool splitsIntoTwoRuns(const std::vector<unsigned> &first, unsigned firstCells,
                       const std::vector<unsigned> &last, unsigned lastCells) {
  std::vector<unsigned> fewestBefore, mostBefore, fewestAfter, mostAfter;
  prefixCellCounts(first, fewestBefore, mostBefore);
  suffixCellCounts(last, fewestAfter, mostAfter);
  auto holds = [](unsigned fewest, unsigned most, unsigned count) {
    return fewest != kNone && fewest <= count && count <= most;
  };
  for (unsigned p = 1; p < first.size(); ++p)
    if (holds(fewestBefore[p], mostBefore[p], firstCells) &&
        holds(fewestAfter[p], mostAfter[p], lastCells))
      return true;
  return false;
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
  // Cells 0..firstRun-1 share the first cell's weight.
  unsigned firstRun = 1;
  while (firstRun < numCells && costs.weight(firstRun) == costs.weight(0))
    ++firstRun;
  bool twoRuns = true;
  for (unsigned cell = firstRun; cell < numCells; ++cell)
    twoRuns &= costs.weight(cell) == costs.weight(numCells - 1);
  auto splits = [&] {
    if (!twoRuns)
      return splitsIntoCells(numLayers, numCells, endsOfCell);
    const std::vector<unsigned> &first = ends(0);
    return splitsIntoTwoRuns(first, firstRun, ends(numCells - 1),
                             numCells - firstRun);
  };
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    ends.setBound(mid);
    if (splits())
      hi = mid;
    else
      lo = mid + 1;
  }
  ends.setBound(lo);
  assert(splits() && "the bound search overshot");
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
