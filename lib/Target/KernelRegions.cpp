//===- KernelRegions.cpp - Element-wise runs of a stage program as kernels ===//

#include "gpipe/Target/KernelRegions.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

using namespace gpipe;
using llvm::json::Array;
using llvm::json::Object;

/// Past this many inputs a run is left unfused (the runtime's limit).
static constexpr unsigned kMaxKernelInputs = 16;

unsigned KernelTable::intern(const KernelSpec &spec) {
  std::string description = spec.describe();
  auto [it, inserted] = indexOf.try_emplace(description, table.size());
  if (inserted) {
    // The hash ties the symbol to what it computes: an artifact of another
    // bundle lacks it.
    uint32_t hash = uint32_t(llvm::xxh3_64bits(description));
    table.push_back(
        {llvm::formatv("gpipe_kernel_{0}_{1:x-8}", table.size(), hash).str(),
         spec});
  }
  return it->second;
}

Array KernelTable::describe() const {
  Array list;
  for (const NamedKernel &kernel : table)
    list.push_back(Object{{"symbol", kernel.symbol},
                          {"inputs", int64_t(kernel.spec.numInputs)},
                          {"ops", kernel.spec.describe()}});
  return list;
}

static std::vector<int64_t> idsOf(const Object &op, llvm::StringRef key) {
  std::vector<int64_t> ids;
  if (const Array *list = op.getArray(key))
    for (const llvm::json::Value &id : *list)
      ids.push_back(id.getAsInteger().value_or(-1));
  return ids;
}

void gpipe::countOperandUses(const Array &ops, ValueUses &uses) {
  for (const llvm::json::Value &op : ops)
    for (int64_t id : idsOf(*op.getAsObject(), "operands"))
      ++uses[id];
}

/// Whether `op` can be a step of a kernel: an element-wise op with one
/// result that is computed.
static bool isStep(const Object &op) {
  std::optional<llvm::StringRef> name = op.getString("op");
  std::vector<int64_t> results = idsOf(op, "results");
  return name && isKernelStepOp(*name) && results.size() == 1 &&
         results[0] >= 0;
}

/// The kernel op computing ops[first, last].
static Object buildKernelOp(const Array &ops, size_t first, size_t last,
                            KernelTable &table, bool &tooManyInputs) {
  llvm::DenseMap<int64_t, unsigned> stepOf; // result id -> step
  llvm::SetVector<int64_t> inputs;
  for (size_t k = first; k <= last; ++k) {
    const Object &op = *ops[k].getAsObject();
    for (int64_t id : idsOf(op, "operands"))
      if (!stepOf.count(id))
        inputs.insert(id);
    stepOf[idsOf(op, "results")[0]] = k - first;
  }
  tooManyInputs = inputs.size() > kMaxKernelInputs;
  KernelSpec spec;
  spec.numInputs = inputs.size();
  for (size_t k = first; k <= last; ++k) {
    const Object &op = *ops[k].getAsObject();
    KernelStep step;
    step.op = op.getString("op")->str();
    for (int64_t id : idsOf(op, "operands")) {
      auto it = stepOf.find(id);
      bool internal = it != stepOf.end() && it->second < k - first;
      unsigned input = unsigned(llvm::find(inputs, id) - inputs.begin());
      step.operands.push_back(internal ? spec.numInputs + it->second : input);
    }
    spec.steps.push_back(std::move(step));
  }
  Array operands;
  for (int64_t id : inputs)
    operands.push_back(id);
  int64_t output = idsOf(*ops[last].getAsObject(), "results")[0];
  return Object{{"op", "kernel"},
                {"kernel", int64_t(table.intern(spec))},
                {"operands", std::move(operands)},
                {"results", Array{output}}};
}

std::vector<size_t>
gpipe::fuseKernelRegions(Array &ops, size_t begin, size_t end,
                         const ValueUses &uses, KernelTable &table,
                         llvm::function_ref<bool(size_t, size_t)> allowed) {
  // The op that reads each value, where that is its only read and a step.
  llvm::DenseMap<int64_t, size_t> soleReader;
  for (size_t k = begin; k < end; ++k) {
    const Object &op = *ops[k].getAsObject();
    if (isStep(op))
      for (int64_t id : idsOf(op, "operands"))
        if (uses.lookup(id) == 1)
          soleReader[id] = k;
  }
  // Backwards: a step joins its reader's run when it is the op just before
  // the run's first one. `first[last]` is each run's first op.
  std::vector<size_t> runOf(ops.size()), first(ops.size());
  std::vector<bool> inRun(ops.size(), false);
  for (size_t k = end; k-- > begin;) {
    const Object &op = *ops[k].getAsObject();
    if (!isStep(op))
      continue;
    inRun[k] = true;
    auto reader = soleReader.find(idsOf(op, "results")[0]);
    if (reader != soleReader.end() && inRun[reader->second] &&
        first[runOf[reader->second]] == k + 1) {
      runOf[k] = runOf[reader->second];
      first[runOf[k]] = k;
    } else {
      runOf[k] = k;
      first[k] = k;
    }
  }

  Array rewritten;
  std::vector<size_t> newIndex(ops.size());
  for (size_t k = 0; k < ops.size(); ++k) {
    bool runEnd = k >= begin && k < end && inRun[k] && runOf[k] == k;
    if (runEnd && first[k] < k && allowed(first[k], k)) {
      bool tooManyInputs = false;
      Object kernel = buildKernelOp(ops, first[k], k, table, tooManyInputs);
      if (!tooManyInputs) {
        // The run's ops were copied one by one: take them back.
        size_t start = rewritten.size() - (k - first[k]);
        while (rewritten.size() > start)
          rewritten.erase(rewritten.end() - 1);
        for (size_t j = first[k]; j <= k; ++j)
          newIndex[j] = start;
        rewritten.push_back(std::move(kernel));
        continue;
      }
    }
    newIndex[k] = rewritten.size();
    rewritten.push_back(ops[k]);
  }
  ops = std::move(rewritten);
  return newIndex;
}
