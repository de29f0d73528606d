//===- FusedKernelOp.cpp - A run of element-wise ops as a kernel op -------===//
//
// The kernel op of a run of a stage's element-wise ops: each value placed
// in the iteration space by its op's broadcasting, the space's size-1
// dimensions dropped and the dimensions that every memref has or lacks
// alike merged (KernelRegions.h), a row kernel's rows first, and the ops
// as the kernel's steps.
//
//===----------------------------------------------------------------------===//

#include "KernelOpBuilders.h"

#include "gpipe/runtime/bundle/OpTable.h"

#include "llvm/ADT/DenseMap.h"

using namespace gpipe;
using namespace gpipe::region_detail;
using llvm::json::Array;
using llvm::json::Object;

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

Object gpipe::region_detail::buildKernelOp(const Array &ops, size_t first,
                                           size_t last, const ValueInfoFn &info,
                                           KernelTable &table,
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
