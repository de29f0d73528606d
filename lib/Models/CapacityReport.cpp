//===- CapacityReport.cpp - The capacity studies as markdown --------------===//

#include "gpipe/Models/Capacity.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <iterator>

using namespace gpipe;

std::string gpipe::formatSize(double bytes, unsigned decimals) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  unsigned unit = 0;
  while (std::fabs(bytes) >= 1024.0 && unit + 1 < std::size(units)) {
    bytes /= 1024.0;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f %s", int(decimals), bytes,
                units[unit]);
  return text;
}

void gpipe::printCapacityTable(llvm::raw_ostream &os,
                               const CapacityTableRequest &request,
                               const CapacityTable &table,
                               const std::string &model) {
  const std::vector<int64_t> &stages = request.stages;
  const std::vector<RematPolicy> &policies = request.policies;
  const auto &capacities = table.cells;
  os << "# The largest Transformer that fits " << formatSize(request.budget)
     << " per device\n\n";
  os << "model: " << model << "\n\n";
  auto policyName = [&](size_t p) {
    return stringifyRematPolicy(policies[p]).str();
  };
  std::optional<size_t> none, full;
  for (size_t p = 0; p < policies.size(); ++p) {
    if (policies[p] == RematPolicy::None && !none)
      none = p;
    if (policies[p] == RematPolicy::Full && !full)
      full = p;
  }
  std::string base = "K=" + std::to_string(stages.front());
  os << "| K |";
  for (size_t p = 0; p < policies.size(); ++p)
    os << " " << policyName(p) << ": blocks | " << policyName(p)
       << ": params | " << policyName(p) << ": arena |";
  if (none && full)
    os << " full / none |";
  for (size_t p = 0; p < policies.size(); ++p)
    os << " " << policyName(p) << " vs " << base << " |";
  os << "\n|--:|";
  size_t columns = 3 * policies.size() + (none && full) + policies.size();
  for (size_t c = 0; c < columns; ++c)
    os << "--:|";
  os << "\n";
  auto ratio = [](const Capacity &a, const Capacity &b) -> std::string {
    if (a.blocks == 0 || b.blocks == 0)
      return "-";
    return llvm::formatv("{0:f2}x", double(a.blocks) / double(b.blocks)).str();
  };
  for (size_t i = 0; i < stages.size(); ++i) {
    os << "| " << stages[i] << " |";
    for (size_t p = 0; p < policies.size(); ++p) {
      const Capacity &c = capacities[p][i];
      if (c.blocks == 0) {
        os << " 0 | - | > budget |";
        continue;
      }
      TransformerConfig sized = request.model;
      sized.blocks = c.blocks;
      uint64_t params = countTransformerParameters(sized);
      os << " " << c.blocks << (c.capped ? "+" : "") << " | "
         << llvm::formatv("{0:f2}M", params / 1e6) << " | "
         << formatSize(c.arena) << " |";
    }
    if (none && full)
      os << " " << ratio(capacities[*full][i], capacities[*none][i]) << " |";
    for (size_t p = 0; p < policies.size(); ++p)
      os << " " << ratio(capacities[p][i], capacities[p][0]) << " |";
    os << "\n";
  }
  os << "\nblocks: the most Transformer blocks (two layers each, plus embed, "
        "head and loss) whose largest device arena fits the budget";
  os << "; params: trainable parameters; arena: the largest device's arena "
        "(gpipe.memory arena_bytes) at that size\n";
  for (size_t i = 0; i < stages.size(); ++i)
    for (size_t p = 0; p < policies.size(); ++p) {
      const Capacity &c = capacities[p][i];
      if (c.blocks == 0)
        os << "K=" << stages[i] << ", remat " << policyName(p)
           << ": nothing fits; the smallest model that splits in " << stages[i]
           << " stages (" << minBlocksFor(stages[i])
           << (minBlocksFor(stages[i]) == 1 ? " block" : " blocks")
           << ") needs " << formatSize(c.smallestArena) << "\n";
      if (c.capped)
        os << "K=" << stages[i] << ", remat " << policyName(p)
           << ": still fits at --max-blocks " << c.blocks << "\n";
    }
  os << llvm::formatv("{0} compiles in {1:f1} s ({2:f1} s compiling)\n",
                      table.compiles, table.seconds, table.compileSeconds);
}

void gpipe::printMicrobatchSweep(llvm::raw_ostream &os,
                                 const MicrobatchSweepRequest &request,
                                 const MicrobatchSweep &sweep,
                                 const std::string &model) {
  const int64_t k = request.stages;
  const LinearFit &fit = sweep.fit;
  os << "# Activation memory against micro-batches: " << k << " devices, remat "
     << stringifyRematPolicy(request.remat) << "\n\n";
  os << "model: " << model << "\n\n";
  os << "| N | L | M | device | peak | resident | activation |"
     << (fit.solvable ? " fit | residual |" : "") << "\n";
  os << "|--:|--:|--:|--:|--:|--:|--:|" << (fit.solvable ? "--:|--:|" : "")
     << "\n";
  double maxResidual = 0;
  for (const SweepPoint &p : sweep.points) {
    double activation = double(p.memory.peak - p.memory.resident);
    os << "| " << p.batch << " | " << p.blocks << " | " << p.microbatches
       << " | " << p.device << " | " << formatSize(p.memory.peak, 2) << " | "
       << formatSize(p.memory.resident, 2) << " | " << formatSize(activation, 2)
       << " |";
    if (fit.solvable) {
      const double perDevice = double(p.blocks) / double(k) * double(p.batch);
      double predicted = fit.a * double(p.batch) +
                         fit.b * perDevice / double(p.microbatches) +
                         fit.c * perDevice;
      double residual =
          activation > 0 ? (predicted - activation) / activation : 0;
      maxResidual = std::max(maxResidual, std::fabs(residual));
      os << " " << formatSize(predicted, 2) << " | "
         << llvm::format("%+.2f%%", 100 * residual) << " |";
    }
    os << "\n";
  }
  os << "\nN: batch, L: blocks, M: micro-batches; device: the device with the "
        "largest peak; activation = peak - resident (gpipe.memory peak_bytes "
        "- resident_bytes)\n";
  if (fit.solvable && fit.hasC)
    os << llvm::formatv(
        "fit over {0} points: activation ~ a*N + b*(L/K)*(N/M) + c*(L/K)*N "
        "with a = {1} per example, b = {2} per example per block, c = {3} per "
        "example per block kept for every micro-batch; max relative residual "
        "{4:f2}%\n",
        sweep.points.size(), formatSize(fit.a, 2), formatSize(fit.b, 2),
        formatSize(fit.c, 2), 100 * maxResidual);
  else if (fit.solvable)
    os << llvm::formatv(
        "fit over {0} points: activation ~ a*N + b*(L/K)*(N/M) with a = {1} "
        "per example, b = {2} per example per block; max relative residual "
        "{3:f2}%\n",
        sweep.points.size(), formatSize(fit.a, 2), formatSize(fit.b, 2),
        100 * maxResidual);
  else
    os << "no fit: the sweep cannot separate a*N from b*(L/K)*(N/M); give at "
          "least two micro-batch counts\n";
  os << llvm::formatv("{0} compiles in {1:f1} s\n", sweep.compiles,
                      sweep.seconds);
}
