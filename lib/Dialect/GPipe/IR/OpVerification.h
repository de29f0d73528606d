//===- OpVerification.h - Checks shared by the op verifiers -----*- C++ -*-===//
//
// Private to lib/Dialect/GPipe/IR: the checks GPipeOps.cpp and
// GPipeImageOps.cpp both use.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_DIALECT_GPIPE_IR_OPVERIFICATION_H
#define GPIPE_LIB_DIALECT_GPIPE_IR_OPVERIFICATION_H

#include "mlir/IR/Operation.h"

namespace gpipe::detail {

/// "expects result type T, got U" unless they match.
mlir::LogicalResult verifyResultShape(mlir::Operation *op, mlir::Type expected,
                                      mlir::Type actual);

/// The bias of a weighted op (dense, conv2d), if any, is [features] and the
/// weight, bias and result have the input's element type.
mlir::LogicalResult verifyBiasAndTypes(mlir::Operation *op, mlir::Value input,
                                       mlir::Value weight, mlir::Value bias,
                                       mlir::Value result, int64_t features);

} // namespace gpipe::detail

#endif // GPIPE_LIB_DIALECT_GPIPE_IR_OPVERIFICATION_H
