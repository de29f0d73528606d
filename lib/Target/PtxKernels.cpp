//===- PtxKernels.cpp - Generated kernels as PTX for CUDA -----------------===//
//
// Each kernel is built directly as a gpu.func over raw pointers (the ABI of
// PtxKernels.h): a grid-stride scf.for over the flattened output, the
// output's coordinates by division, each input's flat index from them, and
// the steps' scalar arithmetic from KernelToLinalg's emitKernelSteps, the
// very definitions the CPU's kernels use; a reduction loops over the reduced
// dimensions (nested scf.for, row-major) inside a thread. No linalg: its
// parallel-loop mapping gave one thread per block.
//
// The lowering: math expansions (below), scf to cf, arith, cf and math to
// the LLVM dialect (math as LLVM intrinsics), then the gpu ops to NVVM (the
// kernels, the special registers), LLVM IR, -O3 for nvptx64-nvidia-cuda at
// the chip, PTX ISA 8.0, and the NVPTX back end's assembly.
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
//    is looked up: the serializer below links no library, and a kernel that
//    still calls an external function (a math op without an expansion) is an
//    error, so the same kernels give the same PTX on every machine.
// The cost: the double-precision sin, cos and pow take about 20, 20 and 40
// double operations per element (H100: half the float rate; a consumer GPU
// runs them 64 times slower than float, where these kernels may become
// compute-bound).
//
//===----------------------------------------------------------------------===//

#include "gpipe/Target/PtxKernels.h"

#include "KernelContext.h"

#include "gpipe/Conversion/KernelToLinalg.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/ModuleToObject.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/APInt.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"

#include <cmath>
#include <limits>
#include <mutex>

using namespace mlir;
using namespace gpipe;

namespace {
constexpr llvm::StringLiteral kTriple = "nvptx64-nvidia-cuda";
constexpr llvm::StringLiteral kFeatures = "+ptx80";
constexpr llvm::StringLiteral kModuleName = "gpipe_kernels";
/// The table of the large-argument reduction of sin and cos.
constexpr llvm::StringLiteral kTwoOverPiTable = "__gpipe_two_over_pi_mod4";

//===----------------------------------------------------------------------===//
// Scalar arithmetic
//===----------------------------------------------------------------------===//

/// Arithmetic at one location, for the index computations (i64) and the
/// double-precision math.
struct Emit {
  OpBuilder &b;
  Location loc;

  Type f32() { return b.getF32Type(); }
  Type f64() { return b.getF64Type(); }
  Type i64() { return b.getI64Type(); }
  Value d(double v) {
    return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v));
  }
  Value f(float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value i(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  }
  Value addi(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value subi(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value muli(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value divui(Value x, Value y) {
    return arith::DivUIOp::create(b, loc, x, y);
  }
  Value remui(Value x, Value y) {
    return arith::RemUIOp::create(b, loc, x, y);
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value neg(Value x) { return arith::NegFOp::create(b, loc, x); }
  Value fma(Value x, Value y, Value z) {
    return math::FmaOp::create(b, loc, x, y, z);
  }
  Value floor(Value x) { return math::FloorOp::create(b, loc, x); }
  Value roundEven(Value x) { return math::RoundEvenOp::create(b, loc, x); }
  Value abs(Value x) { return math::AbsFOp::create(b, loc, x); }
  Value cmp(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value cmpi(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value andi(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value ori(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value extf(Value x) { return arith::ExtFOp::create(b, loc, f64(), x); }
  Value truncf(Value x) { return arith::TruncFOp::create(b, loc, f32(), x); }
  Value bitcast(Type type, Value x) {
    return arith::BitcastOp::create(b, loc, type, x);
  }
  /// c[0] + z (c[1] + z (c[2] + ...)).
  Value horner(Value z, ArrayRef<double> c) {
    Value acc = d(c.back());
    for (double coefficient : llvm::reverse(c.drop_back()))
      acc = fma(acc, z, d(coefficient));
    return acc;
  }
};

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

/// Replaces the math ops of `symbols` (a gpu.module or a module) by their
/// expansions: the CPU's polynomial approximations for exp, log, tanh, erf,
/// erfc; sin, cos and pow as above.
static LogicalResult expandMath(Operation *symbols) {
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

//===----------------------------------------------------------------------===//
// The kernel body
//===----------------------------------------------------------------------===//

/// The arguments of a kernel body, as the ABI orders them, and the thread's
/// first output element and stride.
struct BodyArgs {
  ValueRange inputs;
  Value output;
  ValueRange sizes;
  Value first, step;
};

/// Checks `kernel` as the CPU's lowering does (emitKernelSteps in a scratch
/// block), so that the index arithmetic meets only valid dimensions.
static LogicalResult checkKernel(MLIRContext *ctx, Location loc,
                                 const NamedKernel &kernel) {
  OpBuilder b(ctx);
  Block scratch;
  SmallVector<Value> inputs;
  for (unsigned k = 0; k < kernel.spec.numInputs; ++k) {
    KernelElement element = kernel.spec.inputType(k);
    Type type = element == KernelElement::I1 ? Type(b.getI1Type())
                                             : storageType(b, element);
    inputs.push_back(scratch.addArgument(type, loc));
  }
  b.setInsertionPointToStart(&scratch);
  FailureOr<SmallVector<Value>> values =
      emitKernelSteps(b, loc, kernel.symbol, kernel.spec, inputs);
  // The ops go before the block.
  while (!scratch.empty())
    scratch.back().erase();
  return failure(failed(values));
}

/// A row kernel's body (KernelSpec::rowDims): thread `first` takes rows
/// first, first + step, ...; in each, a pass over the columns per leading
/// reduction (in column order), then one that writes the row. `indexOf(k,
/// coords)` is input k's flat index at a point, `loadInput(k, base, index)`
/// its element there, `elementAt(base, index)` an f32 element's address.
template <typename IndexOf, typename LoadInput, typename ElementAt>
static LogicalResult emitRowKernelBody(OpBuilder &b, Location loc,
                                       const NamedKernel &kernel,
                                       const BodyArgs &args, IndexOf indexOf,
                                       LoadInput loadInput,
                                       ElementAt elementAt) {
  const KernelSpec &spec = kernel.spec;
  const unsigned rows = spec.rowDims;
  Emit e{b, loc};
  Value rowCount = e.i(1);
  for (unsigned d = 0; d < rows; ++d)
    rowCount = e.muli(rowCount, args.sizes[d]);
  auto rowLoop = scf::ForOp::create(b, loc, args.first, rowCount, args.step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rowLoop.getBody());
  SmallVector<Value> coords(spec.rank);
  Value rest = rowLoop.getInductionVar();
  for (unsigned d = rows; d-- > 0;) {
    if (d == 0) {
      coords[0] = rest;
      break;
    }
    coords[d] = e.remui(rest, args.sizes[d]);
    rest = e.divui(rest, args.sizes[d]);
  }
  // Nested loops over the columns carrying `init`; `body` gives the next
  // values at each point (coords set).
  std::function<SmallVector<Value>(unsigned, ValueRange,
                                   function_ref<SmallVector<Value>(ValueRange)>)>
      overColumns = [&](unsigned dim, ValueRange init,
                        function_ref<SmallVector<Value>(ValueRange)> body)
      -> SmallVector<Value> {
    if (dim == spec.rank)
      return body(init);
    auto loop = scf::ForOp::create(b, loc, e.i(0), args.sizes[dim], e.i(1),
                                   init);
    OpBuilder::InsertionGuard inner(b);
    // Without values to carry the loop has its yield already.
    if (init.empty())
      b.setInsertionPoint(loop.getBody()->getTerminator());
    else
      b.setInsertionPointToStart(loop.getBody());
    coords[dim] = loop.getInductionVar();
    SmallVector<Value> next =
        overColumns(dim + 1, loop.getRegionIterArgs(), body);
    if (!init.empty())
      scf::YieldOp::create(b, loc, next);
    return SmallVector<Value>(loop.getResults());
  };
  SmallVector<Value> results;
  LogicalResult status = success();
  auto stepsHere = [&]() -> SmallVector<Value> {
    SmallVector<Value> elements;
    for (unsigned k = 0; k < spec.numInputs; ++k)
      elements.push_back(loadInput(k, args.inputs[k], indexOf(k, coords)));
    FailureOr<SmallVector<Value>> values =
        emitKernelSteps(b, loc, kernel.symbol, spec, elements, results);
    if (failed(values)) {
      status = failure();
      return elements;
    }
    return *values;
  };
  for (const KernelStep &step : ArrayRef<KernelStep>(spec.steps).drop_back()) {
    if (!isReductionStep(step.op))
      continue;
    bool max = step.op == "reduce_max";
    Value identity = e.f(max ? -std::numeric_limits<float>::infinity() : 0.0f);
    Value total = overColumns(rows, ValueRange{identity}, [&](ValueRange acc) {
      Value v = stepsHere()[step.operands[0]];
      return SmallVector<Value>{
          max ? arith::MaximumFOp::create(b, loc, acc[0], v).getResult()
              : e.add(acc[0], v)};
    })[0];
    if (step.op == "reduce_mean")
      total = e.div(total, e.f(float(step.constant("count"))));
    results.push_back(total);
  }
  overColumns(rows, ValueRange{}, [&](ValueRange) {
    Value value = toStorage(b, loc, stepsHere().back());
    Value flat = coords[0];
    for (unsigned d = 1; d < spec.rank; ++d)
      flat = e.addi(e.muli(flat, args.sizes[d]), coords[d]);
    LLVM::StoreOp::create(b, loc, value, elementAt(args.output, flat));
    return SmallVector<Value>{};
  });
  return status;
}

/// Emits at `b` the computation of output elements first, first + step, ...
/// (the kernel checked).
static LogicalResult emitKernelBody(OpBuilder &b, Location loc,
                                    const NamedKernel &kernel,
                                    const BodyArgs &args) {
  const KernelSpec &spec = kernel.spec;
  Emit e{b, loc};
  Type f32 = b.getF32Type();
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());

  // A memref's own size along its i-th dimension (`dim` of the space): its
  // window's extent, or the space's size.
  auto ownSize = [&](const KernelWindow *w, size_t i, unsigned dim) {
    return w && !w->whole(i) ? e.i(w->extents[i]) : args.sizes[dim];
  };
  const KernelWindow *outWindow =
      spec.outputWindow ? &*spec.outputWindow : nullptr;
  // The output's element count, and each input's row-major strides over
  // its dimensions.
  Value count = e.i(1);
  for (auto [i, dim] : llvm::enumerate(spec.outputDims))
    count = e.muli(count, ownSize(outWindow, i, dim));
  std::vector<SmallVector<Value>> strides(spec.numInputs);
  for (unsigned k = 0; k < spec.numInputs; ++k) {
    ArrayRef<unsigned> dims = spec.inputDims[k];
    strides[k].assign(spec.rank, Value());
    Value stride = e.i(1);
    for (size_t i = dims.size(); i-- > 0;) {
      strides[k][dims[i]] = stride;
      stride = e.muli(stride, ownSize(spec.inputWindow(k), i, dims[i]));
    }
  }
  // Input k's flat index at the point `coords`, through its window.
  auto indexOf = [&](unsigned k, ArrayRef<Value> coords) {
    const KernelWindow *w = spec.inputWindow(k);
    Value index = e.i(0);
    for (auto [i, dim] : llvm::enumerate(spec.inputDims[k])) {
      Value at = coords[dim];
      if (w && !w->whole(i))
        at = e.addi(e.i(w->offsets[i]), e.muli(e.i(w->steps[i]), at));
      index = e.addi(index, e.muli(at, strides[k][dim]));
    }
    return index;
  };
  SmallVector<unsigned> reduced;
  for (unsigned dim = 0; dim < spec.rank; ++dim)
    if (!llvm::is_contained(spec.outputDims, dim))
      reduced.push_back(dim);
  const KernelStep *reduction = spec.reduces() ? &spec.steps.back() : nullptr;

  auto elementAt = [&](Value base, Value index) {
    return LLVM::GEPOp::create(b, loc, ptr, f32, base, ValueRange{index},
                               LLVM::GEPNoWrapFlags::inbounds)
        .getResult();
  };
  // Input k's element at `index` of `base`, as the steps see it.
  auto loadInput = [&](unsigned k, Value base, Value index) {
    KernelElement element = spec.inputType(k);
    Value stored = LLVM::LoadOp::create(b, loc, storageType(b, element),
                                        elementAt(base, index));
    return fromStorage(b, loc, stored, element);
  };
  if (spec.rowDims)
    return emitRowKernelBody(b, loc, kernel, args, indexOf, loadInput,
                             elementAt);

  LogicalResult result = success();
  auto loop = scf::ForOp::create(b, loc, args.first, count, args.step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value flat = loop.getInductionVar();
  // The output's coordinates, row-major; the first needs no remainder.
  SmallVector<Value> coords(spec.rank);
  Value rest = flat;
  const size_t outRank = spec.outputDims.size();
  for (size_t i = outRank; i-- > 0;) {
    unsigned dim = spec.outputDims[i];
    if (i == 0) {
      coords[dim] = rest;
      break;
    }
    Value size = ownSize(outWindow, i, dim);
    coords[dim] = e.remui(rest, size);
    rest = e.divui(rest, size);
  }
  // An output window: the coordinates are the output's own; the point of
  // the space is (c - offset) / step where that is a point, else the
  // element is 0 (`inWindow` false).
  // A gather's gradient writes its output whole: no window test.
  const bool gatherGrad = spec.gathers() && spec.steps[0].op == "gather_grad";
  Value inWindow;
  if (outWindow && !gatherGrad)
    for (auto [i, dim] : llvm::enumerate(spec.outputDims)) {
      if (outWindow->whole(i))
        continue;
      // Signed: a coordinate before the offset is outside.
      Value shifted = e.subi(coords[dim], e.i(outWindow->offsets[i]));
      Value stepValue = e.i(outWindow->steps[i]);
      Value point = arith::DivSIOp::create(b, loc, shifted, stepValue);
      Value onLattice = e.andi(
          e.cmpi(arith::CmpIPredicate::sge, shifted, e.i(0)),
          e.cmpi(arith::CmpIPredicate::eq,
                 arith::RemSIOp::create(b, loc, shifted, stepValue), e.i(0)));
      Value inside = e.andi(
          onLattice, e.cmpi(arith::CmpIPredicate::slt, point, args.sizes[dim]));
      inWindow = inWindow ? e.andi(inWindow, inside) : inside;
      // Clamped into the space, so that the load outside stays in bounds.
      coords[dim] = e.select(inside, point, e.i(0));
    }
  // Input elements read once per output element rather than at each point
  // of a reduction: those of the inputs that lack the reduced dimensions.
  SmallVector<Value> preloaded(spec.numInputs);
  // The steps at the point `coords`.
  auto stepsHere = [&]() -> FailureOr<SmallVector<Value>> {
    SmallVector<Value> elements;
    for (unsigned k = 0; k < spec.numInputs; ++k) {
      if (preloaded[k]) {
        elements.push_back(preloaded[k]);
        continue;
      }
      ArrayRef<unsigned> dims = spec.inputDims[k];
      Value index;
      if (dims == ArrayRef<unsigned>(spec.outputDims) &&
          !spec.inputWindow(k) && !outWindow)
        index = flat;
      else
        index = indexOf(k, coords);
      elements.push_back(loadInput(k, args.inputs[k], index));
    }
    return emitKernelSteps(b, loc, kernel.symbol, spec, elements);
  };

  Value value;
  if (spec.concatenates()) {
    // The input whose part holds the point: its pointer and index chosen by
    // the axis coordinate, one load.
    const unsigned axis = unsigned(spec.steps[0].constant("axis"));
    Value axisAt = coords[axis];
    Value base = args.inputs[0], index;
    int64_t start = 0;
    SmallVector<Value> local(coords);
    for (unsigned k = 0; k < spec.numInputs; ++k) {
      local[axis] = e.subi(axisAt, e.i(start));
      Value here = indexOf(k, local);
      if (k == 0) {
        index = here;
      } else {
        Value past = e.cmpi(arith::CmpIPredicate::sge, axisAt, e.i(start));
        base = e.select(past, args.inputs[k], base);
        index = e.select(past, here, index);
      }
      start += spec.inputWindow(k)->extents[axis];
    }
    // The words as they are: every input has the output's type.
    value = LLVM::LoadOp::create(b, loc, storageType(b, spec.outputType),
                                 elementAt(base, index));
  } else if (spec.gathers()) {
    // The table's extent along the axis is a constant of the kernel.
    const unsigned axis = unsigned(spec.steps[0].constant("axis"));
    const KernelWindow *table =
        gatherGrad ? outWindow : spec.inputWindow(0);
    Value extent = e.i(table->extents[axis]);
    auto indexAt = [&](ArrayRef<Value> at) {
      return wrapIndex(b, loc, loadInput(1, args.inputs[1], indexOf(1, at)),
                       extent);
    };
    if (!gatherGrad) {
      auto [position, inRange] = indexAt(coords);
      SmallVector<Value> read(coords);
      read[axis] = position;
      Value element = loadInput(0, args.inputs[0], indexOf(0, read));
      value = e.select(inRange, element,
                       e.f(std::numeric_limits<float>::quiet_NaN()));
    } else {
      // dy's elements whose index points here, added in index order.
      auto inner = scf::ForOp::create(b, loc, e.i(0), args.sizes[axis],
                                      e.i(1), ValueRange{e.f(0.0f)});
      OpBuilder::InsertionGuard innerGuard(b);
      b.setInsertionPointToStart(inner.getBody());
      SmallVector<Value> read(coords);
      read[axis] = inner.getInductionVar();
      auto [position, inRange] = indexAt(read);
      Value hit = e.andi(inRange, e.cmpi(arith::CmpIPredicate::eq, position,
                                         coords[axis]));
      Value acc = inner.getRegionIterArg(0);
      Value dy = loadInput(0, args.inputs[0], indexOf(0, read));
      scf::YieldOp::create(b, loc, e.select(hit, e.add(acc, dy), acc));
      value = inner.getResult(0);
    }
  } else if (!reduction) {
    FailureOr<SmallVector<Value>> values = stepsHere();
    if (failed(values))
      return failure();
    value = values->back();
  } else {
    for (unsigned k = 0; k < spec.numInputs; ++k)
      if (llvm::none_of(spec.inputDims[k], [&](unsigned dim) {
            return llvm::is_contained(reduced, dim);
          })) {
        preloaded[k] = loadInput(k, args.inputs[k], indexOf(k, coords));
      }
    bool max = reduction->op == "reduce_max";
    Value identity = e.f(max ? -std::numeric_limits<float>::infinity() : 0.0f);
    // Nested loops over the reduced dimensions, outermost first.
    std::function<Value(unsigned, Value)> reduceFrom = [&](unsigned level,
                                                           Value acc) -> Value {
      if (level == reduced.size()) {
        FailureOr<SmallVector<Value>> values = stepsHere();
        if (failed(values)) {
          result = failure();
          return acc;
        }
        Value v = (*values)[reduction->operands[0]];
        return max ? arith::MaximumFOp::create(b, loc, acc, v).getResult()
                   : e.add(acc, v);
      }
      unsigned dim = reduced[level];
      auto inner = scf::ForOp::create(b, loc, e.i(0), args.sizes[dim], e.i(1),
                                      ValueRange{acc});
      OpBuilder::InsertionGuard innerGuard(b);
      b.setInsertionPointToStart(inner.getBody());
      coords[dim] = inner.getInductionVar();
      Value next = reduceFrom(level + 1, inner.getRegionIterArg(0));
      scf::YieldOp::create(b, loc, next);
      return inner.getResult(0);
    };
    value = reduceFrom(0, identity);
    if (failed(result))
      return failure();
    if (reduction->op == "reduce_mean")
      value = e.div(value, e.f(float(reduction->constant("count"))));
  }
  value = toStorage(b, loc, value);
  if (inWindow)
    value = e.select(inWindow, value,
                     arith::ConstantOp::create(
                         b, loc, b.getZeroAttr(value.getType())));
  LLVM::StoreOp::create(b, loc, value, elementAt(args.output, flat));
  return result;
}

/// The kernel's parameter types: the pointers, then the sizes.
static SmallVector<Type> parameterTypes(MLIRContext *ctx,
                                        const KernelSpec &spec) {
  SmallVector<Type> types(spec.numInputs + 1, LLVM::LLVMPointerType::get(ctx));
  types.append(spec.rank, IntegerType::get(ctx, 64));
  return types;
}

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

DialectRegistry ptxDialects() {
  DialectRegistry registry;
  registry.insert<arith::ArithDialect, cf::ControlFlowDialect,
                  func::FuncDialect, gpu::GPUDialect, LLVM::LLVMDialect,
                  math::MathDialect, NVVM::NVVMDialect, scf::SCFDialect,
                  ub::UBDialect>();
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  return registry;
}

/// The PTX kernels' compilation in a context of their own (KernelContext.h).
class PtxCompilation : public KernelContext {
public:
  PtxCompilation() : KernelContext(ptxDialects(), "PTX kernels") {}

  FailureOr<OwningOpRef<ModuleOp>> build(ArrayRef<NamedKernel> kernels,
                                         StringRef chip);
  LogicalResult lowerToNVVM(gpu::GPUModuleOp module);
  FailureOr<std::string> serialize(gpu::GPUModuleOp module, StringRef chip);
};

/// The gpu.module of `module`.
gpu::GPUModuleOp kernelModule(ModuleOp module) {
  return *module.getOps<gpu::GPUModuleOp>().begin();
}
} // namespace

FailureOr<OwningOpRef<ModuleOp>>
PtxCompilation::build(ArrayRef<NamedKernel> kernels, StringRef chip) {
  Location loc = UnknownLoc::get(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b(&context);
  (*module)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                     b.getUnitAttr());
  b.setInsertionPointToEnd(module->getBody());
  auto target = NVVM::NVVMTargetAttr::get(&context, /*optLevel=*/3, kTriple,
                                          chip, kFeatures);
  auto gpuModule = gpu::GPUModuleOp::create(b, loc, kModuleName,
                                            ArrayRef<Attribute>{target});
  for (const NamedKernel &kernel : kernels) {
    if (failed(checkKernel(&context, loc, kernel)))
      return failure();
    b.setInsertionPointToEnd(gpuModule.getBody());
    auto func = gpu::GPUFuncOp::create(
        b, loc, kernel.symbol,
        b.getFunctionType(parameterTypes(&context, kernel.spec), {}));
    func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    Block &entry = func.getBody().front();
    b.setInsertionPointToStart(&entry);
    Emit e{b, loc};
    auto index64 = [&](Value v) {
      return arith::IndexCastUIOp::create(b, loc, e.i64(), v).getResult();
    };
    Value thread = index64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
    Value block = index64(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
    Value blockSize =
        index64(gpu::BlockDimOp::create(b, loc, gpu::Dimension::x));
    Value gridSize = index64(gpu::GridDimOp::create(b, loc, gpu::Dimension::x));
    ValueRange params = entry.getArguments();
    unsigned n = kernel.spec.numInputs;
    BodyArgs args{params.take_front(n), params[n], params.drop_front(n + 1),
                  e.addi(e.muli(block, blockSize), thread),
                  e.muli(gridSize, blockSize)};
    if (failed(emitKernelBody(b, loc, kernel, args)))
      return failure();
    gpu::ReturnOp::create(b, loc);
  }
  if (failed(verify(*module)))
    return failure();
  return module;
}

LogicalResult PtxCompilation::lowerToNVVM(gpu::GPUModuleOp module) {
  if (failed(expandMath(module)))
    return failure();
  PassManager scfToCf(&context, gpu::GPUModuleOp::getOperationName());
  scfToCf.addPass(createSCFToControlFlowPass());
  if (failed(scfToCf.run(module)))
    return failure();

  LowerToLLVMOptions options(&context);
  options.overrideIndexBitwidth(64);
  LLVMTypeConverter converter(&context, options);
  configureGpuToNVVMTypeConverter(converter);
  // First arith, math (as LLVM intrinsics: sqrt.rn, abs, fma, floor, ...),
  // cf and ub, before the GPU patterns, which would make some of them calls
  // to libdevice (minnumf as __nv_fminf, sqrt as __nv_sqrtf, ...).
  {
    RewritePatternSet patterns(&context);
    arith::populateArithToLLVMConversionPatterns(converter, patterns);
    cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
    ub::populateUBToLLVMConversionPatterns(converter, patterns);
    populateMathToLLVMConversionPatterns(converter, patterns,
                                         /*approximateLog1p=*/false);
    LLVMConversionTarget target(context);
    target.addLegalDialect<gpu::GPUDialect>();
    target.addIllegalDialect<math::MathDialect, arith::ArithDialect,
                             cf::ControlFlowDialect, ub::UBDialect>();
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return failure();
  }
  // Then the kernels and the thread indices.
  {
    RewritePatternSet patterns(&context);
    populateGpuToNVVMConversionPatterns(converter, patterns);
    LLVMConversionTarget target(context);
    target.addLegalDialect<NVVM::NVVMDialect>();
    target.addIllegalDialect<gpu::GPUDialect>();
    target.addLegalOp<gpu::GPUModuleOp>();
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return failure();
  }
  PassManager reconcile(&context, gpu::GPUModuleOp::getOperationName());
  reconcile.addPass(createReconcileUnrealizedCastsPass());
  if (failed(reconcile.run(module)))
    return failure();
  // Nothing may be left to link: no libdevice, no other library.
  for (auto func : module.getOps<LLVM::LLVMFuncOp>())
    if (func.isExternal())
      return func.emitError() << "the kernels call '" << func.getName()
                              << "', which no library provides to them";
  return success();
}

namespace {
/// LLVM IR to PTX for the NVPTX target, linking nothing (MLIR's NVVM
/// serializer would link libdevice wherever it finds a CUDA toolkit).
class PtxSerializer : public LLVM::ModuleToObject {
public:
  PtxSerializer(Operation &module, StringRef chip)
      : ModuleToObject(module, kTriple, chip, kFeatures, /*optLevel=*/3) {}

protected:
  FailureOr<SmallVector<char, 0>>
  moduleToObject(llvm::Module &llvmModule) override {
    FailureOr<llvm::TargetMachine *> machine = getOrCreateTargetMachine();
    if (failed(machine))
      return getOperation().emitError()
             << "no NVPTX target machine for " << triple << " " << chip;
    FailureOr<SmallString<0>> ptx = translateModuleToISA(
        llvmModule, **machine, [&] { return getOperation().emitError(); });
    if (failed(ptx))
      return failure();
    return SmallVector<char, 0>(ptx->begin(), ptx->end());
  }
};

void initializeNvptx() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

/// Why `chip` cannot be targeted, or "": an NVPTX processor sm_50 ... sm_90a
/// (what PTX ISA 8.0 covers).
std::string checkChip(StringRef chip) {
  initializeNvptx();
  std::string error;
  llvm::Triple triple(kTriple);
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return "LLVM has no NVPTX target: " + error;
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      target->createMCSubtargetInfo(triple, "", ""));
  StringRef digits = chip;
  unsigned version = 0;
  bool named = digits.consume_front("sm_");
  digits.consume_back("a");
  if (!named || digits.getAsInteger(10, version) || !info ||
      !info->isCPUStringValid(chip))
    return ("'" + chip + "' is not an NVPTX processor (sm_90, sm_80, ...)")
        .str();
  if (version < 50 || version > 90)
    return ("'" + chip +
            "' is outside what PTX ISA 8.0 targets (sm_50 to sm_90a)")
        .str();
  return "";
}
} // namespace

FailureOr<std::string> PtxCompilation::serialize(gpu::GPUModuleOp module,
                                                 StringRef chip) {
  initializeNvptx();
  PtxSerializer serializer(*module, chip);
  std::optional<SmallVector<char, 0>> ptx = serializer.run();
  if (!ptx)
    return failure();
  return std::string(ptx->begin(), ptx->end());
}

FailureOr<std::string> gpipe::printPtxKernelIR(ArrayRef<NamedKernel> kernels,
                                               StringRef stage, StringRef chip,
                                               Location loc) {
  if (stage != "gpu" && stage != "nvvm")
    return (emitError(loc) << "unknown PTX kernel stage '" << stage
                           << "'; expected gpu or nvvm"),
           failure();
  PtxCompilation compilation;
  FailureOr<OwningOpRef<ModuleOp>> module = compilation.build(kernels, chip);
  if (failed(module)) {
    compilation.report(loc, "cannot build the kernels");
    return failure();
  }
  if (stage == "nvvm" &&
      failed(compilation.lowerToNVVM(kernelModule(**module)))) {
    compilation.report(loc, "lowering to NVVM failed");
    return failure();
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  (*module)->print(os);
  return text;
}

/// The PTX of every kernel set this process compiled, by chip and set: a
/// tool that compiles one model under many plans generates it once.
static std::mutex ptxCacheMutex;
static llvm::StringMap<std::string> &compiledPtx() {
  static llvm::StringMap<std::string> cache;
  return cache;
}

FailureOr<std::string> gpipe::compilePtxKernels(ArrayRef<NamedKernel> kernels,
                                                StringRef chip, Location loc) {
  if (std::string problem = checkChip(chip); !problem.empty())
    return (emitError(loc) << "PTX kernels: " << problem), failure();
  std::string key = chip.str() + "\n";
  for (const NamedKernel &kernel : kernels)
    key += kernel.symbol + "=" + kernel.spec.describe() + "\n";
  {
    std::lock_guard<std::mutex> lock(ptxCacheMutex);
    auto it = compiledPtx().find(key);
    if (it != compiledPtx().end())
      return it->second;
  }
  PtxCompilation compilation;
  FailureOr<OwningOpRef<ModuleOp>> module = compilation.build(kernels, chip);
  if (failed(module)) {
    compilation.report(loc, "cannot build the kernels");
    return failure();
  }
  gpu::GPUModuleOp gpuModule = kernelModule(**module);
  if (failed(compilation.lowerToNVVM(gpuModule))) {
    compilation.report(loc, "lowering to NVVM failed");
    return failure();
  }
  FailureOr<std::string> ptx = compilation.serialize(gpuModule, chip);
  if (failed(ptx)) {
    compilation.report(loc, "PTX code generation failed for " + chip);
    return failure();
  }
  std::lock_guard<std::mutex> lock(ptxCacheMutex);
  compiledPtx()[key] = *ptx;
  return ptx;
}

FailureOr<OwningOpRef<ModuleOp>>
gpipe::buildPtxKernelHostModule(MLIRContext &context,
                                ArrayRef<NamedKernel> kernels, Location loc) {
  context.appendDialectRegistry(ptxDialects());
  context.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b(&context);
  for (const NamedKernel &kernel : kernels) {
    if (failed(checkKernel(&context, loc, kernel)))
      return failure();
    b.setInsertionPointToEnd(module->getBody());
    SmallVector<Type> types = parameterTypes(&context, kernel.spec);
    types.append(2, b.getI64Type()); // first, step
    auto func = func::FuncOp::create(b, loc, kernel.symbol,
                                     b.getFunctionType(types, {}));
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    ValueRange params = entry->getArguments();
    unsigned n = kernel.spec.numInputs, rank = kernel.spec.rank;
    BodyArgs args{params.take_front(n), params[n],
                  params.slice(n + 1, rank), params[n + 1 + rank],
                  params[n + 2 + rank]};
    if (failed(emitKernelBody(b, loc, kernel, args)))
      return failure();
    func::ReturnOp::create(b, loc);
  }
  if (failed(expandMath(*module)))
    return (emitError(loc) << "PTX kernels on the host: math expansion failed"),
           failure();
  PassManager lower(&context);
  lower.addPass(createSCFToControlFlowPass());
  lower.addPass(createConvertMathToLLVMPass());
  lower.addPass(createArithToLLVMConversionPass());
  lower.addPass(createUBToLLVMConversionPass());
  lower.addPass(createConvertFuncToLLVMPass());
  lower.addPass(createConvertControlFlowToLLVMPass());
  lower.addPass(createReconcileUnrealizedCastsPass());
  if (failed(lower.run(*module)))
    return (emitError(loc) << "PTX kernels on the host: lowering failed"),
           failure();
  return module;
}
