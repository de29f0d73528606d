//===- GPipeOps.h - gpipe operations ----------------------------*- C++ -*-===//

#ifndef GPIPE_DIALECT_GPIPE_IR_GPIPEOPS_H
#define GPIPE_DIALECT_GPIPE_IR_GPIPEOPS_H

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/runtime/bundle/OpTable.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace gpipe {
class ModelOp;
class StageOp;
class LayerOp;
class ScheduleOp;
class ProgramOp;
} // namespace gpipe

#define GET_OP_CLASSES
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h.inc"

namespace gpipe {
/// Whether `result` (of a compute or gradient op) has the batch as its
/// dimension 0, given which operands of its op have it. Decided by dataflow,
/// never by the shape alone: a weight may have the batch as its first
/// dimension.
bool isPerExampleResult(mlir::OpResult result,
                        llvm::ArrayRef<bool> operandBatched);

/// The window attributes of conv2d, the pools and their gradients, as the
/// runtime reads them (OpTable.h), or nothing for other ops.
std::optional<runtime::WindowAttrs> getWindowAttrs(mlir::Operation *op);
} // namespace gpipe

#endif // GPIPE_DIALECT_GPIPE_IR_GPIPEOPS_H
