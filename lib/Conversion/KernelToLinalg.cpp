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
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

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
  Value neg(Value x) { return arith::NegFOp::create(b, loc, x); }
  Value cmp(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value pow(Value x, Value y) { return math::PowFOp::create(b, loc, x, y); }
  Value log(Value x) { return math::LogOp::create(b, loc, x); }
  /// 1 / (1 + e^-x).
  Value sigmoid(Value x) { return div(k(1.0f), add(k(1.0f), exp(neg(x)))); }
  /// The gradient of max (`greater` OGT) or min (OLT) for lhs, as
  /// PyTorch's: 0 where the other side wins, half of dy on a tie.
  Value pickGrad(arith::CmpFPredicate losesWhen, Value dy, Value a, Value c) {
    Value tie =
        select(cmp(arith::CmpFPredicate::OEQ, a, c), mul(dy, k(0.5f)), dy);
    return select(cmp(losesWhen, a, c), k(0.0f), tie);
  }

  /// The general element-wise ops (GPipeElementwiseOps.td) and their
  /// gradients.
  Value generalStep(StringRef op, ArrayRef<Value> a) {
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

  /// `x` (f32, i32 or i1) as `to` ("f32", "i32", "i1"): f32 to i32 toward
  /// zero, saturating, NaN 0; to i1 x != 0 (NaN true); i1 to 0 or 1.
  Value castTo(Value x, StringRef to) {
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

  Value step(const KernelStep &s, ArrayRef<Value> a) {
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
};
} // namespace

bool gpipe::isKernelStepOp(StringRef op) { return arityOf(op) != 0; }

bool gpipe::isKernelOp(StringRef op) {
  return isKernelStepOp(op) || op == "sum_to" || op == "reduce_max_count" ||
         op == "slice_grad" || op == "concat" || op == "cast" ||
         op == "gather" || op == "gather_grad";
}

StringRef gpipe::elementName(KernelElement element) {
  switch (element) {
  case KernelElement::F32:
    return "f32";
  case KernelElement::I32:
    return "i32";
  case KernelElement::I1:
    return "i1";
  }
  return "f32";
}

Type gpipe::storageType(OpBuilder &b, KernelElement element) {
  return element == KernelElement::F32 ? Type(b.getF32Type())
                                       : Type(b.getI32Type());
}

Value gpipe::fromStorage(OpBuilder &b, Location loc, Value stored,
                         KernelElement element) {
  if (element != KernelElement::I1)
    return stored;
  Value zero = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, stored, zero);
}

Value gpipe::toStorage(OpBuilder &b, Location loc, Value value) {
  if (!value.getType().isInteger(1))
    return value;
  return arith::ExtUIOp::create(b, loc, b.getI32Type(), value);
}

bool gpipe::isReductionStep(StringRef op) {
  return op == "reduce_sum" || op == "reduce_mean" || op == "reduce_max";
}

double KernelStep::constant(StringRef name) const {
  for (const auto &[key, value] : constants)
    if (key == name)
      return value;
  return 0.0;
}

bool gpipe::hasLibraryKernel(StringRef op) {
  return llvm::is_contained({"relu", "gelu", "gelu_erf", "tanh", "add",
                             "add_grads", "relu_grad", "gelu_grad",
                             "gelu_erf_grad", "tanh_grad"},
                            op);
}

KernelSpec KernelSpec::elementwise(unsigned numInputs) {
  KernelSpec spec;
  spec.numInputs = numInputs;
  spec.rank = 1;
  spec.inputDims.assign(numInputs, {0});
  spec.outputDims = {0};
  return spec;
}

bool KernelSpec::reduces() const {
  return !steps.empty() && isReductionStep(steps.back().op);
}

bool KernelSpec::reducesInside() const {
  return steps.size() > 1 &&
         llvm::any_of(ArrayRef<KernelStep>(steps).drop_back(),
                      [](const KernelStep &s) { return isReductionStep(s.op); });
}

std::string KernelSpec::describe() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto dims = [&](ArrayRef<unsigned> list) {
    os << "(";
    llvm::interleave(list, os, ",");
    os << ")";
  };
  auto window = [&](const KernelWindow *w) {
    if (!w)
      return;
    auto list = [&](StringRef key, ArrayRef<int64_t> values) {
      os << key << "=";
      llvm::interleave(values, os, ",");
    };
    os << "[";
    list("offsets", w->offsets);
    list(" steps", w->steps);
    list(" extents", w->extents);
    os << "]";
  };
  os << "rank " << rank;
  if (rowDims)
    os << " rows " << rowDims;
  os << ":";
  auto typeOf = [&](KernelElement element) {
    if (element != KernelElement::F32)
      os << ":" << elementName(element);
  };
  for (auto [k, list] : llvm::enumerate(inputDims)) {
    os << " in" << k;
    dims(list);
    typeOf(inputType(unsigned(k)));
    window(inputWindow(unsigned(k)));
  }
  os << " -> out";
  dims(outputDims);
  typeOf(outputType);
  window(outputWindow ? &*outputWindow : nullptr);
  auto name = [&](unsigned operand) {
    if (operand < numInputs)
      os << "in" << operand;
    else
      os << "t" << operand - numInputs;
  };
  for (auto [i, step] : llvm::enumerate(steps)) {
    os << "; " << step.op;
    if (!step.constants.empty()) {
      os << "[";
      llvm::interleave(
          step.constants, os,
          [&](const auto &c) {
            os << c.first << "=" << llvm::format("%.9g", c.second);
          },
          ",");
      os << "]";
    }
    os << "(";
    llvm::interleave(step.operands, os, name, ",");
    os << ")->";
    if (i + 1 == steps.size())
      os << "out";
    else
      os << "t" << i;
  }
  return text;
}

/// Whether `dims` is strictly ascending in [0, rank).
static bool isDimList(ArrayRef<unsigned> dims, unsigned rank) {
  for (auto [i, dim] : llvm::enumerate(dims))
    if (dim >= rank || (i > 0 && dim <= dims[i - 1]))
      return false;
  return true;
}

/// Whether `dims` are distinct dimensions in [0, rank), in any order (a
/// transposed input's).
static bool isDimSet(ArrayRef<unsigned> dims, unsigned rank) {
  SmallVector<unsigned> sorted(dims);
  llvm::sort(sorted);
  return isDimList(sorted, rank);
}

/// The problems of the kernel's windows (its dimensions checked), or "".
static std::string checkWindows(const KernelSpec &kernel) {
  std::string problem;
  llvm::raw_string_ostream os(problem);
  if (!kernel.inputWindows.empty() &&
      kernel.inputWindows.size() != kernel.numInputs) {
    os << "has " << kernel.inputWindows.size() << " input windows for "
       << kernel.numInputs << " inputs";
    return problem;
  }
  auto check = [&](const KernelWindow &w, ArrayRef<unsigned> dims,
                   StringRef what) {
    if (w.offsets.size() != dims.size() || w.steps.size() != dims.size() ||
        w.extents.size() != dims.size()) {
      os << what << "'s window does not have one entry per dimension";
      return false;
    }
    for (size_t i = 0; i < dims.size(); ++i) {
      bool whole = w.whole(i) && w.offsets[i] == 0 && w.steps[i] == 1;
      bool part = w.extents[i] >= 1 && w.offsets[i] >= 0 && w.steps[i] >= 1 &&
                  w.offsets[i] < w.extents[i];
      if (!whole && !part) {
        os << what << "'s window is bad along dimension " << i;
        return false;
      }
      if (!w.whole(i) && dims[i] == 0) {
        os << what << " has an extent along iteration dimension 0, which "
           << "scales with the micro-batch";
        return false;
      }
    }
    return true;
  };
  for (unsigned k = 0; k < kernel.numInputs; ++k)
    if (const KernelWindow *w = kernel.inputWindow(k))
      if (!check(*w, kernel.inputDims[k], "input " + std::to_string(k)))
        return problem;
  if (kernel.outputWindow) {
    if (!check(*kernel.outputWindow, kernel.outputDims, "the output"))
      return problem;
    if (kernel.reduces() || kernel.concatenates()) {
      os << "has an output window but reduces or concatenates";
      return problem;
    }
  }
  // Each dimension's size comes from a memref that is whole along it.
  for (unsigned d = 0; d < kernel.rank; ++d) {
    bool sized = false;
    auto wholeAlong = [&](ArrayRef<unsigned> dims, const KernelWindow *w) {
      for (auto [i, dim] : llvm::enumerate(dims))
        if (dim == d && (!w || w->whole(i)))
          sized = true;
    };
    for (unsigned k = 0; k < kernel.numInputs; ++k)
      wholeAlong(kernel.inputDims[k], kernel.inputWindow(k));
    wholeAlong(kernel.outputDims,
               kernel.outputWindow ? &*kernel.outputWindow : nullptr);
    if (!sized) {
      os << "has no memref whole along dimension " << d;
      return problem;
    }
  }
  return problem;
}

/// A concat's problems, or "": every input and the output have all the
/// dimensions in order, the inputs are whole but along the axis, where they
/// have an extent.
static std::string checkConcat(const KernelSpec &kernel) {
  const KernelStep &step = kernel.steps[0];
  double axisValue = step.constant("axis");
  unsigned axis = unsigned(axisValue);
  SmallVector<unsigned> all;
  for (unsigned d = 0; d < kernel.rank; ++d)
    all.push_back(d);
  bool ok = kernel.numInputs >= 2 && axisValue >= 1 &&
            double(axis) == axisValue && axis < kernel.rank &&
            !kernel.outputWindow && kernel.outputDims == all &&
            step.operands.size() == kernel.numInputs;
  for (unsigned k = 0; ok && k < kernel.numInputs; ++k) {
    const KernelWindow *w = kernel.inputWindow(k);
    ok = step.operands[k] == k && kernel.inputDims[k] == all && w;
    for (unsigned d = 0; ok && d < kernel.rank; ++d)
      ok = (d == axis) != w->whole(d) && w->offsets[d] == 0 && w->steps[d] == 1;
  }
  return ok ? "" : "has a concat that is not its inputs in order along an "
                   "axis other than 0: " + kernel.describe();
}

/// A gather's or gather_grad's problems, or "" (KernelSpec::gathers): two
/// inputs; the table (input 0 of a gather, the output of a gather_grad)
/// has every dimension, whole but along the axis, where it has an extent;
/// the other memref (the output, or dy) every dimension, whole; the
/// indices, i32, the axis alone or after dimension 0.
static std::string checkGather(const KernelSpec &kernel) {
  const KernelStep &step = kernel.steps[0];
  const bool forward = step.op == "gather";
  double axisValue = step.constant("axis");
  unsigned axis = unsigned(axisValue);
  SmallVector<unsigned> all;
  for (unsigned d = 0; d < kernel.rank; ++d)
    all.push_back(d);
  const KernelWindow *table =
      forward ? kernel.inputWindow(0)
              : kernel.outputWindow ? &*kernel.outputWindow : nullptr;
  const KernelWindow *other =
      forward ? (kernel.outputWindow ? &*kernel.outputWindow : nullptr)
              : kernel.inputWindow(0);
  ArrayRef<unsigned> indexDims =
      kernel.inputDims.size() == 2 ? ArrayRef<unsigned>(kernel.inputDims[1])
                                   : ArrayRef<unsigned>();
  bool ok = kernel.numInputs == 2 && axisValue >= 0 &&
            double(axis) == axisValue && axis < kernel.rank &&
            step.operands.size() == 2 && step.operands[0] == 0 &&
            step.operands[1] == 1 && kernel.inputDims[0] == all &&
            kernel.outputDims == all && table && !other &&
            !kernel.inputWindow(1) && kernel.inputType(0) == KernelElement::F32 &&
            kernel.inputType(1) == KernelElement::I32 &&
            kernel.outputType == KernelElement::F32 &&
            (indexDims == ArrayRef<unsigned>{axis} ||
             (axis > 0 && indexDims == ArrayRef<unsigned>{0, axis}));
  for (unsigned d = 0; ok && d < kernel.rank; ++d)
    ok = (d == axis) != table->whole(d) && table->offsets[d] == 0 &&
         table->steps[d] == 1;
  return ok ? "" : "has a " + step.op +
                       " that is not an f32 table read or written at i32 "
                       "indices along one axis: " + kernel.describe();
}

/// The kernel's problems, or "" if it can be built.
static std::string checkKernel(const KernelSpec &kernel) {
  std::string problem;
  llvm::raw_string_ostream os(problem);
  if (kernel.steps.empty()) {
    os << "has no steps";
    return problem;
  }
  if (kernel.rank < 1 || kernel.inputDims.size() != kernel.numInputs ||
      !isDimList(kernel.outputDims, kernel.rank) ||
      !llvm::all_of(kernel.inputDims, [&](ArrayRef<unsigned> dims) {
        return isDimSet(dims, kernel.rank);
      })) {
    os << "has bad dimensions: " << kernel.describe();
    return problem;
  }
  if (std::string bad = checkWindows(kernel); !bad.empty())
    return bad;
  if (kernel.concatenates())
    return checkConcat(kernel);
  if (kernel.gathers())
    return checkGather(kernel);
  for (auto [i, step] : llvm::enumerate(kernel.steps))
    if (isReductionStep(step.op) && i + 1 != kernel.steps.size() &&
        !kernel.rowDims) {
      os << "reduces at step " << i << ", before its last, but has no rows";
      return problem;
    }
  if (kernel.rowDims) {
    SmallVector<unsigned> all;
    for (unsigned d = 0; d < kernel.rank; ++d)
      all.push_back(d);
    if (kernel.rowDims >= kernel.rank || kernel.reduces() ||
        !kernel.reducesInside() || kernel.outputDims != all ||
        kernel.outputWindow ||
        llvm::any_of(kernel.inputWindows,
                     [](const auto &w) { return w.has_value(); })) {
      os << "has rows but is not a row kernel (rows [0, " << kernel.rowDims
         << ") of " << kernel.rank
         << " dimensions, reductions before its last step only, an output "
            "of every dimension, no windows): "
         << kernel.describe();
      return problem;
    }
  }
  if (!kernel.inputTypes.empty() &&
      kernel.inputTypes.size() != kernel.numInputs) {
    os << "has " << kernel.inputTypes.size() << " input types for "
       << kernel.numInputs << " inputs";
    return problem;
  }
  if (kernel.reduces() && kernel.outputType != KernelElement::F32) {
    os << "reduces into " << elementName(kernel.outputType)
       << " (reductions are f32)";
    return problem;
  }
  if (!kernel.reduces() && kernel.outputDims.size() != kernel.rank) {
    os << "lacks output dimensions but does not reduce";
    return problem;
  }
  for (auto [i, step] : llvm::enumerate(kernel.steps)) {
    unsigned arity = arityOf(step.op);
    if (arity == 0) {
      os << "'" << step.op << "' is not an element-wise op a kernel computes";
      return problem;
    }
    if (step.operands.size() != arity) {
      os << "'" << step.op << "' takes " << arity << " operands, got "
         << step.operands.size();
      return problem;
    }
    for (unsigned operand : step.operands)
      if (operand >= kernel.numInputs + i) {
        os << "step " << i << " reads value " << operand
           << ", which is not computed before it";
        return problem;
      }
  }
  return problem;
}

/// A concat's body (checkConcat): input k copied into the output's part
/// after inputs 0..k-1 along the axis, each copy a generic of its own.
static void buildConcat(OpBuilder &b, Location loc, const KernelSpec &kernel,
                        ValueRange args) {
  const unsigned axis = unsigned(kernel.steps[0].constant("axis"));
  AffineMap identity = b.getMultiDimIdentityMap(kernel.rank);
  SmallVector<utils::IteratorType> parallel(kernel.rank,
                                            utils::IteratorType::parallel);
  Value output = args.back();
  int64_t at = 0;
  for (unsigned k = 0; k < kernel.numInputs; ++k) {
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (unsigned d = 0; d < kernel.rank; ++d) {
      offsets.push_back(b.getIndexAttr(d == axis ? at : 0));
      sizes.push_back(
          tensor::DimOp::create(b, loc, args[k], int64_t(d)).getResult());
      strides.push_back(b.getIndexAttr(1));
    }
    Value part = tensor::ExtractSliceOp::create(b, loc, output, offsets, sizes,
                                                strides);
    auto copy = linalg::GenericOp::create(
        b, loc, TypeRange{part.getType()}, ValueRange{args[k]}, part,
        ArrayRef<AffineMap>{identity, identity}, parallel,
        [&](OpBuilder &nested, Location nestedLoc, ValueRange elems) {
          linalg::YieldOp::create(nested, nestedLoc, elems[0]);
        });
    copy->setAttr("gpipe.tile", b.getUnitAttr());
    output = tensor::InsertSliceOp::create(b, loc, copy.getResult(0), output,
                                           offsets, sizes, strides);
    at += kernel.inputWindow(k)->extents[axis];
  }
  func::ReturnOp::create(b, loc, output);
}

std::pair<Value, Value> gpipe::wrapIndex(OpBuilder &b, Location loc,
                                         Value index, Value extent) {
  Type type = extent.getType();
  Value i = index;
  if (index.getType() != type)
    i = type.isIndex()
            ? arith::IndexCastOp::create(b, loc, type, index).getResult()
            : arith::ExtSIOp::create(b, loc, type, index).getResult();
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(type));
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, zero);
  Value wrapped = arith::SelectOp::create(
      b, loc, negative, arith::AddIOp::create(b, loc, i, extent), i);
  // Unsigned: a wrapped index still below 0 is far above the extent.
  Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                        wrapped, extent);
  return {arith::SelectOp::create(b, loc, inRange, wrapped, zero), inRange};
}

/// A gather's or gather_grad's body (checkGather). The gather is one
/// generic over the output reading the table with tensor.extract; the
/// gradient fills its output with 0, then adds dy's elements in row-major
/// order (each output element's in index order) in a loop nest.
static void buildGather(OpBuilder &b, Location loc, const KernelSpec &kernel,
                        ValueRange args) {
  const KernelStep &step = kernel.steps[0];
  const unsigned axis = unsigned(step.constant("axis"));
  const bool batched = kernel.inputDims[1].size() == 2;
  Value table = step.op == "gather" ? args[0] : args[2];
  Value extent = tensor::DimOp::create(b, loc, table, int64_t(axis));
  auto indexAt = [&](OpBuilder &nb, Location l, ValueRange coords) {
    SmallVector<Value> at;
    if (batched)
      at.push_back(coords[0]);
    at.push_back(coords[axis]);
    return tensor::ExtractOp::create(nb, l, args[1], at).getResult();
  };
  Value result;
  if (step.op == "gather") {
    AffineMap identity = b.getMultiDimIdentityMap(kernel.rank);
    SmallVector<utils::IteratorType> parallel(kernel.rank,
                                              utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        b, loc, TypeRange{args[2].getType()}, ValueRange{}, args[2],
        ArrayRef<AffineMap>{identity}, parallel,
        [&](OpBuilder &nb, Location l, ValueRange) {
          SmallVector<Value> coords;
          for (unsigned d = 0; d < kernel.rank; ++d)
            coords.push_back(linalg::IndexOp::create(nb, l, d));
          auto [at, inRange] = wrapIndex(nb, l, indexAt(nb, l, coords), extent);
          coords[axis] = at;
          Value element = tensor::ExtractOp::create(nb, l, table, coords);
          Value nan = arith::ConstantOp::create(
              nb, l,
              nb.getF32FloatAttr(std::numeric_limits<float>::quiet_NaN()));
          linalg::YieldOp::create(
              nb, l,
              ValueRange{arith::SelectOp::create(nb, l, inRange, element, nan)
                             .getResult()});
        });
    result = generic.getResult(0);
  } else {
    Value dy = args[0];
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
    Value filled = linalg::FillOp::create(b, loc, zero, args[2]).getResult(0);
    SmallVector<Value> lower, upper, steps;
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
    for (unsigned d = 0; d < kernel.rank; ++d) {
      lower.push_back(c0);
      steps.push_back(c1);
      upper.push_back(tensor::DimOp::create(b, loc, dy, int64_t(d)));
    }
    scf::LoopNest nest = scf::buildLoopNest(
        b, loc, lower, upper, steps, ValueRange{filled},
        [&](OpBuilder &nb, Location l, ValueRange ivs,
            ValueRange iter) -> scf::ValueVector {
          auto [at, inRange] = wrapIndex(nb, l, indexAt(nb, l, ivs), extent);
          SmallVector<Value> target(ivs);
          target[axis] = at;
          auto add = scf::IfOp::create(
              nb, l, inRange,
              [&](OpBuilder &tb, Location tl) {
                Value sum = arith::AddFOp::create(
                    tb, tl, tensor::ExtractOp::create(tb, tl, iter[0], target),
                    tensor::ExtractOp::create(tb, tl, dy, ivs));
                scf::YieldOp::create(
                    tb, tl,
                    tensor::InsertOp::create(tb, tl, sum, iter[0], target)
                        .getResult());
              },
              [&](OpBuilder &eb, Location el) {
                scf::YieldOp::create(eb, el, iter[0]);
              });
          return {add.getResult(0)};
        });
    result = nest.results[0];
  }
  func::ReturnOp::create(b, loc, result);
}

/// A row kernel's body (KernelSpec::rowDims): a loop nest over the rows;
/// in each, the inputs' parts of the row (a slice over the columns, or the
/// element of an input without columns), one generic per leading reduction
/// over the columns (to a 0-D tensor; each reads the results before it),
/// then one that writes the row. Every generic is marked for the schedule.
static void buildRowKernel(OpBuilder &b, Location loc, StringRef name,
                           const KernelSpec &kernel, ValueRange args,
                           ArrayRef<OpFoldResult> spaceSizes) {
  const unsigned rows = kernel.rowDims, cols = kernel.rank - rows;
  MLIRContext *ctx = b.getContext();
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  SmallVector<Value> lower(rows, c0), upper, steps(rows, c1);
  for (unsigned d = 0; d < rows; ++d)
    upper.push_back(getValueOrCreateConstantIndexOp(b, loc, spaceSizes[d]));
  auto colsOf = [&](ArrayRef<unsigned> dims) {
    SmallVector<unsigned> out;
    for (unsigned dim : dims)
      if (dim >= rows)
        out.push_back(dim);
    return out;
  };
  // A memref's part of the row at `ivs`: its columns, in its own order.
  auto rowPart = [&](OpBuilder &nb, Location l, Value memref,
                     ArrayRef<unsigned> dims, ValueRange ivs,
                     Type element) -> Value {
    SmallVector<OpFoldResult> offsets, sizes, strides;
    SmallVector<int64_t> shape;
    for (unsigned dim : dims) {
      offsets.push_back(dim < rows ? OpFoldResult(ivs[dim])
                                   : OpFoldResult(nb.getIndexAttr(0)));
      sizes.push_back(dim < rows ? OpFoldResult(nb.getIndexAttr(1))
                                 : spaceSizes[dim]);
      strides.push_back(nb.getIndexAttr(1));
      if (dim >= rows)
        shape.push_back(ShapedType::kDynamic);
    }
    auto type = RankedTensorType::get(shape, element);
    return tensor::ExtractSliceOp::create(nb, l, type, memref, offsets, sizes,
                                          strides);
  };
  auto colMap = [&](ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> exprs;
    for (unsigned dim : colsOf(dims))
      exprs.push_back(getAffineDimExpr(dim - rows, ctx));
    return AffineMap::get(cols, 0, exprs, ctx);
  };
  // Each leading reduction's 0-D accumulator, made once (its buffer then
  // serves every row) and refilled per row.
  SmallVector<Value> accumulators;
  for (const KernelStep &step : ArrayRef<KernelStep>(kernel.steps).drop_back())
    if (isReductionStep(step.op))
      accumulators.push_back(
          tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, b.getF32Type()));
  scf::LoopNest nest = scf::buildLoopNest(
      b, loc, lower, upper, steps, ValueRange{args.back()},
      [&](OpBuilder &nb, Location l, ValueRange ivs,
          ValueRange iter) -> scf::ValueVector {
        // Inputs without columns are one element per row; the others a
        // slice over the columns, read by each generic.
        SmallVector<Value> scalars(kernel.numInputs), parts;
        SmallVector<unsigned> partOf;
        SmallVector<AffineMap> partMaps;
        for (unsigned k = 0; k < kernel.numInputs; ++k) {
          ArrayRef<unsigned> dims = kernel.inputDims[k];
          KernelElement element = kernel.inputType(k);
          if (colsOf(dims).empty()) {
            SmallVector<Value> at;
            for (unsigned dim : dims)
              at.push_back(ivs[dim]);
            scalars[k] = fromStorage(
                nb, l, tensor::ExtractOp::create(nb, l, args[k], at), element);
            continue;
          }
          partOf.push_back(k);
          parts.push_back(
              rowPart(nb, l, args[k], dims, ivs, storageType(nb, element)));
          partMaps.push_back(colMap(dims));
        }
        // The steps at a point of the row, given the parts' elements there.
        auto stepsAt = [&](OpBuilder &gb, Location gl, ValueRange elems,
                           ArrayRef<Value> reductions) {
          SmallVector<Value> inputs(scalars);
          for (auto [n, k] : llvm::enumerate(partOf))
            inputs[k] = fromStorage(gb, gl, elems[n], kernel.inputType(k));
          return *emitKernelSteps(gb, gl, name, kernel, inputs, reductions);
        };
        SmallVector<utils::IteratorType> reduction(
            cols, utils::IteratorType::reduction);
        SmallVector<Value> results;
        for (const KernelStep &step : kernel.steps) {
          if (&step == &kernel.steps.back() || !isReductionStep(step.op))
            continue;
          bool max = step.op == "reduce_max";
          Value identity = arith::ConstantOp::create(
              nb, l,
              nb.getF32FloatAttr(max ? -std::numeric_limits<float>::infinity()
                                     : 0.0f));
          Value init =
              linalg::FillOp::create(nb, l, identity,
                                     accumulators[results.size()])
                  .getResult(0);
          SmallVector<AffineMap> maps(partMaps);
          maps.push_back(AffineMap::get(cols, 0, {}, ctx));
          auto generic = linalg::GenericOp::create(
              nb, l, TypeRange{init.getType()}, parts, init, maps, reduction,
              [&](OpBuilder &gb, Location gl, ValueRange elems) {
                SmallVector<Value> values =
                    stepsAt(gb, gl, elems.drop_back(), results);
                Value v = values[step.operands[0]], acc = elems.back();
                ScalarBuilder scalar{gb, gl};
                linalg::YieldOp::create(
                    gb, gl,
                    ValueRange{max ? arith::MaximumFOp::create(gb, gl, acc, v)
                                         .getResult()
                                   : scalar.add(acc, v)});
              });
          generic->setAttr("gpipe.tile", nb.getUnitAttr());
          Value total = tensor::ExtractOp::create(nb, l, generic.getResult(0),
                                                  ValueRange{});
          if (step.op == "reduce_mean")
            total = ScalarBuilder{nb, l}.div(
                total, ScalarBuilder{nb, l}.k(float(step.constant("count"))));
          results.push_back(total);
        }
        // The row of the output.
        SmallVector<unsigned> all;
        for (unsigned d = 0; d < kernel.rank; ++d)
          all.push_back(d);
        Value outRow = rowPart(nb, l, iter[0], all, ivs,
                               storageType(nb, kernel.outputType));
        SmallVector<AffineMap> maps(partMaps);
        maps.push_back(colMap(all));
        auto generic = linalg::GenericOp::create(
            nb, l, TypeRange{outRow.getType()}, parts, outRow, maps,
            SmallVector<utils::IteratorType>(cols,
                                             utils::IteratorType::parallel),
            [&](OpBuilder &gb, Location gl, ValueRange elems) {
              SmallVector<Value> values =
                  stepsAt(gb, gl, elems.drop_back(), results);
              linalg::YieldOp::create(
                  gb, gl, ValueRange{toStorage(gb, gl, values.back())});
            });
        generic->setAttr("gpipe.tile", nb.getUnitAttr());
        SmallVector<OpFoldResult> offsets, sizes,
            strides(kernel.rank, nb.getIndexAttr(1));
        for (unsigned d = 0; d < kernel.rank; ++d) {
          offsets.push_back(d < rows ? OpFoldResult(ivs[d])
                                     : OpFoldResult(nb.getIndexAttr(0)));
          sizes.push_back(d < rows ? OpFoldResult(nb.getIndexAttr(1))
                                   : spaceSizes[d]);
        }
        return {tensor::InsertSliceOp::create(nb, l, generic.getResult(0),
                                              iter[0], offsets, sizes, strides)
                    .getResult()};
      });
  func::ReturnOp::create(b, loc, nest.results[0]);
}

LogicalResult gpipe::buildKernelFunction(ModuleOp module, Location loc,
                                         StringRef name,
                                         const KernelSpec &kernel) {
  if (std::string problem = checkKernel(kernel); !problem.empty())
    return emitError(loc) << "kernel '" << name << "': " << problem;

  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto tensorOfRank = [&](size_t rank, KernelElement element) {
    return RankedTensorType::get(SmallVector<int64_t>(rank, ShapedType::kDynamic),
                                 storageType(b, element));
  };
  SmallVector<Type> argTypes;
  for (auto [k, dims] : llvm::enumerate(kernel.inputDims))
    argTypes.push_back(
        tensorOfRank(dims.size(), kernel.inputType(unsigned(k))));
  Type outputType = tensorOfRank(kernel.outputDims.size(), kernel.outputType);
  argTypes.push_back(outputType);
  auto func = func::FuncOp::create(b, loc, name,
                                   b.getFunctionType(argTypes, {outputType}));
  func.setArgAttr(kernel.numInputs,
                  bufferization::BufferizationDialect::kWritableAttrName,
                  b.getBoolAttr(true));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);

  auto projection = [&](ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> exprs;
    for (unsigned dim : dims)
      exprs.push_back(b.getAffineDimExpr(dim));
    return AffineMap::get(kernel.rank, 0, exprs, ctx);
  };
  SmallVector<AffineMap> maps;
  for (ArrayRef<unsigned> dims : kernel.inputDims)
    maps.push_back(projection(dims));
  maps.push_back(projection(kernel.outputDims));
  SmallVector<utils::IteratorType> iterators(kernel.rank,
                                             utils::IteratorType::reduction);
  for (unsigned dim : kernel.outputDims)
    iterators[dim] = utils::IteratorType::parallel;

  ValueRange args = entry->getArguments();
  // Each iteration dimension's size, from a memref whole along it (the
  // output's first).
  SmallVector<OpFoldResult> spaceSizes(kernel.rank);
  auto sizesFrom = [&](Value memref, ArrayRef<unsigned> dims,
                       const KernelWindow *w) {
    for (auto [i, dim] : llvm::enumerate(dims))
      if (!spaceSizes[dim] && (!w || w->whole(i)))
        spaceSizes[dim] =
            tensor::DimOp::create(b, loc, memref, int64_t(i)).getResult();
  };
  sizesFrom(args.back(), kernel.outputDims,
            kernel.outputWindow ? &*kernel.outputWindow : nullptr);
  for (unsigned k = 0; k < kernel.numInputs; ++k)
    sizesFrom(args[k], kernel.inputDims[k], kernel.inputWindow(k));
  if (kernel.concatenates()) {
    buildConcat(b, loc, kernel, args);
    return success();
  }
  if (kernel.gathers()) {
    buildGather(b, loc, kernel, args);
    return success();
  }
  if (kernel.rowDims) {
    buildRowKernel(b, loc, name, kernel, args, spaceSizes);
    return success();
  }
  // A windowed memref as the part of it the space covers.
  auto windowOf = [&](ArrayRef<unsigned> dims, const KernelWindow &w,
                      SmallVector<OpFoldResult> &offsets,
                      SmallVector<OpFoldResult> &sizes,
                      SmallVector<OpFoldResult> &strides) {
    for (auto [i, dim] : llvm::enumerate(dims)) {
      offsets.push_back(b.getIndexAttr(w.offsets[i]));
      sizes.push_back(spaceSizes[dim]);
      strides.push_back(b.getIndexAttr(w.steps[i]));
    }
  };
  SmallVector<Value> inputs(args.drop_back());
  for (unsigned k = 0; k < kernel.numInputs; ++k)
    if (const KernelWindow *w = kernel.inputWindow(k)) {
      SmallVector<OpFoldResult> offsets, sizes, strides;
      windowOf(kernel.inputDims[k], *w, offsets, sizes, strides);
      inputs[k] = tensor::ExtractSliceOp::create(b, loc, args[k], offsets,
                                                 sizes, strides);
    }
  Value output = args.back();
  // An output window: the whole output 0, the generic writing its part.
  Value whole;
  SmallVector<OpFoldResult> outOffsets, outSizes, outStrides;
  if (kernel.outputWindow) {
    Value zero = arith::ConstantOp::create(
        b, loc, b.getZeroAttr(storageType(b, kernel.outputType)));
    whole = linalg::FillOp::create(b, loc, zero, output).getResult(0);
    windowOf(kernel.outputDims, *kernel.outputWindow, outOffsets, outSizes,
             outStrides);
    output = tensor::ExtractSliceOp::create(b, loc, whole, outOffsets,
                                            outSizes, outStrides);
  }
  const KernelStep *reduction =
      kernel.reduces() ? &kernel.steps.back() : nullptr;
  ArrayRef<KernelStep> pointwise = kernel.steps;
  if (reduction) {
    // The output starts at the reduction's identity.
    float identity = reduction->op == "reduce_max"
                         ? -std::numeric_limits<float>::infinity()
                         : 0.0f;
    Value init = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(identity));
    output = linalg::FillOp::create(b, loc, init, output).getResult(0);
    pointwise = pointwise.drop_back();
  }
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{output.getType()}, inputs, output, maps, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange elems) {
        ScalarBuilder scalar{nested, nestedLoc};
        SmallVector<Value> values;
        for (auto [k, elem] : llvm::enumerate(elems.drop_back()))
          values.push_back(fromStorage(nested, nestedLoc, elem,
                                       kernel.inputType(unsigned(k))));
        for (const KernelStep &step : pointwise) {
          SmallVector<Value> operands;
          for (unsigned operand : step.operands)
            operands.push_back(values[operand]);
          values.push_back(scalar.step(step, operands));
        }
        Value result = values.back();
        if (reduction) {
          Value acc = elems.back(), v = values[reduction->operands[0]];
          result = reduction->op == "reduce_max"
                       ? arith::MaximumFOp::create(nested, nestedLoc, acc, v)
                             .getResult()
                       : scalar.add(acc, v);
        }
        linalg::YieldOp::create(nested, nestedLoc,
                                toStorage(nested, nestedLoc, result));
      });
  generic->setAttr("gpipe.tile", b.getUnitAttr());
  Value result = generic.getResult(0);
  if (kernel.outputWindow)
    result = tensor::InsertSliceOp::create(b, loc, result, whole, outOffsets,
                                           outSizes, outStrides);
  if (reduction && reduction->op == "reduce_mean") {
    // The sum over the count, a constant: means never reduce the batch.
    unsigned rank = kernel.outputDims.size();
    AffineMap identity = b.getMultiDimIdentityMap(rank);
    Value count = arith::ConstantOp::create(
        b, loc, b.getF32FloatAttr(float(reduction->constant("count"))));
    result =
        linalg::GenericOp::create(
            b, loc, TypeRange{outputType}, ValueRange{}, result,
            ArrayRef<AffineMap>{identity},
            SmallVector<utils::IteratorType>(rank,
                                             utils::IteratorType::parallel),
            [&](OpBuilder &nested, Location nestedLoc, ValueRange elems) {
              ScalarBuilder scalar{nested, nestedLoc};
              linalg::YieldOp::create(nested, nestedLoc,
                                      scalar.div(elems[0], count));
            })
            .getResult(0);
  }
  func::ReturnOp::create(b, loc, result);
  return success();
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
