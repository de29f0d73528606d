//===- Differentiate.cpp - Give every stage its backward ------------------===//
//
// For each stage, writes a gpipe.stage_backward: a flattened copy of the
// stage's forward (ops marked `gpipe.recompute`, parameters through
// gpipe.param_ref), then reverse-mode gradient ops. Gradients of a value used
// several times are summed with gpipe.add; parameter gradients are
// accumulated with gpipe.accumulate_grad; the gradients of the inputs that
// came from the previous stage are yielded. Copies no gradient reads are
// erased (RecomputeCopies.h): a recompute rebuilds only what the backward
// reads.
//
//===----------------------------------------------------------------------===//

#include "ElementwiseGradients.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Dialect/GPipe/Transforms/RecomputeCopies.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#define DEBUG_TYPE "gpipe-differentiate"

namespace gpipe {
#define GEN_PASS_DEF_DIFFERENTIATEPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;

static bool isFloatTensor(Value value) {
  return isa<FloatType>(cast<RankedTensorType>(value.getType()).getElementType());
}

namespace {
/// Builds the gradient ops of one stage backward.
class GradientBuilder {
public:
  /// `modelInputs` are the values that get no gradient: the block arguments
  /// that stand for model inputs (data), and frozen parameters.
  GradientBuilder(OpBuilder &builder, llvm::DenseSet<Value> modelInputs)
      : builder(builder), modelInputs(std::move(modelInputs)) {}

  /// Adds `grad` to the gradient of `value` (if `value` can have one).
  void contribute(Value value, Value grad, Location loc) {
    if (!isFloatTensor(value) || modelInputs.contains(value))
      return;
    // The gradient of an operand that a broadcasting op stretched.
    if (grad.getType() != value.getType())
      grad = SumToOp::create(builder, loc, value.getType(), grad, CostAttr());
    if (auto ref = value.getDefiningOp<ParamRefOp>()) {
      AccumulateGradOp::create(builder, loc, ref.getName(), grad);
      return;
    }
    Value &slot = grads[value];
    slot = slot ? AddOp::create(builder, loc, slot.getType(), slot, grad,
                                       CostAttr())
                           .getResult() : grad;
  }

  Value gradOf(Value value) const { return grads.lookup(value); }

  /// Emits the gradient ops of `op` given the gradient of its result.
  LogicalResult differentiate(Operation *op, Value dy) {
    Location loc = op->getLoc();
    if (emitElementwiseGradient(
            op, dy, builder,
            [&](Value value, Value grad) { contribute(value, grad, loc); },
            [&](Value value) {
              return isFloatTensor(value) && !modelInputs.contains(value);
            }))
      return success();
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](DenseOp dense) {
          auto grad = DenseGradOp::create(
              builder, loc, dense.getInput().getType(),
              dense.getWeight().getType(), dy, dense.getInput(),
              dense.getWeight());
          contribute(dense.getInput(), grad.getDx(), loc);
          contribute(dense.getWeight(), grad.getDw(), loc);
          if (Value bias = dense.getBias())
            contribute(bias,
                       BiasGradOp::create(builder, loc, bias.getType(), dy),
                       loc);
          return success();
        })
        .Case([&](MatmulOp o) {
          // Y = op(A) op(B): dA = dY op(B)^T, or op(B) dY^T where A is
          // transposed; dB = op(A)^T dY, or dY^T op(A). Each is a matmul
          // over dY's batch, summed back to the operand's (contribute).
          bool ta = o.getTransposeLhs(), tb = o.getTransposeRhs();
          auto product = [&](Value of, Value lhs, Value rhs, bool tl,
                             bool tr) {
            if (!isFloatTensor(of) || modelInputs.contains(of))
              return;
            auto dyType = cast<RankedTensorType>(dy.getType());
            auto ofType = cast<RankedTensorType>(of.getType());
            SmallVector<int64_t> shape(dyType.getShape().drop_back(2));
            shape.append(ofType.getShape().take_back(2).begin(),
                         ofType.getShape().take_back(2).end());
            auto type = RankedTensorType::get(shape, ofType.getElementType());
            auto grad = MatmulOp::create(builder, loc, type, lhs, rhs, tl, tr,
                                         CostAttr());
            contribute(of, grad, loc);
          };
          Value a = o.getLhs(), b = o.getRhs();
          if (!ta)
            product(a, dy, b, false, !tb);
          else
            product(a, b, dy, tb, true);
          if (!tb)
            product(b, a, dy, !ta, false);
          else
            product(b, dy, a, true, ta);
          return success();
        })
        .Case([&](ReluOp o) {
          contribute(o.getInput(),
                     ReluGradOp::create(builder, loc, dy.getType(), dy, o.getInput()), loc);
          return success();
        })
        .Case([&](GeluOp o) {
          contribute(o.getInput(),
                     GeluGradOp::create(builder, loc, dy.getType(), dy, o.getInput()), loc);
          return success();
        })
        .Case([&](GeluErfOp o) {
          contribute(o.getInput(),
                     GeluErfGradOp::create(builder, loc, dy.getType(), dy,
                                           o.getInput()),
                     loc);
          return success();
        })
        .Case([&](TanhOp o) {
          contribute(o.getInput(),
                     TanhGradOp::create(builder, loc, dy.getType(), dy, o.getResult()), loc);
          return success();
        })
        .Case([&](SoftmaxOp o) {
          contribute(o.getInput(),
                     SoftmaxGradOp::create(builder, loc, dy.getType(), dy, o.getResult()),
                     loc);
          return success();
        })
        .Case([&](DropoutOp o) {
          // The mask is the forward's: a function of its seed and rows.
          contribute(o.getInput(),
                     DropoutGradOp::create(builder, loc, dy.getType(), dy, o.getResult()),
                     loc);
          return success();
        })
        .Case([&](AddOp o) {
          contribute(o.getLhs(), dy, loc);
          contribute(o.getRhs(), dy, loc);
          return success();
        })
        .Case([&](LayerNormOp o) {
          auto grad = LayerNormGradOp::create(
              builder, loc, o.getInput().getType(), o.getGamma().getType(),
              o.getBeta().getType(), dy, o.getResult(), o.getInput(),
              o.getGamma(), o.getEpsilonAttr());
          contribute(o.getInput(), grad.getDx(), loc);
          contribute(o.getGamma(), grad.getDgamma(), loc);
          contribute(o.getBeta(), grad.getDbeta(), loc);
          return success();
        })
        .Case([&](BatchNormOp o) {
          // The running statistics get no gradient: their buffers hold the
          // runtime's sums (BatchNormKernels.h).
          auto grad = BatchNormGradOp::create(
              builder, loc, o.getInput().getType(), o.getGamma().getType(),
              o.getBeta().getType(), dy, o.getResult(), o.getInput(),
              o.getGamma());
          contribute(o.getInput(), grad.getDx(), loc);
          contribute(o.getGamma(), grad.getDgamma(), loc);
          contribute(o.getBeta(), grad.getDbeta(), loc);
          return success();
        })
        .Case([&](EmbeddingOp o) {
          contribute(o.getTable(),
                     EmbeddingGradOp::create(builder, loc,
                                             o.getTable().getType(), dy,
                                             o.getIds()),
                     loc);
          return success();
        })
        .Case([&](Conv2dOp o) {
          auto grad = Conv2dGradOp::create(
              builder, loc, o.getInput().getType(), o.getWeight().getType(), dy,
              o.getInput(), o.getWeight(), o.getStrideAttr(),
              o.getPaddingAttr(), o.getGroupsAttr());
          contribute(o.getInput(), grad.getDx(), loc);
          contribute(o.getWeight(), grad.getDw(), loc);
          // Channels last: the bias's gradient is dy's column sums.
          if (Value bias = o.getBias())
            contribute(bias,
                       BiasGradOp::create(builder, loc, bias.getType(), dy),
                       loc);
          return success();
        })
        .Case([&](MaxPool2dOp o) {
          contribute(
              o.getInput(),
              MaxPool2dGradOp::create(builder, loc, o.getInput().getType(), dy,
                                      o.getInput(), o.getWindowAttr(),
                                      o.getStrideAttr(), o.getPaddingAttr()),
              loc);
          return success();
        })
        .Case([&](AvgPool2dOp o) {
          contribute(
              o.getInput(),
              AvgPool2dGradOp::create(builder, loc, o.getInput().getType(), dy,
                                      o.getWindowAttr(), o.getStrideAttr(),
                                      o.getPaddingAttr()),
              loc);
          return success();
        })
        .Case([&](GlobalAvgPoolOp o) {
          contribute(o.getInput(),
                     GlobalAvgPoolGradOp::create(builder, loc,
                                                 o.getInput().getType(), dy),
                     loc);
          return success();
        })
        .Case([&](FlattenOp o) {
          contribute(
              o.getInput(),
              FlattenGradOp::create(builder, loc, o.getInput().getType(), dy),
              loc);
          return success();
        })
        .Case([&](AttentionOp o) {
          // A biased attention's grad takes the biases (for their shapes)
          // and returns their gradients after the weights'.
          SmallVector<Type> biasGrads;
          if (o.getQkvBias())
            biasGrads = {o.getQkvBias().getType(), o.getOutBias().getType()};
          auto grad = AttentionGradOp::create(
              builder, loc, o.getInput().getType(), o.getQkvWeight().getType(),
              o.getOutWeight().getType(), biasGrads, dy, o.getResult(),
              o.getInput(), o.getQkvWeight(), o.getOutWeight(), o.getQkvBias(),
              o.getOutBias(), o.getHeads(), o.getCausal());
          contribute(o.getInput(), grad.getDx(), loc);
          contribute(o.getQkvWeight(), grad.getDqkvWeight(), loc);
          contribute(o.getOutWeight(), grad.getDoutWeight(), loc);
          if (o.getQkvBias()) {
            contribute(o.getQkvBias(), grad.getBiasGrads()[0], loc);
            contribute(o.getOutBias(), grad.getBiasGrads()[1], loc);
          }
          return success();
        })
        .Case([&](SoftmaxCrossEntropyOp o) {
          contribute(o.getLogits(),
                     SoftmaxCrossEntropyGradOp::create(
                         builder, loc, o.getLogits().getType(), o.getResult(),
                         o.getLabels()),
                     loc);
          return success();
        })
        .Case([&](MseLossOp o) -> LogicalResult {
          if (!modelInputs.contains(o.getTarget()))
            return o.emitOpError()
                   << "has a target that is not a model input; gradients "
                      "flow only into the prediction of mse_loss";
          contribute(o.getPrediction(),
                     MseLossGradOp::create(builder, loc, o.getPrediction().getType(),
                                           o.getPrediction(),
                                           o.getTarget()),
                     loc);
          return success();
        })
        .Default([](Operation *other) {
          return other->emitOpError() << "has no gradient";
        });
  }

private:
  OpBuilder &builder;
  llvm::DenseSet<Value> modelInputs;
  llvm::DenseMap<Value, Value> grads;
};
} // namespace

/// Copies the forward of `stage` into `block` (whose leading arguments stand
/// for the stage inputs), flattening its layers. Returns the copied op for
/// each forward compute op, in order, and maps the stage's yielded values.
static void cloneForward(StageOp stage, Block *block, OpBuilder &builder,
                         IRMapping &mapping,
                         SmallVectorImpl<Operation *> &recomputed) {
  for (auto [input, argument] :
       llvm::zip(stage.getBody().front().getArguments(),
                 block->getArguments()))
    mapping.map(input, argument);
  UnitAttr marker = builder.getUnitAttr();
  for (LayerOp layer : stage.getBody().front().getOps<LayerOp>()) {
    Block &layerBody = layer.getBody().front();
    for (Operation &op : layerBody.without_terminator()) {
      if (auto param = dyn_cast<ParamOp>(op)) {
        mapping.map(param.getResult(),
                    ParamRefOp::create(builder, param.getLoc(),
                                       param.getType(), param.getName()));
        continue;
      }
      Operation *copy = builder.clone(op, mapping);
      copy->removeAttr("cost"); // the forward op carries it
      copy->setAttr(kRecomputeAttr, marker);
      recomputed.push_back(copy);
    }
    for (auto [result, yielded] :
         llvm::zip(layer.getResults(), layerBody.getTerminator()->getOperands()))
      mapping.map(result, mapping.lookup(yielded));
  }
}

namespace {
struct DifferentiatePass
    : public gpipe::impl::DifferentiatePassBase<DifferentiatePass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(differentiateModel(model)))
        return signalPassFailure();
  }

  LogicalResult differentiateModel(ModelOp model) {
    Block &body = model.getBody().front();
    if (!body.getOps<StageBackwardOp>().empty())
      return model.emitOpError() << "is already differentiated";
    SmallVector<StageOp> stages = llvm::to_vector(body.getOps<StageOp>());
    if (stages.empty())
      return model.emitOpError()
             << "has no stages; run gpipe-form-stages first";
    Value loss = model.getReturnOp().getLoss();
    OpBuilder builder(model.getContext());
    builder.setInsertionPoint(model.getReturnOp());
    for (StageOp stage : stages)
      if (failed(differentiateStage(stage, loss, builder)))
        return failure();
    return success();
  }

  LogicalResult differentiateStage(StageOp stage, Value loss,
                                   OpBuilder &builder) {
    bool isLast = loss.getDefiningOp() == stage;
    SmallVector<Type> inputs(stage.getInputs().getTypes());
    if (!isLast)
      llvm::append_range(inputs, stage.getResultTypes());
    // Gradients go back for the inputs that came from the previous stage.
    SmallVector<unsigned> channelInputs;
    SmallVector<Type> results;
    for (auto [index, input] : llvm::enumerate(stage.getInputs()))
      if (!input.getDefiningOp<InputOp>()) {
        channelInputs.push_back(index);
        results.push_back(input.getType());
      }
    auto backward = StageBackwardOp::create(
        builder, stage.getLoc(), stage.getSymName(),
        builder.getFunctionType(inputs, results), StringAttr());
    OpBuilder inner(backward.getContext());
    Block *block = inner.createBlock(&backward.getBody());
    for (Type type : inputs)
      block->addArgument(type, stage.getLoc());

    IRMapping mapping;
    SmallVector<Operation *> recomputed;
    cloneForward(stage, block, inner, mapping, recomputed);

    // Seed: the incoming gradient of each output (the loss seeds itself).
    llvm::DenseSet<Value> modelInputs;
    for (auto [index, input] : llvm::enumerate(stage.getInputs()))
      if (input.getDefiningOp<InputOp>())
        modelInputs.insert(block->getArgument(index));
    // A frozen parameter, a constant of the model, gets none either.
    stage.walk([&](ParamOp param) {
      if (param.getFrozen())
        modelInputs.insert(mapping.lookup(param.getResult()));
    });
    GradientBuilder gradients(inner, std::move(modelInputs));
    auto stageYield = cast<YieldOp>(stage.getBody().front().getTerminator());
    Operation *lossOp = nullptr;
    if (isLast) {
      lossOp = mapping.lookup(stageYield.getValues()[0]).getDefiningOp();
      if (!isa_and_nonnull<SoftmaxCrossEntropyOp, MseLossOp>(lossOp))
        return stage.emitOpError()
               << "returns a loss that is not computed by "
                  "gpipe.softmax_cross_entropy or gpipe.mse_loss";
    } else {
      unsigned numInputs = stage.getInputs().size();
      for (auto [index, value] : llvm::enumerate(stageYield.getValues()))
        gradients.contribute(mapping.lookup(value),
                             block->getArgument(numInputs + index),
                             stage.getLoc());
    }

    for (Operation *op : llvm::reverse(recomputed)) {
      if (op == lossOp) {
        if (failed(gradients.differentiate(op, Value())))
          return failure();
        continue;
      }
      if (op->getNumResults() != 1)
        continue;
      Value dy = gradients.gradOf(op->getResult(0));
      if (!dy)
        continue; // nothing downstream needs this value's gradient
      if (failed(gradients.differentiate(op, dy)))
        return failure();
    }

    // A parameter read only through ops that pass no gradient (a
    // comparison, a cast to an integer) gets a zero one, as PyTorch's: the
    // runtime requires every trained parameter's gradient.
    // A batch norm's running statistics are not trained: the forward
    // updates them.
    llvm::StringSet<> accumulated;
    backward.walk(
        [&](AccumulateGradOp op) { accumulated.insert(op.getName()); });
    stage.walk([&](ParamOp param) {
      bool runningStatistic = llvm::any_of(
          param.getResult().getUsers(), [&](Operation *user) {
            auto norm = dyn_cast<BatchNormOp>(user);
            return norm && (norm.getRunningMean() == param.getResult() ||
                            norm.getRunningVar() == param.getResult());
          });
      if (param.getFrozen() || runningStatistic ||
          accumulated.contains(param.getName()))
        return;
      Value zero = ZerosOp::create(inner, param.getLoc(), param.getType());
      AccumulateGradOp::create(inner, param.getLoc(), param.getName(), zero);
    });

    SmallVector<Value> yielded;
    for (unsigned index : channelInputs) {
      Value grad = gradients.gradOf(block->getArgument(index));
      if (!grad)
        grad = ZerosOp::create(inner, stage.getLoc(),
                               block->getArgument(index).getType());
      yielded.push_back(grad);
    }
    YieldOp::create(inner, stage.getLoc(), yielded);
    eraseUnreadRecomputes(backward);
    return success();
  }
};
} // namespace
