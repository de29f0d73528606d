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
      unsigned __int128 paramBytes = 0;
      layer.walk(
          [&](ParamOp param) { paramBytes += tensorBytes(param.getType()); });
      if (paramBytes > uint64_t(INT64_MAX)) {
        layer.emitOpError() << "has 2^63 bytes of parameters or more; the "
                               "model is too large";
        return WalkResult::interrupt();
      }
      CostAttr total = CostAttr::get(context, 0, uint64_t(paramBytes), 0);
      for (Operation &op : layer.getBody().front().without_terminator()) {
        if (isa<ParamOp>(op))
          continue;
        CostAttr cost = getCost(&op);
        if (!cost) {
          FailureOr<CostAttr> estimate = estimateOpCost(&op);
          if (failed(estimate))
            return WalkResult::interrupt();
          cost = *estimate;
          op.setAttr("cost", cost);
        }
        total = CostAttr::get(context, total.getFlops() + cost.getFlops(),
                              total.getParamBytes(),
                              total.getActivationBytes() +
                                  cost.getActivationBytes());
        if (total.getFlops() > uint64_t(INT64_MAX) ||
            total.getActivationBytes() > uint64_t(INT64_MAX)) {
          layer.emitOpError()
              << "costs 2^63 FLOPs or bytes or more; the model is too large";
          return WalkResult::interrupt();
        }
      }
      if (!getCost(layer))
        layer.setCostAttr(total);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    // Stages sum their layers' costs: the sums over each model must fit too.
    getOperation().walk([&](ModelOp model) {
      unsigned __int128 sums[3] = {0, 0, 0};
      model.walk([&](LayerOp layer) {
        if (CostAttr cost = getCost(layer)) {
          sums[0] += cost.getFlops();
          sums[1] += cost.getParamBytes();
          sums[2] += cost.getActivationBytes();
        }
      });
      for (unsigned __int128 sum : sums)
        if (sum > uint64_t(INT64_MAX)) {
          model.emitOpError() << "has layers that cost 2^63 FLOPs or bytes "
                                 "or more in all; the model is too large";
          return signalPassFailure();
        }
    });
  }
};
} // namespace
