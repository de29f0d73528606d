//===- KernelRegions.cpp - Element-wise runs of a stage program as kernels ===//
//
// The distinct kernels of a bundle, and the runs of a stage's element-wise
// ops that become them (KernelRegions.h); each run's kernel op is
// FusedKernelOp.cpp's or PartialKernelOp.cpp's.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Target/KernelRegions.h"

#include "KernelOpBuilders.h"

#include "gpipe/runtime/bundle/OpTable.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

using namespace gpipe;
using namespace gpipe::region_detail;
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
  auto dimList = [](llvm::ArrayRef<unsigned> dims) {
    Array list;
    for (unsigned dim : dims)
      list.push_back(int64_t(dim));
    return list;
  };
  Array list;
  for (const NamedKernel &kernel : table) {
    Array inputDims;
    for (llvm::ArrayRef<unsigned> dims : kernel.spec.inputDims)
      inputDims.push_back(dimList(dims));
    Object item{{"symbol", kernel.symbol},
                {"inputs", int64_t(kernel.spec.numInputs)},
                {"ops", kernel.spec.describe()},
                {"rank", int64_t(kernel.spec.rank)},
                {"inputDims", std::move(inputDims)},
                {"outputDims", dimList(kernel.spec.outputDims)}};
    // Each memref's own sizes where it has a window (the runtime needs no
    // offsets or steps: the code has them).
    const KernelSpec &spec = kernel.spec;
    auto extentsOf = [](const KernelWindow *window, size_t rank) {
      return window ? Array(window->extents)
                    : Array(std::vector<int64_t>(rank, -1));
    };
    if (spec.outputWindow ||
        llvm::any_of(spec.inputWindows,
                     [](const auto &w) { return w.has_value(); })) {
      Array extents;
      for (unsigned k = 0; k < spec.numInputs; ++k)
        extents.push_back(
            extentsOf(spec.inputWindow(k), spec.inputDims[k].size()));
      extents.push_back(extentsOf(spec.outputWindow ? &*spec.outputWindow
                                                    : nullptr,
                                  spec.outputDims.size()));
      item["extents"] = std::move(extents);
    }
    // Each memref's element type where one is not f32 (an i1 is stored as
    // an i32 word).
    auto storageName = [](KernelElement element) {
      return element == KernelElement::F32 ? "f32" : "i32";
    };
    if (spec.outputType != KernelElement::F32 || !spec.inputTypes.empty()) {
      Array types;
      for (unsigned k = 0; k < spec.numInputs; ++k)
        types.push_back(storageName(spec.inputType(k)));
      types.push_back(storageName(spec.outputType));
      item["types"] = std::move(types);
    }
    // A gather's indices (input 1) index its table's axis, whose extent the
    // runtime checks indices from the batch against.
    if (spec.gathers()) {
      unsigned axis = unsigned(spec.steps[0].constant("axis"));
      const KernelWindow *table = spec.steps[0].op == "gather"
                                      ? spec.inputWindow(0)
                                      : &*spec.outputWindow;
      item["indexBounds"] = Array{int64_t(0), table->extents[axis]};
    }
    list.push_back(std::move(item));
  }
  return list;
}

std::vector<int64_t> gpipe::region_detail::idsOf(const Object &op,
                                                 llvm::StringRef key) {
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

static bool isBroadcastingNamedOp(const Object &op) {
  return op.getBoolean("broadcast").value_or(false);
}

bool gpipe::region_detail::isReduction(const Object &op) {
  llvm::StringRef name = op.getString("op").value_or("");
  return isReductionStep(name) || name == "sum_to" ||
         name == "reduce_max_count";
}

std::vector<int64_t>
gpipe::region_detail::reducedAxes(const Object &op, const ValueInfoFn &info) {
  if (op.getString("op") != "sum_to")
    return idsOf(op, "axes");
  std::vector<int64_t> from = info(idsOf(op, "operands")[0]).shape;
  std::vector<int64_t> to = info(idsOf(op, "results")[0]).shape;
  std::vector<int64_t> axes;
  size_t offset = from.size() - std::min(from.size(), to.size());
  for (size_t d = 0; d < from.size(); ++d)
    if (d < offset || (to[d - offset] == 1 && from[d] != 1))
      axes.push_back(int64_t(d));
  return axes;
}

bool gpipe::region_detail::isIsolated(const Object &op) {
  return llvm::is_contained(
      {"reshape", "slice", "slice_grad", "concat", "gather", "gather_grad"},
      op.getString("op").value_or(""));
}

/// Whether `op` can be a step of a kernel: an element-wise op or reduction
/// with one result that is computed (and, for a named op, if the table
/// fuses those or it broadcasts).
static bool isStep(const Object &op, const KernelTable &table) {
  std::optional<llvm::StringRef> name = op.getString("op");
  std::vector<int64_t> results = idsOf(op, "results");
  return name && isKernelOp(*name) &&
         (table.fuseNamedOps || !hasLibraryKernel(*name) ||
          isBroadcastingNamedOp(op)) &&
         results.size() == 1 && results[0] >= 0;
}

/// Whether `op`, a step, becomes a kernel even alone: a general op always,
/// a named one when the table fuses those or it broadcasts.
static bool kernelAlone(const Object &op, const KernelTable &table) {
  return table.fuseNamedOps || !hasLibraryKernel(*op.getString("op")) ||
         isBroadcastingNamedOp(op);
}

std::vector<size_t>
gpipe::fuseKernelRegions(Array &ops, size_t begin, size_t end,
                         const ValueUses &uses, const ValueInfoFn &info,
                         KernelTable &table,
                         llvm::function_ref<bool(size_t, size_t)> allowed,
                         llvm::function_ref<bool(size_t)> pinned) {
  auto isStepAt = [&](size_t k) {
    return !pinned(k) && isStep(*ops[k].getAsObject(), table);
  };
  // The steps that read each value (once per operand).
  llvm::DenseMap<int64_t, llvm::SmallVector<size_t, 2>> readers;
  for (size_t k = begin; k < end; ++k) {
    const Object &op = *ops[k].getAsObject();
    if (isStepAt(k))
      for (int64_t id : idsOf(op, "operands"))
        readers[id].push_back(k);
  }
  // Backwards: a step joins the run that reads it when every read of its
  // value is that run's and it is the op just before the run's first one. A
  // reduction joins only as a leading one: over the trailing axes (never
  // the batch's) of a value shaped as the run's output, which ends in an
  // element-wise op, with the axes of the run's other leading reductions
  // (`rowAxes`). `first[last]` is each run's first op.
  std::vector<size_t> runOf(ops.size()), first(ops.size());
  std::vector<bool> inRun(ops.size(), false);
  llvm::DenseMap<size_t, std::vector<int64_t>> rowAxes;
  auto leadingAxes = [&](const Object &op,
                         size_t run) -> std::optional<std::vector<int64_t>> {
    const Object &last = *ops[run].getAsObject();
    llvm::StringRef name = op.getString("op").value_or("");
    if (!(isReductionStep(name) || name == "sum_to") || isReduction(last))
      return std::nullopt;
    std::vector<int64_t> axes = reducedAxes(op, info);
    std::vector<int64_t> shape = info(idsOf(op, "operands")[0]).shape;
    if (shape != info(idsOf(last, "results")[0]).shape || axes.empty())
      return std::nullopt;
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] != int64_t(shape.size() - axes.size() + i) || axes[i] == 0)
        return std::nullopt;
    auto known = rowAxes.find(run);
    if (known != rowAxes.end() && known->second != axes)
      return std::nullopt;
    return axes;
  };
  for (size_t k = end; k-- > begin;) {
    const Object &op = *ops[k].getAsObject();
    if (!isStepAt(k))
      continue;
    inRun[k] = true;
    runOf[k] = k;
    first[k] = k;
    int64_t result = idsOf(op, "results")[0];
    auto found = readers.find(result);
    if (isIsolated(op) || found == readers.end() ||
        found->second.size() != uses.lookup(result))
      continue;
    size_t reader = found->second.front();
    size_t run = runOf[reader];
    bool joins = inRun[reader] && first[run] == k + 1;
    for (size_t r : found->second)
      joins = joins && inRun[r] && runOf[r] == run &&
              !isIsolated(*ops[r].getAsObject());
    std::optional<std::vector<int64_t>> axes;
    if (joins && isReduction(op)) {
      axes = leadingAxes(op, run);
      joins = axes.has_value();
    }
    if (!joins)
      continue;
    if (axes)
      rowAxes[run] = *axes;
    runOf[k] = run;
    first[run] = k;
  }

  Array rewritten;
  std::vector<size_t> newIndex(ops.size());
  auto fuse = [&](size_t from, size_t to) {
    std::string problem;
    Object kernel = buildKernelOp(ops, from, to, info, table, problem);
    if (!problem.empty()) {
      if (from == to)
        table.refuse("'" +
                     ops[from].getAsObject()->getString("op")->str() +
                     "' cannot be a generated kernel: " + problem);
      return false;
    }
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
        // An add that broadcasts (a position table) is always a kernel,
        // never half of the library's add + layer norm.
        if (isBroadcastingNamedOp(*object(i)))
          return std::nullopt;
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
    const ValueInfoFn &info, KernelTable &table) {
  ValueUses uses;
  countOperandUses(forward, uses);
  countOperandUses(grads, uses);
  for (const llvm::json::Array *ids : readLists)
    for (const llvm::json::Value &id : *ids)
      ++uses[id.getAsInteger().value_or(-1)];

  // A named op of one shape whose operands are not all batched alike stays
  // the library's (a kernel would read a batch-shaped parameter as rows of
  // the micro-batch). Broadcasting ops place each operand by shape.
  auto mixesBatching = [&](const llvm::json::Value &value) {
    const Object &op = *value.getAsObject();
    if (!hasLibraryKernel(op.getString("op").value_or("")) ||
        isBroadcastingNamedOp(op))
      return false;
    bool some = false, all = true;
    for (int64_t id : idsOf(op, "operands")) {
      bool batched = info(id).batched;
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
      forward, 0, forward.size(), uses, info, table,
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
      fuseKernelRegions(grads, 0, bEnd, uses, info, table, any, mixed);
  size_t wBegin = bEnd < oldSize ? backMap[bEnd] : grads.size();
  fuseKernelRegions(grads, wBegin, grads.size(), uses, info, table, any,
                    mixed);
  if (weightsFrom)
    weightsFrom = int64_t(wBegin);
}
