//===- PartialKernelOp.cpp - An op on part of a value as a kernel op ------===//
//
// A slice, its gradient, a concat, a gather or its gradient becomes a
// kernel op of its own, whose memrefs carry windows where they are not
// the space whole (KernelOpBuilders.h).
//
//===----------------------------------------------------------------------===//

#include "KernelOpBuilders.h"

#include "gpipe/runtime/bundle/OpTable.h"

using namespace gpipe;
using namespace gpipe::region_detail;
using llvm::json::Array;
using llvm::json::Object;

Object gpipe::region_detail::buildPartialKernelOp(const Object &op,
                                                  const ValueInfoFn &info,
                                                  KernelTable &table,
                                                  std::string &problem) {
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
