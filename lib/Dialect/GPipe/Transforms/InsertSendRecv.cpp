//===- InsertSendRecv.cpp - Channels between adjacent stages --------------===//

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#define DEBUG_TYPE "gpipe-insert-send-recv"

namespace gpipe {
#define GEN_PASS_DEF_INSERTSENDRECVPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;

/// The stages of `model` in order; fails unless every layer is in a stage and
/// no channel exists yet.
static FailureOr<SmallVector<StageOp>> collectStages(ModelOp model) {
  SmallVector<StageOp> stages;
  for (Operation &op : model.getBody().front()) {
    if (isa<LayerOp>(op))
      return op.emitOpError()
             << "is not in a stage; run gpipe-form-stages first";
    if (isa<SendOp, RecvOp>(op))
      return op.emitOpError() << "already connects stages; channels are "
                                 "inserted once";
    auto stage = dyn_cast<StageOp>(op);
    if (!stage)
      continue;
    stages.push_back(stage);
  }
  return stages;
}

namespace {
struct InsertSendRecvPass
    : public gpipe::impl::InsertSendRecvPassBase<InsertSendRecvPass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(insertChannels(model)))
        return signalPassFailure();
  }

  LogicalResult insertChannels(ModelOp model) {
    FailureOr<SmallVector<StageOp>> stages = collectStages(model);
    if (failed(stages))
      return failure();
    OpBuilder builder(model.getContext());
    for (StageOp consumer : llvm::drop_begin(*stages)) {
      int64_t to = consumer.getIndex();
      StageOp producer = (*stages)[to - 1];
      llvm::DenseMap<Value, Value> received;
      Operation *lastSend = producer;
      for (OpOperand &operand : consumer->getOpOperands()) {
        auto from = operand.get().getDefiningOp<StageOp>();
        if (!from)
          continue;
        if (from != producer)
          return consumer.emitOpError()
                 << "reads input #" << operand.getOperandNumber()
                 << " from stage " << from.getIndex()
                 << "; only adjacent stages communicate (gpipe-form-stages "
                    "passes such values through the stages between)";
        Value value = operand.get();
        Value &recv = received[value];
        if (!recv) {
          int64_t channel = cast<OpResult>(value).getResultNumber();
          builder.setInsertionPointAfter(lastSend);
          lastSend = SendOp::create(builder, producer.getLoc(), value,
                                    to - 1, to, channel);
          builder.setInsertionPoint(consumer);
          recv = RecvOp::create(builder, consumer.getLoc(), value.getType(),
                                to - 1, to, channel);
        }
        operand.set(recv);
      }
    }
    return success();
  }
};
} // namespace
