//===- Rematerialize.cpp - Choose what stage backwards recompute ----------===//

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "gpipe-rematerialize"

namespace gpipe {
#define GEN_PASS_DEF_REMATERIALIZEPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;

StringRef gpipe::stringifyRematPolicy(RematPolicy policy) {
  switch (policy) {
  case RematPolicy::None:
    return "none";
  case RematPolicy::Full:
    return "full";
  case RematPolicy::ExceptLast:
    return "except-last";
  }
  return "full";
}

namespace {
struct RematerializePass
    : public gpipe::impl::RematerializePassBase<RematerializePass> {
  using Base::Base;

  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      Block &body = model.getBody().front();
      auto backwards = body.getOps<StageBackwardOp>();
      if (backwards.empty()) {
        model.emitOpError()
            << "has no stage backwards; run gpipe-differentiate first";
        return signalPassFailure();
      }
      StringAttr name =
          StringAttr::get(&getContext(), stringifyRematPolicy(policy));
      for (StageBackwardOp backward : backwards) {
        // Recompute needs the forward copy gpipe-differentiate writes first.
        bool hasRecompute = llvm::any_of(
            backward.getBody().front(), [](Operation &op) {
              return op.hasAttr("gpipe.recompute");
            });
        StageOp stage = model.lookupStage(backward.getStage());
        bool stageComputes = llvm::any_of(
            stage.getBody().front().getOps<LayerOp>(), [](LayerOp layer) {
              return llvm::any_of(layer.getBody().front(), [](Operation &op) {
                return !isa<ParamOp, YieldOp>(op);
              });
            });
        if (policy != RematPolicy::None && stageComputes && !hasRecompute) {
          backward.emitOpError()
              << "has no recompute ops (marked 'gpipe.recompute') to run "
                 "under remat policy '"
              << name.getValue() << "'";
          return signalPassFailure();
        }
        backward.setRematAttr(name);
      }
    }
  }
};
} // namespace
