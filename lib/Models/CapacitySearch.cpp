//===- CapacitySearch.cpp - The searches of the capacity studies ----------===//
//
// Pure arithmetic, no MLIR: the largest block count under a budget (the
// table) and the least-squares coefficients of the activation model (the
// sweep).
//
//===----------------------------------------------------------------------===//

#include "gpipe/Models/Capacity.h"

#include <algorithm>
#include <map>

using namespace gpipe;

int64_t gpipe::minBlocksFor(int64_t stages) {
  return std::max<int64_t>(1, (stages - 3 + 1) / 2);
}

std::optional<Capacity> gpipe::findLargestFitting(
    llvm::function_ref<std::optional<int64_t>(int64_t)> arenaOf, int64_t fewest,
    int64_t most, uint64_t budget) {
  std::map<int64_t, int64_t> memo;
  auto arena = [&](int64_t blocks) -> std::optional<int64_t> {
    if (auto it = memo.find(blocks); it != memo.end())
      return it->second;
    std::optional<int64_t> bytes = arenaOf(blocks);
    if (bytes)
      memo[blocks] = *bytes;
    return bytes;
  };
  Capacity capacity;
  int64_t lo = fewest;
  std::optional<int64_t> bytes = arena(lo);
  if (!bytes)
    return std::nullopt;
  if (uint64_t(*bytes) > budget) {
    capacity.smallestArena = *bytes;
    return capacity;
  }
  // Invariant: lo fits; hi (when set) does not.
  std::optional<int64_t> hi;
  while (!hi && lo < most) {
    int64_t next = std::min<int64_t>(2 * lo, most);
    if (!(bytes = arena(next)))
      return std::nullopt;
    if (uint64_t(*bytes) <= budget)
      lo = next;
    else
      hi = next;
  }
  if (!hi) {
    capacity.capped = true;
  } else {
    while (*hi - lo > 1) {
      int64_t mid = lo + (*hi - lo) / 2;
      if (!(bytes = arena(mid)))
        return std::nullopt;
      (uint64_t(*bytes) <= budget ? lo : *hi) = mid;
    }
  }
  capacity.blocks = lo;
  capacity.arena = memo.at(lo);
  return capacity;
}

LinearFit gpipe::fitThroughOrigin(const std::vector<double> &x1,
                                  const std::vector<double> &x2,
                                  const std::vector<double> &y) {
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    s11 += x1[i] * x1[i];
    s12 += x1[i] * x2[i];
    s22 += x2[i] * x2[i];
    s1y += x1[i] * y[i];
    s2y += x2[i] * y[i];
  }
  LinearFit fit;
  double det = s11 * s22 - s12 * s12;
  fit.solvable = det > 1e-9 * s11 * s22;
  if (fit.solvable) {
    fit.a = (s1y * s22 - s2y * s12) / det;
    fit.b = (s11 * s2y - s12 * s1y) / det;
  }
  return fit;
}
