//===- SplitLayers.cpp - Finer layers for the partitioner -----------------===//
//
// The partitioner moves whole layers, so a layer that holds two heavy ops (a
// Transformer's feed-forward block: two products; a residual block: two
// convolutions) can only go whole to one cell. Under remat the devices'
// work differs (the first devices recompute, the last does not), and the
// balance it wants may fall inside such a layer. This pass cuts a layer
// before each heavy op after its first, where one value crosses the cut and
// each parameter is read on one side only; the pieces are layers of their
// own, named `<layer>:1`, `<layer>:2`, ... The ops, their order and so the
// computation do not change.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/CostModel.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "gpipe-split-layers"

namespace gpipe {
#define GEN_PASS_DEF_SPLITLAYERSPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;

namespace {

/// A heavy op starts a piece (when one came before it): a product
/// (kProductFlopsPerElement, CostModel.h) of at least a quarter of its
/// layer's FLOPs (smaller pieces would not move the balance much).
constexpr uint64_t kHeavyShareDivisor = 4;

uint64_t resultElements(Operation *op) {
  uint64_t elements = 0;
  for (Type type : op->getResultTypes())
    if (auto shaped = dyn_cast<ShapedType>(type);
        shaped && shaped.hasStaticShape())
      elements += shaped.getNumElements();
  return elements;
}

/// The cost of `ops` (with estimated costs) and of the parameters in `params`,
/// as gpipe-estimate-cost sums a layer.
CostAttr sumCosts(MLIRContext *context, ArrayRef<Operation *> ops,
                  ArrayRef<ParamOp> params) {
  uint64_t flops = 0, paramBytes = 0, activationBytes = 0;
  for (ParamOp param : params)
    paramBytes += tensorBytes(param.getType());
  for (Operation *op : ops) {
    CostAttr cost = getCost(op);
    flops += cost.getFlops();
    activationBytes += cost.getActivationBytes();
  }
  return CostAttr::get(context, flops, paramBytes, activationBytes);
}

/// Whether the ops before `cut` define exactly one value read at or after it
/// (by an op or the yield), and no parameter is read on both sides.
bool isClean(ArrayRef<Operation *> ops, size_t cut, Operation *yield) {
  llvm::SetVector<Value> crossing;
  auto readAfter = [&](Operation *user) {
    if (user == yield)
      return true;
    for (size_t k = cut; k < ops.size(); ++k)
      if (ops[k] == user || ops[k]->isAncestor(user))
        return true;
    return false;
  };
  for (size_t k = 0; k < cut; ++k)
    for (Value result : ops[k]->getResults())
      for (Operation *user : result.getUsers())
        if (readAfter(user))
          crossing.insert(result);
  if (crossing.size() != 1)
    return false;
  auto paramsRead = [&](size_t begin, size_t end) {
    llvm::SmallPtrSet<Operation *, 8> params;
    for (size_t k = begin; k < end; ++k)
      for (Value operand : ops[k]->getOperands())
        if (auto param = operand.getDefiningOp<ParamOp>())
          params.insert(param);
    return params;
  };
  llvm::SmallPtrSet<Operation *, 8> before = paramsRead(0, cut);
  for (Operation *param : paramsRead(cut, ops.size()))
    if (before.contains(param))
      return false;
  return true;
}

struct SplitLayersPass
    : public gpipe::impl::SplitLayersPassBase<SplitLayersPass> {
  void runOnOperation() override {
    getOperation().walk([&](ModelOp model) {
      SmallVector<LayerOp> layers(model.getBody().front().getOps<LayerOp>());
      if (layers.empty())
        return;
      // A layer below the mean moves the balance less than the layers
      // around it: splitting it would only lengthen the reports.
      unsigned __int128 total = 0;
      for (LayerOp layer : layers)
        if (CostAttr cost = getCost(layer))
          total += cost.getFlops();
      const uint64_t mean = uint64_t(total / layers.size());
      for (LayerOp layer : layers)
        if (CostAttr cost = getCost(layer); cost && cost.getFlops() >= mean)
          split(layer);
    });
  }

  void split(LayerOp layer) {
    Block &body = layer.getBody().front();
    Operation *yield = body.getTerminator();
    SmallVector<ParamOp> params;
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator()) {
      if (auto param = dyn_cast<ParamOp>(op)) {
        if (llvm::is_contained(param->getUsers(), yield))
          return; // a layer that yields a parameter stays whole
        params.push_back(param);
      } else if (!getCost(&op))
        return; // gpipe-estimate-cost first
      else
        ops.push_back(&op);
    }
    // A cost written on the layer by hand cannot be shared out.
    CostAttr whole = getCost(layer);
    if (!whole || whole != sumCosts(&getContext(), ops, params))
      return;
    const uint64_t flops = whole.getFlops();
    auto heavy = [&](Operation *op) {
      const uint64_t own = getCost(op).getFlops();
      return own > 0 && own * kHeavyShareDivisor >= flops &&
             own >= kProductFlopsPerElement * resultElements(op);
    };
    SmallVector<size_t> cuts; // pieces start at 0 and at each cut
    bool heavyBefore = false;
    for (size_t k = 0; k < ops.size(); ++k) {
      if (!heavy(ops[k]))
        continue;
      if (heavyBefore && isClean(ops, k, yield)) {
        cuts.push_back(k);
        heavyBefore = false;
      }
      heavyBefore = true;
    }
    if (cuts.empty())
      return;
    cuts.push_back(ops.size());

    OpBuilder builder(layer);
    size_t begin = 0;
    for (size_t piece = 0; piece < cuts.size(); ++piece) {
      const size_t end = cuts[piece];
      const bool last = piece + 1 == cuts.size();
      ArrayRef<Operation *> pieceOps = ArrayRef(ops).slice(begin, end - begin);
      SmallVector<ParamOp> pieceParams;
      // A parameter goes with the piece that reads it; one nothing reads,
      // with the first.
      for (ParamOp param : params)
        if (llvm::any_of(param->getUsers(),
                         [&](Operation *user) {
                           return llvm::is_contained(pieceOps, user);
                         }) ||
            (piece == 0 && param->use_empty()))
          pieceParams.push_back(param);
      // The value the next pieces read, or the layer's results.
      SmallVector<Value> yielded;
      if (last) {
        yielded.assign(yield->operand_begin(), yield->operand_end());
      } else {
        for (Operation *op : pieceOps)
          for (Value result : op->getResults())
            if (llvm::any_of(result.getUsers(), [&](Operation *user) {
                  return !llvm::is_contained(pieceOps, user);
                }))
              yielded.push_back(result);
      }
      auto pieceLayer = LayerOp::create(
          builder, layer.getLoc(), ValueRange(yielded).getTypes(),
          builder.getStringAttr(layer.getName() + ":" +
                                std::to_string(piece + 1)),
          layer.getCellAttr(), sumCosts(&getContext(), pieceOps, pieceParams));
      Block *pieceBody = builder.createBlock(&pieceLayer.getBody());
      for (ParamOp param : pieceParams)
        param->moveBefore(pieceBody, pieceBody->end());
      for (Operation *op : pieceOps)
        op->moveBefore(pieceBody, pieceBody->end());
      builder.setInsertionPointToEnd(pieceBody);
      YieldOp::create(builder, layer.getLoc(), yielded);
      if (last) {
        layer->replaceAllUsesWith(pieceLayer);
      } else {
        yielded.front().replaceUsesWithIf(
            pieceLayer.getResult(0), [&](OpOperand &use) {
              return !pieceLayer->isAncestor(use.getOwner());
            });
      }
      builder.setInsertionPoint(layer);
      begin = end;
    }
    layer.erase();
  }
};
} // namespace
