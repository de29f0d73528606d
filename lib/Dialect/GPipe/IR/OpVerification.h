//===- OpVerification.h - Checks shared by the op verifiers -----*- C++ -*-===//
//
// Private to lib/Dialect/GPipe/IR: the checks that several of GPipeOps.cpp,
// GPipeImageOps.cpp and GPipeBackwardOps.cpp use.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_DIALECT_GPIPE_IR_OPVERIFICATION_H
#define GPIPE_LIB_DIALECT_GPIPE_IR_OPVERIFICATION_H

#include "mlir/IR/OpImplementation.h"
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

/// An attention's optional biases (gpipe.attention, gpipe.attention_grad)
/// come together, `qkvBias` of shape [3 width] and `outBias` [width], in
/// `elementType`.
mlir::LogicalResult verifyAttentionBiases(mlir::Operation *op,
                                          mlir::Value qkvBias,
                                          mlir::Value outBias, int64_t width,
                                          mlir::Type elementType);

} // namespace gpipe::detail

namespace gpipe {
// Custom directives of the broadcasting ops' assembly (GPipeElementwiseOps.cpp).

/// `T` when lhs, rhs and result have type T, else `T_lhs, T_rhs -> T_result`.
mlir::ParseResult parseBroadcastTypes(mlir::OpAsmParser &parser,
                                      mlir::Type &lhs, mlir::Type &rhs,
                                      mlir::Type &result);
void printBroadcastTypes(mlir::OpAsmPrinter &printer, mlir::Operation *op,
                         mlir::Type lhs, mlir::Type rhs, mlir::Type result);
/// `T` when the three have type T, else `T_a, T_b, T_c`.
mlir::ParseResult parseSameOrListedTypes(mlir::OpAsmParser &parser,
                                         mlir::Type &a, mlir::Type &b,
                                         mlir::Type &c);
void printSameOrListedTypes(mlir::OpAsmPrinter &printer, mlir::Operation *op,
                            mlir::Type a, mlir::Type b, mlir::Type c);
} // namespace gpipe

#endif // GPIPE_LIB_DIALECT_GPIPE_IR_OPVERIFICATION_H
