//===- KernelSteps.cpp - The scalar arithmetic of a kernel's steps --------===//
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

#include "KernelInternals.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace gpipe;
using namespace gpipe::kernel_detail;

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
/// Largest float exponent argument whose exp is finite.
constexpr float kExpMax = 88.3762626647949f;
} // namespace

unsigned gpipe::kernel_detail::arityOf(StringRef op) {
  return llvm::StringSwitch<unsigned>(op)
      .Cases({"relu", "gelu", "gelu_erf", "tanh"}, 1)
      .Cases({"neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal",
              "sigmoid", "silu", "erf", "sin", "cos", "clip"},
             1)
      .Cases({"add", "add_grads", "relu_grad", "gelu_grad", "gelu_erf_grad",
              "tanh_grad"},
             2)
      .Cases({"sub", "mul", "div", "pow", "max", "min"}, 2)
      .Cases({"abs_grad", "exp_grad", "log_grad", "sqrt_grad", "rsqrt_grad",
              "reciprocal_grad", "sigmoid_grad", "silu_grad", "erf_grad",
              "sin_grad", "cos_grad", "clip_grad"},
             2)
      .Cases({"div_rhs_grad", "pow_lhs_grad", "pow_rhs_grad", "max_lhs_grad",
              "min_lhs_grad"},
             3)
      .Cases({"broadcast_to", "reduce_sum_grad", "reduce_mean_grad",
              "reshape", "transpose"},
             1)
      .Case("slice", 1)
      .Cases({"eq", "lt", "le", "gt", "ge", "and", "or"}, 2)
      .Cases({"not", "cast_f32", "cast_i32", "cast_i1"}, 1)
      .Case("where", 3)
      .Cases({"where_lhs_grad", "where_rhs_grad"}, 2)
      .Cases({"gather", "gather_grad"}, 2)
      .Case("max_tie", 2)
      .Case("reduce_max_grad", 4)
      .Cases({"reduce_sum", "reduce_mean", "reduce_max"}, 1)
      .Default(0);
}

Value ScalarBuilder::generalStep(StringRef op, ArrayRef<Value> a) {
  using P = arith::CmpFPredicate;
  if (op == "neg")
    return neg(a[0]);
  if (op == "abs")
    return math::AbsFOp::create(b, loc, a[0]);
  if (op == "exp")
    return exp(a[0]);
  if (op == "log")
    return log(a[0]);
  if (op == "sqrt")
    return math::SqrtOp::create(b, loc, a[0]);
  if (op == "rsqrt")
    return div(k(1.0f), math::SqrtOp::create(b, loc, a[0]));
  if (op == "reciprocal")
    return div(k(1.0f), a[0]);
  if (op == "sigmoid")
    return sigmoid(a[0]);
  if (op == "silu")
    return div(a[0], add(k(1.0f), exp(neg(a[0]))));
  if (op == "erf")
    return math::ErfOp::create(b, loc, a[0]);
  if (op == "sin")
    return math::SinOp::create(b, loc, a[0]);
  if (op == "cos")
    return math::CosOp::create(b, loc, a[0]);
  if (op == "sub")
    return sub(a[0], a[1]);
  if (op == "mul")
    return mul(a[0], a[1]);
  if (op == "div")
    return div(a[0], a[1]);
  if (op == "pow")
    return pow(a[0], a[1]);
  if (op == "max")
    return arith::MaximumFOp::create(b, loc, a[0], a[1]);
  if (op == "min")
    return arith::MinimumFOp::create(b, loc, a[0], a[1]);
  // Gradients: a[0] is dy.
  Value dy = a[0];
  if (op == "abs_grad") { // (dy, x): dy sign(x), NaN for a NaN x
    Value x = a[1];
    Value sign = select(cmp(P::OGT, x, k(0)), k(1.0f),
                        select(cmp(P::OLT, x, k(0)), k(-1.0f), k(0.0f)));
    return mul(dy, select(cmp(P::UNO, x, x), x, sign));
  }
  if (op == "exp_grad") // (dy, y)
    return mul(dy, a[1]);
  if (op == "log_grad") // (dy, x)
    return div(dy, a[1]);
  if (op == "sqrt_grad") // (dy, y): 2y exactly as y + y
    return div(dy, add(a[1], a[1]));
  if (op == "rsqrt_grad") // (dy, y)
    return mul(mul(dy, mul(mul(a[1], a[1]), a[1])), k(-0.5f));
  if (op == "reciprocal_grad") // (dy, y)
    return neg(mul(dy, mul(a[1], a[1])));
  if (op == "sigmoid_grad") // (dy, y)
    return mul(mul(dy, a[1]), sub(k(1.0f), a[1]));
  if (op == "silu_grad") { // (dy, x)
    Value s = sigmoid(a[1]);
    return mul(mul(dy, s), add(k(1.0f), mul(a[1], sub(k(1.0f), s))));
  }
  if (op == "erf_grad") // (dy, x): 2 / sqrt(pi) e^(-x^2)
    return mul(mul(dy, k(1.1283791670955126f)), exp(neg(mul(a[1], a[1]))));
  if (op == "sin_grad")
    return mul(dy, math::CosOp::create(b, loc, a[1]));
  if (op == "cos_grad")
    return neg(mul(dy, math::SinOp::create(b, loc, a[1])));
  if (op == "div_rhs_grad") // (dy, y, rhs)
    return neg(div(mul(dy, a[1]), a[2]));
  if (op == "pow_lhs_grad") { // (dy, a, b)
    Value slope = mul(a[2], pow(a[1], sub(a[2], k(1.0f))));
    return select(cmp(P::OEQ, a[2], k(0)), k(0.0f), mul(dy, slope));
  }
  if (op == "pow_rhs_grad") { // (dy, a, b)
    Value zero = arith::AndIOp::create(b, loc, cmp(P::OEQ, a[1], k(0)),
                                       cmp(P::OGE, a[2], k(0)));
    Value slope = mul(pow(a[1], a[2]), log(a[1]));
    return select(zero, k(0.0f), mul(dy, slope));
  }
  if (op == "max_lhs_grad") // (dy, lhs, rhs)
    return pickGrad(P::OLT, dy, a[1], a[2]);
  if (op == "min_lhs_grad")
    return pickGrad(P::OGT, dy, a[1], a[2]);
  // Broadcasting: the value itself at every point it stretches to; a
  // layout op's, wherever its input dimensions place it.
  if (op == "broadcast_to" || op == "reduce_sum_grad" || op == "reshape" ||
      op == "transpose" || op == "slice")
    return a[0];
  if (op == "max_tie") // (x, y): 1 where x is the maximum y
    return select(cmp(P::OEQ, a[0], a[1]), k(1.0f), k(0.0f));
  if (op == "reduce_max_grad") // (dy, x, y, count)
    return select(cmp(P::OEQ, a[1], a[2]), div(dy, a[3]), k(0.0f));
  // Comparisons (false with a NaN), logic on i1, selection, casts.
  if (std::optional<P> predicate = llvm::StringSwitch<std::optional<P>>(op)
                                       .Case("eq", P::OEQ)
                                       .Case("lt", P::OLT)
                                       .Case("le", P::OLE)
                                       .Case("gt", P::OGT)
                                       .Case("ge", P::OGE)
                                       .Default(std::nullopt))
    return cmp(*predicate, a[0], a[1]);
  if (op == "and")
    return arith::AndIOp::create(b, loc, a[0], a[1]);
  if (op == "or")
    return arith::OrIOp::create(b, loc, a[0], a[1]);
  if (op == "not")
    return arith::XOrIOp::create(
        b, loc, a[0], arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
  if (op == "where") // (cond, lhs, rhs)
    return select(a[0], a[1], a[2]);
  if (op == "where_lhs_grad") // (dy, cond)
    return select(a[1], a[0], k(0.0f));
  if (op == "where_rhs_grad")
    return select(a[1], k(0.0f), a[0]);
  if (op == "cast_f32" || op == "cast_i32" || op == "cast_i1")
    return castTo(a[0], op.drop_front(5));
  return {};
}

Value ScalarBuilder::castTo(Value x, StringRef to) {
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  Type from = x.getType();
  auto zeroOf = [&](Type type) {
    return arith::ConstantOp::create(b, loc, b.getZeroAttr(type)).getResult();
  };
  if (to == "f32") {
    if (from.isF32())
      return x;
    return from.isInteger(1)
               ? arith::UIToFPOp::create(b, loc, f32, x).getResult()
               : arith::SIToFPOp::create(b, loc, f32, x).getResult();
  }
  if (to == "i1") {
    if (from.isInteger(1))
      return x;
    return from.isF32() ? cmp(arith::CmpFPredicate::UNE, x, k(0.0f))
                        : arith::CmpIOp::create(b, loc,
                                                arith::CmpIPredicate::ne, x,
                                                zeroOf(from))
                              .getResult();
  }
  // to i32
  if (from.isInteger(32))
    return x;
  if (from.isInteger(1))
    return arith::ExtUIOp::create(b, loc, i32, x);
  // The largest float below 2^31 is 2147483520: clamped, fptosi is
  // defined; the selects put in the saturated and NaN results.
  Value clamped = minNum(arith::MaxNumFOp::create(b, loc, x, k(-2147483648.0f)),
                         k(2147483520.0f));
  Value truncated = arith::FPToSIOp::create(b, loc, i32, clamped);
  auto int32 = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(v)))
        .getResult();
  };
  Value big = select(cmp(arith::CmpFPredicate::OGE, x, k(2147483648.0f)),
                     int32(2147483647), truncated);
  return select(cmp(arith::CmpFPredicate::UNO, x, x), int32(0), big);
}

Value ScalarBuilder::normalCdf(Value x) {
  Value arg = mul(arith::NegFOp::create(b, loc, x), k(kInvSqrt2));
  return mul(k(0.5f), math::ErfcOp::create(b, loc, arg));
}

Value ScalarBuilder::geluExp(Value x) {
  Value u =
      mul(k(kSqrt2OverPi), add(x, mul(k(kGeluCubic), mul(mul(x, x), x))));
  return exp(minNum(mul(k(-2.0f), u), k(kExpMax)));
}

Value ScalarBuilder::step(const KernelStep &s, ArrayRef<Value> a) {
  StringRef op = s.op;
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
  if (op == "clip") { // NaN stays NaN: both compares are false
    Value low = k(float(s.constant("min"))),
          high = k(float(s.constant("max")));
    return select(
        cmp(arith::CmpFPredicate::OLT, a[0], low), low,
        select(cmp(arith::CmpFPredicate::OGT, a[0], high), high, a[0]));
  }
  if (op == "clip_grad") { // (dy, x): dy where min < x < max (PyTorch: 0 at the bounds)
    Value inside = arith::AndIOp::create(
        b, loc,
        cmp(arith::CmpFPredicate::OGT, a[1], k(float(s.constant("min")))),
        cmp(arith::CmpFPredicate::OLT, a[1], k(float(s.constant("max")))));
    return select(inside, a[0], k(0.0f));
  }
  if (op == "reduce_mean_grad") // (dy): dy / count
    return div(a[0], k(float(s.constant("count"))));
  if (Value v = generalStep(op, a))
    return v;
  return {};
}

FailureOr<SmallVector<Value>>
gpipe::emitKernelSteps(OpBuilder &b, Location loc, StringRef name,
                       const KernelSpec &kernel, ArrayRef<Value> inputs,
                       ArrayRef<Value> reductions) {
  if (std::string problem = checkKernel(kernel); !problem.empty())
    return (emitError(loc) << "kernel '" << name << "': " << problem),
           failure();
  if (inputs.size() != kernel.numInputs)
    return (emitError(loc) << "kernel '" << name << "': takes "
                           << kernel.numInputs << " inputs, got "
                           << inputs.size()),
           failure();
  ScalarBuilder scalar{b, loc};
  SmallVector<Value> values(inputs);
  // A concat's caller reads the input holding the point; a gather's, the
  // element at the index.
  if (kernel.concatenates() || kernel.gathers())
    return values;
  ArrayRef<KernelStep> pointwise = kernel.steps;
  if (kernel.reduces())
    pointwise = pointwise.drop_back();
  size_t nextReduction = 0;
  for (const KernelStep &step : pointwise) {
    if (isReductionStep(step.op)) { // a row kernel's leading reduction
      values.push_back(nextReduction < reductions.size()
                           ? reductions[nextReduction]
                           : scalar.k(0.0f));
      ++nextReduction;
      continue;
    }
    SmallVector<Value> operands;
    for (unsigned operand : step.operands)
      operands.push_back(values[operand]);
    values.push_back(scalar.step(step, operands));
  }
  return values;
}
