//===- BundleOps.cpp - A stage's values and ops in a bundle ---------------===//
//
// Each value of a stage gets an id and a spec (shape, type, whether per
// example); each compute or gradient op becomes a bundle op: the op
// table's row (or a general op's mnemonic, for the kernel fusion), its
// operand and result ids, and the attributes the runtime reads.
//
//===----------------------------------------------------------------------===//

#include "BundleOps.h"

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/RecomputeCopies.h"
#include "gpipe/Dialect/GPipe/Transforms/SplitBackward.h"
#include "gpipe/Target/BatchPlacement.h"
#include "gpipe/runtime/bundle/OpTable.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;
using namespace gpipe;
using namespace gpipe::bundle_detail;
namespace json = llvm::json;

int ValueTable::define(Value value, bool batched) {
  int id = specs.size();
  ids[value] = id;
  auto type = cast<RankedTensorType>(value.getType());
  json::Array shape;
  for (int64_t dim : type.getShape())
    shape.push_back(dim);
  batched = batched && type.getRank() > 0 && type.getDimSize(0) == batch;
  batchedIds.push_back(batched);
  shapes.emplace_back(type.getShape().begin(), type.getShape().end());
  Type element = type.getElementType();
  elements.push_back(element.isInteger(1)    ? KernelElement::I1
                     : element.isInteger()   ? KernelElement::I32
                                             : KernelElement::F32);
  specs.push_back(json::Object{
      {"shape", std::move(shape)},
      {"type", type.getElementType().isInteger() ? "i32" : "f32"},
      {"batched", batched}});
  return id;
}

/// The bundle op of a compute or gradient op: the op table's row named by its
/// mnemonic (a gpipe.add of a backward, not a recompute copy, sums two
/// gradients: add_grads), or nothing. `param` and `accumulate_grad` carry a
/// name and are written by the stage emission itself.
static std::optional<runtime::OpKind> bundleOpKind(Operation *op) {
  if (op->getName().getDialectNamespace() != "gpipe" ||
      isa<ParamOp, AccumulateGradOp>(op))
    return std::nullopt;
  if (isa<AddOp>(op) && op->getParentOfType<StageBackwardOp>() &&
      !op->hasAttr(kRecomputeAttr))
    return runtime::OpKind::AddGrads;
  std::optional<runtime::OpKind> kind =
      runtime::opKindNamed(op->getName().stripDialect().str());
  if (kind &&
      runtime::resultCountOf(runtime::opInfo(*kind), op->getNumOperands()) !=
          op->getNumResults())
    return std::nullopt;
  return kind;
}

/// Op-specific attributes.
static void addAttributes(Operation *op, json::Object &out) {
  if (std::optional<runtime::WindowAttrs> window = getWindowAttrs(op)) {
    auto pair = [](const int64_t(&values)[2]) {
      return json::Array{values[0], values[1]};
    };
    if (isa<Conv2dOp, Conv2dGradOp>(op)) {
      out["groups"] = window->groups;
    } else {
      out["window"] = pair(window->window);
    }
    out["stride"] = pair(window->stride);
    out["padding"] = pair(window->padding);
  }
  llvm::TypeSwitch<Operation *>(op)
      .Case<LayerNormOp, LayerNormGradOp>([&](auto norm) {
        out["epsilon"] = norm.getEpsilon().convertToDouble();
      })
      .Case([&](BatchNormOp norm) {
        out["epsilon"] = norm.getEpsilon().convertToDouble();
        out["momentum"] = norm.getMomentum().convertToDouble();
      })
      .Case<AttentionOp, AttentionGradOp>([&](auto attention) {
        out["heads"] = int64_t(attention.getHeads());
        out["causal"] = attention.getCausal();
      })
      .Case([&](MatmulOp matmul) {
        // The runtime's names; written only when set.
        if (matmul.getTransposeLhs())
          out["transpose_a"] = true;
        if (matmul.getTransposeRhs())
          out["transpose_b"] = true;
      })
      .Case([&](DropoutOp dropout) {
        out["rate"] = dropout.getRate().convertToDouble();
        out["seed"] = uint64_t(dropout.getSeed());
      })
      .Case([&](DropoutGradOp grad) {
        // The mask is the forward dropout's.
        auto forward = grad.getForward().getDefiningOp<DropoutOp>();
        if (forward) {
          out["rate"] = forward.getRate().convertToDouble();
          out["seed"] = uint64_t(forward.getSeed());
        }
      });
}

LogicalResult gpipe::bundle_detail::emitOp(Operation *op, ValueTable &values,
                                           json::Array &list,
                                           bool defineResults,
                                           bool dropUnused) {
  // A general element-wise op is written by its mnemonic, for
  // fuseStageKernels to turn into a kernel.
  std::string name;
  const bool generated = op->hasTrait<gpipe::traits::GeneratedKernel>();
  // An add whose operands are not of its result's shape: generated.
  const bool broadcasts =
      isa<AddOp>(op) && (op->getOperand(0).getType() != op->getResultTypes()[0] ||
                         op->getOperand(1).getType() != op->getResultTypes()[0]);
  if (generated)
    name = op->getName().stripDialect().str();
  else if (std::optional<runtime::OpKind> kind = bundleOpKind(op))
    name = runtime::opKindName(*kind);
  else
    return op->emitOpError() << "cannot be written to a bundle";
  json::Array operands, results;
  SmallVector<bool> operandBatched;
  for (Value operand : op->getOperands()) {
    FailureOr<int> id = values.lookup(op, operand);
    if (failed(id))
      return failure();
    operands.push_back(*id);
    operandBatched.push_back(values.isBatched(*id));
  }
  if (generated || broadcasts)
    if (failed(checkBatchPlacement(op, values.batchSize(), operandBatched)))
      return failure();
  if (auto matmul = dyn_cast<MatmulOp>(op))
    if (failed(checkMatmulPlacement(matmul, operandBatched)))
      return failure();
  for (OpResult result : op->getResults()) {
    // Half of a split dense or layer-norm gradient: the other half's result
    // is not computed (its id is kept, as the memory description numbers
    // it); nor is an input gradient nothing reads.
    if ((dropUnused && result.use_empty()) || isUnreadInputGradient(result)) {
      if (defineResults)
        values.define(result, isPerExampleResult(result, operandBatched));
      results.push_back(-1);
      continue;
    }
    if (defineResults) {
      results.push_back(
          values.define(result, isPerExampleResult(result, operandBatched)));
      continue;
    }
    FailureOr<int> id = values.lookup(op, result);
    if (failed(id))
      return failure();
    results.push_back(*id);
  }
  json::Object out{{"op", name},
                   {"operands", std::move(operands)},
                   {"results", std::move(results)}};
  addAttributes(op, out);
  if (broadcasts)
    out["broadcast"] = true;
  // A general op's constants (clip's bounds) go into its kernel's steps, and
  // so do the axes of a reduction (and a mean's count).
  if (generated)
    for (NamedAttribute attr : op->getAttrs()) {
      if (auto value = dyn_cast<FloatAttr>(attr.getValue()))
        out[attr.getName().strref()] = value.getValueAsDouble();
      if (auto value = dyn_cast<IntegerAttr>(attr.getValue()))
        out[attr.getName().strref()] = value.getInt();
      auto list = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
      if (list && attr.getName() != "axes")
        out[attr.getName().strref()] = json::Array(list.asArrayRef());
      if (auto axes = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
          axes && attr.getName() == "axes") {
        json::Array list;
        int64_t count = 1;
        auto full = cast<RankedTensorType>(
            isa<ReduceMeanGradOp>(op) ? op->getResult(0).getType()
                                      : op->getOperand(0).getType());
        for (int64_t axis : axes.asArrayRef()) {
          list.push_back(axis);
          count *= full.getDimSize(axis);
        }
        out[attr.getName().strref()] = std::move(list);
        if (isa<ReduceMeanOp, ReduceMeanGradOp>(op))
          out["count"] = count;
      }
    }
  list.push_back(std::move(out));
  return success();
}
