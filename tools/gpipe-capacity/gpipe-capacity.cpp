//===- gpipe-capacity.cpp - How big a Transformer fits a memory budget ----===//
//
//   gpipe-capacity table --budget 1GiB --stages 1,2,4,8 --remat none,full
//   gpipe-capacity sweep --blocks 16 --stages 4 --microbatches 1,2,4,8,16,32
//
// Option parsing and checks; the studies are gpipe/Models/Capacity.h's.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/ByteCount.h"
#include "gpipe/Models/Capacity.h"
#include "gpipe/Support/OptionParsers.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
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
             "to a*N + b*(L/K)*(N/M), + c*(L/K)*N with two block counts");
static cl::SubCommandGroup bothCommands({&tableCommand, &sweepCommand});

static cl::OptionCategory modelCategory("Transformer options");
static gpipe::Whole<int64_t> width("width", cl::init(256),
                                   cl::sub(bothCommands),
                                   cl::cat(modelCategory),
                                   cl::desc("model width"));
static gpipe::Whole<int64_t> heads("heads", cl::init(8), cl::sub(bothCommands),
                                   cl::cat(modelCategory),
                                   cl::desc("attention heads"));
static gpipe::Whole<int64_t> ffWidth("ff", cl::init(1024),
                                     cl::sub(bothCommands),
                                     cl::cat(modelCategory),
                                     cl::desc("hidden width of each MLP"));
static gpipe::Whole<int64_t> seq("seq", cl::init(128), cl::sub(bothCommands),
                                 cl::cat(modelCategory),
                                 cl::desc("sequence length"));
static gpipe::Whole<int64_t> vocab("vocab", cl::init(96), cl::sub(bothCommands),
                                   cl::cat(modelCategory),
                                   cl::desc("vocabulary size"));
static gpipe::Real<double> dropout("dropout", cl::init(0.1),
                                   cl::sub(bothCommands),
                                   cl::cat(modelCategory),
                                   cl::desc("dropout rate"));

static cl::OptionCategory compileCategory("Compile options");
static gpipe::Count
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
static gpipe::Whole<int64_t> tableBatch("batch", cl::init(32),
                                        cl::sub(tableCommand),
                                        cl::cat(modelCategory),
                                        cl::desc("mini-batch size N"));
static gpipe::Whole<int64_t> tableMicrobatches("microbatches", cl::init(8),
                                               cl::sub(tableCommand),
                                               cl::cat(tableCategory),
                                               cl::desc("micro-batches M"));
static gpipe::WholeList<int64_t> tableStages(
    "stages", cl::CommaSeparated, cl::sub(tableCommand), cl::cat(tableCategory),
    cl::desc("numbers of devices K, one row each (default 1,2,4,8)"));
static cl::list<std::string>
    tableRemat("remat", cl::CommaSeparated, cl::sub(tableCommand),
               cl::cat(tableCategory),
               cl::desc("remat policies, one column group each: none, full, "
                        "except-last or selective (default none,full)"));
static gpipe::Whole<int64_t>
    maxBlocks("max-blocks", cl::init(4096), cl::sub(tableCommand),
              cl::cat(tableCategory),
              cl::desc("stop searching at this many blocks"));

// sweep
static cl::OptionCategory sweepCategory("Sweep options");
static gpipe::WholeList<int64_t>
    sweepBlocks("blocks", cl::CommaSeparated, cl::sub(sweepCommand),
                cl::cat(modelCategory),
                cl::desc("Transformer blocks L (default 16; a list sweeps "
                         "them too)"));
static gpipe::Whole<int64_t> sweepStages("stages", cl::init(4),
                                         cl::sub(sweepCommand),
                                         cl::cat(sweepCategory),
                                         cl::desc("devices K"));
static gpipe::WholeList<int64_t>
    sweepMicrobatches("microbatches", cl::CommaSeparated, cl::sub(sweepCommand),
                      cl::cat(sweepCategory),
                      cl::desc("micro-batch counts M (default 1,2,4,8,16,32)"));
static gpipe::WholeList<int64_t>
    sweepBatch("batch", cl::CommaSeparated, cl::sub(sweepCommand),
               cl::cat(modelCategory),
               cl::desc("mini-batch sizes N (default 32; a list sweeps them "
                        "too)"));
static cl::opt<std::string>
    sweepRemat("remat", cl::init("full"), cl::sub(sweepCommand),
               cl::cat(sweepCategory),
               cl::desc("none, full, except-last or selective"));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "gpipe-capacity: error: " << message << "\n";
  return 1;
}

static std::optional<RematPolicy> parseRemat(llvm::StringRef text) {
  for (RematPolicy policy : {RematPolicy::None, RematPolicy::Full,
                             RematPolicy::ExceptLast, RematPolicy::Selective})
    if (gpipe::stringifyRematPolicy(policy) == text.trim())
      return policy;
  return std::nullopt;
}

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
  return error.empty() ? std::nullopt
                       : std::optional<std::string>("invalid model: " + error);
}

static int runTable() {
  std::optional<uint64_t> budget;
  if (!gpipe::parseByteCount(budgetText, budget) || !budget || *budget == 0)
    return fail("invalid --budget '" + budgetText +
                "': expected a positive byte count such as 1048576, 512MiB "
                "or 1GiB");
  if (auto error = validateShared(tableBatch))
    return fail(*error);
  if (auto error = gpipe::checkMicrobatchCount(tableMicrobatches, tableBatch))
    return fail(*error);
  if (maxBlocks < 1)
    return fail("expects --max-blocks of at least 1, got " +
                std::to_string(int64_t(maxBlocks)));
  std::vector<int64_t> stages(tableStages.begin(), tableStages.end());
  if (stages.empty())
    stages = {1, 2, 4, 8};
  for (int64_t k : stages) {
    if (auto error = gpipe::checkStageCount(k))
      return fail(*error);
    if (gpipe::minBlocksFor(k) > maxBlocks)
      return fail(llvm::formatv("{0} stages need at least {1} blocks, more "
                                "than --max-blocks {2}",
                                k, gpipe::minBlocksFor(k), int64_t(maxBlocks))
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
                  "': expected none, full, except-last or selective");
    policies.push_back(*policy);
  }

  gpipe::CapacityTableRequest request;
  request.model = modelConfig(1, tableBatch);
  request.microbatches = tableMicrobatches;
  request.stages = stages;
  request.policies = policies;
  request.budget = *budget;
  request.maxBlocks = maxBlocks;
  request.compile = {objective, optimizerSlots};
  std::string error;
  std::optional<gpipe::CapacityTable> table =
      gpipe::computeCapacityTable(request, error);
  if (!table)
    return fail(error);
  gpipe::printCapacityTable(llvm::outs(), request, *table,
                            describeModel(std::to_string(tableBatch) + " in " +
                                          std::to_string(tableMicrobatches) +
                                          " micro-batches"));
  return 0;
}

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
  if (auto error = gpipe::checkStageCount(k))
    return fail(*error);
  std::optional<RematPolicy> remat = parseRemat(sweepRemat);
  if (!remat)
    return fail("unknown --remat policy '" + sweepRemat +
                "': expected none, full, except-last or selective");
  for (int64_t n : batches) {
    if (auto error = validateShared(n))
      return fail(*error);
    for (int64_t m : microbatches)
      if (auto error = gpipe::checkMicrobatchCount(m, n))
        return fail(*error);
  }
  gpipe::MicrobatchSweepRequest request;
  request.model = modelConfig(1, 1);
  request.batches = batches;
  request.blockCounts = blockCounts;
  request.microbatches = microbatches;
  request.stages = k;
  request.remat = *remat;
  request.compile = {objective, optimizerSlots};
  std::string error;
  std::optional<gpipe::MicrobatchSweep> sweep =
      gpipe::computeMicrobatchSweep(request, error);
  if (!sweep)
    return fail(error);
  std::string batchList;
  for (int64_t n : batches)
    batchList += (batchList.empty() ? "" : ", ") + std::to_string(n);
  gpipe::printMicrobatchSweep(llvm::outs(), request, *sweep,
                              describeModel(batchList));
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
