//===- GPipeDialect.h - gpipe dialect and attributes ------------*- C++ -*-===//

#ifndef GPIPE_DIALECT_GPIPE_IR_GPIPEDIALECT_H
#define GPIPE_DIALECT_GPIPE_IR_GPIPEDIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h.inc"
#include "gpipe/Dialect/GPipe/IR/GPipeEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "gpipe/Dialect/GPipe/IR/GPipeAttrs.h.inc"

#endif // GPIPE_DIALECT_GPIPE_IR_GPIPEDIALECT_H
