//===- GPipeElementwiseOps.cpp - The general element-wise ops' checks -----===//
//
// Broadcasting follows NumPy (mlir/Dialect/Traits.h's getBroadcastedShape):
// shapes align at their last dimension and a size-1 or missing dimension
// stretches. A reduction's result is its input's shape with the reduced axes
// kept as 1 or dropped.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "OpVerification.h"

#include "mlir/Dialect/Traits.h"

#include <cmath>
#include <cstdio>
#include <string>

using namespace mlir;
using namespace gpipe;

/// `v` as the shortest text that reads back the same (%g).
static std::string shortText(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

LogicalResult ClipOp::verify() {
  double low = getMin().convertToDouble(), high = getMax().convertToDouble();
  if (!std::isfinite(low) || !std::isfinite(high))
    return emitOpError() << "expects finite bounds, got min " << shortText(low)
                         << " and max " << shortText(high);
  if (low > high)
    return emitOpError() << "expects min <= max, got min " << shortText(low)
                         << " and max " << shortText(high);
  return success();
}

//===----------------------------------------------------------------------===//
// Broadcasting
//===----------------------------------------------------------------------===//

static RankedTensorType tensorOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Whether `from` stretches to exactly `to`.
static bool broadcastsTo(RankedTensorType from, RankedTensorType to) {
  SmallVector<int64_t> shape;
  return OpTrait::util::getBroadcastedShape(from.getShape(), to.getShape(),
                                            shape) &&
         ArrayRef<int64_t>(shape) == to.getShape();
}

/// The operands broadcast to one another, to the result's shape, all of the
/// result's element type.
static LogicalResult verifyBroadcastingOp(Operation *op, Value lhs, Value rhs,
                                          Value result) {
  RankedTensorType a = tensorOf(lhs), b = tensorOf(rhs), r = tensorOf(result);
  if (a.getElementType() != r.getElementType() ||
      b.getElementType() != r.getElementType())
    return op->emitOpError() << "expects operands of the result's element type "
                             << r.getElementType() << ", got " << a << " and "
                             << b;
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(a.getShape(), b.getShape(), shape))
    return op->emitOpError()
           << "expects operands that broadcast (aligned at their last "
              "dimension, each pair of sizes equal or one of them 1), got "
           << a << " and " << b;
  if (ArrayRef<int64_t>(shape) != r.getShape())
    return op->emitOpError() << "expects result type "
                             << RankedTensorType::get(shape,
                                                      r.getElementType())
                             << " (the operands broadcast), got " << r;
  return success();
}

#define GPIPE_BROADCASTING_OP(Op)                                              \
  LogicalResult Op::verify() {                                                 \
    return verifyBroadcastingOp(*this, getLhs(), getRhs(), getResult());       \
  }
GPIPE_BROADCASTING_OP(AddOp)
GPIPE_BROADCASTING_OP(SubOp)
GPIPE_BROADCASTING_OP(MulOp)
GPIPE_BROADCASTING_OP(DivOp)
GPIPE_BROADCASTING_OP(PowOp)
GPIPE_BROADCASTING_OP(MaxOp)
GPIPE_BROADCASTING_OP(MinOp)
#undef GPIPE_BROADCASTING_OP

/// `operands` of `element` type broadcast to one another and to `result`'s
/// shape (its element type checked by the op's constraint).
static LogicalResult verifyBroadcastAll(Operation *op, ValueRange operands,
                                        Value result) {
  RankedTensorType r = tensorOf(result);
  SmallVector<int64_t> shape;
  for (Value operand : operands) {
    SmallVector<int64_t> next;
    if (!OpTrait::util::getBroadcastedShape(shape, tensorOf(operand).getShape(),
                                            next))
      return op->emitOpError()
             << "expects operands that broadcast (aligned at their last "
                "dimension, each pair of sizes equal or one of them 1), got "
             << operands.getTypes();
    shape = std::move(next);
  }
  if (ArrayRef<int64_t>(shape) != r.getShape())
    return op->emitOpError() << "expects result type "
                             << RankedTensorType::get(shape,
                                                      r.getElementType())
                             << " (the operands broadcast), got " << r;
  return success();
}

#define GPIPE_COMPARE_OP(Op)                                                   \
  LogicalResult Op::verify() {                                                 \
    if (getLhs().getType().getElementType() !=                                 \
        getRhs().getType().getElementType())                                   \
      return emitOpError() << "expects operands of one element type, got "     \
                           << getLhs().getType() << " and "                    \
                           << getRhs().getType();                              \
    return verifyBroadcastAll(*this, {getLhs(), getRhs()}, getResult());       \
  }
GPIPE_COMPARE_OP(EqOp)
GPIPE_COMPARE_OP(LtOp)
GPIPE_COMPARE_OP(LeOp)
GPIPE_COMPARE_OP(GtOp)
GPIPE_COMPARE_OP(GeOp)
#undef GPIPE_COMPARE_OP

LogicalResult AndOp::verify() {
  return verifyBroadcastAll(*this, {getLhs(), getRhs()}, getResult());
}
LogicalResult OrOp::verify() {
  return verifyBroadcastAll(*this, {getLhs(), getRhs()}, getResult());
}

LogicalResult WhereOp::verify() {
  Type element = getResult().getType().getElementType();
  for (Value branch : {getLhs(), getRhs()})
    if (cast<RankedTensorType>(branch.getType()).getElementType() != element)
      return emitOpError() << "expects lhs and rhs of the result's element "
                              "type "
                           << element << ", got " << branch.getType();
  return verifyBroadcastAll(*this, {getCond(), getLhs(), getRhs()},
                            getResult());
}

/// cond stretches to dy's shape (dx is dy's type: the op's constraint).
static LogicalResult verifyWhereGrad(Operation *op, Value dy, Value cond) {
  if (!broadcastsTo(tensorOf(cond), tensorOf(dy)))
    return op->emitOpError() << "expects a condition that broadcasts to "
                             << dy.getType() << ", got " << cond.getType();
  return success();
}
LogicalResult WhereLhsGradOp::verify() {
  return verifyWhereGrad(*this, getDy(), getCond());
}
LogicalResult WhereRhsGradOp::verify() {
  return verifyWhereGrad(*this, getDy(), getCond());
}

LogicalResult CastOp::verify() {
  RankedTensorType input = tensorOf(getInput()), result = tensorOf(getResult());
  if (input.getShape() != result.getShape())
    return emitOpError() << "expects a result of the input's shape, got "
                         << input << " and " << result;
  return success();
}

/// lhs and rhs each stretch to dy's shape, in its element type.
static LogicalResult verifyBinaryGradOp(Operation *op, Value dy, Value lhs,
                                        Value rhs) {
  RankedTensorType d = tensorOf(dy);
  for (Value operand : {lhs, rhs}) {
    RankedTensorType t = tensorOf(operand);
    if (t.getElementType() != d.getElementType() || !broadcastsTo(t, d))
      return op->emitOpError()
             << "expects operands that broadcast to dy's type " << d
             << ", got " << t;
  }
  return success();
}

#define GPIPE_BINARY_GRAD_OP(Op)                                               \
  LogicalResult Op::verify() {                                                 \
    return verifyBinaryGradOp(*this, getDy(), getLhs(), getRhs());             \
  }
GPIPE_BINARY_GRAD_OP(DivRhsGradOp)
GPIPE_BINARY_GRAD_OP(PowLhsGradOp)
GPIPE_BINARY_GRAD_OP(PowRhsGradOp)
GPIPE_BINARY_GRAD_OP(MaxLhsGradOp)
GPIPE_BINARY_GRAD_OP(MinLhsGradOp)
#undef GPIPE_BINARY_GRAD_OP

LogicalResult BroadcastToOp::verify() {
  RankedTensorType input = tensorOf(getInput()), result = tensorOf(getResult());
  if (input.getElementType() != result.getElementType() ||
      !broadcastsTo(input, result))
    return emitOpError() << "expects an input that broadcasts to the result "
                         << result << ", got " << input;
  if (getBatch() &&
      (input.getRank() != result.getRank() || result.getRank() == 0 ||
       input.getDimSize(0) != 1))
    return emitOpError() << "stretches its input over the batch (`batch`), "
                            "which needs an input of the result's rank with "
                            "size 1 in dimension 0, got "
                         << input << " for " << result;
  return success();
}

LogicalResult SumToOp::verify() {
  RankedTensorType input = tensorOf(getInput()), result = tensorOf(getResult());
  if (input.getElementType() != result.getElementType() ||
      !broadcastsTo(result, input))
    return emitOpError() << "expects a result that broadcasts to the input "
                         << input << ", got " << result;
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// `reduced` is `full` reduced over `axes` (strictly ascending, in range,
/// none of size 0), each reduced axis kept as 1 or dropped. `what` names the
/// two in messages ("the result" from "the input").
static LogicalResult verifyReduction(Operation *op, RankedTensorType full,
                                     RankedTensorType reduced,
                                     ArrayRef<int64_t> axes, StringRef what) {
  if (axes.empty())
    return op->emitOpError() << "expects at least one axis to reduce";
  int64_t rank = full.getRank();
  for (auto [i, axis] : llvm::enumerate(axes)) {
    if (axis < 0 || axis >= rank)
      return op->emitOpError() << "expects axes in [0, " << rank
                               << ") for " << full << ", got " << axis;
    if (i > 0 && axis <= axes[i - 1])
      return op->emitOpError()
             << "expects strictly ascending axes, got " << axes[i - 1]
             << " then " << axis;
    if (full.getDimSize(axis) == 0)
      return op->emitOpError() << "reduces over axis " << axis << " of "
                               << full << ", which is empty";
  }
  SmallVector<int64_t> kept(full.getShape()), dropped;
  for (int64_t axis = 0; axis < rank; ++axis) {
    if (llvm::is_contained(axes, axis))
      kept[axis] = 1;
    else
      dropped.push_back(full.getDimSize(axis));
  }
  Type element = full.getElementType();
  if (reduced.getElementType() == element &&
      (reduced.getShape() == ArrayRef<int64_t>(kept) ||
       reduced.getShape() == ArrayRef<int64_t>(dropped)))
    return success();
  return op->emitOpError() << "expects " << what << " "
                           << RankedTensorType::get(kept, element)
                           << " (reduced axes kept) or "
                           << RankedTensorType::get(dropped, element)
                           << " (dropped), got " << reduced;
}

#define GPIPE_REDUCE_OP(Op)                                                    \
  LogicalResult Op::verify() {                                                 \
    return verifyReduction(*this, tensorOf(getInput()),                        \
                           tensorOf(getResult()), getAxes(), "result type");   \
  }
GPIPE_REDUCE_OP(ReduceSumOp)
GPIPE_REDUCE_OP(ReduceMeanOp)
GPIPE_REDUCE_OP(ReduceMaxOp)
#undef GPIPE_REDUCE_OP

LogicalResult ReduceSumGradOp::verify() {
  return verifyReduction(*this, tensorOf(getDx()), tensorOf(getDy()),
                         getAxes(), "dy of type");
}
LogicalResult ReduceMeanGradOp::verify() {
  return verifyReduction(*this, tensorOf(getDx()), tensorOf(getDy()),
                         getAxes(), "dy of type");
}
LogicalResult ReduceMaxCountOp::verify() {
  return verifyReduction(*this, tensorOf(getInput()), tensorOf(getMax()),
                         getAxes(), "a maximum of type");
}
LogicalResult ReduceMaxGradOp::verify() {
  return verifyReduction(*this, tensorOf(getInput()), tensorOf(getDy()),
                         getAxes(), "dy of type");
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = tensorOf(getInput()), result = tensorOf(getResult());
  if (input.getElementType() != result.getElementType() ||
      input.getNumElements() != result.getNumElements())
    return emitOpError() << "expects a result of the input's "
                         << input.getNumElements() << " elements of type "
                         << input.getElementType() << ", got " << result;
  return success();
}

LogicalResult TransposeOp::verify() {
  RankedTensorType input = tensorOf(getInput()), result = tensorOf(getResult());
  ArrayRef<int64_t> perm = getPerm();
  int64_t rank = input.getRank();
  SmallVector<bool> seen(rank, false);
  for (int64_t dim : perm) {
    if (int64_t(perm.size()) != rank || dim < 0 || dim >= rank || seen[dim])
      return emitOpError() << "expects a permutation of [0, " << rank
                           << ") for " << input << ", got [" << perm << "]";
    seen[dim] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t dim : perm)
    shape.push_back(input.getDimSize(dim));
  auto expected = RankedTensorType::get(shape, input.getElementType());
  if (result != expected)
    return emitOpError() << "expects result type " << expected << ", got "
                         << result;
  return success();
}

/// A slice of `full` with `starts` and `steps` that gives `sliced` (`what`
/// names it in messages).
static LogicalResult verifySlice(Operation *op, RankedTensorType full,
                                 RankedTensorType sliced,
                                 ArrayRef<int64_t> starts,
                                 ArrayRef<int64_t> steps, StringRef what) {
  int64_t rank = full.getRank();
  if (int64_t(starts.size()) != rank || int64_t(steps.size()) != rank)
    return op->emitOpError()
           << "expects one start and one step per dimension of " << full
           << " (" << rank << "), got " << starts.size() << " starts and "
           << steps.size() << " steps";
  if (sliced.getRank() != rank ||
      sliced.getElementType() != full.getElementType())
    return op->emitOpError() << "expects " << what << " of rank " << rank
                             << " and element type " << full.getElementType()
                             << ", got " << sliced;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = full.getDimSize(d), count = sliced.getDimSize(d);
    if (starts[d] < 0 || starts[d] >= size)
      return op->emitOpError() << "expects starts[" << d << "] in [0, " << size
                               << "), got " << starts[d];
    if (steps[d] < 1)
      return op->emitOpError() << "expects steps[" << d
                               << "] >= 1, got " << steps[d];
    int64_t available = (size - starts[d] + steps[d] - 1) / steps[d];
    if (count < 1 || count > available)
      return op->emitOpError()
             << "expects " << what << " dimension " << d << " in [1, "
             << available << "] (the elements from " << starts[d]
             << " by steps of " << steps[d] << " in " << size << "), got "
             << count;
  }
  return success();
}

LogicalResult SliceOp::verify() {
  return verifySlice(*this, tensorOf(getInput()), tensorOf(getResult()),
                     getStarts(), getSteps(), "a result");
}

LogicalResult SliceGradOp::verify() {
  return verifySlice(*this, tensorOf(getDx()), tensorOf(getDy()), getStarts(),
                     getSteps(), "dy");
}

LogicalResult ConcatOp::verify() {
  OperandRange inputs = getInputs();
  RankedTensorType result = tensorOf(getResult());
  int64_t rank = result.getRank(), axis = getAxis();
  if (inputs.size() < 2)
    return emitOpError() << "expects two or more inputs, got "
                         << inputs.size();
  if (axis < 0 || axis >= rank)
    return emitOpError() << "expects axis in [0, " << rank << ") for "
                         << result << ", got " << axis;
  int64_t total = 0;
  for (auto [k, input] : llvm::enumerate(inputs)) {
    RankedTensorType type = tensorOf(input);
    bool matches = type.getRank() == rank &&
                   type.getElementType() == result.getElementType();
    for (int64_t d = 0; matches && d < rank; ++d)
      matches = d == axis || type.getDimSize(d) == result.getDimSize(d);
    if (!matches)
      return emitOpError() << "expects input " << k
                           << " to match the result " << result
                           << " in every dimension but " << axis << ", got "
                           << type;
    total += type.getDimSize(axis);
  }
  if (total != result.getDimSize(axis))
    return emitOpError() << "expects the result's dimension " << axis
                         << " to be the inputs' sum, " << total << ", got "
                         << result.getDimSize(axis);
  return success();
}

/// A gather of `full` along `axis` at `indices` (1-D, or [batch, k] when
/// `batched`) that gives `gathered` (`what` names it in messages).
static LogicalResult verifyGather(Operation *op, RankedTensorType full,
                                  RankedTensorType gathered,
                                  RankedTensorType indices, int64_t axis,
                                  bool batched, StringRef what) {
  int64_t rank = full.getRank();
  if (axis < int64_t(batched) || axis >= rank)
    return op->emitOpError()
           << "expects axis in [" << int64_t(batched) << ", " << rank
           << ") for " << full
           << (batched ? " (batched: dimension 0 pairs with the indices')"
                       : "")
           << ", got " << axis;
  if (!batched && indices.getRank() != 1)
    return op->emitOpError()
           << "expects 1-D indices, got " << indices
           << " (N-D indices: reshape them to 1-D, gather, and reshape the "
              "result; per-example indices [batch, k]: `batched`)";
  if (batched && (indices.getRank() != 2 ||
                  indices.getDimSize(0) != full.getDimSize(0)))
    return op->emitOpError() << "expects batched indices of shape ["
                             << full.getDimSize(0) << ", k] (dimension 0 of "
                             << full << ", then the positions), got "
                             << indices;
  SmallVector<int64_t> shape(full.getShape());
  shape[axis] = indices.getShape().back();
  auto expected = RankedTensorType::get(shape, full.getElementType());
  if (gathered != expected)
    return op->emitOpError() << "expects " << what << " " << expected
                             << " (" << full << " with dimension " << axis
                             << " the indices' " << shape[axis] << "), got "
                             << gathered;
  return success();
}

LogicalResult GatherOp::verify() {
  return verifyGather(*this, tensorOf(getInput()), tensorOf(getResult()),
                      tensorOf(getIndices()), getAxis(), getBatched(),
                      "a result");
}

LogicalResult GatherGradOp::verify() {
  return verifyGather(*this, tensorOf(getDx()), tensorOf(getDy()),
                      tensorOf(getIndices()), getAxis(), getBatched(), "dy");
}

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

ParseResult gpipe::parseBroadcastTypes(OpAsmParser &parser, Type &lhs,
                                       Type &rhs, Type &result) {
  if (parser.parseType(lhs))
    return failure();
  if (failed(parser.parseOptionalComma())) {
    rhs = result = lhs;
    return success();
  }
  return failure(parser.parseType(rhs) || parser.parseArrow() ||
                 parser.parseType(result));
}

void gpipe::printBroadcastTypes(OpAsmPrinter &printer, Operation *, Type lhs,
                                Type rhs, Type result) {
  printer << lhs;
  if (lhs != rhs || lhs != result)
    printer << ", " << rhs << " -> " << result;
}

ParseResult gpipe::parseSameOrListedTypes(OpAsmParser &parser, Type &a,
                                          Type &b, Type &c) {
  if (parser.parseType(a))
    return failure();
  if (failed(parser.parseOptionalComma())) {
    b = c = a;
    return success();
  }
  return failure(parser.parseType(b) || parser.parseComma() ||
                 parser.parseType(c));
}

void gpipe::printSameOrListedTypes(OpAsmPrinter &printer, Operation *, Type a,
                                   Type b, Type c) {
  printer << a;
  if (a != b || a != c)
    printer << ", " << b << ", " << c;
}
