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

LinearFit gpipe::fitThroughOrigin(const std::vector<double> &x1,
                                  const std::vector<double> &x2,
                                  const std::vector<double> &x3,
                                  const std::vector<double> &y) {
  // The normal equations g (a, b, c) = r, by Cramer's rule.
  const std::vector<double> *x[3] = {&x1, &x2, &x3};
  double g[3][3] = {}, r[3] = {};
  for (size_t i = 0; i < y.size(); ++i)
    for (int j = 0; j < 3; ++j) {
      r[j] += (*x[j])[i] * y[i];
      for (int l = 0; l < 3; ++l)
        g[j][l] += (*x[j])[i] * (*x[l])[i];
    }
  auto det = [](const double m[3][3]) {
    return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
           m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
           m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  };
  LinearFit fit;
  const double d = det(g);
  // Below a billionth of Hadamard's bound, a column is a combination of the
  // others (a single block count makes (L/K)*N proportional to N).
  fit.solvable = d > 1e-9 * g[0][0] * g[1][1] * g[2][2];
  if (!fit.solvable)
    return fit;
  fit.hasC = true;
  double *coef[3] = {&fit.a, &fit.b, &fit.c};
  for (int j = 0; j < 3; ++j) {
    double m[3][3];
    for (int row = 0; row < 3; ++row)
      for (int col = 0; col < 3; ++col)
        m[row][col] = col == j ? r[row] : g[row][col];
    *coef[j] = det(m) / d;
  }
  return fit;
}
