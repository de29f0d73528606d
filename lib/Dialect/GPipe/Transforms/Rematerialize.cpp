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
  case RematPolicy::Selective:
    return "selective";
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
      // A backward recomputes the copies gpipe-differentiate left, which
      // may be none: a stage whose gradients read only its inputs.
      for (StageBackwardOp backward : backwards)
        backward.setRematAttr(name);
    }
  }
};
} // namespace
