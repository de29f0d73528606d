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
    list.push_back(std::move(item));
  }
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

static bool isBroadcastingNamedOp(const Object &op) {
  return op.getBoolean("broadcast").value_or(false);
}

/// Whether `op` ends a run: a reduction, whose result no step of its run
/// reads (a kernel computes its steps at every point, a reduction's result
/// only once the points are all summed).
static bool isReduction(const Object &op) {
  llvm::StringRef name = op.getString("op").value_or("");
  return isReductionStep(name) || name == "sum_to" ||
         name == "reduce_max_count";
}

/// The axes a reduction op sums over: its `axes`, or for sum_to the
/// dimensions its result lacks or has as 1 where its operand does not
/// (aligned at the last).
static std::vector<int64_t> reducedAxes(const Object &op,
                                        const ValueInfoFn &info) {
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

/// Whether `op` is a kernel of its own: a reshape, whose operand's dimensions
/// do not map to its result's, or an op that reads or writes part of a
/// value (slice, slice_grad, concat), whose memrefs are not all the space.
static bool isIsolated(const Object &op) {
  return llvm::is_contained(
      {"reshape", "slice", "slice_grad", "concat", "gather", "gather_grad"},
      op.getString("op").value_or(""));
}

/// The kernel op of a slice, a slice's gradient, a concat, a gather or a
/// gather's gradient. Every memref has the dimensions of the space (the
/// shape of what the op writes, or for slice_grad and gather_grad of what it
/// reads), but a gather's indices, which have its axis (and the batch's
/// when batched); and a window along those it does not cover whole (a
/// gather's input and a gather_grad's output along the axis: their own
/// extent). Runs of adjacent dimensions that every memref covers whole and
/// has or lacks alike merge; a unit dimension goes in front when the first
/// is not whole (the first dimension is the one a batched space scales to a
/// micro-batch).
static Object buildPartialKernelOp(const Object &op, const ValueInfoFn &info,
                                   KernelTable &table, std::string &problem) {
  const llvm::StringRef name = *op.getString("op");
  const std::vector<int64_t> operands = idsOf(op, "operands");
  const int64_t result = idsOf(op, "results")[0];
  const bool readsSpace = name == "slice_grad" || name == "gather_grad";
  const ValueInfo space = info(readsSpace ? operands[0] : result);
  const size_t rank = space.shape.size();
  // Per memref (the inputs, then the output), per dimension of the space:
  // whether it has it, offset, step and extent (-1: whole).
  struct Part {
    std::vector<int64_t> offsets, steps, extents;
    std::vector<bool> has;
  };
  auto whole = [&] {
    return Part{std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 1),
                std::vector<int64_t>(rank, -1), std::vector<bool>(rank, true)};
  };
  std::vector<Part> parts(operands.size() + 1, whole());
  if (name == "gather" || name == "gather_grad") {
    const size_t axis = size_t(op.getInteger("axis").value_or(0));
    const ValueInfo indices = info(operands[1]);
    const int64_t full = info(name == "gather" ? operands[0] : result)
                             .shape[axis];
    Part &table = parts[name == "gather" ? 0 : 2];
    table.extents[axis] = full;
    // Batched indices ([batch, k]) have dimension 0 too.
    for (size_t d = 0; d < rank; ++d)
      parts[1].has[d] = d == axis || (d == 0 && indices.shape.size() == 2);
  }
  if (name == "slice" || name == "slice_grad") {
    std::vector<int64_t> starts = idsOf(op, "starts"),
                         steps = idsOf(op, "steps");
    const std::vector<int64_t> full =
        info(name == "slice" ? operands[0] : result).shape;
    Part &part = parts[name == "slice" ? 0 : 1];
    for (size_t d = 0; d < rank; ++d)
      if (starts[d] != 0 || steps[d] != 1 || full[d] != space.shape[d])
        part.offsets[d] = starts[d], part.steps[d] = steps[d],
        part.extents[d] = full[d];
  }
  int64_t axis = -1;
  if (name == "concat") {
    axis = op.getInteger("axis").value_or(-1);
    if (operands.size() > runtime::kMaxKernelInputs) {
      problem = "concatenates more than " +
                std::to_string(runtime::kMaxKernelInputs) + " inputs";
      return {};
    }
    for (size_t k = 0; k < operands.size(); ++k)
      parts[k].extents[axis] = info(operands[k]).shape[axis];
  }
  auto wholeAt = [&](size_t d) {
    return llvm::all_of(parts, [&](const Part &p) { return p.extents[d] < 0; });
  };
  auto alike = [&](size_t d, size_t e) {
    return llvm::all_of(parts,
                        [&](const Part &p) { return p.has[d] == p.has[e]; });
  };
  // Merged dimensions: each is [from, to) of the space's.
  std::vector<std::pair<size_t, size_t>> merged;
  for (size_t d = 0; d < rank; ++d) {
    if (!merged.empty() && wholeAt(d) && wholeAt(merged.back().first) &&
        alike(d, merged.back().first))
      merged.back().second = d + 1;
    else
      merged.push_back({d, d + 1});
  }
  const bool unitInFront = !merged.empty() && !wholeAt(merged[0].first);
  KernelSpec spec;
  spec.numInputs = unsigned(operands.size());
  spec.rank = unsigned(merged.size() + unitInFront);
  if (spec.rank > runtime::kMaxKernelRank) {
    problem = std::to_string(spec.rank) +
              " iteration dimensions after merging (at most " +
              std::to_string(runtime::kMaxKernelRank) + ")";
    return {};
  }
  Array sizes;
  llvm::SmallVector<unsigned> all;
  if (unitInFront)
    sizes.push_back(int64_t(1));
  for (auto [from, to] : merged) {
    int64_t size = 1;
    for (size_t d = from; d < to; ++d)
      size *= space.shape[d];
    sizes.push_back(size);
  }
  for (unsigned d = 0; d < spec.rank; ++d)
    all.push_back(d);
  // The dimensions of the kernel that a memref has.
  auto dimsOf = [&](const Part &part) {
    llvm::SmallVector<unsigned> dims;
    if (unitInFront && llvm::all_of(part.has, [](bool h) { return h; }))
      dims.push_back(0);
    for (auto [i, range] : llvm::enumerate(merged))
      if (part.has[range.first])
        dims.push_back(unsigned(i + unitInFront));
    return dims;
  };
  auto windowOf = [&](const Part &part) -> std::optional<KernelWindow> {
    if (llvm::all_of(part.extents, [](int64_t e) { return e < 0; }))
      return std::nullopt;
    KernelWindow window;
    if (unitInFront)
      window.offsets = {0}, window.steps = {1}, window.extents = {-1};
    for (auto [from, to] : merged) {
      window.offsets.push_back(part.offsets[from]);
      window.steps.push_back(part.steps[from]);
      window.extents.push_back(part.extents[from]);
    }
    return window;
  };
  for (size_t k = 0; k < operands.size(); ++k) {
    spec.inputDims.push_back(dimsOf(parts[k]));
    spec.inputWindows.push_back(windowOf(parts[k]));
  }
  spec.outputDims = all;
  spec.outputWindow = windowOf(parts.back());
  const bool gathers = name == "gather" || name == "gather_grad";
  KernelStep step{gathers ? name.str()
                          : name == "concat" ? "concat" : "slice",
                  {}};
  for (unsigned k = 0; k < spec.numInputs; ++k)
    step.operands.push_back(k);
  if (name == "concat" || gathers) {
    // The axis among the merged dimensions.
    if (gathers)
      axis = op.getInteger("axis").value_or(-1);
    unsigned at = unitInFront;
    for (auto [from, to] : merged) {
      if (size_t(axis) >= from && size_t(axis) < to)
        break;
      ++at;
    }
    step.constants = {{"axis", double(at)}};
  }
  spec.steps.push_back(std::move(step));
  for (int64_t id : operands)
    spec.inputTypes.push_back(info(id).element);
  if (llvm::all_of(spec.inputTypes,
                   [](KernelElement e) { return e == KernelElement::F32; }))
    spec.inputTypes.clear();
  spec.outputType = info(result).element;
  Array operandList;
  for (int64_t id : operands)
    operandList.push_back(id);
  const bool batched = space.batched && !unitInFront && rank > 0 &&
                       space.shape[0] != 1;
  return Object{{"op", "kernel"},
                {"kernel", int64_t(table.intern(spec))},
                {"operands", std::move(operandList)},
                {"results", Array{result}},
                {"space", std::move(sizes)},
                {"batched", batched}};
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

namespace {
/// Where each dimension of a value sits in a kernel's iteration space: an
/// index into the space's shape, or -1 for a dimension of size 1 that
/// stretches (or stays 1).
using DimMap = llvm::SmallVector<int>;

/// Operand j of `op` (NumPy broadcasting, or stretched along the op's `axes`)
/// placed in the iteration space, given where the op's result is.
DimMap placeOperand(const Object &op, size_t j,
                    llvm::ArrayRef<int64_t> operandShape,
                    llvm::ArrayRef<int64_t> resultShape,
                    const DimMap &resultMap) {
  llvm::StringRef name = op.getString("op").value_or("");
  std::vector<int64_t> axes = idsOf(op, "axes");
  // reduce_*_grad's dy, reduce_max_grad's dy, max and count, and
  // reduce_max_count's max have the reduced shape: stretched along axes.
  bool alongAxes = name == "reduce_sum_grad" || name == "reduce_mean_grad" ||
                   (name == "reduce_max_grad" && j != 1) ||
                   (name == "reduce_max_count" && j == 1);
  DimMap map(operandShape.size(), -1);
  if (alongAxes) {
    bool keepsDims = operandShape.size() == resultShape.size();
    size_t next = 0; // the operand's next dimension
    for (size_t d = 0; d < resultShape.size(); ++d) {
      bool reduced = llvm::is_contained(axes, int64_t(d));
      if (reduced && !keepsDims)
        continue;
      if (!reduced && next < map.size())
        map[next] = resultMap[d];
      ++next;
    }
    return map;
  }
  if (name == "transpose") { // result dim i is operand dim perm[i]
    std::vector<int64_t> perm = idsOf(op, "perm");
    for (size_t i = 0; i < perm.size() && i < resultMap.size(); ++i)
      if (size_t(perm[i]) < map.size() && operandShape[perm[i]] != 1)
        map[perm[i]] = resultMap[i];
    return map;
  }
  size_t offset = resultShape.size() - operandShape.size();
  for (size_t d = 0; d < operandShape.size(); ++d)
    if (operandShape[d] != 1 && operandShape[d] == resultShape[offset + d])
      map[d] = resultMap[offset + d];
  return map;
}
} // namespace

/// The kernel op computing ops[first, last], or "" in `problem` why none
/// can.
static Object buildKernelOp(const Array &ops, size_t first, size_t last,
                            const ValueInfoFn &info, KernelTable &table,
                            std::string &problem) {
  const Object &lastOp = *ops[last].getAsObject();
  if (isIsolated(lastOp) && lastOp.getString("op") != "reshape")
    return buildPartialKernelOp(lastOp, info, table, problem);
  if (isIsolated(lastOp)) {
    // A copy over the elements in order: one dimension.
    int64_t input = idsOf(lastOp, "operands")[0];
    int64_t output = idsOf(lastOp, "results")[0];
    ValueInfo result = info(output);
    int64_t count = 1;
    for (int64_t dim : result.shape)
      count *= dim;
    KernelSpec spec = KernelSpec::elementwise(1);
    spec.steps.push_back({lastOp.getString("op")->str(), {0}});
    if (result.element != KernelElement::F32)
      spec.inputTypes = {result.element};
    spec.outputType = result.element;
    return Object{{"op", "kernel"},
                  {"kernel", int64_t(table.intern(spec))},
                  {"operands", Array{input}},
                  {"results", Array{output}},
                  {"space", Array{count}},
                  {"batched", result.batched && count != 1}};
  }
  const bool reduces = isReduction(lastOp);
  // The iteration space: the shape of what the kernel writes, or of what
  // its reduction reads.
  int64_t spaceValue = reduces ? idsOf(lastOp, "operands")[0]
                               : idsOf(lastOp, "results")[0];
  ValueInfo space = info(spaceValue);
  const size_t rank = space.shape.size();
  DimMap identity(rank);
  for (size_t d = 0; d < rank; ++d)
    identity[d] = int(d);

  // Each value's place in the space, from the last op back: an inner value
  // read by several steps must have one place in all of them; an input read
  // at two places counts as two inputs (the same buffer, read twice). A
  // leading reduction reads a value of the whole space and keeps its rows
  // (`innerReduced`: the space dimensions it sums over).
  llvm::DenseMap<int64_t, DimMap> placeOf;
  llvm::DenseMap<int64_t, size_t> stepOf; // result id -> op position
  for (size_t k = first; k <= last; ++k)
    stepOf[idsOf(*ops[k].getAsObject(), "results")[0]] = k;
  std::vector<std::vector<DimMap>> operandPlaces(last + 1);
  llvm::SmallVector<bool> innerReduced(rank, false);
  for (size_t k = last + 1; k-- > first;) {
    const Object &op = *ops[k].getAsObject();
    int64_t result = idsOf(op, "results")[0];
    std::vector<int64_t> operands = idsOf(op, "operands");
    const bool leading = k != last && isReduction(op);
    if (leading) {
      // Its result sits at its operand's rows: the kept axes where they are,
      // the reduced ones stretched (kept as 1) or gone.
      std::vector<int64_t> axes = reducedAxes(op, info);
      DimMap expected;
      bool keeps = info(result).shape.size() == rank;
      for (size_t d = 0; d < rank; ++d) {
        bool reduced = llvm::is_contained(axes, int64_t(d));
        innerReduced[d] = innerReduced[d] || reduced;
        if (!reduced || keeps)
          expected.push_back(reduced ? -1 : int(d));
      }
      const DimMap &actual = placeOf[result];
      bool matches = actual.size() == expected.size();
      for (size_t i = 0; matches && i < actual.size(); ++i)
        matches = actual[i] == expected[i] ||
                  (expected[i] >= 0 && space.shape[expected[i]] == 1);
      if (!matches) {
        problem = "a leading reduction's result is read away from its rows";
        return {};
      }
    }
    for (size_t j = 0; j < operands.size(); ++j) {
      std::vector<int64_t> shape = info(operands[j]).shape;
      DimMap place;
      if ((k == last && reduces) || leading)
        place = j == 0 ? identity
                       : placeOperand(op, j, shape, space.shape, identity);
      else
        place = placeOperand(op, j, shape, info(result).shape,
                             k == last ? identity : placeOf[result]);
      auto inner = stepOf.find(operands[j]);
      if (inner != stepOf.end() && inner->second < k) {
        auto [at, fresh] = placeOf.try_emplace(operands[j], place);
        if (!fresh && at->second != place) {
          problem = "an inner value is read at two places of the space";
          return {};
        }
      }
      operandPlaces[k].push_back(place);
    }
  }

  // The space's dimensions of size 1 go; runs of dimensions that every
  // input (and the output) has or lacks alike merge into one.
  llvm::SmallVector<bool> outputHas(rank, true);
  if (reduces) {
    llvm::StringRef name = *lastOp.getString("op");
    std::vector<int64_t> resultShape =
        info(idsOf(lastOp, "results")[0]).shape;
    std::vector<int64_t> axes = idsOf(lastOp, "axes");
    size_t offset = rank - resultShape.size();
    for (size_t d = 0; d < rank; ++d)
      outputHas[d] = name == "sum_to"
                         ? d >= offset && resultShape[d - offset] != 1
                         : !llvm::is_contained(axes, int64_t(d));
  }
  // The inputs, each (value, place) once.
  llvm::SmallVector<std::pair<int64_t, DimMap>> inputPlaces;
  std::vector<llvm::SmallVector<unsigned>> operandInput(last + 1);
  for (size_t k = first; k <= last; ++k) {
    std::vector<int64_t> operands = idsOf(*ops[k].getAsObject(), "operands");
    for (size_t j = 0; j < operands.size(); ++j) {
      auto inner = stepOf.find(operands[j]);
      if (inner != stepOf.end() && inner->second < k) {
        operandInput[k].push_back(~0u);
        continue;
      }
      std::pair<int64_t, DimMap> key{operands[j], operandPlaces[k][j]};
      auto *it = llvm::find(inputPlaces, key);
      operandInput[k].push_back(unsigned(it - inputPlaces.begin()));
      if (it == inputPlaces.end())
        inputPlaces.push_back(std::move(key));
    }
  }
  if (inputPlaces.size() > runtime::kMaxKernelInputs) {
    problem = "more than " + std::to_string(runtime::kMaxKernelInputs) +
              " inputs";
    return {};
  }
  auto has = [&](const DimMap &place, size_t d) {
    return llvm::is_contained(place, int(d));
  };
  // Each input's space dimensions in its own order (a transposed input's
  // are not ascending), size-1 ones left out.
  auto orderOf = [&](const DimMap &place) {
    llvm::SmallVector<int> order;
    for (int d : place)
      if (d >= 0 && space.shape[d] != 1)
        order.push_back(d);
    return order;
  };
  // Two space dimensions merge where every input that has one has the other
  // right after it.
  auto adjacentEverywhere = [&](size_t before, size_t d) {
    for (const auto &input : inputPlaces) {
      llvm::SmallVector<int> order = orderOf(input.second);
      auto at = llvm::find(order, int(before));
      if (at != order.end() && (at + 1 == order.end() || *(at + 1) != int(d)))
        return false;
    }
    return true;
  };
  std::vector<int> group(rank, -1); // space dimension -> iteration dimension
  llvm::SmallVector<int64_t> sizes;
  llvm::SmallVector<bool> previous;
  size_t previousDim = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (space.shape[d] == 1)
      continue;
    llvm::SmallVector<bool> pattern{outputHas[d], innerReduced[d]};
    for (const auto &input : inputPlaces)
      pattern.push_back(has(input.second, d));
    bool merges = !sizes.empty() && pattern == previous &&
                  adjacentEverywhere(previousDim, d);
    previousDim = d;
    if (merges) {
      group[d] = int(sizes.size()) - 1;
      sizes.back() *= space.shape[d];
      continue;
    }
    group[d] = int(sizes.size());
    sizes.push_back(space.shape[d]);
    previous = std::move(pattern);
  }
  const bool batched = space.batched && rank > 0 && space.shape[0] != 1;
  KernelSpec spec;
  spec.numInputs = inputPlaces.size();
  spec.rank = std::max<unsigned>(1, sizes.size());
  if (sizes.empty())
    sizes.push_back(1); // one point: every operand has the one dimension
  if (spec.rank > runtime::kMaxKernelRank) {
    problem = std::to_string(spec.rank) +
              " iteration dimensions after merging (at most " +
              std::to_string(runtime::kMaxKernelRank) + ")";
    return {};
  }
  auto dimsOf = [&](auto &&present) {
    llvm::SmallVector<unsigned> dims;
    for (size_t d = 0; d < rank; ++d)
      if (group[d] >= 0 && present(d) &&
          !llvm::is_contained(dims, unsigned(group[d])))
        dims.push_back(unsigned(group[d]));
    if (rank == 0 || llvm::all_of(group, [](int g) { return g < 0; }))
      return llvm::SmallVector<unsigned>{0};
    return dims;
  };
  for (const auto &input : inputPlaces) {
    llvm::SmallVector<unsigned> dims;
    for (int d : orderOf(input.second))
      if (dims.empty() || dims.back() != unsigned(group[d]))
        dims.push_back(unsigned(group[d]));
    if (llvm::all_of(group, [](int g) { return g < 0; }))
      dims = {0};
    spec.inputDims.push_back(std::move(dims));
  }
  spec.outputDims = dimsOf([&](size_t d) { return outputHas[d]; });
  // A row kernel's rows come first: the dimensions its leading reductions
  // keep, then those they reduce.
  if (llvm::is_contained(innerReduced, true)) {
    unsigned rows = 0;
    bool columns = false;
    for (size_t d = 0; d < rank; ++d) {
      if (group[d] < 0)
        continue;
      if (innerReduced[d])
        columns = true;
      else if (columns) {
        problem = "its leading reductions keep a dimension after one they "
                  "reduce";
        return {};
      } else
        rows = unsigned(group[d]) + 1;
    }
    if (rows == 0 || !columns) {
      problem = "its leading reductions reduce no dimension of more than one "
                "element, or keep none";
      return {};
    }
    spec.rowDims = rows;
  }
  // A reduced dimension that no input has would have no size.
  for (unsigned dim = 0; dim < spec.rank; ++dim)
    if (!llvm::is_contained(spec.outputDims, dim) &&
        llvm::none_of(spec.inputDims, [&](llvm::ArrayRef<unsigned> dims) {
          return llvm::is_contained(dims, dim);
        })) {
      problem = "it reduces a dimension that only its steps stretch to";
      return {};
    }

  auto constantsOf = [](const Object &op) {
    std::vector<std::pair<std::string, double>> constants;
    // Every other number is a constant of the op (clip's min and max, a
    // mean's count).
    for (const auto &[key, value] : op)
      if (key != "op" && key != "operands" && key != "results")
        if (std::optional<double> number = value.getAsNumber())
          constants.emplace_back(key.str(), *number);
    llvm::sort(constants);
    return constants;
  };
  llvm::DenseMap<size_t, unsigned> valueOfStep; // op position -> value index
  for (size_t k = first; k <= last; ++k) {
    const Object &op = *ops[k].getAsObject();
    std::vector<int64_t> operands = idsOf(op, "operands");
    KernelStep step;
    step.op = op.getString("op")->str();
    step.constants = constantsOf(op);
    for (size_t j = 0; j < operands.size(); ++j)
      step.operands.push_back(operandInput[k][j] != ~0u
                                  ? operandInput[k][j]
                                  : valueOfStep.lookup(stepOf[operands[j]]));
    if (step.op == "cast") {
      step.op = ("cast_" + elementName(info(idsOf(op, "results")[0]).element))
                    .str();
    } else if (step.op == "sum_to") {
      step.op = "reduce_sum";
    } else if (step.op == "reduce_max_count") {
      // 1 where x is the maximum, summed.
      spec.steps.push_back({"max_tie", step.operands});
      step = KernelStep{"reduce_sum",
                        {spec.numInputs + unsigned(spec.steps.size()) - 1}};
    }
    valueOfStep[k] = spec.numInputs + unsigned(spec.steps.size());
    spec.steps.push_back(std::move(step));
  }

  for (const auto &input : inputPlaces)
    spec.inputTypes.push_back(info(input.first).element);
  if (llvm::all_of(spec.inputTypes,
                   [](KernelElement e) { return e == KernelElement::F32; }))
    spec.inputTypes.clear();
  spec.outputType = info(idsOf(lastOp, "results")[0]).element;
  Array operands;
  for (const auto &input : inputPlaces)
    operands.push_back(input.first);
  Array spaceSizes;
  for (int64_t size : sizes)
    spaceSizes.push_back(size);
  int64_t output = idsOf(lastOp, "results")[0];
  return Object{{"op", "kernel"},
                {"kernel", int64_t(table.intern(spec))},
                {"operands", std::move(operands)},
                {"results", Array{output}},
                {"space", std::move(spaceSizes)},
                {"batched", batched}};
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
