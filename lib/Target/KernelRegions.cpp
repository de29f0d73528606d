//===- KernelRegions.cpp - Element-wise runs of a stage program as kernels ===//

#include "gpipe/Target/KernelRegions.h"

#include "gpipe/runtime/bundle/OpTable.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

using namespace gpipe;
using llvm::json::Array;
using llvm::json::Object;

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
/// result that is computed (and, for a named op, if the table fuses those).
static bool isStep(const Object &op, const KernelTable &table) {
  std::optional<llvm::StringRef> name = op.getString("op");
  std::vector<int64_t> results = idsOf(op, "results");
  return name && isKernelStepOp(*name) &&
         (table.fuseNamedOps || !hasLibraryKernel(*name)) &&
         results.size() == 1 && results[0] >= 0;
}

/// Whether `op`, a step, becomes a kernel even alone: a general op always,
/// a named one when the table fuses those.
static bool kernelAlone(const Object &op, const KernelTable &table) {
  return table.fuseNamedOps || !hasLibraryKernel(*op.getString("op"));
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
  tooManyInputs = inputs.size() > runtime::kMaxKernelInputs;
  KernelSpec spec;
  spec.numInputs = inputs.size();
  for (size_t k = first; k <= last; ++k) {
    const Object &op = *ops[k].getAsObject();
    KernelStep step;
    step.op = op.getString("op")->str();
    // Every other number is a constant of the op (clip's min and max).
    for (const auto &[key, value] : op)
      if (key != "op" && key != "operands" && key != "results")
        if (std::optional<double> number = value.getAsNumber())
          step.constants.emplace_back(key.str(), *number);
    llvm::sort(step.constants);
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
                         llvm::function_ref<bool(size_t, size_t)> allowed,
                         llvm::function_ref<bool(size_t)> pinned) {
  auto isStepAt = [&](size_t k) {
    return !pinned(k) && isStep(*ops[k].getAsObject(), table);
  };
  // The op that reads each value, where that is its only read and a step.
  llvm::DenseMap<int64_t, size_t> soleReader;
  for (size_t k = begin; k < end; ++k) {
    const Object &op = *ops[k].getAsObject();
    if (isStepAt(k))
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
    if (!isStepAt(k))
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
  auto fuse = [&](size_t from, size_t to) {
    bool tooManyInputs = false;
    Object kernel = buildKernelOp(ops, from, to, table, tooManyInputs);
    if (tooManyInputs)
      return false;
    for (size_t j = from; j <= to; ++j)
      newIndex[j] = rewritten.size();
    rewritten.push_back(std::move(kernel));
    return true;
  };
  for (size_t k = 0; k < ops.size(); ++k) {
    bool inRange = k >= begin && k < end;
    if (!inRange || !inRun[k] || runOf[k] != k) {
      // Not a run's last op: copied now, taken back if its run fuses.
      newIndex[k] = rewritten.size();
      rewritten.push_back(ops[k]);
      continue;
    }
    size_t from = first[k];
    // Take the run's other ops back, then fuse it whole, or else alone
    // each op that has no library kernel.
    if (from < k)
      while (rewritten.size() > newIndex[from])
        rewritten.erase(rewritten.end() - 1);
    bool fused = from == k
                     ? kernelAlone(*ops[k].getAsObject(), table) && fuse(k, k)
                     : allowed(from, k) && fuse(from, k);
    if (fused)
      continue;
    for (size_t j = from; j <= k; ++j) {
      if (kernelAlone(*ops[j].getAsObject(), table) && fuse(j, j))
        continue;
      newIndex[j] = rewritten.size();
      rewritten.push_back(ops[j]);
    }
  }
  ops = std::move(rewritten);
  return newIndex;
}

std::vector<runtime::FusionKind> gpipe::chooseLibraryFusions(const Array &ops) {
  auto object = [&](size_t i) { return ops[i].getAsObject(); };
  auto firstId = [&](size_t i, llvm::StringRef key) -> int64_t {
    const Array *ids = object(i)->getArray(key);
    std::optional<int64_t> id =
        ids && !ids->empty() ? (*ids)[0].getAsInteger() : std::nullopt;
    return id.value_or(-1);
  };
  return runtime::chooseFusions(
      ops.size(),
      [&](size_t i) -> std::optional<runtime::OpKind> {
        std::optional<llvm::StringRef> name = object(i)->getString("op");
        return name ? runtime::opKindNamed(
                          std::string_view(name->data(), name->size()))
                    : std::nullopt;
      },
      [&](size_t i) { return firstId(i, "operands"); },
      [&](size_t i) { return firstId(i, "results"); });
}

void gpipe::fuseStageKernels(
    llvm::json::Array &forward, llvm::json::Array &grads,
    std::vector<size_t> &recomputed, std::optional<int64_t> &weightsFrom,
    llvm::ArrayRef<const llvm::json::Array *> readLists,
    llvm::function_ref<bool(int64_t)> isBatched, KernelTable &table) {
  ValueUses uses;
  countOperandUses(forward, uses);
  countOperandUses(grads, uses);
  for (const llvm::json::Array *ids : readLists)
    for (const llvm::json::Value &id : *ids)
      ++uses[id.getAsInteger().value_or(-1)];

  // A kernel's operands share its batching (the runtime checks it): a named
  // op that mixes them stays the library's.
  auto mixesBatching = [&](const llvm::json::Value &op) {
    const llvm::json::Array *operands = op.getAsObject()->getArray("operands");
    bool some = false, all = true;
    for (const llvm::json::Value &id : *operands) {
      bool batched = isBatched(id.getAsInteger().value_or(-1));
      some |= batched;
      all &= batched;
    }
    return some && !all;
  };
  // The forward's library pairs stay: both ops of each.
  std::vector<runtime::FusionKind> pairs = chooseLibraryFusions(forward);
  llvm::DenseSet<size_t> pinned;
  for (size_t i = 0; i < pairs.size(); ++i)
    if (pairs[i] != runtime::FusionKind::None)
      pinned.insert_range(std::initializer_list<size_t>{i, i + 1});
  for (size_t i = 0; i < forward.size(); ++i)
    if (mixesBatching(forward[i]))
      pinned.insert(i);
  llvm::DenseSet<size_t> rerun(recomputed.begin(), recomputed.end());
  std::vector<size_t> forwardMap = fuseKernelRegions(
      forward, 0, forward.size(), uses, table,
      [&](size_t first, size_t last) {
        size_t count = 0;
        for (size_t k = first; k <= last; ++k)
          count += rerun.count(k);
        return count == 0 || count == last - first + 1;
      },
      [&](size_t index) { return pinned.contains(index); });
  std::vector<size_t> remapped;
  for (size_t index : recomputed)
    if (remapped.empty() || remapped.back() != forwardMap[index])
      remapped.push_back(forwardMap[index]);
  recomputed = std::move(remapped);

  auto any = [](size_t, size_t) { return true; };
  auto mixed = [&](size_t i) { return mixesBatching(grads[i]); };
  size_t bEnd = size_t(weightsFrom.value_or(int64_t(grads.size())));
  size_t oldSize = grads.size();
  std::vector<size_t> backMap =
      fuseKernelRegions(grads, 0, bEnd, uses, table, any, mixed);
  size_t wBegin = bEnd < oldSize ? backMap[bEnd] : grads.size();
  fuseKernelRegions(grads, wBegin, grads.size(), uses, table, any, mixed);
  if (weightsFrom)
    weightsFrom = int64_t(wBegin);
}
