//===- Partitioner.cpp - Exact contiguous partitioning of layers ----------===//
//
// The entry points: validation, the memory cap's reach and the errors that
// name the numbers. The objectives are solved in PartitionVariance.cpp and
// PartitionBottleneck.cpp (PartitionSolvers.h explains the common frame).
//
//===----------------------------------------------------------------------===//

#include "PartitionSolvers.h"

using namespace gpipe;
using namespace gpipe::partition_detail;

std::vector<unsigned> CellCosts::reach(U128 cap) const {
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
        unsigned probe =
            tooFar - fits <= step ? fits : tooFar - static_cast<unsigned>(step);
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

void gpipe::partition_detail::suffixCellCounts(
    const std::vector<unsigned> &ends, std::vector<unsigned> &fewest,
    std::vector<unsigned> &most) {
  unsigned numLayers = static_cast<unsigned>(ends.size());
  fewest.assign(numLayers + 1, kNone);
  most.assign(numLayers + 1, kNone);
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
}

bool gpipe::partition_detail::splitsExactly(const std::vector<unsigned> &ends,
                                            unsigned numCells) {
  std::vector<unsigned> fewest, most;
  suffixCellCounts(ends, fewest, most);
  return fewest[0] != kNone && fewest[0] <= numCells && numCells <= most[0];
}

namespace {

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
    U128 weight = c < problem.cellWeights.size() ? problem.cellWeights[c] : 1;
    uint64_t cost = saturateToU64(saturatingMul(weight, cellCompute));
    partition.maxCellCompute = std::max(partition.maxCellCompute, cost);
    sumSquares = saturatingAdd(sumSquares, saturatingMul(cost, cost));
    if (c > 0)
      cutTotal += problem.cutBytes[begin];
  }
  partition.sumSquaredCompute = sumSquares;
  partition.totalCutBytes = saturateToU64(cutTotal);
  return partition;
}

/// `problem` with the layers between allowed cuts merged into one each
/// (`groupStarts`: the first original layer of each), solved, and its cell
/// starts mapped back to the original layers.
static PartitionOutcome partitionJoined(const PartitionProblem &problem) {
  const size_t numLayers = problem.layers.size();
  std::vector<unsigned> groupStarts;
  std::string firstReason;
  for (unsigned i = 0; i < numLayers; ++i) {
    if (i == 0 || problem.joined[i].empty())
      groupStarts.push_back(i);
    else if (firstReason.empty())
      firstReason = problem.joined[i];
  }
  const unsigned numGroups = unsigned(groupStarts.size());
  auto originalEnd = [&](unsigned group) {
    return group < numGroups ? groupStarts[group] : unsigned(numLayers);
  };
  if (problem.numCells > numGroups)
    return failure("cannot split " + countOf(numLayers, "layer") + " into " +
                   countOf(problem.numCells, "cell") + ": only " +
                   countOf(numGroups - 1, "place") +
                   " between them may be cut, the others are crossed by "
                   "values that no stage boundary carries (" +
                   firstReason + "); expected at most " +
                   countOf(numGroups, "cell") +
                   ", or such values computed in the layers that read them");
  PartitionProblem merged = problem;
  merged.joined.clear();
  merged.layers.clear();
  merged.cutBytes.clear();
  for (unsigned g = 0; g < numGroups; ++g) {
    LayerCost cost{problem.layers[groupStarts[g]].name, 0, 0, 0};
    for (unsigned i = groupStarts[g]; i < originalEnd(g + 1); ++i) {
      cost.compute += problem.layers[i].compute;
      cost.paramBytes += problem.layers[i].paramBytes;
      cost.activationBytes += problem.layers[i].activationBytes;
    }
    if (originalEnd(g + 1) - groupStarts[g] > 1)
      cost.name += "' to '" + problem.layers[originalEnd(g + 1) - 1].name;
    merged.layers.push_back(std::move(cost));
    merged.cutBytes.push_back(problem.cutBytes[groupStarts[g]]);
  }
  merged.cutBytes.push_back(problem.cutBytes[numLayers]);
  if (problem.cellMemoryFunction)
    merged.cellMemoryFunction = [&](unsigned begin, unsigned end) {
      return problem.cellMemoryFunction(groupStarts[begin], originalEnd(end));
    };
  PartitionOutcome outcome = partitionLayers(merged);
  if (!outcome.succeeded())
    return outcome;
  std::vector<unsigned> starts;
  for (unsigned group : outcome.partition->cellStarts)
    starts.push_back(groupStarts[group]);
  outcome.partition = evaluatePartition(problem, std::move(starts));
  return outcome;
}

PartitionOutcome gpipe::partitionLayers(const PartitionProblem &problem) {
  size_t numLayers = problem.layers.size();
  unsigned numCells = problem.numCells;
  if (!problem.joined.empty()) {
    if (problem.joined.size() != numLayers + 1)
      return failure("joined has " +
                     countOf(problem.joined.size(), "entry", "entries") +
                     " for " + countOf(numLayers, "layer") + ": expected " +
                     toString(numLayers + 1) +
                     ", one per cut position including both ends, or none");
    if (std::any_of(problem.joined.begin() + 1, problem.joined.end() - 1,
                    [](const std::string &why) { return !why.empty(); }))
      return partitionJoined(problem);
  }
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
  const std::vector<uint64_t> &weights = problem.cellWeights;
  if (!weights.empty() && weights.size() != numCells)
    return failure("cellWeights has " +
                   countOf(weights.size(), "entry", "entries") + " for " +
                   countOf(numCells, "cell") + ": expected " +
                   toString(numCells) + ", one per cell, or none");
  for (size_t c = 0; c < weights.size(); ++c)
    if (weights[c] == 0)
      return failure("cell " + toString(c) +
                     " has weight 0: expected a weight of at least 1");
  if (totalCut > kU64Max)
    return failure("the total of cutBytes between the layers is " +
                   toString(totalCut) + ", more than 64 bits can hold");

  CellCosts costs(problem);
  uint64_t largestWeight = 1;
  for (unsigned c = 0; c < numCells; ++c)
    largestWeight = std::max(largestWeight, costs.weight(c));
  if (totalCompute * largestWeight > kU64Max)
    return failure("the total compute of the " + countOf(numLayers, "layer") +
                   " times the largest cell weight (" +
                   toString(largestWeight) +
                   ", the weights divided by their common divisor) is " +
                   toString(totalCompute * largestWeight) +
                   ", more than 64 bits can hold");
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
