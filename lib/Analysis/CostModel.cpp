//===- CostModel.cpp - Forward cost of gpipe ops from their shapes --------===//
//
// Element-wise ops are charged a fixed number of FLOPs per element, chosen to
// reflect their arithmetic (relu 1, add 1, dropout 2, tanh 4, softmax 5, layer
// norm 8, gelu and gelu_erf 8); GEMMs and attention are counted exactly. The
// partitioner only needs costs that are proportional to the real run times.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/CostModel.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace gpipe;

uint64_t gpipe::tensorBytes(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  uint64_t elementBytes = (tensor.getElementTypeBitWidth() + 7) / 8;
  return static_cast<uint64_t>(tensor.getNumElements()) * elementBytes;
}

CostAttr gpipe::getCost(Operation *op) {
  return op->getAttrOfType<CostAttr>("cost");
}

CostAttr gpipe::addCosts(MLIRContext *context, CostAttr lhs, CostAttr rhs) {
  return CostAttr::get(context, lhs.getFlops() + rhs.getFlops(),
                       lhs.getParamBytes() + rhs.getParamBytes(),
                       lhs.getActivationBytes() + rhs.getActivationBytes());
}

/// Costs are computed in 128 bits and refused at 2^63 and beyond: the
/// verifier bounds every tensor's bytes, not the products of its sizes.
using Wide = unsigned __int128;

static Wide numElements(Value value) {
  return cast<RankedTensorType>(value.getType()).getNumElements();
}

/// Bytes of the operands that are parameters (read straight from a
/// gpipe.param).
static Wide paramOperandBytes(Operation *op) {
  Wide bytes = 0;
  for (Value operand : op->getOperands())
    if (operand.getDefiningOp<ParamOp>())
      bytes += tensorBytes(operand.getType());
  return bytes;
}

/// FLOPs and extra kept bytes (beyond the result) of each kind of op.
namespace {
struct OpWork {
  Wide flops = 0;
  Wide extraActivationBytes = 0;
};
} // namespace

/// FLOPs per element of a general element-wise op (GPipeElementwiseOps.td):
/// one for arithmetic, a polynomial's worth for a transcendental function.
static Wide elementwiseFlops(Operation *op) {
  return llvm::StringSwitch<Wide>(op->getName().stripDialect())
      .Cases({"neg", "abs", "clip", "clip_grad", "sub", "mul", "div", "max",
              "min", "abs_grad",
              "log_grad", "div_rhs_grad", "max_lhs_grad", "min_lhs_grad",
              "broadcast_to", "sum_to", "reduce_sum", "reduce_mean",
              "reduce_max", "reduce_sum_grad", "reduce_mean_grad",
              "reduce_max_count", "reduce_max_grad", "reshape", "transpose",
              "slice", "slice_grad", "concat", "eq", "lt", "le", "gt", "ge",
              "and", "or", "not", "where", "where_lhs_grad", "where_rhs_grad",
              "cast", "gather", "gather_grad"},
             1)
      .Cases({"reciprocal", "reciprocal_grad", "exp_grad", "sqrt_grad",
              "rsqrt_grad", "sigmoid_grad"},
             3)
      .Default(12);
}

static FailureOr<OpWork> estimateWork(Operation *op) {
  if (op->hasTrait<gpipe::traits::GeneratedKernel>()) {
    // Per element of the widest operand or result: a reduction reads more
    // than it writes, a broadcast writes more than it reads.
    // A gather reads only the elements it writes.
    Wide elements = numElements(op->getResult(0));
    for (Value operand : op->getOperands())
      if (!isa<GatherOp>(op))
        elements = std::max(elements, numElements(operand));
    return OpWork{elementwiseFlops(op) * elements, 0};
  }
  return llvm::TypeSwitch<Operation *, FailureOr<OpWork>>(op)
      .Case([](DenseOp dense) -> OpWork {
        auto weight = cast<RankedTensorType>(dense.getWeight().getType());
        Wide rows = numElements(dense.getInput()) / weight.getDimSize(0);
        Wide n = weight.getDimSize(1);
        Wide flops = 2 * rows * Wide(weight.getDimSize(0)) * n;
        if (dense.getBias())
          flops += rows * n;
        return {flops, 0};
      })
      .Case([](MatmulOp matmul) -> OpWork {
        // 2 M N K per element of the result's batch.
        auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
        int64_t k = lhs.getDimSize(lhs.getRank() - (matmul.getTransposeLhs() ? 2 : 1));
        return {2 * numElements(matmul.getResult()) * Wide(k), 0};
      })
      .Case([](ReluOp o) -> OpWork {
        return {numElements(o.getInput()), 0};
      })
      .Case([](AddOp o) -> OpWork {
        return {numElements(o.getResult()), 0};
      })
      .Case([](TanhOp o) -> OpWork {
        return {4 * numElements(o.getInput()), 0};
      })
      .Case([](SoftmaxOp o) -> OpWork {
        return {5 * numElements(o.getInput()), 0};
      })
      .Case<GeluOp, GeluErfOp>([](auto o) -> OpWork {
        return {8 * numElements(o.getInput()), 0};
      })
      .Case([](LayerNormOp o) -> OpWork {
        return {8 * numElements(o.getInput()), 0};
      })
      .Case([](BatchNormOp o) -> OpWork {
        // Statistics and normalisation as layer norm's; kept: the mean,
        // rstd and the gradient's two column sums per channel (f32).
        Wide channels =
            cast<RankedTensorType>(o.getInput().getType()).getShape().back();
        return {8 * numElements(o.getInput()), 16 * channels};
      })
      .Case([](DropoutOp o) -> OpWork {
        // The mask is kept for the backward: one byte per element.
        return {2 * numElements(o.getInput()), numElements(o.getInput())};
      })
      .Case([](EmbeddingOp o) -> OpWork {
        return {numElements(o.getResult()), 0};
      })
      .Case([](AttentionOp o) -> OpWork {
        auto type = cast<RankedTensorType>(o.getInput().getType());
        Wide b = type.getDimSize(0), s = type.getDimSize(1),
             d = type.getDimSize(2), h = o.getHeads();
        Wide elementBytes = (type.getElementTypeBitWidth() + 7) / 8;
        // QKV projection, scores, weighted sum, output projection, softmax.
        Wide flops = 2 * b * s * d * 3 * d + 2 * b * s * s * d +
                     2 * b * s * s * d + 2 * b * s * d * d + 5 * b * h * s * s;
        // The biases: one add per element of qkv [b s, 3d] and of y [b s, d].
        if (o.getQkvBias())
          flops += 4 * b * s * d;
        // Kept for the backward: q, k, v, the attention weights, the context.
        Wide kept = (3 * b * s * d + b * h * s * s + b * s * d) * elementBytes;
        return {flops, kept};
      })
      .Case([](Conv2dOp o) -> OpWork {
        auto weight = cast<RankedTensorType>(o.getWeight().getType());
        // Each output element: a dot product over the kernel's window of
        // its group's channels (KH x KW x C / groups), plus the bias.
        Wide window = Wide(weight.getDimSize(0)) * weight.getDimSize(1) *
                      weight.getDimSize(2);
        Wide outputs = numElements(o.getResult());
        return {2 * outputs * window + (o.getBias() ? outputs : 0), 0};
      })
      .Case<MaxPool2dOp, AvgPool2dOp>([](auto o) -> OpWork {
        // A compare or an add per pixel of each output's window.
        ArrayRef<int64_t> window = o.getWindow();
        Wide size = window.size() == 2 ? Wide(window[0]) * window[1] : 1;
        return {numElements(o.getResult()) * size, 0};
      })
      .Case([](GlobalAvgPoolOp o) -> OpWork {
        return {numElements(o.getInput()), 0};
      })
      .Case([](FlattenOp) -> OpWork {
        return {0, 0};
      })
      .Case([](SoftmaxCrossEntropyOp o) -> OpWork {
        return {5 * numElements(o.getLogits()), 0};
      })
      .Case([](MseLossOp o) -> OpWork {
        return {3 * numElements(o.getPrediction()), 0};
      })
      .Default([](Operation *) { return failure(); });
}

FailureOr<CostAttr> gpipe::estimateOpCost(Operation *op) {
  FailureOr<OpWork> work = estimateWork(op);
  if (failed(work))
    return op->emitOpError() << "has no cost model; write its cost by hand";
  Wide activationBytes = work->extraActivationBytes;
  for (Type type : op->getResultTypes())
    activationBytes += tensorBytes(type);
  Wide paramBytes = paramOperandBytes(op);
  if (work->flops > Wide(INT64_MAX) || activationBytes > Wide(INT64_MAX) ||
      paramBytes > Wide(INT64_MAX))
    return op->emitOpError()
           << "costs 2^63 FLOPs or bytes or more; the model is too large";
  return CostAttr::get(op->getContext(), uint64_t(work->flops),
                       uint64_t(paramBytes), uint64_t(activationBytes));
}
