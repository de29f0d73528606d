//===- ElementwiseGradients.cpp - Gradients of the general element-wise ops
//===//
//
// Each rule is a gradient op of GPipeElementwiseOps.td, or a general op where
// the derivative is one (sub, mul, div): whatever it emits is again computed
// by generated kernels, and fuses with its neighbours in the backward. A
// broadcasting op's rules give gradients of the result's shape; the caller's
// `contribute` sums each down to its operand's shape (gpipe.sum_to).
//
//===----------------------------------------------------------------------===//

#include "ElementwiseGradients.h"

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace gpipe;

namespace {
struct Rules {
  OpBuilder &b;
  Location loc;
  Value dy;
  ContributeFn contribute;
  WantsGradientFn wants;

  /// `input` gets GradOp(dy, primal).
  template <class GradOp> void unary(Value input, Value primal) {
    if (wants(input))
      contribute(input, GradOp::create(b, loc, dy.getType(), dy, primal));
  }
  /// `target` gets GradOp(dy, lhs, rhs).
  template <class GradOp> void binary(Value target, Value lhs, Value rhs) {
    if (wants(target))
      contribute(target, GradOp::create(b, loc, dy.getType(), dy, lhs, rhs));
  }
  /// `target` gets Op(lhs, rhs), a general binary op.
  template <class Op> void general(Value target, Value lhs, Value rhs) {
    if (wants(target))
      contribute(target,
                 Op::create(b, loc, dy.getType(), lhs, rhs, CostAttr()));
  }
};
} // namespace

bool gpipe::emitElementwiseGradient(Operation *op, Value dy, OpBuilder &builder,
                                    ContributeFn contribute,
                                    WantsGradientFn wants) {
  Rules r{builder, op->getLoc(), dy, contribute, wants};
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case([&](NegOp o) {
        if (wants(o.getInput()))
          contribute(o.getInput(), NegOp::create(builder, o.getLoc(),
                                                 dy.getType(), dy, CostAttr()));
        return true;
      })
      .Case([&](AbsOp o) {
        return r.unary<AbsGradOp>(o.getInput(), o.getInput()), true;
      })
      .Case([&](ExpOp o) {
        return r.unary<ExpGradOp>(o.getInput(), o.getResult()), true;
      })
      .Case([&](LogOp o) {
        return r.unary<LogGradOp>(o.getInput(), o.getInput()), true;
      })
      .Case([&](SqrtOp o) {
        return r.unary<SqrtGradOp>(o.getInput(), o.getResult()), true;
      })
      .Case([&](RsqrtOp o) {
        return r.unary<RsqrtGradOp>(o.getInput(), o.getResult()), true;
      })
      .Case([&](ReciprocalOp o) {
        return r.unary<ReciprocalGradOp>(o.getInput(), o.getResult()), true;
      })
      .Case([&](SigmoidOp o) {
        return r.unary<SigmoidGradOp>(o.getInput(), o.getResult()), true;
      })
      .Case([&](SiluOp o) {
        return r.unary<SiluGradOp>(o.getInput(), o.getInput()), true;
      })
      .Case([&](ErfOp o) {
        return r.unary<ErfGradOp>(o.getInput(), o.getInput()), true;
      })
      .Case([&](SinOp o) {
        return r.unary<SinGradOp>(o.getInput(), o.getInput()), true;
      })
      .Case([&](CosOp o) {
        return r.unary<CosGradOp>(o.getInput(), o.getInput()), true;
      })
      .Case([&](ClipOp o) {
        if (wants(o.getInput()))
          contribute(o.getInput(),
                     ClipGradOp::create(builder, o.getLoc(), dy.getType(), dy,
                                        o.getInput(), o.getMinAttr(),
                                        o.getMaxAttr()));
        return true;
      })
      .Case([&](SubOp o) {
        if (wants(o.getLhs()))
          contribute(o.getLhs(), dy);
        if (wants(o.getRhs()))
          contribute(o.getRhs(), NegOp::create(builder, o.getLoc(),
                                               dy.getType(), dy, CostAttr()));
        return true;
      })
      .Case([&](MulOp o) {
        r.general<MulOp>(o.getLhs(), dy, o.getRhs());
        r.general<MulOp>(o.getRhs(), dy, o.getLhs());
        return true;
      })
      .Case([&](DivOp o) {
        r.general<DivOp>(o.getLhs(), dy, o.getRhs());
        r.binary<DivRhsGradOp>(o.getRhs(), o.getResult(), o.getRhs());
        return true;
      })
      .Case([&](PowOp o) {
        r.binary<PowLhsGradOp>(o.getLhs(), o.getLhs(), o.getRhs());
        r.binary<PowRhsGradOp>(o.getRhs(), o.getLhs(), o.getRhs());
        return true;
      })
      .Case([&](MaxOp o) {
        r.binary<MaxLhsGradOp>(o.getLhs(), o.getLhs(), o.getRhs());
        r.binary<MaxLhsGradOp>(o.getRhs(), o.getRhs(), o.getLhs());
        return true;
      })
      .Case([&](MinOp o) {
        r.binary<MinLhsGradOp>(o.getLhs(), o.getLhs(), o.getRhs());
        r.binary<MinLhsGradOp>(o.getRhs(), o.getRhs(), o.getLhs());
        return true;
      })
      .Case([&](BroadcastToOp o) {
        if (wants(o.getInput()))
          contribute(o.getInput(), dy); // summed to the input's shape
        return true;
      })
      .Case([&](SumToOp o) {
        if (wants(o.getInput()))
          contribute(o.getInput(),
                     BroadcastToOp::create(builder, o.getLoc(),
                                           o.getInput().getType(), dy,
                                           UnitAttr(), CostAttr()));
        return true;
      })
      .Case([&](ReduceSumOp o) {
        if (wants(o.getInput()))
          contribute(o.getInput(),
                     ReduceSumGradOp::create(builder, o.getLoc(),
                                             o.getInput().getType(), dy,
                                             o.getAxesAttr()));
        return true;
      })
      .Case([&](ReduceMeanOp o) {
        if (wants(o.getInput()))
          contribute(o.getInput(),
                     ReduceMeanGradOp::create(builder, o.getLoc(),
                                              o.getInput().getType(), dy,
                                              o.getAxesAttr()));
        return true;
      })
      .Case([&](ReduceMaxOp o) {
        // Ties share dy evenly, as torch.amax's gradient.
        if (!wants(o.getInput()))
          return true;
        Value count = ReduceMaxCountOp::create(
            builder, o.getLoc(), o.getResult().getType(), o.getInput(),
            o.getResult(), o.getAxesAttr());
        contribute(o.getInput(),
                   ReduceMaxGradOp::create(builder, o.getLoc(),
                                           o.getInput().getType(), dy,
                                           o.getInput(), o.getResult(), count,
                                           o.getAxesAttr()));
        return true;
      })
      .Case([&](ReshapeOp o) {
        if (wants(o.getInput()))
          contribute(o.getInput(),
                     ReshapeOp::create(builder, o.getLoc(),
                                       o.getInput().getType(), dy, CostAttr()));
        return true;
      })
      .Case([&](TransposeOp o) {
        if (!wants(o.getInput()))
          return true;
        // The inverse permutation: input dim perm[i] is result dim i.
        ArrayRef<int64_t> perm = o.getPerm();
        SmallVector<int64_t> inverse(perm.size());
        for (auto [i, dim] : llvm::enumerate(perm))
          inverse[dim] = int64_t(i);
        contribute(o.getInput(),
                   TransposeOp::create(builder, o.getLoc(),
                                       o.getInput().getType(), dy,
                                       builder.getDenseI64ArrayAttr(inverse),
                                       CostAttr()));
        return true;
      })
      .Case([&](SliceOp o) {
        if (wants(o.getInput()))
          contribute(o.getInput(),
                     SliceGradOp::create(builder, o.getLoc(),
                                         o.getInput().getType(), dy,
                                         o.getStartsAttr(), o.getStepsAttr()));
        return true;
      })
      .Case([&](ConcatOp o) {
        // Each input's part of dy.
        int64_t axis = o.getAxis(), offset = 0;
        for (Value input : o.getInputs()) {
          auto type = cast<RankedTensorType>(input.getType());
          SmallVector<int64_t> starts(type.getRank(), 0),
              steps(type.getRank(), 1);
          starts[axis] = offset;
          offset += type.getDimSize(axis);
          if (wants(input))
            contribute(input,
                       SliceOp::create(builder, o.getLoc(), type, dy,
                                       builder.getDenseI64ArrayAttr(starts),
                                       builder.getDenseI64ArrayAttr(steps),
                                       CostAttr()));
        }
        return true;
      })
      .Case([&](GatherOp o) {
        // The indices (i32) get none.
        if (wants(o.getInput()))
          contribute(o.getInput(),
                     GatherGradOp::create(builder, o.getLoc(),
                                          o.getInput().getType(), dy,
                                          o.getIndices(), o.getAxisAttr(),
                                          o.getBatchedAttr()));
        return true;
      })
      // Comparisons and logic have no gradient (their results are i1).
      .Case<EqOp, LtOp, LeOp, GtOp, GeOp, AndOp, OrOp, NotOp>(
          [](Operation *) { return true; })
      .Case([&](WhereOp o) {
        if (wants(o.getLhs()))
          contribute(o.getLhs(),
                     WhereLhsGradOp::create(builder, o.getLoc(), dy.getType(),
                                            dy, o.getCond()));
        if (wants(o.getRhs()))
          contribute(o.getRhs(),
                     WhereRhsGradOp::create(builder, o.getLoc(), dy.getType(),
                                            dy, o.getCond()));
        return true;
      })
      .Case([&](CastOp o) {
        // Only a float-to-float cast (the identity) passes a gradient.
        if (o.getInput().getType() == o.getResult().getType() &&
            wants(o.getInput()))
          contribute(o.getInput(), dy);
        return true;
      })
      .Default([](Operation *) { return false; });
}
