//===- PtxMath.cpp - Math expansions of the PTX kernels -------------------===//
//
// The math ops of the PTX kernels, expanded before the lowering so that
// nothing is left to link.
//
// The math, and why:
//  - exp, log, tanh, erf, erfc: MLIR's polynomial approximations, the same
//    patterns (and so the same arithmetic) as the CPU's kernels: an element
//    gets the bits of the CPU's x86-64-v3/v4 variants (which, like the GPU,
//    have FMA).
//  - sqrt, division: IEEE, correctly rounded (sqrt.rn.f32, div.rn.f32);
//    no fast-math flag anywhere, so the back end contracts no multiply-add
//    (it writes mul.rn/add.rn, which ptxas leaves alone); denormals kept.
//  - sin, cos, pow: the CPU calls libm for these (the approximations' range
//    reduction loses 1e-5 at 100, which rotary positions reach; pow's IEEE
//    cases). On the GPU they are computed here in double precision and
//    rounded once to float, so that no libdevice is needed:
//      * sin/cos: x reduced by pi/2 with a three-double Cody-Waite reduction
//        (fused multiply-adds) for |x| < 2^30, and for larger |x| by an exact
//        Payne-Hanek step: x = m 2^e, m an integer of 24 bits, times
//        (2^e 2/pi mod 4) from a table of double-double values built from
//        320 bits of 2/pi; then fdlibm's double-precision kernels (|error| <
//        2^-58 on [-pi/4, pi/4]). The result is the correctly rounded float
//        except where the true value lies within ~2^-50 of a rounding
//        boundary, as glibc's sinf/cosf (a prototype agreed with 300-bit
//        references on 18,000 values over [-1e38, 1e38]; PtxKernelsTest
//        compares it with libm).
//      * pow(a, b): exp(b log|a|) in double (log by the atanh series on a
//        mantissa in [sqrt(1/2), sqrt(2)), exp by a degree-11 polynomial and
//        an exact power of 2), rounded once to float (overflow, denormals),
//        with C99's special cases: pow(x, 0) = pow(1, y) = 1 (even for NaN),
//        pow(-1, +-inf) = 1, a negative base with an integer exponent signed
//        by its parity, a negative finite base with a non-integer exponent
//        NaN, zeros and infinities as C's powf.
//    libdevice was not used because MLIR's NVVM target links it only where a
//    CUDA toolkit is found (CUDA_HOME, CUDA_PATH, the build's default), and
//    its functions follow __nvvm_reflect settings (its sqrtf is approximate
//    by default): the PTX would depend on the compiling machine. Here nothing
//    is looked up: the serializer (PtxKernels.cpp) links no library, and a
//    kernel that still calls an external function (a math op without an
//    expansion) is an error, so the same kernels give the same PTX on every
//    machine.
// The cost: the double-precision sin, cos and pow take about 20, 20 and 40
// double operations per element (H100: half the float rate; a consumer GPU
// runs them 64 times slower than float, where these kernels may become
// compute-bound).
//
//===----------------------------------------------------------------------===//

#include "PtxMath.h"

#include "PtxEmit.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/APInt.h"

#include <cmath>
#include <vector>

using namespace mlir;
using namespace gpipe::ptx_detail;

namespace {
/// The table of the large-argument reduction of sin and cos.
constexpr llvm::StringLiteral kTwoOverPiTable = "__gpipe_two_over_pi_mod4";

//===----------------------------------------------------------------------===//
// sin and cos
//===----------------------------------------------------------------------===//

// pi/2 as three doubles (P1 + P2 + P3, each the nearest to what remains).
constexpr double kPio2_1 = 0x1.921fb54442d18p+0;
constexpr double kPio2_2 = 0x1.1a62633145c07p-54;
constexpr double kPio2_3 = -0x1.f1976b7ed8fbcp-110;
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
/// Below this |x| the three-double reduction is exact enough (its quotient
/// is below 2^30, far from 2^52 where the double product loses it).
constexpr double kSmallArgument = 0x1p30;
/// 2/pi's first 320 bits after the binary point (2/pi = w 2^-320).
constexpr llvm::StringLiteral kTwoOverPiBits =
    "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a"
    "424dd2e0";
/// The largest binary exponent e of a float written m 2^e with m < 2^24.
constexpr unsigned kMaxExponent = 104;
// fdlibm's __kernel_sin and __kernel_cos coefficients (Sun Microsystems,
// freely distributable): sin r = r + r^3 (S1 + r^2 (S2 + ...)), cos r =
// 1 - r^2/2 + r^4 (C1 + r^2 (C2 + ...)), each within 2^-58 on [-pi/4, pi/4].
constexpr double kSin[] = {-1.66666666666666324348e-01, 8.33333333332248946124e-03,
                           -1.98412698298579493134e-04, 2.75573137070700676789e-06,
                           -2.50507602534068634195e-08, 1.58969099521155010221e-10};
constexpr double kCos[] = {4.16666666666666019037e-02, -1.38888888888741095749e-03,
                           2.48015872894767294178e-05, -2.75573143513906633035e-07,
                           2.08757232129817482790e-09, -1.13596475577881948265e-11};

/// `v` 2^-scale, its leading 53 bits (truncated); `v` less them in `rest`.
static double leadingBits(const llvm::APInt &v, int scale, llvm::APInt &rest) {
  unsigned bits = v.getActiveBits();
  unsigned shift = bits > 53 ? bits - 53 : 0;
  uint64_t top = v.lshr(shift).getZExtValue();
  rest = v - llvm::APInt(v.getBitWidth(), top).shl(shift);
  return std::ldexp(double(top), int(shift) - scale);
}

/// (2^e 2/pi) mod 4 for e = 0 .. kMaxExponent, each as hi, lo doubles (hi
/// the leading 53 bits, lo the next; 106 bits).
static std::vector<double> twoOverPiMod4Table() {
  llvm::APInt w(320, kTwoOverPiBits, 16);
  std::vector<double> table;
  for (unsigned e = 0; e <= kMaxExponent; ++e) {
    // (w 2^e) mod 2^322, a fixed-point value in [0, 4) with 320 fraction bits.
    llvm::APInt v = w.zext(320 + kMaxExponent + 2).shl(e).trunc(322);
    llvm::APInt rest(322, 0), unused(322, 0);
    table.push_back(leadingBits(v, 320, rest));
    table.push_back(leadingBits(rest, 320, unused));
  }
  return table;
}

/// Adds the reduction table to `symbols` (a gpu.module or a module) unless
/// it has it.
static void addTwoOverPiTable(Operation *symbols) {
  if (SymbolTable::lookupSymbolIn(symbols, kTwoOverPiTable))
    return;
  MLIRContext *ctx = symbols->getContext();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(&symbols->getRegion(0).front());
  std::vector<double> table = twoOverPiMod4Table();
  auto tensorType =
      RankedTensorType::get({int64_t(table.size())}, Float64Type::get(ctx));
  auto arrayType =
      LLVM::LLVMArrayType::get(Float64Type::get(ctx), table.size());
  LLVM::GlobalOp::create(b, symbols->getLoc(), arrayType, /*isConstant=*/true,
                         LLVM::Linkage::Internal, kTwoOverPiTable,
                         DenseElementsAttr::get(tensorType,
                                                ArrayRef<double>(table)),
                         /*alignment=*/8);
}

/// sin x or cos x (`cosine`) for a float x, in double, rounded once.
static Value expandSinCos(OpBuilder &b, Location loc, Value x, bool cosine) {
  using P = arith::CmpFPredicate;
  Emit e{b, loc};
  Value xd = e.extf(x);
  Value small = e.cmp(P::OLT, e.abs(xd), e.d(kSmallArgument));
  // NaN and the infinities take the small path, which gives NaN.
  small = e.ori(small, e.cmp(P::UNO, xd, xd));
  small = e.ori(small, e.cmp(P::OEQ, e.abs(xd), e.d(INFINITY)));
  // (j, r) with x = j pi/2 + r, |r| <= pi/4 (a little more for huge x).
  auto reduced = scf::IfOp::create(
      b, loc, small,
      [&](OpBuilder &nb, Location nl) {
        Emit n{nb, nl};
        Value j = n.roundEven(n.mul(xd, n.d(kTwoOverPi)));
        Value negJ = n.neg(j);
        Value r = n.fma(negJ, n.d(kPio2_1), xd);
        r = n.fma(negJ, n.d(kPio2_2), r);
        r = n.fma(negJ, n.d(kPio2_3), r);
        scf::YieldOp::create(nb, nl, ValueRange{j, r});
      },
      [&](OpBuilder &nb, Location nl) {
        // |x| = m 2^e exactly: x 2/pi mod 4 = m ((2^e 2/pi) mod 4).
        Emit n{nb, nl};
        Type i32 = nb.getI32Type();
        Value bits = n.bitcast(i32, math::AbsFOp::create(nb, nl, x));
        auto i32c = [&](int32_t v) {
          return arith::ConstantOp::create(nb, nl, nb.getI32IntegerAttr(v));
        };
        Value biased = arith::ShRUIOp::create(nb, nl, bits, i32c(23));
        Value mantissa = arith::OrIOp::create(
            nb, nl, arith::AndIOp::create(nb, nl, bits, i32c(0x7fffff)),
            i32c(0x800000));
        Value m = arith::UIToFPOp::create(nb, nl, n.f64(), mantissa);
        // e = biased - 150, in [7, 104] here (|x| >= 2^30).
        Value index = arith::ExtUIOp::create(
            nb, nl, n.i64(),
            arith::SubIOp::create(nb, nl, biased, i32c(150)));
        auto ptr = LLVM::LLVMPointerType::get(nb.getContext());
        Value table = LLVM::AddressOfOp::create(nb, nl, ptr, kTwoOverPiTable);
        auto load = [&](Value at) {
          Value p = LLVM::GEPOp::create(nb, nl, ptr, n.f64(), table,
                                        ValueRange{at},
                                        LLVM::GEPNoWrapFlags::inbounds);
          return LLVM::LoadOp::create(nb, nl, n.f64(), p).getResult();
        };
        Value twice = n.addi(index, index);
        Value hi = load(twice), lo = load(n.addi(twice, n.i(1)));
        // m hi exactly as p + pe; m lo's rounding is far below what counts.
        Value p = n.mul(m, hi);
        Value pe = n.fma(m, hi, n.neg(p));
        Value tail = n.add(pe, n.mul(m, lo));
        Value pm = n.sub(p, n.mul(n.d(4.0), n.floor(n.mul(p, n.d(0.25)))));
        Value j = n.roundEven(n.add(pm, tail));
        Value frac = n.add(n.sub(pm, j), tail);
        Value r = n.mul(frac, n.d(kPio2_1));
        // Odd functions of x: the reduction of -x is (-j, -r).
        Value negative = n.cmp(P::OLT, xd, n.d(0.0));
        j = n.select(negative, n.neg(j), j);
        r = n.select(negative, n.neg(r), r);
        scf::YieldOp::create(nb, nl, ValueRange{j, r});
      });
  Value j = reduced.getResult(0), r = reduced.getResult(1);
  Value z = e.mul(r, r);
  // sin r = r + r z (S1 + z (S2 + ...)), cos r = 1 - z/2 + z^2 (C1 + ...).
  Value sinR =
      e.fma(e.mul(z, r),
            e.fma(z, e.horner(z, ArrayRef<double>(kSin).drop_front()),
                  e.d(kSin[0])),
            r);
  Value cosR = e.add(e.sub(e.d(1.0), e.mul(e.d(0.5), z)),
                     e.mul(e.mul(z, z), e.horner(z, kCos)));
  // The quadrant j mod 4, exactly, as a double in {0, 1, 2, 3}.
  Value q = e.sub(j, e.mul(e.d(4.0), e.floor(e.mul(j, e.d(0.25)))));
  auto is = [&](double k) { return e.cmp(P::OEQ, q, e.d(k)); };
  // sin x: s, c, -s, -c; cos x: c, -s, -c, s by quadrant.
  Value useCos = e.ori(is(1.0), is(3.0));
  Value negate = cosine ? e.ori(is(1.0), is(2.0)) : e.ori(is(2.0), is(3.0));
  Value value = cosine ? e.select(useCos, sinR, cosR)
                       : e.select(useCos, cosR, sinR);
  value = e.select(negate, e.neg(value), value);
  Value result = e.truncf(value);
  // sin(-0) = -0 (the reduction above gives +0).
  if (!cosine)
    result = e.select(
        arith::CmpFOp::create(b, loc, P::OEQ, x, e.f(0.0f)), x, result);
  return result;
}

//===----------------------------------------------------------------------===//
// pow
//===----------------------------------------------------------------------===//

constexpr double kLn2 = 0x1.62e42fefa39efp-1;
constexpr double kLn2Lo = 0x1.abc9e3b39803fp-56;
constexpr double kLog2E = 0x1.71547652b82fep+0;
constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;

/// log x for a positive, finite, normal double x: x = f 2^k with f in
/// [sqrt(1/2), sqrt(2)), log f = 2 atanh s, s = (f - 1) / (f + 1), |s| <
/// 0.172, by its series to s^19 (relative error below 2^-54).
static Value logDouble(Emit &e, Value x) {
  Type i64 = e.i64();
  Value bits = e.bitcast(i64, x);
  Value k = arith::SubIOp::create(
      e.b, e.loc, arith::ShRUIOp::create(e.b, e.loc, bits, e.i(52)),
      e.i(1023));
  Value f = e.bitcast(
      e.f64(), e.ori(e.andi(bits, e.i((int64_t(1) << 52) - 1)),
                     e.i(int64_t(1023) << 52)));
  Value high = e.cmp(arith::CmpFPredicate::OGT, f, e.d(kSqrt2));
  f = e.select(high, e.mul(f, e.d(0.5)), f);
  k = e.select(high, e.addi(k, e.i(1)), k);
  Value s = e.div(e.sub(f, e.d(1.0)), e.add(f, e.d(1.0)));
  Value s2 = e.mul(s, s);
  SmallVector<double> series; // 2/3, 2/5, ..., 2/19
  for (int n = 3; n <= 19; n += 2)
    series.push_back(2.0 / n);
  Value logF = e.fma(e.mul(s, s2), e.horner(s2, series), e.add(s, s));
  Value kd = arith::SIToFPOp::create(e.b, e.loc, e.f64(), k);
  return e.fma(kd, e.d(kLn2), logF);
}

/// e^y for a double y (NaN stays NaN; y is clamped to [-200, 200], beyond
/// which every float result is 0 or infinite): y = n ln 2 + r, |r| <=
/// ln(2)/2, e^r by its Taylor polynomial to r^11, times 2^n exactly.
static Value expDouble(Emit &e, Value y) {
  using P = arith::CmpFPredicate;
  Value clamped = e.select(e.cmp(P::OGT, y, e.d(200.0)), e.d(200.0), y);
  clamped = e.select(e.cmp(P::OLT, clamped, e.d(-200.0)), e.d(-200.0), clamped);
  Value isNan = e.cmp(P::UNO, y, y);
  clamped = e.select(isNan, e.d(0.0), clamped);
  Value n = e.roundEven(e.mul(clamped, e.d(kLog2E)));
  Value r = e.fma(e.neg(n), e.d(kLn2), clamped);
  r = e.fma(e.neg(n), e.d(kLn2Lo), r);
  SmallVector<double> taylor;
  double factorial = 1.0;
  for (int k = 0; k <= 11; ++k) {
    factorial *= k ? k : 1;
    taylor.push_back(1.0 / factorial);
  }
  Value poly = e.horner(r, taylor);
  Value ni = arith::FPToSIOp::create(e.b, e.loc, e.i64(), n);
  Value scale = e.bitcast(
      e.f64(), arith::ShLIOp::create(e.b, e.loc, e.addi(ni, e.i(1023)),
                                     e.i(52)));
  return e.select(isNan, y, e.mul(poly, scale));
}

/// powf(a, b) as C99's, in double, rounded once.
static Value expandPow(OpBuilder &b, Location loc, Value a, Value bf) {
  using P = arith::CmpFPredicate;
  Emit e{b, loc};
  Value ad = e.abs(e.extf(a)), bd = e.extf(bf);
  Value inf = e.d(INFINITY);
  // log|a|: -inf at 0, +inf at +inf, NaN for NaN (a float's magnitude is a
  // normal double otherwise).
  Value regular = e.andi(e.cmp(P::OGT, ad, e.d(0.0)), e.cmp(P::OLT, ad, inf));
  Value logA = logDouble(e, e.select(regular, ad, e.d(1.0)));
  logA = e.select(regular, logA,
                  e.select(e.cmp(P::OEQ, ad, e.d(0.0)), e.neg(inf),
                           e.select(e.cmp(P::OEQ, ad, inf), inf, ad)));
  Value magnitude = expDouble(e, e.mul(bd, logA));
  // The exponent's kind: an integer (the infinities count as even ones), and
  // odd.
  Value floorB = e.floor(bd);
  Value integer = e.cmp(P::OEQ, floorB, bd);
  Value half = e.floor(e.mul(bd, e.d(0.5)));
  Value odd = e.andi(integer, e.cmp(P::ONE, e.add(half, half), bd));
  // A negative base (-0 and -inf included) and an odd exponent: negative.
  Value signBit = e.cmpi(arith::CmpIPredicate::slt,
                         e.bitcast(b.getI32Type(), a),
                         arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0)));
  Value result = e.select(e.andi(signBit, odd), e.neg(magnitude), magnitude);
  // A negative finite base and a finite non-integer exponent: NaN.
  Value negativeFinite = e.andi(e.cmp(P::OLT, e.extf(a), e.d(0.0)),
                                e.cmp(P::OGT, e.extf(a), e.neg(inf)));
  Value fraction = e.andi(e.cmp(P::ORD, bd, bd), e.cmp(P::UNE, floorB, bd));
  result = e.select(e.andi(negativeFinite, fraction), e.d(NAN), result);
  // pow(x, 0) = pow(1, y) = pow(-1, +-inf) = 1.
  Value one = e.ori(e.cmp(P::OEQ, bd, e.d(0.0)),
                    e.cmp(P::OEQ, e.extf(a), e.d(1.0)));
  one = e.ori(one, e.andi(e.cmp(P::OEQ, ad, e.d(1.0)),
                          e.cmp(P::OEQ, e.abs(bd), inf)));
  result = e.select(one, e.d(1.0), result);
  return e.truncf(result);
}

template <typename Op>
struct ExpandSinCos : OpRewritePattern<Op> {
  ExpandSinCos(MLIRContext *ctx, bool cosine)
      : OpRewritePattern<Op>(ctx), cosine(cosine) {}
  LogicalResult matchAndRewrite(Op op,
                                PatternRewriter &rewriter) const override {
    if (!op.getType().isF32())
      return rewriter.notifyMatchFailure(op, "not f32");
    rewriter.replaceOp(
        op, expandSinCos(rewriter, op.getLoc(), op.getOperand(), cosine));
    return success();
  }
  bool cosine;
};

struct ExpandPow : OpRewritePattern<math::PowFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::PowFOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getType().isF32())
      return rewriter.notifyMatchFailure(op, "not f32");
    rewriter.replaceOp(op, expandPow(rewriter, op.getLoc(), op.getLhs(),
                                     op.getRhs()));
    return success();
  }
};
} // namespace

LogicalResult gpipe::ptx_detail::expandMath(Operation *symbols) {
  bool trigonometry = false;
  symbols->walk([&](Operation *op) {
    trigonometry |= isa<math::SinOp, math::CosOp>(op);
  });
  if (trigonometry)
    addTwoOverPiTable(symbols);
  MLIRContext *ctx = symbols->getContext();
  RewritePatternSet patterns(ctx);
  populateMathPolynomialApproximationPatterns(patterns, [](StringRef op) {
    return op != "math.sin" && op != "math.cos";
  });
  patterns.add<ExpandSinCos<math::SinOp>>(ctx, /*cosine=*/false);
  patterns.add<ExpandSinCos<math::CosOp>>(ctx, /*cosine=*/true);
  patterns.add<ExpandPow>(ctx);
  return applyPatternsGreedily(symbols, std::move(patterns));
}
