//===- PtxEmit.h - Scalar arithmetic for the PTX kernels --------*- C++ -*-===//
//
// Private to lib/Target: the builder of one location's arithmetic that the
// PTX kernels' bodies (PtxKernelBody.cpp: index computations in i64) and
// their math expansions (PtxMath.cpp: double precision) share.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_TARGET_PTXEMIT_H
#define GPIPE_LIB_TARGET_PTXEMIT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"

namespace gpipe::ptx_detail {

/// Arithmetic at one location, for the index computations (i64) and the
/// double-precision math.
struct Emit {
  mlir::OpBuilder &b;
  mlir::Location loc;

  mlir::Type f32() { return b.getF32Type(); }
  mlir::Type f64() { return b.getF64Type(); }
  mlir::Type i64() { return b.getI64Type(); }
  mlir::Value d(double v) {
    return mlir::arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v));
  }
  mlir::Value f(float v) {
    return mlir::arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  mlir::Value i(int64_t v) {
    return mlir::arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  }
  mlir::Value addi(mlir::Value x, mlir::Value y) {
    return mlir::arith::AddIOp::create(b, loc, x, y);
  }
  mlir::Value subi(mlir::Value x, mlir::Value y) {
    return mlir::arith::SubIOp::create(b, loc, x, y);
  }
  mlir::Value muli(mlir::Value x, mlir::Value y) {
    return mlir::arith::MulIOp::create(b, loc, x, y);
  }
  mlir::Value divui(mlir::Value x, mlir::Value y) {
    return mlir::arith::DivUIOp::create(b, loc, x, y);
  }
  mlir::Value remui(mlir::Value x, mlir::Value y) {
    return mlir::arith::RemUIOp::create(b, loc, x, y);
  }
  mlir::Value add(mlir::Value x, mlir::Value y) {
    return mlir::arith::AddFOp::create(b, loc, x, y);
  }
  mlir::Value sub(mlir::Value x, mlir::Value y) {
    return mlir::arith::SubFOp::create(b, loc, x, y);
  }
  mlir::Value mul(mlir::Value x, mlir::Value y) {
    return mlir::arith::MulFOp::create(b, loc, x, y);
  }
  mlir::Value div(mlir::Value x, mlir::Value y) {
    return mlir::arith::DivFOp::create(b, loc, x, y);
  }
  mlir::Value neg(mlir::Value x) {
    return mlir::arith::NegFOp::create(b, loc, x);
  }
  mlir::Value fma(mlir::Value x, mlir::Value y, mlir::Value z) {
    return mlir::math::FmaOp::create(b, loc, x, y, z);
  }
  mlir::Value floor(mlir::Value x) {
    return mlir::math::FloorOp::create(b, loc, x);
  }
  mlir::Value roundEven(mlir::Value x) {
    return mlir::math::RoundEvenOp::create(b, loc, x);
  }
  mlir::Value abs(mlir::Value x) {
    return mlir::math::AbsFOp::create(b, loc, x);
  }
  mlir::Value cmp(mlir::arith::CmpFPredicate p, mlir::Value x, mlir::Value y) {
    return mlir::arith::CmpFOp::create(b, loc, p, x, y);
  }
  mlir::Value cmpi(mlir::arith::CmpIPredicate p, mlir::Value x, mlir::Value y) {
    return mlir::arith::CmpIOp::create(b, loc, p, x, y);
  }
  mlir::Value select(mlir::Value c, mlir::Value x, mlir::Value y) {
    return mlir::arith::SelectOp::create(b, loc, c, x, y);
  }
  mlir::Value andi(mlir::Value x, mlir::Value y) {
    return mlir::arith::AndIOp::create(b, loc, x, y);
  }
  mlir::Value ori(mlir::Value x, mlir::Value y) {
    return mlir::arith::OrIOp::create(b, loc, x, y);
  }
  mlir::Value extf(mlir::Value x) {
    return mlir::arith::ExtFOp::create(b, loc, f64(), x);
  }
  mlir::Value truncf(mlir::Value x) {
    return mlir::arith::TruncFOp::create(b, loc, f32(), x);
  }
  mlir::Value bitcast(mlir::Type type, mlir::Value x) {
    return mlir::arith::BitcastOp::create(b, loc, type, x);
  }
  /// c[0] + z (c[1] + z (c[2] + ...)).
  mlir::Value horner(mlir::Value z, llvm::ArrayRef<double> c) {
    mlir::Value acc = d(c.back());
    for (double coefficient : llvm::reverse(c.drop_back()))
      acc = fma(acc, z, d(coefficient));
    return acc;
  }
};

} // namespace gpipe::ptx_detail

#endif // GPIPE_LIB_TARGET_PTXEMIT_H
