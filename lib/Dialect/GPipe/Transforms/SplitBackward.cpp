//===- SplitBackward.cpp - A stage backward as B, then W, in IR -----------===//

#include "gpipe/Dialect/GPipe/Transforms/SplitBackward.h"
#include "gpipe/Dialect/GPipe/Transforms/RecomputeCopies.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace gpipe;

void gpipe::splitStageBackward(StageBackwardOp backward) {
  if (isSplitBackward(backward))
    return;
  backward->setAttr(kSplitAttr, UnitAttr::get(backward.getContext()));
  Block &body = backward.getBody().front();
  // Walk back from the yielded input gradients: an op is in B when B needs
  // one of its results (a separable op's: its input gradient, result 0).
  // The recompute prefix and the parameter references stay in B.
  llvm::DenseSet<Value> needed(body.getTerminator()->operand_begin(),
                               body.getTerminator()->operand_end());
  llvm::DenseSet<Operation *> inB;
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    bool wanted = isa<ParamRefOp>(op) || op->hasAttr(kRecomputeAttr);
    for (OpResult result : op->getResults())
      wanted |=
          (!separatesWeightGradients(op) || result.getResultNumber() == 0) &&
          needed.contains(result);
    if (!wanted)
      continue;
    inB.insert(op);
    needed.insert(op->operand_begin(), op->operand_end());
  }
  // W ops move after B's, in their order; a separable op of B gets a clone
  // there that takes over the uses of its parameter gradients.
  Operation *terminator = body.getTerminator();
  OpBuilder builder(terminator);
  UnitAttr mark = builder.getUnitAttr();
  for (Operation *op : ops) {
    if (!inB.contains(op)) {
      op->moveBefore(terminator);
      op->setAttr(kWeightsAttr, mark);
      continue;
    }
    if (!separatesWeightGradients(op))
      continue;
    Operation *clone = builder.clone(*op);
    clone->setAttr(kWeightsAttr, mark);
    for (unsigned r = 1; r < op->getNumResults(); ++r)
      op->getResult(r).replaceAllUsesWith(clone->getResult(r));
  }
}
