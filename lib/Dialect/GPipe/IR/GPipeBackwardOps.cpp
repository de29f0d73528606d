//===- GPipeBackwardOps.cpp - Verifiers of stage backwards and gradients --===//

#include "OpVerification.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;
using namespace gpipe;

static RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Checks that `actual` (a gradient) has the type of `of` (what it is the
/// gradient of).
static LogicalResult expectSameType(Operation *op, StringRef what, Value actual,
                                    Value of) {
  if (actual.getType() != of.getType())
    return op->emitOpError() << "expects " << what << " of type "
                             << of.getType() << ", got " << actual.getType();
  return success();
}

LogicalResult StageBackwardOp::verify() {
  auto model = (*this)->getParentOfType<ModelOp>();
  StageOp stage = model.lookupStage(getStage());
  if (!stage)
    return emitOpError() << "refers to " << getStageAttr()
                         << ", which is not a stage of model @"
                         << model.getSymName();
  // Inputs: the stage's inputs, then (but for the last stage, whose output is
  // the loss) the gradients of its outputs.
  SmallVector<Type> expected(stage.getInputs().getTypes());
  bool isLast = model.getReturnOp().getLoss().getDefiningOp() == stage;
  if (!isLast)
    llvm::append_range(expected, stage.getResultTypes());
  FunctionType type = getFunctionType();
  if (TypeRange(type.getInputs()) != TypeRange(expected))
    return emitOpError() << "expects inputs matching the inputs of "
                         << getStageAttr()
                         << (isLast ? "" : " then its output gradients")
                         << ", got " << type;
  Block &body = getBody().front();
  if (body.getArgumentTypes() != type.getInputs())
    return emitOpError() << "expects block arguments of the types " << type
                         << " declares";
  return success();
}

LogicalResult DenseGradOp::verify() {
  RankedTensorType weight = tensorType(getWeight());
  RankedTensorType dy = tensorType(getDy());
  if (weight.getRank() != 2 || dy.getRank() < 1 ||
      dy.getShape().back() != weight.getDimSize(1))
    return emitOpError() << "expects dy with the weight's "
                         << (weight.getRank() == 2 ? weight.getDimSize(1) : 0)
                         << " columns as last dimension, got " << dy;
  if (failed(expectSameType(*this, "dx", getDx(), getInput())))
    return failure();
  return expectSameType(*this, "dw", getDw(), getWeight());
}

LogicalResult BiasGradOp::verify() {
  RankedTensorType dy = tensorType(getDy());
  RankedTensorType db = tensorType(getDb());
  if (dy.getRank() < 1 || db.getRank() != 1 ||
      db.getDimSize(0) != dy.getShape().back() ||
      db.getElementType() != dy.getElementType())
    return emitOpError() << "expects db of shape ["
                         << (dy.getRank() ? dy.getShape().back() : 0)
                         << "] (the last dimension of dy), got " << db;
  return success();
}

/// A normalisation's gradients: dy, the forward result and dx have the
/// input's type; dgamma and dbeta gamma's.
template <class NormGradOp> static LogicalResult verifyNormGrad(NormGradOp op) {
  if (failed(expectSameType(op, "dy", op.getDy(), op.getInput())) ||
      failed(expectSameType(op, "forward", op.getForward(), op.getInput())) ||
      failed(expectSameType(op, "dx", op.getDx(), op.getInput())) ||
      failed(expectSameType(op, "dgamma", op.getDgamma(), op.getGamma())))
    return failure();
  return expectSameType(op, "dbeta", op.getDbeta(), op.getGamma());
}

LogicalResult LayerNormGradOp::verify() { return verifyNormGrad(*this); }

LogicalResult BatchNormGradOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if (input.getRank() != 2 && input.getRank() != 4)
    return emitOpError() << "expects an input of rank 2 [batch, features] or "
                            "4 [batch, height, width, channels], got "
                         << input;
  RankedTensorType gamma = tensorType(getGamma());
  if (gamma.getRank() != 1 || gamma.getDimSize(0) != input.getShape().back())
    return emitOpError() << "expects gamma of shape ["
                         << input.getShape().back()
                         << "] (the input's channels), got " << gamma;
  return verifyNormGrad(*this);
}

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType ids = tensorType(getIds());
  RankedTensorType dy = tensorType(getDy());
  RankedTensorType table = tensorType(getDtable());
  if (table.getRank() != 2 || dy.getRank() != ids.getRank() + 1 ||
      dy.getShape().drop_back() != ids.getShape() ||
      dy.getShape().back() != table.getDimSize(1))
    return emitOpError() << "expects dy of the ids' shape plus the table "
                            "width, got "
                         << dy << " for ids " << ids << " and table " << table;
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(expectSameType(*this, "dy", getDy(), getInput())) ||
      failed(expectSameType(*this, "forward", getForward(), getInput())) ||
      failed(expectSameType(*this, "dx", getDx(), getInput())) ||
      failed(expectSameType(*this, "dqkv_weight", getDqkvWeight(),
                            getQkvWeight())) ||
      failed(expectSameType(*this, "dout_weight", getDoutWeight(),
                            getOutWeight())))
    return failure();
  RankedTensorType input = tensorType(getInput());
  if (input.getRank() != 3 || !input.hasStaticShape())
    return emitOpError() << "expects a static input of rank 3 [batch, "
                            "sequence, width], got "
                         << input;
  if (failed(detail::verifyAttentionBiases(*this, getQkvBias(), getOutBias(),
                                           input.getDimSize(2),
                                           input.getElementType())))
    return failure();
  // (dqkv_bias, dout_bias) with the biases, nothing without.
  size_t biases = getQkvBias() ? 2 : 0;
  if (getBiasGrads().size() != biases)
    return emitOpError() << "expects " << biases
                         << " bias gradients (one per bias operand), got "
                         << getBiasGrads().size();
  if (!biases)
    return success();
  if (failed(
          expectSameType(*this, "dqkv_bias", getBiasGrads()[0], getQkvBias())))
    return failure();
  return expectSameType(*this, "dout_bias", getBiasGrads()[1], getOutBias());
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  RankedTensorType logits = tensorType(getDlogits());
  RankedTensorType labels = tensorType(getLabels());
  if (logits.getRank() < 1 ||
      labels.getShape() != logits.getShape().drop_back())
    return emitOpError() << "expects labels of the logits' shape without the "
                            "class dimension, got "
                         << labels << " for logits " << logits;
  return success();
}

// A forward result is batched iff an operand is; a gradient is batched iff
// the value it is the gradient of is.
bool gpipe::isPerExampleResult(OpResult result, ArrayRef<bool> operandBatched) {
  Operation *op = result.getOwner();
  unsigned index = result.getResultNumber();
  // The operand whose gradient `result` is.
  std::optional<unsigned> primal =
      llvm::TypeSwitch<Operation *, std::optional<unsigned>>(op)
          // (dy, x, w) -> (dx, dw)
          .Case<DenseGradOp, Conv2dGradOp>(
              [&](auto) { return index == 0 ? 1u : 2u; })
          // (dy, y, x, gamma) -> (dx, dgamma, dbeta): dbeta is shaped as gamma
          .Case<LayerNormGradOp, BatchNormGradOp>(
              [&](auto) { return index == 0 ? 2u : 3u; })
          // (dy, y, x, wqkv, wo[, bqkv, bo]) -> (dx, dwqkv, dwo[, dbqkv,
          // dbo])
          .Case<AttentionGradOp>([&](auto) { return 2u + index; })
          // (dy, x or y) -> dx
          .Case<ReluGradOp, GeluGradOp, GeluErfGradOp, TanhGradOp,
                SoftmaxGradOp, DropoutGradOp, MaxPool2dGradOp>(
              [](auto) { return 1u; })
          // (dy) -> dx, shaped as the forward's input
          .Case<AvgPool2dGradOp, GlobalAvgPoolGradOp, FlattenGradOp>(
              [](auto) { return 0u; })
          // (loss, labels) -> dlogits, per label position
          .Case<SoftmaxCrossEntropyGradOp>([](auto) { return 1u; })
          // (prediction, target) -> dprediction
          .Case<MseLossGradOp>([](auto) { return 0u; })
          .Default([](Operation *) { return std::nullopt; });
  if (primal)
    return *primal < operandBatched.size() && operandBatched[*primal];
  // Stretched over the batch: per example whatever its input.
  if (auto stretch = dyn_cast<BroadcastToOp>(op); stretch && stretch.getBatch())
    return true;
  // A reduction over the batch, or a sum down to a shape without it (a
  // parameter's gradient), is not per example.
  auto reducesBatch = [&](ArrayRef<int64_t> axes) {
    return llvm::is_contained(axes, int64_t(0));
  };
  if (auto sum = dyn_cast<SumToOp>(op)) {
    auto from = cast<RankedTensorType>(sum.getInput().getType());
    auto to = cast<RankedTensorType>(sum.getResult().getType());
    return operandBatched[0] && to.getRank() == from.getRank() &&
           to.getDimSize(0) == from.getDimSize(0);
  }
  if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(op))
    return operandBatched[0] &&
           !reducesBatch(op->getAttrOfType<DenseI64ArrayAttr>("axes")
                             .asArrayRef());
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    // Per example where a per-example operand's batch lands in the result's
    // dimension 0 (a batch dimension, or the lhs's rows), not where it is
    // contracted (a weight's gradient).
    auto rank = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getRank();
    };
    return (operandBatched[0] &&
            (rank(matmul.getLhs()) > 2 || !matmul.getTransposeLhs())) ||
           (operandBatched[1] && rank(matmul.getRhs()) > 2);
  }
  if (isa<ReduceMaxCountOp>(op))
    return operandBatched[1];
  if (isa<ReduceMaxGradOp>(op))
    return operandBatched[1];
  // A bias or an embedding table is never per example; a zero gradient is
  // that of a stage input, which always is.
  if (isa<BiasGradOp, EmbeddingGradOp>(op))
    return false;
  // A stage input's zero gradient is per example; a parameter's (of a
  // parameter that no gradient reaches) is not.
  if (isa<ZerosOp>(op))
    return llvm::none_of(result.getUsers(), [](Operation *user) {
      return isa<AccumulateGradOp>(user);
    });
  return llvm::is_contained(operandBatched, true);
}
