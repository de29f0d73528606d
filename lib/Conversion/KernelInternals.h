//===- KernelInternals.h - What the kernel lowerings share ------*- C++ -*-===//
//
// Private to lib/Conversion. The kernel's checks (KernelSpec.cpp), its steps'
// scalar bodies (KernelSteps.cpp) and its linalg function (KernelToLinalg.cpp)
// share the steps' arities, the check of a whole kernel and the builder of
// the scalar arithmetic.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_CONVERSION_KERNELINTERNALS_H
#define GPIPE_LIB_CONVERSION_KERNELINTERNALS_H

#include "gpipe/Conversion/KernelToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <string>

namespace gpipe::kernel_detail {

/// The number of operands of each step op, or 0 for an unknown op.
unsigned arityOf(llvm::StringRef op);

/// The kernel's problems, or "" if it can be built.
std::string checkKernel(const KernelSpec &kernel);

/// Scalar f32 arithmetic at one location.
struct ScalarBuilder {
  mlir::OpBuilder &b;
  mlir::Location loc;

  mlir::Value k(float v) {
    return mlir::arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
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
  mlir::Value exp(mlir::Value x) {
    return mlir::math::ExpOp::create(b, loc, x);
  }
  mlir::Value minNum(mlir::Value x, mlir::Value y) {
    return mlir::arith::MinNumFOp::create(b, loc, x, y);
  }
  /// x <= 0 ? 0 : then; false for a NaN x.
  mlir::Value zeroUnlessPositive(mlir::Value x, mlir::Value then) {
    mlir::Value le = mlir::arith::CmpFOp::create(
        b, loc, mlir::arith::CmpFPredicate::OLE, x, k(0));
    return mlir::arith::SelectOp::create(b, loc, le, k(0), then);
  }
  mlir::Value neg(mlir::Value x) {
    return mlir::arith::NegFOp::create(b, loc, x);
  }
  mlir::Value cmp(mlir::arith::CmpFPredicate p, mlir::Value x, mlir::Value y) {
    return mlir::arith::CmpFOp::create(b, loc, p, x, y);
  }
  mlir::Value select(mlir::Value c, mlir::Value x, mlir::Value y) {
    return mlir::arith::SelectOp::create(b, loc, c, x, y);
  }
  mlir::Value pow(mlir::Value x, mlir::Value y) {
    return mlir::math::PowFOp::create(b, loc, x, y);
  }
  mlir::Value log(mlir::Value x) {
    return mlir::math::LogOp::create(b, loc, x);
  }
  /// 1 / (1 + e^-x).
  mlir::Value sigmoid(mlir::Value x) {
    return div(k(1.0f), add(k(1.0f), exp(neg(x))));
  }
  /// The gradient of max (`greater` OGT) or min (OLT) for lhs, as
  /// PyTorch's: 0 where the other side wins, half of dy on a tie.
  mlir::Value pickGrad(mlir::arith::CmpFPredicate losesWhen, mlir::Value dy,
                       mlir::Value a, mlir::Value c) {
    mlir::Value tie = select(cmp(mlir::arith::CmpFPredicate::OEQ, a, c),
                             mul(dy, k(0.5f)), dy);
    return select(cmp(losesWhen, a, c), k(0.0f), tie);
  }

  /// The general element-wise ops (GPipeElementwiseOps.td) and their
  /// gradients.
  mlir::Value generalStep(llvm::StringRef op, llvm::ArrayRef<mlir::Value> a);

  /// `x` (f32, i32 or i1) as `to` ("f32", "i32", "i1"): f32 to i32 toward
  /// zero, saturating, NaN 0; to i1 x != 0 (NaN true); i1 to 0 or 1.
  mlir::Value castTo(mlir::Value x, llvm::StringRef to);

  /// Phi(x) = erfc(-x / sqrt 2) / 2.
  mlir::Value normalCdf(mlir::Value x);
  /// exp(min(-2u, kExpMax)) for u of the tanh GELU.
  mlir::Value geluExp(mlir::Value x);

  /// Step `s` on its operands' values `a` (null for an op that is not a
  /// step).
  mlir::Value step(const KernelStep &s, llvm::ArrayRef<mlir::Value> a);
};

} // namespace gpipe::kernel_detail

#endif // GPIPE_LIB_CONVERSION_KERNELINTERNALS_H
