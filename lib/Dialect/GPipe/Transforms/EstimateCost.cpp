//===- EstimateCost.cpp - Fill in op and layer costs ----------------------===//

#include "gpipe/Analysis/CostModel.h"
#include "gpipe/Analysis/LayerSequence.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#define DEBUG_TYPE "gpipe-estimate-cost"

namespace gpipe {
#define GEN_PASS_DEF_ESTIMATECOSTPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;

namespace {
struct EstimateCostPass
    : public gpipe::impl::EstimateCostPassBase<EstimateCostPass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    WalkResult result = getOperation().walk([&](LayerOp layer) {
      // The layer's own parameters count once, however many ops read them.
      CostAttr total = CostAttr::get(context, 0, layerParamBytes(layer), 0);
      for (Operation &op : layer.getBody().front().without_terminator()) {
        if (isa<ParamOp>(op))
          continue;
        CostAttr cost = getCost(&op);
        if (!cost) {
          FailureOr<CostAttr> estimate = estimateOpCost(&op);
          if (failed(estimate)) {
            op.emitOpError() << "has no cost model; write its cost by hand";
            return WalkResult::interrupt();
          }
          cost = *estimate;
          op.setAttr("cost", cost);
        }
        total = CostAttr::get(context, total.getFlops() + cost.getFlops(),
                              total.getParamBytes(),
                              total.getActivationBytes() +
                                  cost.getActivationBytes());
      }
      if (!getCost(layer))
        layer.setCostAttr(total);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
