//===- KernelToLinalg.cpp - A fused element-wise kernel as linalg ---------===//
//
// The scalar body of each step is the runtime's definition of the op
// (runtime/include/gpipe/runtime/kernels/DeviceKernels.h), written with arith
// and math ops so that the lowering can vectorize it:
//  - relu: x <= 0 ? 0 : x (NaN stays NaN, -0 gives +0), its gradient
//    x <= 0 ? 0 : dy (the gradient passes where x is NaN, as PyTorch's);
//  - gelu: 0.5 x (2 / (1 + e)), e = exp(min(-2u, 88.376)), never tanh(u) + 1,
//    which cancels where tanh u rounds to -1; its gradient with
//    sech^2 u = 4 e / (1 + e)^2;
//  - gelu_erf: x Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2, which keeps its
//    digits in the left tail; its gradient Phi(x) + x phi(x);
//  - tanh's gradient from the forward's output: dy (1 - y^2).
// min is minnumf: a NaN argument gives the other one, as C's fminf.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Conversion/KernelToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace gpipe;

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
/// Largest float exponent argument whose exp is finite.
constexpr float kExpMax = 88.3762626647949f;

/// The number of operands of each step op, or 0 for an unknown op.
unsigned arityOf(StringRef op) {
  return llvm::StringSwitch<unsigned>(op)
      .Cases({"relu", "gelu", "gelu_erf", "tanh"}, 1)
      .Cases({"add", "add_grads", "relu_grad", "gelu_grad", "gelu_erf_grad",
              "tanh_grad"},
             2)
      .Default(0);
}

/// Scalar f32 arithmetic at one location.
struct ScalarBuilder {
  OpBuilder &b;
  Location loc;

  Value k(float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value exp(Value x) { return math::ExpOp::create(b, loc, x); }
  Value minNum(Value x, Value y) {
    return arith::MinNumFOp::create(b, loc, x, y);
  }
  /// x <= 0 ? 0 : then; false for a NaN x.
  Value zeroUnlessPositive(Value x, Value then) {
    Value le =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLE, x, k(0));
    return arith::SelectOp::create(b, loc, le, k(0), then);
  }
  /// Phi(x) = erfc(-x / sqrt 2) / 2.
  Value normalCdf(Value x) {
    Value arg = mul(arith::NegFOp::create(b, loc, x), k(kInvSqrt2));
    return mul(k(0.5f), math::ErfcOp::create(b, loc, arg));
  }
  /// exp(min(-2u, kExpMax)) for u of the tanh GELU.
  Value geluExp(Value x) {
    Value u =
        mul(k(kSqrt2OverPi), add(x, mul(k(kGeluCubic), mul(mul(x, x), x))));
    return exp(minNum(mul(k(-2.0f), u), k(kExpMax)));
  }

  Value step(StringRef op, ArrayRef<Value> a) {
    if (op == "relu")
      return zeroUnlessPositive(a[0], a[0]);
    if (op == "relu_grad") // (dy, x)
      return zeroUnlessPositive(a[1], a[0]);
    if (op == "add" || op == "add_grads")
      return add(a[0], a[1]);
    if (op == "tanh")
      return math::TanhOp::create(b, loc, a[0]);
    if (op == "tanh_grad") // (dy, y)
      return mul(a[0], sub(k(1.0f), mul(a[1], a[1])));
    if (op == "gelu")
      return mul(mul(k(0.5f), a[0]), div(k(2.0f), add(k(1.0f), geluExp(a[0]))));
    if (op == "gelu_grad") { // (dy, x)
      Value x = a[1], x2 = mul(x, x);
      Value u =
          mul(mul(k(kSqrt2OverPi), x), add(k(1.0f), mul(k(kGeluCubic), x2)));
      Value e = exp(minNum(mul(k(-2.0f), u), k(kExpMax)));
      Value inv = div(k(1.0f), add(k(1.0f), e));
      Value sech2 = mul(mul(k(4.0f), mul(e, inv)), inv);
      Value du =
          mul(k(kSqrt2OverPi), add(k(1.0f), mul(k(3.0f * kGeluCubic), x2)));
      Value slope = add(mul(k(0.5f), mul(k(2.0f), inv)),
                        mul(mul(mul(k(0.5f), x), sech2), du));
      return mul(a[0], slope);
    }
    if (op == "gelu_erf")
      return mul(a[0], normalCdf(a[0]));
    if (op == "gelu_erf_grad") { // (dy, x)
      Value x = a[1];
      Value density = mul(k(kInvSqrt2Pi), exp(mul(mul(k(-0.5f), x), x)));
      return mul(a[0], add(normalCdf(x), mul(x, density)));
    }
    return {};
  }
};
} // namespace

bool gpipe::isKernelStepOp(StringRef op) { return arityOf(op) != 0; }

std::string KernelSpec::describe() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto name = [&](unsigned operand) {
    if (operand < numInputs)
      os << "in" << operand;
    else
      os << "t" << operand - numInputs;
  };
  for (auto [i, step] : llvm::enumerate(steps)) {
    if (i)
      os << "; ";
    os << step.op << "(";
    llvm::interleave(step.operands, os, name, ",");
    os << ")->";
    if (i + 1 == steps.size())
      os << "out";
    else
      os << "t" << i;
  }
  return text;
}

LogicalResult gpipe::buildKernelFunction(ModuleOp module, Location loc,
                                         StringRef name,
                                         const KernelSpec &kernel) {
  if (kernel.steps.empty())
    return emitError(loc) << "kernel '" << name << "' has no steps";
  for (auto [i, step] : llvm::enumerate(kernel.steps)) {
    unsigned arity = arityOf(step.op);
    if (arity == 0)
      return emitError(loc) << "kernel '" << name << "': '" << step.op
                            << "' is not an element-wise op a kernel computes";
    if (step.operands.size() != arity)
      return emitError(loc)
             << "kernel '" << name << "': '" << step.op << "' takes " << arity
             << " operands, got " << step.operands.size();
    for (unsigned operand : step.operands)
      if (operand >= kernel.numInputs + i)
        return emitError(loc)
               << "kernel '" << name << "': step " << i << " reads value "
               << operand << ", which is not computed before it";
  }

  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto tensorType =
      RankedTensorType::get({ShapedType::kDynamic}, b.getF32Type());
  SmallVector<Type> argTypes(kernel.numInputs + 1, tensorType);
  auto func = func::FuncOp::create(b, loc, name,
                                   b.getFunctionType(argTypes, {tensorType}));
  func.setArgAttr(kernel.numInputs,
                  bufferization::BufferizationDialect::kWritableAttrName,
                  b.getBoolAttr(true));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);

  AffineMap identity = b.getDimIdentityMap();
  SmallVector<AffineMap> maps(kernel.numInputs + 1, identity);
  SmallVector<utils::IteratorType> iterators{utils::IteratorType::parallel};
  ValueRange args = entry->getArguments();
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{tensorType}, args.drop_back(), args.take_back(), maps,
      iterators, [&](OpBuilder &nested, Location nestedLoc, ValueRange elems) {
        ScalarBuilder scalar{nested, nestedLoc};
        SmallVector<Value> values(elems.drop_back());
        for (const KernelStep &step : kernel.steps) {
          SmallVector<Value> operands;
          for (unsigned operand : step.operands)
            operands.push_back(values[operand]);
          values.push_back(scalar.step(step.op, operands));
        }
        linalg::YieldOp::create(nested, nestedLoc, values.back());
      });
  func::ReturnOp::create(b, loc, generic.getResult(0));
  return success();
}
