//===- Capacity.cpp - How big a Transformer fits a memory budget ----------===//

#include "gpipe/Models/Capacity.h"
#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <map>

using namespace mlir;
using namespace gpipe;

struct CapacityCompiler::Impl {
  explicit Impl(CapacityCompileOptions options)
      : compileOptions(options), context(makeRegistry()) {
    context.loadAllAvailableDialects();
    context.disableMultithreading();
  }

  static DialectRegistry makeRegistry() {
    DialectRegistry registry;
    registry.insert<GPipeDialect>();
    return registry;
  }

  std::optional<std::vector<DeviceMemoryUse>>
  run(const TransformerConfig &model, int64_t stages, int64_t microbatches,
      RematPolicy remat, std::string &error) {
    std::string diagnostics;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      llvm::raw_string_ostream os(diagnostics);
      os << "  " << diag.getLocation() << ": "
         << (diag.getSeverity() == DiagnosticSeverity::Error ? "error: " : "")
         << diag << "\n";
      for (const Diagnostic &note : diag.getNotes())
        os << "    note: " << note << "\n";
      return success();
    });
    std::string what = llvm::formatv(
        "compiling {0} blocks on {1} devices with {2} micro-batches (remat "
        "{3})",
        model.blocks, stages, microbatches, stringifyRematPolicy(remat));
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(buildTransformerModel(model), &context);
    if (!module) {
      error =
          what + " failed: the generated model does not parse:\n" + diagnostics;
      return std::nullopt;
    }
    CompilePipelineOptions options;
    options.numStages = unsigned(stages);
    options.numMicrobatches = unsigned(microbatches);
    options.objective = compileOptions.objective;
    options.remat = remat;
    options.optimizerSlots = compileOptions.optimizerSlots;
    PassManager pm(&context);
    buildCompilePipeline(pm, options);
    if (failed(pm.run(*module))) {
      error = what + " failed:\n" + diagnostics;
      return std::nullopt;
    }
    auto schedules = llvm::to_vector(module->getOps<ScheduleOp>());
    if (schedules.size() != 1) {
      error = what + ": expected one gpipe.schedule after gpipe-compile, got " +
              std::to_string(schedules.size());
      return std::nullopt;
    }
    std::vector<DeviceMemoryUse> devices;
    for (ProgramOp program :
         schedules.front().getBody().front().getOps<ProgramOp>()) {
      std::string device = std::to_string(program.getDevice());
      auto memory = program->getAttrOfType<DictionaryAttr>("gpipe.memory");
      if (!memory) {
        error = what + ": gpipe.program device " + device +
                " has no \"gpipe.memory\" dictionary; the gpipe-compile "
                "pipeline must end with gpipe-plan-memory";
        return std::nullopt;
      }
      DeviceMemoryUse entry;
      for (auto [key, field] : {std::pair<const char *, int64_t *>{
                                    "resident_bytes", &entry.resident},
                                {"peak_bytes", &entry.peak},
                                {"arena_bytes", &entry.arena},
                                {"num_buffers", &entry.buffers}}) {
        auto value = memory.getAs<IntegerAttr>(key);
        if (!value) {
          error = what + ": the \"gpipe.memory\" dictionary of device " +
                  device + " has no integer \"" + key + "\"";
          return std::nullopt;
        }
        *field = value.getInt();
      }
      devices.push_back(entry);
    }
    if (int64_t(devices.size()) != stages) {
      error = what + ": expected " + std::to_string(stages) +
              " programs, got " + std::to_string(devices.size());
      return std::nullopt;
    }
    return devices;
  }

  CapacityCompileOptions compileOptions;
  MLIRContext context;
};

CapacityCompiler::CapacityCompiler(CapacityCompileOptions options)
    : impl(std::make_unique<Impl>(options)) {}

CapacityCompiler::~CapacityCompiler() = default;

std::optional<std::vector<DeviceMemoryUse>>
CapacityCompiler::compile(const TransformerConfig &model, int64_t stages,
                          int64_t microbatches, RematPolicy remat,
                          std::string &error) {
  ++numCompiles;
  auto start = std::chrono::steady_clock::now();
  auto result = impl->run(model, stages, microbatches, remat, error);
  compileSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

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
  std::vector<double> x1, x2, y;
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
        y.push_back(double(memory.peak - memory.resident));
      }
  sweep.fit = fitThroughOrigin(x1, x2, y);
  sweep.compiles = compiler.numCompiles;
  sweep.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return sweep;
}
