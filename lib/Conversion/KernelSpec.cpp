//===- KernelSpec.cpp - What a fused kernel computes, and its checks ------===//
//
// A KernelSpec's queries and its description (identical kernels describe
// alike: the key that shares them), how the element types are stored,
// which bundle ops become steps, and the checks of a whole kernel (its
// dimensions, windows, concats and gathers) that every lowering makes
// first.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Conversion/KernelToLinalg.h"

#include "KernelInternals.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace gpipe;
using namespace gpipe::kernel_detail;

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

std::string gpipe::kernel_detail::checkKernel(const KernelSpec &kernel) {
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
