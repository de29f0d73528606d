//===- SetBatch.cpp - Change a model's mini-batch size --------------------===//

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseSet.h"

#define DEBUG_TYPE "gpipe-set-batch"

namespace gpipe {
#define GEN_PASS_DEF_SETBATCHPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;

/// `value`'s type with leading dimension `batch`.
static void setLeadingDimension(Value value, int64_t batch) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = batch;
  value.setType(RankedTensorType::get(shape, type.getElementType()));
}

static LogicalResult setBatch(ModelOp model, int64_t batch) {
  const int64_t old = model.getBatch();
  llvm::DenseSet<Value> perExample;
  auto isLeadingBatch = [&](Value value) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    return type && type.getRank() > 0 && type.getDimSize(0) == old;
  };
  for (Operation &op : model.getBody().front()) {
    if (auto input = dyn_cast<InputOp>(op)) {
      setLeadingDimension(input.getResult(), batch);
      perExample.insert(input.getResult());
      continue;
    }
    auto layer = dyn_cast<LayerOp>(op);
    if (!layer) {
      if (isa<ReturnOp>(op))
        continue;
      return op.emitOpError()
             << "cannot be rebatched; gpipe-set-batch runs on a model of "
                "inputs and layers, before gpipe-form-stages";
    }
    Block &body = layer.getBody().front();
    for (Operation &inner : body.without_terminator()) {
      SmallVector<bool> operandBatched;
      for (Value operand : inner.getOperands())
        operandBatched.push_back(perExample.contains(operand));
      for (OpResult result : inner.getResults())
        if (isPerExampleResult(result, operandBatched) &&
            isLeadingBatch(result)) {
          setLeadingDimension(result, batch);
          perExample.insert(result);
        }
    }
    for (auto [result, yielded] :
         llvm::zip(layer.getResults(), body.getTerminator()->getOperands())) {
      result.setType(yielded.getType());
      if (perExample.contains(yielded))
        perExample.insert(result);
    }
  }
  model.setBatch(batch);
  return success();
}

namespace {
struct SetBatchPass : public gpipe::impl::SetBatchPassBase<SetBatchPass> {
  using SetBatchPassBase::SetBatchPassBase;
  void runOnOperation() override {
    if (replicas < 1) {
      getOperation().emitError()
          << "gpipe-set-batch expects replicas >= 1, got 0";
      return signalPassFailure();
    }
    if (batch < 1 && replicas == 1) {
      getOperation().emitError()
          << "gpipe-set-batch expects batch >= 1, got " << int64_t(batch);
      return signalPassFailure();
    }
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      int64_t whole = batch > 0 ? int64_t(batch) : model.getBatch();
      if (whole % int64_t(replicas) != 0) {
        model.emitOpError() << "cannot split its mini-batch of " << whole
                            << " rows over " << unsigned(replicas)
                            << " data-parallel replicas: expected a multiple "
                               "of "
                            << unsigned(replicas) << " rows";
        return signalPassFailure();
      }
      if (failed(setBatch(model, whole / int64_t(replicas))))
        return signalPassFailure();
    }
  }
};
} // namespace
