//===- ElementwiseFusion.cpp - Group element-wise ops into kernels --------===//
//
// Walks a stage body backwards: an element-wise op whose result has a single
// consumer (looking through a layer's yield) that is an element-wise op of the
// same body joins that consumer's group; any other op starts a group and is
// its output. Every group is thus an in-tree rooted at its output, and every
// element-wise op belongs to exactly one group.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Conversion/ElementwiseFusion.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "gpipe-elementwise-fusion"

using namespace mlir;
using namespace gpipe;

bool gpipe::isFusableElementwiseOp(Operation *op) {
  return isa<ReluOp, GeluOp, GeluErfOp, TanhOp, AddOp, ReluGradOp, GeluGradOp,
             GeluErfGradOp, TanhGradOp>(op);
}

/// The only op that reads `value`, looking through the yield of a layer to
/// the users of the layer's result, or null if there is not exactly one.
static Operation *getSoleConsumer(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  OpOperand &use = *value.use_begin();
  Operation *user = use.getOwner();
  if (auto yield = dyn_cast<YieldOp>(user)) {
    auto layer = dyn_cast<LayerOp>(yield->getParentOp());
    if (!layer)
      return nullptr;
    Value result = layer->getResult(use.getOperandNumber());
    if (!result.hasOneUse())
      return nullptr;
    user = result.use_begin()->getOwner();
  }
  return user;
}

/// The op computing `value`, looking through a layer's result to the value
/// its body yields.
static Operation *getProducer(Value value) {
  Operation *def = value.getDefiningOp();
  if (auto layer = dyn_cast_or_null<LayerOp>(def)) {
    auto yield = cast<YieldOp>(layer.getBody().front().getTerminator());
    return yield->getOperand(cast<OpResult>(value).getResultNumber())
        .getDefiningOp();
  }
  return def;
}

/// Checks that `op` can be compiled to scalar f32 code over `numElements`.
static LogicalResult checkOperands(Operation *op, RankedTensorType outType) {
  if (!outType.getElementType().isF32())
    return op->emitOpError()
           << "fused kernels support f32 only, got element type "
           << outType.getElementType();
  for (Value operand : op->getOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!type || type.getShape() != outType.getShape())
      return op->emitOpError()
             << "fused kernels need operands of the result's shape " << outType
             << ", got " << operand.getType();
  }
  return success();
}

FailureOr<SmallVector<FusedKernel>>
gpipe::fuseElementwiseOps(ArrayRef<Operation *> ops) {
  llvm::DenseMap<Operation *, unsigned> position;
  for (auto [i, op] : llvm::enumerate(ops))
    if (isFusableElementwiseOp(op))
      position[op] = i;

  // Group of each element-wise op, named by the position of its output op.
  llvm::DenseMap<Operation *, unsigned> groupOf;
  for (Operation *op : llvm::reverse(ops)) {
    if (!position.count(op))
      continue;
    Operation *consumer = getSoleConsumer(op->getResult(0));
    if (consumer && position.count(consumer))
      groupOf[op] = groupOf.lookup(consumer);
    else
      groupOf[op] = position.lookup(op);
  }

  // Kernels in the order of their outputs, ops in body order.
  llvm::MapVector<unsigned, SmallVector<Operation *>> groups;
  for (Operation *op : ops)
    if (position.count(op))
      groups[groupOf.lookup(op)].push_back(op);
  SmallVector<std::pair<unsigned, SmallVector<Operation *>>> ordered(
      groups.begin(), groups.end());
  llvm::sort(ordered,
             [](const auto &a, const auto &b) { return a.first < b.first; });

  SmallVector<FusedKernel> kernels;
  for (auto &[root, groupOps] : ordered) {
    FusedKernel kernel;
    kernel.index = kernels.size();
    kernel.ops = groupOps;
    kernel.output = groupOps.back()->getResult(0);
    auto outType = cast<RankedTensorType>(kernel.output.getType());
    kernel.numElements = outType.getNumElements();
    llvm::SetVector<Value> inputs;
    for (Operation *op : groupOps) {
      if (failed(checkOperands(op, outType)))
        return failure();
      for (Value operand : op->getOperands()) {
        Operation *producer = getProducer(operand);
        bool internal = producer && position.count(producer) &&
                        groupOf.lookup(producer) == root;
        if (!internal)
          inputs.insert(operand);
      }
    }
    kernel.inputs = inputs.takeVector();
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

FailureOr<SmallVector<FusedKernel>>
gpipe::analyzeElementwiseFusion(ModelOp model) {
  SmallVector<FusedKernel> all;
  unsigned numStages = 0;
  auto append = [&](StringRef stage, bool backward,
                    ArrayRef<Operation *> ops) -> LogicalResult {
    FailureOr<SmallVector<FusedKernel>> kernels = fuseElementwiseOps(ops);
    if (failed(kernels))
      return failure();
    for (FusedKernel &kernel : *kernels) {
      kernel.stage = stage.str();
      kernel.backward = backward;
      all.push_back(std::move(kernel));
    }
    return success();
  };

  SmallVector<StageBackwardOp> backwards;
  for (Operation &op : model.getBody().front()) {
    if (auto stage = dyn_cast<StageOp>(op)) {
      ++numStages;
      SmallVector<Operation *> ops;
      for (Operation &inner : stage.getBody().front()) {
        if (auto layer = dyn_cast<LayerOp>(inner))
          for (Operation &layerOp : layer.getBody().front())
            ops.push_back(&layerOp);
        ops.push_back(&inner);
      }
      if (failed(append(stage.getSymName(), /*backward=*/false, ops)))
        return failure();
    } else if (auto backward = dyn_cast<StageBackwardOp>(op)) {
      backwards.push_back(backward);
    }
  }
  if (numStages == 0)
    return model.emitOpError()
           << "has no gpipe.stage to generate kernels for; compile the model "
              "with gpipe-compile first";
  for (StageBackwardOp backward : backwards) {
    SmallVector<Operation *> ops;
    for (Operation &op : backward.getBody().front())
      ops.push_back(&op);
    if (failed(append(backward.getStage(), /*backward=*/true, ops)))
      return failure();
  }
  return all;
}
