//===- BatchPlacement.cpp - Where a generated op puts the batch -----------===//
//
// A bundle runs each op on one micro-batch's rows at a time. These checks
// refuse, at emission, the ops whose results would then differ from the
// whole batch's: an op that mixes examples, or reads a value that is not per
// example along the batch dimension of one that is.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Target/BatchPlacement.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/RecomputeCopies.h"

using namespace mlir;
using namespace gpipe;

/// A gather (or its gradient) on a micro-batch's rows: per-example indices
/// go with a per-example input, `batched` (each example reads its own
/// rows); indices that are not per example (a constant's) index a
/// per-example input along another axis than the batch.
static LogicalResult checkGatherPlacement(Operation *op,
                                          ArrayRef<bool> operandBatched) {
  const bool batched = op->hasAttr("batched");
  const int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
  if (batched && !(operandBatched[0] && operandBatched[1]))
    return op->emitOpError()
           << "is batched, which pairs per-example indices with a per-example "
              "value, but its "
           << (operandBatched[0] ? "indices are" : "input is")
           << " not per example (a parameter, or a value computed from "
              "parameters alone)";
  if (!batched && operandBatched[1])
    return op->emitOpError()
           << "reads per-example indices without `batched`: the batch would "
              "land in dimension "
           << axis
           << " of the result; gather from a per-example value with "
              "`batched`, or look up a table's rows with gpipe.embedding";
  if (operandBatched[0] && axis == 0)
    return op->emitOpError()
           << "gathers along the batch (axis 0) of a per-example value: each "
              "micro-batch holds its own rows; gather along another axis";
  return success();
}

/// A generated op runs on a micro-batch's rows: refuses an operand that is
/// not per example (a parameter, or a value of parameters alone) but sits in
/// the batch dimension of a result that is, since a micro-batch would read
/// all of its rows; and a forward reduction over the batch, which would mix
/// a micro-batch's examples where the model mixes the whole batch's.
LogicalResult gpipe::checkBatchPlacement(Operation *op, int64_t batch,
                                         ArrayRef<bool> operandBatched) {
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  bool resultBatched =
      isPerExampleResult(op->getResult(0), operandBatched) &&
      result.getRank() > 0 && result.getDimSize(0) == batch;
  bool isGradient = op->getParentOfType<StageBackwardOp>() &&
                    !op->hasAttr(kRecomputeAttr);
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes");
  if (!isGradient && isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(op) &&
      operandBatched[0] && llvm::is_contained(axes.asArrayRef(), 0))
    return op->emitOpError()
           << "reduces over the batch (axis 0), which would mix each "
              "micro-batch's examples apart from the others'; reduce over "
              "the other axes";
  if (!isGradient && isa<SumToOp>(op) && operandBatched[0] && !resultBatched)
    return op->emitOpError()
           << "sums over the batch (axis 0), which would mix each "
              "micro-batch's examples apart from the others'";
  // Only a reshape's or a transpose's: another op's operand 0 may be a
  // scalar (a constant divided by a per-example value).
  auto transpose = dyn_cast<TransposeOp>(op);
  auto reshapeInput = isa<ReshapeOp>(op)
                          ? cast<RankedTensorType>(op->getOperand(0).getType())
                          : RankedTensorType();
  bool keepsBatch =
      transpose ? transpose.getPerm()[0] == 0
                : reshapeInput && resultBatched && reshapeInput.getRank() > 0 &&
                      result.getDimSize(0) == reshapeInput.getDimSize(0);
  if (isa<SliceOp, SliceGradOp>(op) && operandBatched[0]) {
    auto starts = op->getAttrOfType<DenseI64ArrayAttr>("starts").asArrayRef();
    auto steps = op->getAttrOfType<DenseI64ArrayAttr>("steps").asArrayRef();
    auto operand = cast<RankedTensorType>(op->getOperand(0).getType());
    if (starts[0] != 0 || steps[0] != 1 ||
        operand.getDimSize(0) != result.getDimSize(0))
      return op->emitOpError()
             << "slices the batch (dimension 0) of a per-example value: each "
                "micro-batch holds its own rows; keep dimension 0 whole "
                "(start 0, step 1) and slice the others";
  }
  if (auto concat = dyn_cast<ConcatOp>(op);
      concat && concat.getAxis() == 0 && llvm::is_contained(operandBatched, true))
    return op->emitOpError()
           << "concatenates per-example values along the batch (axis 0): "
              "each micro-batch holds its own rows; concatenate along "
              "another axis";
  if (isa<GatherOp, GatherGradOp>(op))
    if (failed(checkGatherPlacement(op, operandBatched)))
      return failure();
  if (operandBatched[0] && isa<ReshapeOp, TransposeOp>(op) && !keepsBatch)
    return op->emitOpError()
           << "moves the batch away from dimension 0 of a per-example value; "
              "keep dimension 0 as it is (reshape and permute the others)";
  if (!resultBatched || axes)
    return success();
  for (auto [operand, batched] : llvm::zip(op->getOperands(), operandBatched)) {
    auto type = cast<RankedTensorType>(operand.getType());
    if (!batched && type.getRank() == result.getRank() &&
        type.getDimSize(0) != 1)
      return op->emitOpError()
             << "reads " << type
             << ", which is not per example (a parameter, or a value "
                "computed from parameters alone) but spans the batch "
                "dimension of its per-example result: each micro-batch has "
                "its own rows of the one and all rows of the other; give it "
                "size 1 (or drop) in dimension 0 to broadcast it";
  }
  return success();
}

/// A matmul runs on a micro-batch's rows: in a forward, a per-example
/// operand keeps the batch in dimension 0 of the result (a batch dimension,
/// or the lhs's rows), never in a contracted or column dimension; a
/// backward may contract it (a weight's gradient, summed over the batch as
/// micro-batches accumulate). Where the result's dimension 0 is a batch
/// dimension, an operand that is not per example does not span it.
LogicalResult gpipe::checkMatmulPlacement(MatmulOp op,
                                          ArrayRef<bool> operandBatched) {
  auto result = cast<RankedTensorType>(op.getResult().getType());
  bool isGradient = op->getParentOfType<StageBackwardOp>() &&
                    !op->hasAttr(kRecomputeAttr);
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    auto type = cast<RankedTensorType>(operand.getType());
    bool batched = operandBatched[index];
    bool rowsOfLhs = index == 0 && type.getRank() == 2 && !op.getTransposeLhs();
    if (batched && type.getRank() == result.getRank() &&
        (type.getRank() > 2 || rowsOfLhs))
      continue;
    if (batched && !isGradient)
      return op.emitOpError()
             << "reads the per-example " << type << " ("
             << (index ? "rhs" : "lhs")
             << ") with its batch (dimension 0) outside the result's dimension "
                "0 (contracted, a column, or behind other batch dimensions); "
                "keep the batch first in both";
    if (!batched && llvm::is_contained(operandBatched, true) &&
        result.getRank() > 2 && type.getRank() == result.getRank() &&
        type.getDimSize(0) != 1)
      return op.emitOpError()
             << "reads " << type
             << ", which is not per example (a parameter, or a value "
                "computed from parameters alone) but spans the batch "
                "dimension of its per-example result; give it size 1 (or "
                "drop) in dimension 0 to broadcast it";
  }
  return success();
}
