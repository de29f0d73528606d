//===- PartitionerReference.cpp - References for the partitioner's tests --===//
//
// Two independent references written from the raw layer arrays: a brute
// force over every set of cuts (small L), and a plain O(K L^2) dynamic
// program (L in the hundreds); and the random problems they are run on.
//
//===----------------------------------------------------------------------===//

#include "PartitionerReference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

using namespace gpipe;
using namespace gpipe::partition_test;

namespace {

__extension__ typedef unsigned __int128 U128;

__extension__ typedef unsigned __int128 U128;

std::string decimal(U128 value) {
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + int(value % 10)));
    value /= 10;
  } while (value != 0);
  return digits;
}

/// Cell memory exactly as the header states it, from the raw arrays.
U128 referenceMemory(const PartitionProblem &problem, unsigned begin,
                     unsigned end) {
  if (problem.cellMemoryFunction)
    return problem.cellMemoryFunction(begin, end);
  U128 params = 0, activations = 0;
  for (unsigned i = begin; i < end; ++i) {
    params += problem.layers[i].paramBytes;
    activations += problem.layers[i].activationBytes;
  }
  const CellMemoryModel &model = problem.memoryModel;
  U128 microbatches = std::max<uint64_t>(model.numMicrobatches, 1);
  U128 live = model.rematerialize
                  ? (activations + microbatches - 1) / microbatches
                  : activations;
  return model.paramCopies * params + problem.cutBytes[begin] + live;
}

bool fitsCap(const PartitionProblem &problem, U128 memory) {
  return !problem.memoryCap || memory <= *problem.memoryCap;
}

std::string layerTooBigMessage(const PartitionProblem &problem, unsigned i,
                               U128 memory) {
  return "layer '" + problem.layers[i].name + "' (#" + std::to_string(i) +
         ") needs " + decimal(memory) +
         " bytes on its own, more than the memory cap of " +
         decimal(*problem.memoryCap) + " bytes";
}

std::string noPartitionMessage(const PartitionProblem &problem,
                               U128 smallestCap) {
  unsigned k = problem.numCells;
  return "no partition into " + std::to_string(k) +
         (k == 1 ? " cell" : " cells") + " fits the memory cap of " +
         decimal(*problem.memoryCap) +
         " bytes; the smallest cap that fits is " + decimal(smallestCap) +
         " bytes";
}

/// What a reference solver expects: the lexicographic optimum of
/// (objective, cut bytes, cell starts), or the error message.
struct Expected {
  std::string error;
  std::vector<unsigned> starts;
  U128 objective = 0;
  U128 cutBytes = 0;
};

/// The error for the first layer that no cell fitting the cap can hold, if
/// any. The smallest cells holding layer i are [b, i + 1), b <= i; with
/// cutBytes they are not always bigger than the layer alone.
std::string singleLayerError(const PartitionProblem &problem) {
  if (!problem.memoryCap)
    return "";
  for (unsigned i = 0; i < problem.layers.size(); ++i) {
    bool placeable = false;
    for (unsigned b = 0; b <= i; ++b)
      placeable |= fitsCap(problem, referenceMemory(problem, b, i + 1));
    if (!placeable)
      return layerTooBigMessage(problem, i, referenceMemory(problem, i, i + 1));
  }
  return "";
}

/// What a unit of cell c's compute costs.
U128 weightOf(const PartitionProblem &problem, unsigned cell) {
  return problem.cellWeights.empty() ? 1 : problem.cellWeights[cell];
}

/// Enumerates every set of K - 1 cuts in lexicographic order of the starts.
/// Also returns, through `smallestCap`, the least max cell memory over all
/// partitions (ignoring the cap).
Expected bruteForce(const PartitionProblem &problem, U128 *smallestCap) {
  unsigned numLayers = problem.layers.size(), numCells = problem.numCells;
  Expected best;
  bool found = false;
  U128 leastMaxMemory = ~U128(0);
  std::vector<unsigned> starts(numCells);
  for (unsigned c = 0; c < numCells; ++c)
    starts[c] = c;
  auto joinedAt = [&](unsigned start) {
    return !problem.joined.empty() && !problem.joined[start].empty();
  };
  while (true) {
    U128 sumSquares = 0, maxCompute = 0, cut = 0, maxMemory = 0;
    bool allowed = true;
    for (unsigned c = 1; c < numCells; ++c)
      allowed = allowed && !joinedAt(starts[c]);
    for (unsigned c = 0; allowed && c < numCells; ++c) {
      unsigned begin = starts[c];
      unsigned end = c + 1 < numCells ? starts[c + 1] : numLayers;
      U128 compute = 0;
      for (unsigned i = begin; i < end; ++i)
        compute += problem.layers[i].compute;
      compute *= weightOf(problem, c);
      sumSquares += compute * compute;
      maxCompute = std::max(maxCompute, compute);
      maxMemory = std::max(maxMemory, referenceMemory(problem, begin, end));
      if (c > 0)
        cut += problem.cutBytes[begin];
    }
    if (allowed)
      leastMaxMemory = std::min(leastMaxMemory, maxMemory);
    U128 objective = problem.objective == PartitionObjective::Variance
                         ? sumSquares
                         : maxCompute;
    if (allowed && fitsCap(problem, maxMemory) &&
        (!found || objective < best.objective ||
         (objective == best.objective && cut < best.cutBytes))) {
      found = true;
      best.starts = starts;
      best.objective = objective;
      best.cutBytes = cut;
    }
    // Next combination of starts[1..K-1] within [1, L - 1].
    int c = static_cast<int>(numCells) - 1;
    while (c >= 1 && starts[c] == numLayers - numCells + c)
      --c;
    if (c < 1)
      break;
    ++starts[c];
    for (unsigned d = c + 1; d < numCells; ++d)
      starts[d] = starts[d - 1] + 1;
  }
  if (smallestCap)
    *smallestCap = leastMaxMemory;
  best.error = singleLayerError(problem);
  if (best.error.empty() && !found)
    best.error = noPartitionMessage(problem, leastMaxMemory);
  return best;
}

/// Plain suffix DP: O(K L^2). Level k, start i: best split of [i, L) into k
/// cells, ties broken towards the earliest end of the first cell.
/// With `smallestCap`, only computes the least max cell memory into it.
Expected plainDp(const PartitionProblem &problem, U128 *smallestCap) {
  unsigned numLayers = problem.layers.size(), numCells = problem.numCells;
  const CellMemoryModel &model = problem.memoryModel;
  std::vector<U128> compute(numLayers + 1, 0), params(numLayers + 1, 0),
      activations(numLayers + 1, 0);
  for (unsigned i = 0; i < numLayers; ++i) {
    compute[i + 1] = compute[i] + problem.layers[i].compute;
    params[i + 1] = params[i] + problem.layers[i].paramBytes;
    activations[i + 1] = activations[i] + problem.layers[i].activationBytes;
  }
  U128 microbatches = std::max<uint64_t>(model.numMicrobatches, 1);
  std::vector<U128> memoryTable((numLayers + 1) * (numLayers + 1));
  for (unsigned i = 0; i < numLayers; ++i)
    for (unsigned j = i + 1; j <= numLayers; ++j) {
      U128 a = activations[j] - activations[i];
      memoryTable[i * (numLayers + 1) + j] =
          model.paramCopies * (params[j] - params[i]) + problem.cutBytes[i] +
          (model.rematerialize ? (a + microbatches - 1) / microbatches : a);
    }
  auto memory = [&](unsigned i, unsigned j) {
    return memoryTable[i * (numLayers + 1) + j];
  };
  auto cost = [&](unsigned i, unsigned j, unsigned cell) {
    return weightOf(problem, cell) * (compute[j] - compute[i]);
  };
  auto cellOk = [&](unsigned i, unsigned j) {
    return fitsCap(problem, memory(i, j));
  };
  const U128 none = ~U128(0);

  // A generic "min over the first cell" DP whose values are pairs.
  using Pair = std::pair<U128, U128>;
  auto solve = [&](auto cellValue, auto combine,
                   std::vector<unsigned> *starts) {
    std::vector<std::vector<Pair>> value(numCells + 1,
                                         std::vector<Pair>(numLayers + 1));
    std::vector<std::vector<unsigned>> arg(
        numCells + 1, std::vector<unsigned>(numLayers + 1, 0));
    std::vector<std::vector<bool>> ok(numCells + 1,
                                      std::vector<bool>(numLayers + 1, false));
    for (unsigned i = 0; i < numLayers; ++i)
      if (auto last = cellValue(i, numLayers, numCells - 1)) {
        ok[1][i] = true;
        value[1][i] = {*last, 0};
      }
    for (unsigned k = 2; k <= numCells; ++k)
      for (unsigned i = 0; i < numLayers; ++i)
        for (unsigned j = i + 1; j < numLayers; ++j) {
          auto first = cellValue(i, j, numCells - k);
          if (!first || !ok[k - 1][j])
            continue;
          Pair candidate = combine(*first, value[k - 1][j], j);
          if (!ok[k][i] || candidate < value[k][i]) {
            ok[k][i] = true;
            value[k][i] = candidate;
            arg[k][i] = j;
          }
        }
    if (!ok[numCells][0])
      return Pair{none, none};
    if (starts) {
      starts->assign(1, 0);
      for (unsigned k = numCells, i = 0; k >= 2; --k)
        starts->push_back(i = arg[k][i]);
    }
    return value[numCells][0];
  };

  Expected expected;
  expected.error = singleLayerError(problem);
  // The least max memory, for the error message.
  auto leastMaxMemory = [&] {
    return solve([&](unsigned i, unsigned j,
                     unsigned) { return std::optional<U128>(memory(i, j)); },
                 [](U128 first, Pair rest, unsigned) {
                   return Pair{std::max(first, rest.first), 0};
                 },
                 nullptr)
        .first;
  };
  if (smallestCap) {
    *smallestCap = leastMaxMemory();
    return expected;
  }
  if (problem.objective == PartitionObjective::Variance) {
    Pair best = solve(
        [&](unsigned i, unsigned j, unsigned cell) -> std::optional<U128> {
          if (!cellOk(i, j))
            return std::nullopt;
          return cost(i, j, cell) * cost(i, j, cell);
        },
        [&](U128 first, Pair rest, unsigned j) {
          return Pair{first + rest.first, rest.second + problem.cutBytes[j]};
        },
        &expected.starts);
    expected.objective = best.first;
    expected.cutBytes = best.second;
    if (best.first == none && expected.error.empty())
      expected.error = noPartitionMessage(problem, leastMaxMemory());
    return expected;
  }
  Pair bottleneck = solve(
      [&](unsigned i, unsigned j, unsigned cell) -> std::optional<U128> {
        if (!cellOk(i, j))
          return std::nullopt;
        return cost(i, j, cell);
      },
      [](U128 first, Pair rest, unsigned) {
        return Pair{std::max(first, rest.first), 0};
      },
      nullptr);
  if (bottleneck.first == none) {
    if (expected.error.empty())
      expected.error = noPartitionMessage(problem, leastMaxMemory());
    return expected;
  }
  Pair cuts = solve(
      [&](unsigned i, unsigned j, unsigned cell) -> std::optional<U128> {
        if (!cellOk(i, j) || cost(i, j, cell) > bottleneck.first)
          return std::nullopt;
        return 0;
      },
      [&](U128, Pair rest, unsigned j) {
        return Pair{rest.first + problem.cutBytes[j], 0};
      },
      &expected.starts);
  expected.objective = bottleneck.first;
  expected.cutBytes = cuts.first;
  return expected;
}

/// Checks an outcome against a reference; `context` names the case.
void expectMatches(const PartitionProblem &problem,
                   const PartitionOutcome &outcome, const Expected &expected,
                   const std::string &context) {
  SCOPED_TRACE(context);
  ASSERT_EQ(outcome.succeeded(), expected.error.empty())
      << "error: " << outcome.error << " / expected: " << expected.error;
  if (!outcome.succeeded()) {
    EXPECT_EQ(outcome.error, expected.error);
    return;
  }
  const Partition &partition = *outcome.partition;
  U128 objective = problem.objective == PartitionObjective::Variance
                       ? partition.sumSquaredCompute
                       : partition.maxCellCompute;
  EXPECT_TRUE(objective == expected.objective)
      << decimal(objective) << " vs " << decimal(expected.objective);
  EXPECT_TRUE(partition.totalCutBytes == expected.cutBytes)
      << partition.totalCutBytes << " vs " << decimal(expected.cutBytes);
  EXPECT_EQ(partition.cellStarts, expected.starts);
  ASSERT_EQ(partition.cellMemory.size(), problem.numCells);
  for (unsigned c = 0; c < problem.numCells; ++c) {
    unsigned end = c + 1 < problem.numCells ? partition.cellStarts[c + 1]
                                            : problem.layers.size();
    U128 memory = referenceMemory(problem, partition.cellStarts[c], end);
    EXPECT_TRUE(partition.cellMemory[c] == memory);
    EXPECT_TRUE(fitsCap(problem, memory));
  }
}

} // namespace

uint64_t gpipe::partition_test::uniform(std::mt19937_64 &rng, uint64_t lo,
                                        uint64_t hi) {
  return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
}

namespace {

/// A random problem mixing tiny ranges (many ties), large values (up to a
/// total near 2^64) and cut bytes that dominate the memory.
PartitionProblem randomProblem(std::mt19937_64 &rng, unsigned numLayers,
                               unsigned numCells,
                               PartitionObjective objective) {
  PartitionProblem problem;
  problem.numCells = numCells;
  problem.objective = objective;
  uint64_t computeMax;
  switch (uniform(rng, 0, 3)) {
  case 0:
    computeMax = 3;
    break;
  case 1:
    computeMax = 100;
    break;
  case 2:
    computeMax = ~uint64_t(0) / numLayers;
    break;
  default:
    computeMax = 1'000'000'000'000'000ull;
    break;
  }
  uint64_t bytesMax = uniform(rng, 0, 1) ? 3 : 1000;
  // Mode 3 mixes tiny and huge cuts: starts after a huge cut reach few ends,
  // so the memory is far from monotone in the start and splitting a cell
  // can break the cap (more cells may not fit where fewer do).
  unsigned cutMode = uniform(rng, 0, 3);
  uint64_t cutMax = std::vector<uint64_t>{3, 1000, 100000, 3}[cutMode];
  for (unsigned i = 0; i < numLayers; ++i) {
    LayerCost layer;
    layer.name = "l" + std::to_string(i);
    layer.compute = uniform(rng, 0, computeMax);
    layer.paramBytes = uniform(rng, 0, bytesMax);
    layer.activationBytes = uniform(rng, 0, bytesMax);
    problem.layers.push_back(layer);
  }
  for (unsigned i = 0; i <= numLayers; ++i)
    problem.cutBytes.push_back(
        uniform(rng, 0, cutMax) +
        (cutMode == 3 && uniform(rng, 0, 2) == 0 ? 50 * bytesMax : 0));
  problem.memoryModel.paramCopies = uniform(rng, 0, 4);
  problem.memoryModel.numMicrobatches = uniform(rng, 0, 4);
  problem.memoryModel.rematerialize = uniform(rng, 0, 1);
  return problem;
}

/// Picks a cap around `leastMax`, the smallest cap that fits: tight, one
/// byte short, loose, or anything below it.
void pickCap(std::mt19937_64 &rng, PartitionProblem &problem, U128 leastMax) {
  uint64_t least = static_cast<uint64_t>(leastMax);
  switch (uniform(rng, 0, 5)) {
  case 0:
    problem.memoryCap.reset();
    break;
  case 1:
    problem.memoryCap = least;
    break;
  case 2:
    problem.memoryCap = least == 0 ? 0 : least - 1;
    break;
  case 3:
  case 4:
    problem.memoryCap = least + uniform(rng, 0, least / 2);
    break;
  default:
    problem.memoryCap = uniform(rng, 0, least);
    break;
  }
}

/// Weights of 1 to 4 per cell: all equal (which must change only the
/// objective's scale), two runs (the schedules' shape: every cell alike but
/// the last ones, which the bottleneck search takes a faster way), or any.
/// The compute is scaled down so that the weighted total still fits 64 bits.
void addRandomWeights(std::mt19937_64 &rng, PartitionProblem &problem) {
  unsigned numCells = problem.numCells;
  switch (uniform(rng, 0, 3)) {
  case 0:
    problem.cellWeights.assign(numCells, uniform(rng, 1, 4));
    break;
  case 1: {
    problem.cellWeights.assign(numCells, uniform(rng, 1, 4));
    unsigned lastRun = unsigned(uniform(rng, 1, numCells));
    std::fill(problem.cellWeights.end() - lastRun, problem.cellWeights.end(),
              uniform(rng, 1, 4));
    break;
  }
  default:
    for (unsigned c = 0; c < numCells; ++c)
      problem.cellWeights.push_back(uniform(rng, 1, 4));
  }
  for (LayerCost &layer : problem.layers)
    layer.compute /= 4;
}

/// A memory function like the planner's, not a sum over layers: the
/// parameter state adds up, the working set is the largest layer's, and the
/// cell's inputs count in full. Nondecreasing in the end, not in the start.
void useNonAdditiveMemory(PartitionProblem &problem) {
  std::vector<LayerCost> layers = problem.layers;
  std::vector<uint64_t> cuts = problem.cutBytes;
  problem.cellMemoryFunction = [layers, cuts](unsigned begin, unsigned end) {
    uint64_t params = 0, working = 0;
    for (unsigned i = begin; i < end; ++i) {
      params += 3 * layers[i].paramBytes;
      working = std::max(working, 2 * layers[i].activationBytes);
    }
    return params + working + cuts[begin];
  };
}

} // namespace

void gpipe::partition_test::runBruteForceCases(PartitionObjective objective,
                                               uint64_t seed,
                                               CaseOptions options) {
  std::mt19937_64 rng(seed);
  unsigned withCap = 0, failures = 0;
  for (unsigned n = 0; n < 1500; ++n) {
    unsigned numLayers = uniform(rng, 1, 12);
    unsigned numCells = uniform(rng, 1, std::min(5u, numLayers));
    PartitionProblem problem =
        randomProblem(rng, numLayers, numCells, objective);
    if (options.memoryFunction)
      useNonAdditiveMemory(problem);
    if (options.weighted)
      addRandomWeights(rng, problem);
    U128 leastMax = 0;
    bruteForce(problem, &leastMax);
    pickCap(rng, problem, leastMax);
    Expected expected = bruteForce(problem, nullptr);
    withCap += problem.memoryCap.has_value();
    failures += !expected.error.empty();
    expectMatches(problem, partitionLayers(problem), expected,
                  "case " + std::to_string(n) +
                      ", L=" + std::to_string(numLayers) +
                      ", K=" + std::to_string(numCells));
    if (::testing::Test::HasFailure())
      return;
  }
  // The generator must cover both feasible and infeasible capped cases.
  EXPECT_GT(withCap, 1000u);
  EXPECT_GT(failures, 250u);
  EXPECT_LT(failures, 750u);
}

void gpipe::partition_test::runJoinedCases(PartitionObjective objective,
                                           uint64_t seed) {
  std::mt19937_64 rng(seed);
  unsigned solved = 0, tooFewPlaces = 0;
  for (unsigned n = 0; n < 1500; ++n) {
    unsigned numLayers = uniform(rng, 2, 12);
    unsigned numCells = uniform(rng, 1, std::min(5u, numLayers));
    PartitionProblem problem =
        randomProblem(rng, numLayers, numCells, objective);
    problem.joined.assign(numLayers + 1, "");
    unsigned places = 0;
    for (unsigned i = 1; i < numLayers; ++i) {
      if (uniform(rng, 0, 2) == 0)
        problem.joined[i] = "mask " + std::to_string(i);
      else
        ++places;
    }
    if (n % 2 == 0) {
      U128 leastMax = 0;
      bruteForce(problem, &leastMax);
      if (leastMax != ~U128(0))
        pickCap(rng, problem, leastMax);
    }
    Expected expected = bruteForce(problem, nullptr);
    PartitionOutcome outcome = partitionLayers(problem);
    std::string context = "case " + std::to_string(n) + ", L=" +
                          std::to_string(numLayers) +
                          ", K=" + std::to_string(numCells);
    if (numCells > places + 1) {
      // Too few places to cut: said with the first reason.
      ++tooFewPlaces;
      EXPECT_FALSE(outcome.succeeded()) << context;
      EXPECT_NE(outcome.error.find("only " + std::to_string(places) +
                                   (places == 1 ? " place" : " places")),
                std::string::npos)
          << context << ": " << outcome.error;
      continue;
    }
    if (!expected.error.empty()) {
      // Merged layers are named together in the solver's messages.
      EXPECT_FALSE(outcome.succeeded()) << context;
      continue;
    }
    ++solved;
    expectMatches(problem, outcome, expected, context);
    if (::testing::Test::HasFailure())
      return;
  }
  EXPECT_GT(solved, 700u);
  EXPECT_GT(tooFewPlaces, 50u);
}

void gpipe::partition_test::runPlainDpCases(PartitionObjective objective,
                                            uint64_t seed,
                                            CaseOptions options) {
  std::mt19937_64 rng(seed);
  for (unsigned n = 0; n < 30; ++n) {
    unsigned numLayers = uniform(rng, 200, 320);
    unsigned numCells = uniform(rng, 1, 16);
    PartitionProblem problem =
        randomProblem(rng, numLayers, numCells, objective);
    if (options.weighted)
      addRandomWeights(rng, problem);
    U128 leastMax = 0;
    plainDp(problem, &leastMax);
    pickCap(rng, problem, leastMax);
    expectMatches(problem, partitionLayers(problem), plainDp(problem, nullptr),
                  "case " + std::to_string(n) +
                      ", L=" + std::to_string(numLayers) +
                      ", K=" + std::to_string(numCells));
    if (::testing::Test::HasFailure())
      return;
  }
}

namespace {

/// Tiny compute and half the cuts zero (so many splits tie exactly), the
/// other cuts up to most of the cap, which cuts short the cells starting
/// there: the reach of a start jumps up and down, exercising the tie rules
/// where the variance search leaves its monotone staircase.
PartitionProblem tieHeavyProblem(uint64_t seed, PartitionObjective objective) {
  std::mt19937_64 rng(seed);
  PartitionProblem problem;
  unsigned numLayers = uniform(rng, 10, 60);
  problem.numCells = uniform(rng, 2, 8);
  problem.objective = objective;
  problem.memoryModel = {1, 1, true};
  for (unsigned i = 0; i < numLayers; ++i)
    problem.layers.push_back(
        {"t" + std::to_string(i), uniform(rng, 0, 3), 1, 0});
  for (unsigned i = 0; i <= numLayers; ++i)
    problem.cutBytes.push_back(uniform(rng, 0, 1) ? 0 : uniform(rng, 0, 25));
  problem.memoryCap = uniform(rng, 20, 30);
  return problem;
}

} // namespace

void gpipe::partition_test::runTieHeavyCases(
    PartitionObjective objective, const std::vector<uint64_t> &seeds) {
  for (uint64_t seed : seeds) {
    PartitionProblem problem = tieHeavyProblem(seed, objective);
    expectMatches(problem, partitionLayers(problem), plainDp(problem, nullptr),
                  "seed " + std::to_string(seed));
    if (::testing::Test::HasFailure())
      return;
  }
}
