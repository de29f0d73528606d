//===- PartitionerBenchmark.cpp - Scaling of the exact partitioner --------===//
//
// Time of partitionLayers against the number of layers L and cells K, for
// both objectives, with and without a memory cap, and with the weights of
// 1F1B under full remat (every cell 4, the last 3: a different search for
// the bottleneck). items/s counts layers.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/Partitioner.h"

#include <benchmark/benchmark.h>

#include <random>
#include <string>

using namespace gpipe;

namespace {

/// Random layers in realistic ranges (compute in FLOPs, sizes in bytes); a
/// cut carries the previous layer's activations. With `withCap`, the cap is
/// 2.5x the memory of an average cell, so a cell spans at most a few times
/// L / K layers.
PartitionProblem makeProblem(unsigned numLayers, unsigned numCells,
                             PartitionObjective objective, bool withCap) {
  std::mt19937_64 rng(0x9e3779b97f4a7c15ull ^ numLayers);
  auto uniform = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  PartitionProblem problem;
  problem.numCells = numCells;
  problem.objective = objective;
  problem.memoryModel = {4, 8, true};
  problem.cutBytes.push_back(uniform(10'000, 10'000'000));
  for (unsigned i = 0; i < numLayers; ++i) {
    LayerCost layer;
    layer.name = "layer" + std::to_string(i);
    layer.compute = uniform(100'000'000, 100'000'000'000);
    layer.paramBytes = uniform(10'000, 10'000'000);
    layer.activationBytes = uniform(10'000, 10'000'000);
    problem.cutBytes.push_back(layer.activationBytes);
    problem.layers.push_back(std::move(layer));
  }
  if (withCap) {
    uint64_t cutTotal = 0;
    for (uint64_t cut : problem.cutBytes)
      cutTotal += cut;
    uint64_t averageCell = cellMemory(problem, 0, numLayers) / numCells +
                           cutTotal / (numLayers + 1);
    problem.memoryCap = averageCell / 2 * 5;
  }
  return problem;
}

void runPartition(benchmark::State &state, PartitionObjective objective,
                  bool withCap, bool weighted = false) {
  unsigned numLayers = state.range(0), numCells = state.range(1);
  PartitionProblem problem =
      makeProblem(numLayers, numCells, objective, withCap);
  if (weighted) {
    problem.cellWeights.assign(numCells, 4);
    problem.cellWeights.back() = 3;
  }
  if (!partitionLayers(problem).succeeded()) {
    state.SkipWithError("the benchmark problem has no partition");
    return;
  }
  for (auto _ : state) {
    PartitionOutcome outcome = partitionLayers(problem);
    benchmark::DoNotOptimize(outcome);
  }
  state.counters["layers"] = numLayers;
  state.counters["cells"] = numCells;
  state.SetItemsProcessed(state.iterations() * numLayers);
}

void partitionArgs(benchmark::internal::Benchmark *benchmark) {
  benchmark->ArgNames({"L", "K"});
  for (int64_t numLayers : {100, 1000, 10000, 100000})
    for (int64_t numCells : {2, 8, 32, 128})
      if (numCells <= numLayers)
        benchmark->Args({numLayers, numCells});
}

void BM_Partition_Variance(benchmark::State &state) {
  runPartition(state, PartitionObjective::Variance, /*withCap=*/false);
}
void BM_Partition_Bottleneck(benchmark::State &state) {
  runPartition(state, PartitionObjective::Bottleneck, /*withCap=*/false);
}
void BM_Partition_VarianceWithCap(benchmark::State &state) {
  runPartition(state, PartitionObjective::Variance, /*withCap=*/true);
}
void BM_Partition_BottleneckWithCap(benchmark::State &state) {
  runPartition(state, PartitionObjective::Bottleneck, /*withCap=*/true);
}
void BM_Partition_VarianceWeighted(benchmark::State &state) {
  runPartition(state, PartitionObjective::Variance, /*withCap=*/false,
               /*weighted=*/true);
}
void BM_Partition_BottleneckWeighted(benchmark::State &state) {
  runPartition(state, PartitionObjective::Bottleneck, /*withCap=*/false,
               /*weighted=*/true);
}

} // namespace

BENCHMARK(BM_Partition_Variance)
    ->Apply(partitionArgs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Partition_Bottleneck)
    ->Apply(partitionArgs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Partition_VarianceWithCap)
    ->Apply(partitionArgs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Partition_BottleneckWithCap)
    ->Apply(partitionArgs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Partition_VarianceWeighted)
    ->Apply(partitionArgs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Partition_BottleneckWeighted)
    ->Apply(partitionArgs)
    ->Unit(benchmark::kMillisecond);
