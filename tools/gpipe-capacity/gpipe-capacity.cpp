//===- gpipe-capacity.cpp - How big a Transformer fits a memory budget ----===//
//
//   gpipe-capacity table --budget 1GiB --stages 1,2,4,8 --remat none,full
//   gpipe-capacity sweep --blocks 16 --stages 4 --microbatches 1,2,4,8,16,32
//
// The spirit of the GPipe paper's Table 1, with the compiler's memory
// planner as the judge: Transformers of a fixed width are written as gpipe
// text (gpipe/Models/TransformerBuilder.h), compiled by gpipe-compile, and
// the `gpipe.memory` dictionary that gpipe-plan-memory writes on every
// device's program says whether the model fits.
//
// `table` finds, for each rematerialisation policy and number of devices K,
// the most blocks whose largest device arena fits the budget (exponential,
// then binary search over the number of blocks) and prints a markdown table.
// `sweep` compiles one model for several micro-batch counts M and fits the
// activation memory (peak - resident) of the largest device to
// a*N + b*(L/K)*(N/M) by least squares.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/ByteCount.h"
#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Models/TransformerBuilder.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace mlir;
using gpipe::RematPolicy;
namespace cl = llvm::cl;

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

static cl::SubCommand tableCommand(
    "table", "the largest Transformer that fits a per-device budget, for each "
             "remat policy and number of devices (the paper's Table 1)");
static cl::SubCommand sweepCommand(
    "sweep", "activation memory against the number of micro-batches, fitted "
             "to a*N + b*(L/K)*(N/M)");
static cl::SubCommandGroup bothCommands({&tableCommand, &sweepCommand});

static cl::OptionCategory modelCategory("Transformer options");
static cl::opt<int64_t> width("width", cl::init(256), cl::sub(bothCommands),
                              cl::cat(modelCategory), cl::desc("model width"));
static cl::opt<int64_t> heads("heads", cl::init(8), cl::sub(bothCommands),
                              cl::cat(modelCategory),
                              cl::desc("attention heads"));
static cl::opt<int64_t> ffWidth("ff", cl::init(1024), cl::sub(bothCommands),
                                cl::cat(modelCategory),
                                cl::desc("hidden width of each MLP"));
static cl::opt<int64_t> seq("seq", cl::init(128), cl::sub(bothCommands),
                            cl::cat(modelCategory),
                            cl::desc("sequence length"));
static cl::opt<int64_t> vocab("vocab", cl::init(96), cl::sub(bothCommands),
                              cl::cat(modelCategory),
                              cl::desc("vocabulary size"));
static cl::opt<double> dropout("dropout", cl::init(0.1), cl::sub(bothCommands),
                               cl::cat(modelCategory),
                               cl::desc("dropout rate"));

static cl::OptionCategory compileCategory("Compile options");
static cl::opt<unsigned>
    optimizerSlots("optimizer-slots", cl::init(2), cl::sub(bothCommands),
                   cl::cat(compileCategory),
                   cl::desc("optimizer state tensors per parameter (Adam: 2)"));
static cl::opt<gpipe::PartitionObjective>
    objective("objective", cl::desc("partition objective"),
              cl::sub(bothCommands), cl::cat(compileCategory),
              cl::init(gpipe::PartitionObjective::Variance),
              cl::values(clEnumValN(gpipe::PartitionObjective::Variance,
                                    "variance", "even cell costs (GPipe)"),
                         clEnumValN(gpipe::PartitionObjective::Bottleneck,
                                    "bottleneck", "smallest largest cell")));

// table
static cl::OptionCategory tableCategory("Table options");
static cl::opt<std::string>
    budgetText("budget", cl::init("1GiB"), cl::sub(tableCommand),
               cl::cat(tableCategory),
               cl::desc("per-device memory budget (1048576, 512MiB, 1GiB)"));
static cl::opt<int64_t> tableBatch("batch", cl::init(32), cl::sub(tableCommand),
                                   cl::cat(modelCategory),
                                   cl::desc("mini-batch size N"));
static cl::opt<int64_t> tableMicrobatches("microbatches", cl::init(8),
                                          cl::sub(tableCommand),
                                          cl::cat(tableCategory),
                                          cl::desc("micro-batches M"));
static cl::list<int64_t> tableStages(
    "stages", cl::CommaSeparated, cl::sub(tableCommand), cl::cat(tableCategory),
    cl::desc("numbers of devices K, one row each (default 1,2,4,8)"));
static cl::list<std::string>
    tableRemat("remat", cl::CommaSeparated, cl::sub(tableCommand),
               cl::cat(tableCategory),
               cl::desc("remat policies, one column group each: none, full "
                        "or except-last (default none,full)"));
static cl::opt<int64_t>
    maxBlocks("max-blocks", cl::init(4096), cl::sub(tableCommand),
              cl::cat(tableCategory),
              cl::desc("stop searching at this many blocks"));

// sweep
static cl::OptionCategory sweepCategory("Sweep options");
static cl::list<int64_t>
    sweepBlocks("blocks", cl::CommaSeparated, cl::sub(sweepCommand),
                cl::cat(modelCategory),
                cl::desc("Transformer blocks L (default 16; a list sweeps "
                         "them too)"));
static cl::opt<int64_t> sweepStages("stages", cl::init(4),
                                    cl::sub(sweepCommand),
                                    cl::cat(sweepCategory),
                                    cl::desc("devices K"));
static cl::list<int64_t>
    sweepMicrobatches("microbatches", cl::CommaSeparated, cl::sub(sweepCommand),
                      cl::cat(sweepCategory),
                      cl::desc("micro-batch counts M (default 1,2,4,8,16,32)"));
static cl::list<int64_t>
    sweepBatch("batch", cl::CommaSeparated, cl::sub(sweepCommand),
               cl::cat(modelCategory),
               cl::desc("mini-batch sizes N (default 32; a list sweeps them "
                        "too)"));
static cl::opt<std::string> sweepRemat("remat", cl::init("full"),
                                       cl::sub(sweepCommand),
                                       cl::cat(sweepCategory),
                                       cl::desc("none, full or except-last"));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "gpipe-capacity: error: " << message << "\n";
  return 1;
}

static std::optional<RematPolicy> parseRemat(llvm::StringRef text) {
  return llvm::StringSwitch<std::optional<RematPolicy>>(text.trim())
      .Case("none", RematPolicy::None)
      .Case("full", RematPolicy::Full)
      .Case("except-last", RematPolicy::ExceptLast)
      .Default(std::nullopt);
}

/// Like gpipe::formatBytes, with a choice of decimals and negative values.
static std::string formatSize(double bytes, unsigned decimals = 1) {
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

static std::string formatRatio(double ratio) {
  return llvm::formatv("{0:f2}x", ratio).str();
}

/// Fewest blocks whose 2B + 3 layers can be split in `stages` cells.
static int64_t minBlocksFor(int64_t stages) {
  return std::max<int64_t>(1, (stages - 3 + 1) / 2);
}

//===----------------------------------------------------------------------===//
// Compiling a model and reading its memory plan
//===----------------------------------------------------------------------===//

namespace {
/// The `gpipe.memory` dictionary of one device's program.
struct DeviceMemory {
  int64_t resident = 0, peak = 0, arena = 0, buffers = 0;
};

struct CompileRequest {
  gpipe::TransformerConfig model;
  int64_t stages = 1, microbatches = 1;
  RematPolicy remat = RematPolicy::Full;
};

/// Compiles generated models in one context and reads their memory plans.
class Compiler {
public:
  Compiler() : context(makeRegistry()) {
    context.loadAllAvailableDialects();
    context.disableMultithreading();
  }

  /// The memory of every device, in device order. On failure `error` says
  /// why, with the compiler's diagnostics.
  std::optional<std::vector<DeviceMemory>>
  compile(const CompileRequest &request, std::string &error) {
    ++numCompiles;
    auto start = std::chrono::steady_clock::now();
    std::optional<std::vector<DeviceMemory>> result = run(request, error);
    compileSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    return result;
  }

  unsigned numCompiles = 0;
  double compileSeconds = 0;

private:
  static DialectRegistry makeRegistry() {
    DialectRegistry registry;
    registry.insert<gpipe::GPipeDialect>();
    return registry;
  }

  std::optional<std::vector<DeviceMemory>> run(const CompileRequest &request,
                                               std::string &error) {
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
        request.model.blocks, request.stages, request.microbatches,
        gpipe::stringifyRematPolicy(request.remat));
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
        gpipe::buildTransformerModel(request.model), &context);
    if (!module) {
      error =
          what + " failed: the generated model does not parse:\n" + diagnostics;
      return std::nullopt;
    }
    gpipe::CompilePipelineOptions options;
    options.numStages = unsigned(request.stages);
    options.numMicrobatches = unsigned(request.microbatches);
    options.objective = objective;
    options.remat = request.remat;
    options.optimizerSlots = optimizerSlots;
    PassManager pm(&context);
    gpipe::buildCompilePipeline(pm, options);
    if (failed(pm.run(*module))) {
      error = what + " failed:\n" + diagnostics;
      return std::nullopt;
    }
    auto schedules = llvm::to_vector(module->getOps<gpipe::ScheduleOp>());
    if (schedules.size() != 1) {
      error = what + ": expected one gpipe.schedule after gpipe-compile, got " +
              std::to_string(schedules.size());
      return std::nullopt;
    }
    std::vector<DeviceMemory> devices;
    for (gpipe::ProgramOp program :
         schedules.front().getBody().front().getOps<gpipe::ProgramOp>()) {
      std::string device = std::to_string(program.getDevice());
      auto memory = program->getAttrOfType<DictionaryAttr>("gpipe.memory");
      if (!memory) {
        error = what + ": gpipe.program device " + device +
                " has no \"gpipe.memory\" dictionary; the gpipe-compile "
                "pipeline must end with gpipe-plan-memory";
        return std::nullopt;
      }
      DeviceMemory entry;
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
    if (int64_t(devices.size()) != request.stages) {
      error = what + ": expected " + std::to_string(request.stages) +
              " programs, got " + std::to_string(devices.size());
      return std::nullopt;
    }
    return devices;
  }

  MLIRContext context;
};
} // namespace

static gpipe::TransformerConfig modelConfig(int64_t blocks, int64_t batch) {
  gpipe::TransformerConfig config;
  config.blocks = blocks;
  config.width = width;
  config.heads = heads;
  config.ffWidth = ffWidth;
  config.seq = seq;
  config.batch = batch;
  config.vocab = vocab;
  config.dropout = dropout;
  return config;
}

/// The fixed model and compile options; `batch` is "32 in 8 micro-batches"
/// or "16, 32".
static std::string describeModel(const std::string &batch) {
  return llvm::formatv(
      "width {0}, {1} heads, MLP {2}, sequence {3}, vocabulary {4}, dropout "
      "{5}, batch {6}; {7} optimizer slots, objective {8}",
      int64_t(width), int64_t(heads), int64_t(ffWidth), int64_t(seq),
      int64_t(vocab), double(dropout), batch, unsigned(optimizerSlots),
      objective == gpipe::PartitionObjective::Variance ? "variance"
                                                       : "bottleneck");
}

/// Checks the options every subcommand shares.
static std::optional<std::string> validateShared(int64_t batch) {
  std::string error = gpipe::validateTransformerConfig(modelConfig(1, batch));
  if (!error.empty())
    return "invalid model: " + error;
  return std::nullopt;
}

static std::optional<std::string> validateStages(int64_t stages) {
  if (stages < 1 || stages > 64)
    return "expects --stages in 1..64, got " + std::to_string(stages);
  return std::nullopt;
}

static std::optional<std::string> validateMicrobatches(int64_t microbatches,
                                                       int64_t batch) {
  if (microbatches < 1)
    return "expects --microbatches of at least 1, got " +
           std::to_string(microbatches);
  if (microbatches > batch)
    return "expects --microbatches of at most the batch " +
           std::to_string(batch) + ", got " + std::to_string(microbatches);
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// table
//===----------------------------------------------------------------------===//

namespace {
/// The largest model of one (remat, K) cell of the table.
struct Capacity {
  int64_t blocks = 0;        ///< 0: not even the smallest splittable model fits
  int64_t smallestArena = 0; ///< arena of the smallest model, when none fits
  int64_t arena = 0;         ///< the largest device's arena at `blocks`
  bool capped = false;       ///< still fits at --max-blocks
};
} // namespace

/// Largest device arena of `blocks` blocks, memoised.
static std::optional<int64_t> largestArena(Compiler &compiler,
                                           std::map<int64_t, int64_t> &memo,
                                           CompileRequest request,
                                           int64_t blocks, std::string &error) {
  if (auto it = memo.find(blocks); it != memo.end())
    return it->second;
  request.model.blocks = blocks;
  std::optional<std::vector<DeviceMemory>> devices =
      compiler.compile(request, error);
  if (!devices)
    return std::nullopt;
  int64_t largest = 0;
  for (const DeviceMemory &device : *devices)
    largest = std::max(largest, device.arena);
  memo[blocks] = largest;
  return largest;
}

/// Exponential, then binary search for the most blocks that fit `budget`.
/// Assumes the largest arena grows with the number of blocks.
static std::optional<Capacity> findCapacity(Compiler &compiler,
                                            const CompileRequest &request,
                                            uint64_t budget,
                                            std::string &error) {
  std::map<int64_t, int64_t> memo;
  auto arenaOf = [&](int64_t blocks) {
    return largestArena(compiler, memo, request, blocks, error);
  };
  Capacity capacity;
  int64_t lo = minBlocksFor(request.stages);
  std::optional<int64_t> arena = arenaOf(lo);
  if (!arena)
    return std::nullopt;
  if (uint64_t(*arena) > budget) {
    capacity.smallestArena = *arena;
    return capacity;
  }
  // Invariant: lo fits; hi (when set) does not.
  std::optional<int64_t> hi;
  while (!hi && lo < maxBlocks) {
    int64_t next = std::min<int64_t>(2 * lo, maxBlocks);
    if (!(arena = arenaOf(next)))
      return std::nullopt;
    if (uint64_t(*arena) <= budget)
      lo = next;
    else
      hi = next;
  }
  if (!hi) {
    capacity.capped = true;
  } else {
    while (*hi - lo > 1) {
      int64_t mid = lo + (*hi - lo) / 2;
      if (!(arena = arenaOf(mid)))
        return std::nullopt;
      (uint64_t(*arena) <= budget ? lo : *hi) = mid;
    }
  }
  capacity.blocks = lo;
  capacity.arena = memo.at(lo);
  return capacity;
}

static int runTable() {
  std::optional<uint64_t> budget;
  if (!gpipe::parseByteCount(budgetText, budget) || !budget || *budget == 0)
    return fail("invalid --budget '" + budgetText +
                "': expected a positive byte count such as 1048576, 512MiB "
                "or 1GiB");
  if (auto error = validateShared(tableBatch))
    return fail(*error);
  if (auto error = validateMicrobatches(tableMicrobatches, tableBatch))
    return fail(*error);
  if (maxBlocks < 1)
    return fail("expects --max-blocks of at least 1, got " +
                std::to_string(int64_t(maxBlocks)));
  std::vector<int64_t> stages(tableStages.begin(), tableStages.end());
  if (stages.empty())
    stages = {1, 2, 4, 8};
  for (int64_t k : stages) {
    if (auto error = validateStages(k))
      return fail(*error);
    if (minBlocksFor(k) > maxBlocks)
      return fail(llvm::formatv("{0} stages need at least {1} blocks, more "
                                "than --max-blocks {2}",
                                k, minBlocksFor(k), int64_t(maxBlocks))
                      .str());
  }
  std::vector<RematPolicy> policies;
  std::vector<std::string> rematNames(tableRemat.begin(), tableRemat.end());
  if (rematNames.empty())
    rematNames = {"none", "full"};
  for (const std::string &name : rematNames) {
    std::optional<RematPolicy> policy = parseRemat(name);
    if (!policy)
      return fail("unknown --remat policy '" + name +
                  "': expected none, full or except-last");
    policies.push_back(*policy);
  }

  auto start = std::chrono::steady_clock::now();
  Compiler compiler;
  // capacities[p][k]
  std::vector<std::vector<Capacity>> capacities(policies.size());
  for (size_t p = 0; p < policies.size(); ++p) {
    for (int64_t k : stages) {
      CompileRequest request;
      request.model = modelConfig(1, tableBatch);
      request.stages = k;
      request.microbatches = tableMicrobatches;
      request.remat = policies[p];
      std::string error;
      std::optional<Capacity> capacity =
          findCapacity(compiler, request, *budget, error);
      if (!capacity)
        return fail(error);
      capacities[p].push_back(*capacity);
    }
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  llvm::raw_ostream &os = llvm::outs();
  os << "# The largest Transformer that fits " << formatSize(*budget)
     << " per device\n\n";
  os << "model: "
     << describeModel(std::to_string(tableBatch) + " in " +
                      std::to_string(tableMicrobatches) + " micro-batches")
     << "\n\n";
  auto policyName = [&](size_t p) {
    return gpipe::stringifyRematPolicy(policies[p]).str();
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
    return formatRatio(double(a.blocks) / double(b.blocks));
  };
  for (size_t i = 0; i < stages.size(); ++i) {
    os << "| " << stages[i] << " |";
    for (size_t p = 0; p < policies.size(); ++p) {
      const Capacity &c = capacities[p][i];
      if (c.blocks == 0) {
        os << " 0 | - | > budget |";
        continue;
      }
      uint64_t params =
          gpipe::countTransformerParameters(modelConfig(c.blocks, tableBatch));
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
                      compiler.numCompiles, seconds, compiler.compileSeconds);
  return 0;
}

//===----------------------------------------------------------------------===//
// sweep
//===----------------------------------------------------------------------===//

static int runSweep() {
  std::vector<int64_t> batches(sweepBatch.begin(), sweepBatch.end());
  if (batches.empty())
    batches = {32};
  std::vector<int64_t> blockCounts(sweepBlocks.begin(), sweepBlocks.end());
  if (blockCounts.empty())
    blockCounts = {16};
  std::vector<int64_t> microbatches(sweepMicrobatches.begin(),
                                    sweepMicrobatches.end());
  if (microbatches.empty())
    microbatches = {1, 2, 4, 8, 16, 32};
  int64_t k = sweepStages;
  if (auto error = validateStages(k))
    return fail(*error);
  std::optional<RematPolicy> remat = parseRemat(sweepRemat);
  if (!remat)
    return fail("unknown --remat policy '" + sweepRemat +
                "': expected none, full or except-last");
  for (int64_t n : batches) {
    if (auto error = validateShared(n))
      return fail(*error);
    for (int64_t m : microbatches)
      if (auto error = validateMicrobatches(m, n))
        return fail(*error);
  }
  for (int64_t blocks : blockCounts) {
    if (blocks < 0)
      return fail("expects --blocks of at least 0, got " +
                  std::to_string(blocks));
    if (gpipe::numTransformerLayers(modelConfig(blocks, 1)) < k)
      return fail(
          llvm::formatv("{0} blocks make {1} layers, fewer than the "
                        "{2} stages: expected at least {3} blocks",
                        blocks,
                        gpipe::numTransformerLayers(modelConfig(blocks, 1)), k,
                        minBlocksFor(k))
              .str());
  }

  struct Point {
    int64_t n, blocks, m, device;
    DeviceMemory memory;
    double x1, x2, y;
  };
  std::vector<Point> points;
  auto start = std::chrono::steady_clock::now();
  Compiler compiler;
  for (int64_t n : batches)
    for (int64_t blocks : blockCounts)
      for (int64_t m : microbatches) {
        CompileRequest request;
        request.model = modelConfig(blocks, n);
        request.stages = k;
        request.microbatches = m;
        request.remat = *remat;
        std::string error;
        std::optional<std::vector<DeviceMemory>> devices =
            compiler.compile(request, error);
        if (!devices)
          return fail(error);
        int64_t largest = 0;
        for (size_t d = 1; d < devices->size(); ++d)
          if ((*devices)[d].peak > (*devices)[largest].peak)
            largest = d;
        const DeviceMemory &memory = (*devices)[largest];
        points.push_back({n, blocks, m, largest, memory, double(n),
                          double(blocks) / double(k) * double(n) / double(m),
                          double(memory.peak - memory.resident)});
      }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  // Least squares without intercept: y ~ a*x1 + b*x2.
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  for (const Point &p : points) {
    s11 += p.x1 * p.x1;
    s12 += p.x1 * p.x2;
    s22 += p.x2 * p.x2;
    s1y += p.x1 * p.y;
    s2y += p.x2 * p.y;
  }
  double det = s11 * s22 - s12 * s12;
  bool solvable = det > 1e-9 * s11 * s22;
  double a = solvable ? (s1y * s22 - s2y * s12) / det : 0;
  double b = solvable ? (s11 * s2y - s12 * s1y) / det : 0;

  llvm::raw_ostream &os = llvm::outs();
  os << "# Activation memory against micro-batches: " << k << " devices, remat "
     << gpipe::stringifyRematPolicy(*remat) << "\n\n";
  std::string batchList;
  for (int64_t n : batches)
    batchList += (batchList.empty() ? "" : ", ") + std::to_string(n);
  os << "model: " << describeModel(batchList) << "\n\n";
  os << "| N | L | M | device | peak | resident | activation |"
     << (solvable ? " fit | residual |" : "") << "\n";
  os << "|--:|--:|--:|--:|--:|--:|--:|" << (solvable ? "--:|--:|" : "") << "\n";
  double maxResidual = 0;
  for (const Point &p : points) {
    os << "| " << p.n << " | " << p.blocks << " | " << p.m << " | " << p.device
       << " | " << formatSize(p.memory.peak, 2) << " | "
       << formatSize(p.memory.resident, 2) << " | " << formatSize(p.y, 2)
       << " |";
    if (solvable) {
      double fit = a * p.x1 + b * p.x2;
      double residual = p.y > 0 ? (fit - p.y) / p.y : 0;
      maxResidual = std::max(maxResidual, std::fabs(residual));
      os << " " << formatSize(fit, 2) << " | "
         << llvm::format("%+.2f%%", 100 * residual) << " |";
    }
    os << "\n";
  }
  os << "\nN: batch, L: blocks, M: micro-batches; device: the device with the "
        "largest peak; activation = peak - resident (gpipe.memory peak_bytes "
        "- resident_bytes)\n";
  if (solvable)
    os << llvm::formatv(
        "fit over {0} points: activation ~ a*N + b*(L/K)*(N/M) with a = {1} "
        "per example, b = {2} per example per block; max relative residual "
        "{3:f2}%\n",
        points.size(), formatSize(a, 2), formatSize(b, 2), 100 * maxResidual);
  else
    os << "no fit: the sweep cannot separate a*N from b*(L/K)*(N/M); give at "
          "least two micro-batch counts\n";
  os << llvm::formatv("{0} compiles in {1:f1} s\n", compiler.numCompiles,
                      seconds);
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(
      {&modelCategory, &compileCategory, &tableCategory, &sweepCategory});
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "gpipe-capacity: how large a Transformer fits a per-device memory "
          "budget with GPipe, and how activation memory follows the number "
          "of micro-batches\n",
          &llvm::errs()))
    return 1;
  if (tableCommand)
    return runTable();
  if (sweepCommand)
    return runSweep();
  return fail("expected a subcommand: table or sweep (see --help)");
}
