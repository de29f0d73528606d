//===- PartitionVariance.cpp - The variance objective, exactly ------------===//
//
// Variance (sum of squared cell compute), O(K L log L) time without a cap:
//   the cost of the first cell w^2 (S[j] - S[i])^2 plus anything that depends
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
//   A level's first cell is always the same cell, so its weight w is a
//   constant of the level and keeps the matrix Monge.
//
//===----------------------------------------------------------------------===//

#include "PartitionSolvers.h"

using namespace gpipe;
using namespace gpipe::partition_detail;

namespace {

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

} // namespace

std::vector<unsigned>
gpipe::partition_detail::solveVariance(const CellCosts &costs,
                                       unsigned numCells,
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
    U128 cost = U128(costs.weight(numCells - 1)) * costs.compute(i, numLayers);
    prev[i] = {cost * cost, 0, reach[i] < numLayers};
  }

  ArgminTable argmins(numLayers, numCells);
  std::vector<unsigned> rows, pending, ends, rowArgmins;
  for (unsigned level = 2; level <= numCells; ++level) {
    unsigned rowLo = numCells - level;
    unsigned rowHi = level == numCells ? 0 : numLayers - level;
    unsigned colLo = rowLo + 1, colHi = numLayers - level + 1;
    // The first cell of a suffix of `level` cells.
    U128 weight = costs.weight(numCells - level);
    for (unsigned j = colLo; j <= colHi; ++j) {
      VarianceValue &h = prev[j];
      h = h.infeasible
              ? VarianceValue{0, 0, true}
              : VarianceValue{h.sumSquares, h.cutBytes + costs.cut(j), false};
    }
    auto candidate = [&](unsigned i, unsigned j) {
      U128 cost = weight * (sums[j] - sums[i]);
      const VarianceValue &h = prev[j];
      return VarianceValue{cost * cost + h.sumSquares, h.cutBytes,
                           h.infeasible};
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
