//===- Capacity.cpp - How big a Transformer fits a memory budget ----------===//
//
// The two studies of gpipe-capacity and the limits on their options: the
// largest model per (remat, K) and the micro-batch sweep, each a loop of
// compiles (CapacityCompiler.cpp) driven by a search (CapacitySearch.cpp).
//
//===----------------------------------------------------------------------===//

#include "gpipe/Models/Capacity.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>

using namespace gpipe;

std::optional<std::string> gpipe::checkStageCount(int64_t stages) {
  if (stages < 1 || stages > 64)
    return "expects --stages in 1..64, got " + std::to_string(stages);
  return std::nullopt;
}

std::optional<std::string> gpipe::checkMicrobatchCount(int64_t microbatches,
                                                       int64_t batch) {
  if (microbatches < 1)
    return "expects --microbatches of at least 1, got " +
           std::to_string(microbatches);
  if (microbatches > batch)
    return "expects --microbatches of at most the batch " +
           std::to_string(batch) + ", got " + std::to_string(microbatches);
  return std::nullopt;
}

std::optional<CapacityTable>
gpipe::computeCapacityTable(const CapacityTableRequest &request,
                            std::string &error) {
  auto start = std::chrono::steady_clock::now();
  CapacityCompiler compiler(request.compile);
  CapacityTable table;
  table.cells.resize(request.policies.size());
  for (size_t p = 0; p < request.policies.size(); ++p)
    for (int64_t k : request.stages) {
      auto arenaOf = [&](int64_t blocks) -> std::optional<int64_t> {
        TransformerConfig model = request.model;
        model.blocks = blocks;
        auto devices = compiler.compile(model, k, request.microbatches,
                                        request.policies[p], error);
        if (!devices)
          return std::nullopt;
        int64_t largest = 0;
        for (const DeviceMemoryUse &device : *devices)
          largest = std::max(largest, device.arena);
        return largest;
      };
      std::optional<Capacity> capacity = findLargestFitting(
          arenaOf, minBlocksFor(k), request.maxBlocks, request.budget);
      if (!capacity)
        return std::nullopt;
      table.cells[p].push_back(*capacity);
    }
  table.compiles = compiler.numCompiles;
  table.compileSeconds = compiler.compileSeconds;
  table.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return table;
}

std::optional<MicrobatchSweep>
gpipe::computeMicrobatchSweep(const MicrobatchSweepRequest &request,
                              std::string &error) {
  const int64_t k = request.stages;
  for (int64_t blocks : request.blockCounts) {
    TransformerConfig model = request.model;
    model.blocks = blocks;
    model.batch = 1;
    if (blocks < 0) {
      error = "expects --blocks of at least 0, got " + std::to_string(blocks);
      return std::nullopt;
    }
    if (numTransformerLayers(model) < k) {
      error =
          llvm::formatv("{0} blocks make {1} layers, fewer than the {2} "
                        "stages: expected at least {3} blocks",
                        blocks, numTransformerLayers(model), k, minBlocksFor(k))
              .str();
      return std::nullopt;
    }
  }
  auto start = std::chrono::steady_clock::now();
  CapacityCompiler compiler(request.compile);
  MicrobatchSweep sweep;
  std::vector<double> x1, x2, x3, y;
  for (int64_t n : request.batches)
    for (int64_t blocks : request.blockCounts)
      for (int64_t m : request.microbatches) {
        TransformerConfig model = request.model;
        model.blocks = blocks;
        model.batch = n;
        auto devices = compiler.compile(model, k, m, request.remat, error);
        if (!devices)
          return std::nullopt;
        int64_t largest = 0;
        for (size_t d = 1; d < devices->size(); ++d)
          if ((*devices)[d].peak > (*devices)[largest].peak)
            largest = d;
        const DeviceMemoryUse &memory = (*devices)[largest];
        sweep.points.push_back({n, blocks, m, largest, memory});
        x1.push_back(double(n));
        x2.push_back(double(blocks) / double(k) * double(n) / double(m));
        x3.push_back(double(blocks) / double(k) * double(n));
        y.push_back(double(memory.peak - memory.resident));
      }
  // Relative residuals are what the report prints and what matters across
  // points of 16 MiB and 400 MiB: each row is weighted by 1 / activation.
  for (size_t i = 0; i < y.size(); ++i)
    if (y[i] > 0) {
      x1[i] /= y[i];
      x2[i] /= y[i];
      x3[i] /= y[i];
      y[i] = 1.0;
    }
  // What every micro-batch keeps grows with L as well as N (all activations
  // under none, the products' results under selective): the third term,
  // where the sweep has the block counts to separate it from a*N.
  sweep.fit = fitThroughOrigin(x1, x2, x3, y);
  if (!sweep.fit.solvable)
    sweep.fit = fitThroughOrigin(x1, x2, y);
  sweep.compiles = compiler.numCompiles;
  sweep.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return sweep;
}
