//===- GPipeOps.h - gpipe operations ----------------------------*- C++ -*-===//

#ifndef GPIPE_DIALECT_GPIPE_IR_GPIPEOPS_H
#define GPIPE_DIALECT_GPIPE_IR_GPIPEOPS_H

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
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

#endif // GPIPE_DIALECT_GPIPE_IR_GPIPEOPS_H
