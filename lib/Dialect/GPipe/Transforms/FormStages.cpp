//===- FormStages.cpp - Outline cells into stages -------------------------===//
//
// Each cell becomes a gpipe.stage whose inputs are the model inputs it reads
// and the values that cross into it from the previous stage. A value that
// skips stages (a residual) is added to the outputs and inputs of every stage
// it passes, so only neighbours ever communicate.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/CostModel.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

#define DEBUG_TYPE "gpipe-form-stages"

namespace gpipe {
#define GEN_PASS_DEF_FORMSTAGESPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;

namespace {
/// The model's layers grouped by cell, and where each layer result lives.
struct CellLayout {
  SmallVector<SmallVector<LayerOp>> cells;
  llvm::DenseMap<Operation *, unsigned> cellOf;
};
} // namespace

/// Reads the `cell` of every layer; cells must be consecutive from 0.
static FailureOr<CellLayout> readCells(ModelOp model) {
  CellLayout layout;
  for (Operation &op : model.getBody().front()) {
    if (isa<InputOp, ReturnOp>(op))
      continue;
    auto layer = dyn_cast<LayerOp>(op);
    if (!layer)
      return op.emitOpError()
             << "cannot be grouped into stages; expected only gpipe.input, "
                "gpipe.layer and gpipe.return in the model";
    std::optional<uint64_t> cell = layer.getCell();
    if (!cell)
      return layer.emitOpError()
             << "has no cell; run gpipe-partition or write 'cell'";
    uint64_t expectedNew = layout.cells.size();
    if (*cell == expectedNew) {
      layout.cells.emplace_back();
    } else if (layout.cells.empty() || *cell != expectedNew - 1) {
      InFlightDiagnostic diag =
          layer.emitOpError() << "is in cell " << *cell
                              << " but cells must be consecutive from 0 in "
                                 "layer order; expected cell ";
      if (layout.cells.empty())
        diag << 0;
      else
        diag << expectedNew - 1 << " or " << expectedNew;
      return diag;
    }
    layout.cells.back().push_back(layer);
    layout.cellOf[layer] = *cell;
  }
  return layout;
}

namespace {
struct FormStagesPass
    : public gpipe::impl::FormStagesPassBase<FormStagesPass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(formStages(model)))
        return signalPassFailure();
  }

  LogicalResult formStages(ModelOp model) {
    FailureOr<CellLayout> layout = readCells(model);
    if (failed(layout))
      return failure();
    unsigned numStages = layout->cells.size();
    Block &body = model.getBody().front();

    // crossing[c]: layer results made before cell c and used in cell >= c, in
    // program order. They are stage c's inputs from stage c - 1.
    SmallVector<SmallVector<Value>> crossing(numStages + 1);
    for (auto [cell, layers] : llvm::enumerate(layout->cells)) {
      for (LayerOp layer : layers) {
        for (Value result : layer.getResults()) {
          unsigned lastUse = cell;
          for (Operation *user : result.getUsers()) {
            Operation *owner = body.findAncestorOpInBlock(*user);
            auto it = layout->cellOf.find(owner);
            if (it != layout->cellOf.end())
              lastUse = std::max(lastUse, it->second);
          }
          if (lastUse == cell)
            continue;
          auto type = cast<RankedTensorType>(result.getType());
          if (!isa<FloatType>(type.getElementType()))
            return layer.emitOpError()
                   << "result #" << cast<OpResult>(result).getResultNumber()
                   << " " << type << " crosses from stage " << cell
                   << " to stage " << cell + 1
                   << ", but stages exchange floating-point tensors only; "
                      "compute it in the stage that reads it (gpipe-partition "
                      "never cuts there)";
          if (type.getRank() == 0 ||
              type.getDimSize(0) != static_cast<int64_t>(model.getBatch()))
            return layer.emitOpError()
                   << "result #" << cast<OpResult>(result).getResultNumber()
                   << " crosses from stage " << cell << " to stage "
                   << cell + 1 << " and must have the batch size "
                   << model.getBatch() << " as leading dimension, got "
                   << type;
          for (unsigned c = cell + 1; c <= lastUse; ++c)
            crossing[c].push_back(result);
        }
      }
    }

    // Model inputs each cell reads, in input order.
    SmallVector<SmallVector<Value>> inputsOf(numStages);
    for (InputOp input : body.getOps<InputOp>()) {
      llvm::SmallSetVector<unsigned, 4> readers;
      for (Operation *user : input->getUsers()) {
        auto it = layout->cellOf.find(body.findAncestorOpInBlock(*user));
        if (it != layout->cellOf.end())
          readers.insert(it->second);
      }
      for (unsigned cell : readers)
        inputsOf[cell].push_back(input);
    }

    ArrayRef<int64_t> cellMemory;
    if (auto summary =
            model->getAttrOfType<DictionaryAttr>("gpipe.partition"))
      if (auto memory = summary.getAs<DenseI64ArrayAttr>("cell_memory"))
        cellMemory = memory.asArrayRef();

    ReturnOp returnOp = model.getReturnOp();
    Value loss = returnOp.getLoss();
    OpBuilder builder(model.getContext());
    llvm::DenseMap<Value, Value> carrier; // model-level value -> stage result
    for (unsigned cell = 0; cell < numStages; ++cell) {
      SmallVector<LayerOp> &layers = layout->cells[cell];
      SmallVector<Value> originals(crossing[cell]);
      SmallVector<Value> operands;
      for (Value value : crossing[cell])
        operands.push_back(carrier.lookup(value));
      llvm::append_range(originals, inputsOf[cell]);
      llvm::append_range(operands, inputsOf[cell]);
      SmallVector<Value> outputs =
          cell + 1 < numStages ? SmallVector<Value>(crossing[cell + 1])
                               : SmallVector<Value>{loss};

      // A stage has a cost only when each of its layers has one.
      CostAttr cost = CostAttr::get(model.getContext(), 0, 0, 0);
      for (LayerOp layer : layers) {
        CostAttr layerCost = getCost(layer);
        cost = layerCost && cost ? addCosts(model.getContext(), cost, layerCost)
                                 : CostAttr();
      }

      builder.setInsertionPoint(layers.front());
      auto stage = StageOp::create(
          builder, layers.front().getLoc(), ValueRange(outputs).getTypes(),
          builder.getStringAttr("stage" + std::to_string(cell)), cell,
          operands,
          cell < cellMemory.size()
              ? builder.getI64IntegerAttr(cellMemory[cell])
              : IntegerAttr(),
          cost);
      Block *block = builder.createBlock(&stage.getBody());
      for (Value value : originals)
        block->addArgument(value.getType(), value.getLoc());
      for (LayerOp layer : layers)
        layer->moveBefore(block, block->end());
      for (auto [value, argument] : llvm::zip(originals, block->getArguments()))
        value.replaceUsesWithIf(argument, [&](OpOperand &use) {
          return stage->isProperAncestor(use.getOwner());
        });

      SmallVector<Value> yielded;
      for (Value value : outputs) {
        auto position = llvm::find(originals, value);
        yielded.push_back(position == originals.end()
                              ? value
                              : block->getArgument(position -
                                                   originals.begin()));
      }
      builder.setInsertionPointToEnd(block);
      YieldOp::create(builder, stage.getLoc(), yielded);
      for (auto [value, result] : llvm::zip(outputs, stage.getResults()))
        carrier[value] = result;
    }
    returnOp.getLossMutable().assign(carrier.lookup(loss));
    return success();
  }
};
} // namespace
