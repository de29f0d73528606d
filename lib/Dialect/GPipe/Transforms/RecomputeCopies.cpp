//===- RecomputeCopies.cpp - A backward's copies of its stage's forward ---===//

#include "gpipe/Dialect/GPipe/Transforms/RecomputeCopies.h"
#include "StageMemoryDescription.h"
#include "gpipe/Analysis/CostModel.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"

#include <algorithm>

using namespace mlir;
using namespace gpipe;

namespace {
constexpr llvm::StringLiteral kCostAttr = "cost";

/// `value`, or the value its layer yields for it: the forward's ops read the
/// results of earlier layers, the copies what the copied layer body yields.
Value throughLayers(Value value) {
  while (auto result = dyn_cast<OpResult>(value)) {
    auto layer = dyn_cast<LayerOp>(result.getOwner());
    if (!layer)
      break;
    value = layer.getBody().front().getTerminator()->getOperand(
        result.getResultNumber());
  }
  return value;
}

/// Whether `copy` and `original` carry the same attributes, but the copy's
/// mark and the original's cost.
bool sameAttributes(Operation *copy, Operation *original) {
  auto wanted = [](NamedAttribute attribute) {
    return attribute.getName() != kRecomputeAttr &&
           attribute.getName() != kCostAttr;
  };
  auto count = [&](Operation *op) {
    return llvm::count_if(op->getAttrs(), wanted);
  };
  return count(copy) == count(original) &&
         llvm::all_of(original->getAttrs(), [&](NamedAttribute attribute) {
           return !wanted(attribute) ||
                  copy->getAttr(attribute.getName()) == attribute.getValue();
         });
}
} // namespace

void gpipe::eraseUnreadRecomputes(StageBackwardOp backward) {
  Block &block = backward.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (op.hasAttr(kRecomputeAttr) && op.use_empty())
      op.erase();
}

FailureOr<llvm::DenseMap<Operation *, Operation *>>
gpipe::matchRecomputeCopies(StageOp stage, StageBackwardOp backward) {
  Block &body = stage.getBody().front();
  Block &backBody = backward.getBody().front();
  IRMapping copies; // a forward value -> its copy in the backward
  for (auto [argument, copy] :
       llvm::zip(body.getArguments(), backBody.getArguments()))
    copies.map(argument, copy);
  // Parameters and ops each keep their order in the copy; the ops may skip.
  SmallVector<Operation *> params, ops;
  for (LayerOp layer : body.getOps<LayerOp>())
    for (Operation &op : layer.getBody().front().without_terminator())
      (isa<ParamOp>(op) ? params : ops).push_back(&op);
  auto copiesOp = [&](Operation *copy, Operation *original) {
    return copy->getName() == original->getName() &&
           copy->getNumOperands() == original->getNumOperands() &&
           copy->getNumResults() == original->getNumResults() &&
           sameAttributes(copy, original) &&
           llvm::all_of(llvm::zip(copy->getOperands(), original->getOperands()),
                        [&](auto pair) {
                          auto [operand, forwardOperand] = pair;
                          return copies.lookupOrNull(
                                     throughLayers(forwardOperand)) == operand;
                        });
  };

  llvm::DenseMap<Operation *, Operation *> matched;
  auto nextParam = params.begin(), nextOp = ops.begin();
  for (Operation &op : backBody.without_terminator()) {
    Operation *original = nullptr;
    if (auto ref = dyn_cast<ParamRefOp>(op)) {
      nextParam = std::find_if(nextParam, params.end(), [&](Operation *param) {
        return cast<ParamOp>(param).getName() == ref.getName();
      });
      if (nextParam == params.end())
        return ref.emitOpError()
               << "names no parameter of the forward of @" << stage.getSymName()
               << " after the previous reference";
      original = *nextParam++;
    } else if (op.hasAttr(kRecomputeAttr)) {
      nextOp = std::find_if(nextOp, ops.end(), [&](Operation *forwardOp) {
        return copiesOp(&op, forwardOp);
      });
      if (nextOp == ops.end())
        return op.emitOpError()
               << "copies no op of the forward of @" << stage.getSymName()
               << " after the previous copy (recompute ops copy the "
                  "forward's ops, on the copies of their operands, in order)";
      original = *nextOp++;
    } else {
      continue;
    }
    matched[&op] = original;
    for (auto [result, copy] :
         llvm::zip(original->getResults(), op.getResults()))
      copies.map(result, copy);
  }
  return matched;
}

/// `op`'s cost, or its estimate where costs were not estimated yet (quietly:
/// null for an op the estimate does not know).
static CostAttr costOrEstimate(Operation *op) {
  if (CostAttr cost = getCost(op))
    return cost;
  ScopedDiagnosticHandler quiet(op->getContext(),
                                [](Diagnostic &) { return success(); });
  FailureOr<CostAttr> estimated = estimateOpCost(op);
  return succeeded(estimated) ? *estimated : CostAttr();
}

bool gpipe::keptUnderSelectiveRemat(Operation *forwardOp) {
  CostAttr cost = costOrEstimate(forwardOp);
  if (!cost)
    return false; // unknown: recomputed
  uint64_t written = uint64_t(savedStateOf(forwardOp).total() / 4);
  for (Type type : forwardOp->getResultTypes())
    if (auto shaped = dyn_cast<ShapedType>(type);
        shaped && shaped.hasStaticShape())
      written += uint64_t(shaped.getNumElements());
  return written > 0 && cost.getFlops() >= kProductFlopsPerElement * written;
}

llvm::DenseSet<Operation *>
gpipe::rerunRecomputes(StageBackwardOp backward,
                       const llvm::DenseMap<Operation *, Operation *> &copies) {
  Block &body = backward.getBody().front();
  llvm::DenseSet<Operation *> rerun;
  if (backward.getRemat().value_or("full") != "selective") {
    for (Operation &op : body)
      if (op.hasAttr(kRecomputeAttr))
        rerun.insert(&op);
    return rerun;
  }
  // From the gradients' reads back through the copies, stopping at kept
  // results; copies come before their readers, so one reverse walk does.
  llvm::DenseSet<Operation *> read;
  auto markOperands = [&](Operation &op) {
    for (Value operand : op.getOperands())
      if (Operation *producer = operand.getDefiningOp())
        read.insert(producer);
  };
  for (Operation &op : llvm::reverse(body)) {
    if (!op.hasAttr(kRecomputeAttr)) {
      markOperands(op);
      continue;
    }
    Operation *original = copies.lookup(&op);
    if (!read.contains(&op) || !original || keptUnderSelectiveRemat(original))
      continue;
    rerun.insert(&op);
    markOperands(op);
  }
  return rerun;
}

double gpipe::rerunFlopShare(StageOp stage, StageBackwardOp backward) {
  FailureOr<llvm::DenseMap<Operation *, Operation *>> copies =
      matchRecomputeCopies(stage, backward);
  if (failed(copies))
    return 1.0;
  uint64_t total = 0, rerun = 0;
  for (LayerOp layer : stage.getBody().front().getOps<LayerOp>())
    for (Operation &op : layer.getBody().front().without_terminator())
      if (!isa<ParamOp>(op))
        if (CostAttr cost = costOrEstimate(&op))
          total += cost.getFlops();
  for (Operation *copy : rerunRecomputes(backward, *copies))
    if (CostAttr cost = costOrEstimate(copies->lookup(copy)))
      rerun += cost.getFlops();
  return total > 0 ? std::min(1.0, double(rerun) / double(total)) : 1.0;
}
