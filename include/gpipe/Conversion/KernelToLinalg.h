//===- KernelToLinalg.h - A fused element-wise kernel as linalg -*- C++ -*-===//
//
// A generated kernel is a chain of element-wise steps over f32 elements (the
// bundle's element-wise ops, fused by the bundle emission: KernelRegions.h).
// This builds it as one `linalg.generic` on tensors, the start of its
// lowering to native code (NativeKernels.h).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_CONVERSION_KERNELTOLINALG_H
#define GPIPE_CONVERSION_KERNELTOLINALG_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>
#include <vector>

namespace gpipe {

/// One step of a kernel: an element-wise op (the bundle's relu, gelu,
/// gelu_erf, tanh, add, add_grads and their gradients relu_grad, gelu_grad,
/// gelu_erf_grad, tanh_grad; the general ops of GPipeElementwiseOps.td and
/// their gradients; max_tie, 1 where x equals y), by mnemonic, operands in
/// the op's order, on earlier values: operand k < numInputs is input k,
/// otherwise step k - numInputs. The last step may be a reduction instead:
/// reduce_sum, reduce_mean or reduce_max of one value over the dimensions
/// the output lacks.
struct KernelStep {
  std::string op;
  llvm::SmallVector<unsigned> operands;
  /// The op's constants by name, sorted (clip: max, min; reduce_mean and
  /// reduce_mean_grad: count, the elements averaged).
  std::vector<std::pair<std::string, double>> constants = {};

  /// The constant `name` (0 if the step has none of that name).
  double constant(llvm::StringRef name) const;
};

/// A memref read or written in part (a slice, its gradient, a concat's
/// input). Along its own dimension i it has `extents[i]` elements, or -1:
/// the space's size at that dimension (then offset 0, step 1); the point p
/// of the space's dimension holds its element offsets[i] + steps[i] * p. An
/// output with a window is written whole: 0 outside it.
struct KernelWindow {
  llvm::SmallVector<int64_t> offsets, steps, extents;

  /// Whether dimension i is the space's whole (extent -1).
  bool whole(size_t i) const { return extents[i] < 0; }
  bool operator==(const KernelWindow &other) const {
    return offsets == other.offsets && steps == other.steps &&
           extents == other.extents;
  }
};

/// An input's or the output's element type: f32, i32, or i1 (a comparison's
/// result, stored as an i32 word, 0 or 1: every element takes 4 bytes).
enum class KernelElement { F32, I32, I1 };

/// "f32", "i32" or "i1".
llvm::StringRef elementName(KernelElement element);

/// How a memref of `element` holds it: f32, or an i32 word.
mlir::Type storageType(mlir::OpBuilder &b, KernelElement element);
/// A loaded element as the steps see it (an i1's word compared with 0).
mlir::Value fromStorage(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value stored, KernelElement element);
/// A step's value as a memref stores it (an i1 widened to its word).
mlir::Value toStorage(mlir::OpBuilder &b, mlir::Location loc,
                      mlir::Value value);

/// A kernel over an iteration space of `rank` dimensions (sizes given when
/// it runs). Input k has the dimensions inputDims[k] of the space, in its
/// own order (a transposed input's are not ascending; a broadcast input
/// lacks some: its element at a point is the one at the point's coordinates
/// in its dimensions); every step is computed at
/// every point. The output has the dimensions `outputDims`: all of them, or
/// for a reduction those it keeps.
struct KernelSpec {
  unsigned numInputs = 0;
  unsigned rank = 1;
  std::vector<llvm::SmallVector<unsigned>> inputDims;
  llvm::SmallVector<unsigned> outputDims;
  std::vector<KernelStep> steps;
  /// Per input (empty: none), and the output's: a window, or none where the
  /// memref is the space's whole along each of its dimensions. A `concat`
  /// step (the only step; axis a constant) copies input k to the output
  /// after inputs 0..k-1 along `axis`: each input is the output's whole but
  /// along the axis, where it has its extent.
  std::vector<std::optional<KernelWindow>> inputWindows;
  std::optional<KernelWindow> outputWindow;
  /// Per input (empty: all f32), and the output's.
  std::vector<KernelElement> inputTypes;
  KernelElement outputType = KernelElement::F32;
  /// A row kernel's rows: dimensions [0, rowDims) (0: not a row kernel). Its
  /// reduction steps come before its last (leading reductions: softmax's
  /// maximum and sum, a norm's mean) and each reduces the other dimensions,
  /// the columns, of a value over the whole space; the steps after one read
  /// its row's result. The output has every dimension. Each row is computed
  /// apart: a pass over its columns per reduction, then one that writes it.
  unsigned rowDims = 0;

  KernelElement inputType(unsigned k) const {
    return k < inputTypes.size() ? inputTypes[k] : KernelElement::F32;
  }

  /// Input k's window, or null.
  const KernelWindow *inputWindow(unsigned k) const {
    return k < inputWindows.size() && inputWindows[k] ? &*inputWindows[k]
                                                      : nullptr;
  }
  /// Whether the only step is a concat.
  bool concatenates() const {
    return steps.size() == 1 && steps[0].op == "concat";
  }
  /// Whether the only step is a `gather` (input 0 read at input 1's i32
  /// indices along `axis`, a constant: input 0 has every dimension, with its
  /// own extent along the axis; the indices have the axis, after dimension
  /// 0 when batched) or a `gather_grad` (input 0, dy, added into the output
  /// at them: the output has every dimension, with its own extent along the
  /// axis). An index in [-n, n) for an extent of n counts from the end where
  /// negative; a gathered element whose index is outside is NaN, and adds
  /// nothing to the gradient.
  bool gathers() const {
    return steps.size() == 1 &&
           (steps[0].op == "gather" || steps[0].op == "gather_grad");
  }

  /// A 1-D element-wise kernel of `numInputs` inputs (no steps yet).
  static KernelSpec elementwise(unsigned numInputs);
  /// Whether the last step is a reduction.
  bool reduces() const;
  /// Whether a step before the last is a reduction (a row kernel).
  bool reducesInside() const;
  /// "rank 2: in0(0,1) in1(1) -> out(0,1); add(in0,in1)->t0;
  /// clip[max=6,min=0](t0)->out": the iteration space, the steps with their
  /// constants, the inputs and the intermediate values named; identical
  /// kernels describe alike.
  std::string describe() const;
};

/// Whether the bundle op `op` becomes kernel steps: a step op itself, or
/// sum_to (a reduce_sum) or reduce_max_count (max_tie, then a reduce_sum).
bool isKernelOp(llvm::StringRef op);

/// Whether `op` is a reduction step (reduce_sum, reduce_mean, reduce_max).
bool isReductionStep(llvm::StringRef op);

/// Whether `op` (an op's mnemonic) can be a kernel step.
bool isKernelStepOp(llvm::StringRef op);

/// Whether the runtime also has a kernel of its own for step `op` (the
/// bundle's named element-wise ops); the general ops have none.
bool hasLibraryKernel(llvm::StringRef op);

/// Adds to `module` a public `func.func @name(in0, ..., out)` over
/// dynamically shaped f32 tensors (of each input's and the output's rank)
/// whose body is one linalg.generic computing `kernel` (marked `gpipe.tile`
/// for the schedule; a reduction's output is filled first, and a mean's
/// divided after), the output argument marked writable so that
/// bufferization writes it in place. Fails (with a diagnostic at `loc`) on
/// an unknown step, a bad operand or bad dimensions.
mlir::LogicalResult buildKernelFunction(mlir::ModuleOp module,
                                        mlir::Location loc,
                                        llvm::StringRef name,
                                        const KernelSpec &kernel);

/// A gather's `index` (i32, or index) along an axis of `extent` elements
/// (an index or i64 value): the position it reads, in range (0 where the
/// index is outside [-extent, extent)), and whether it is inside (i1).
std::pair<mlir::Value, mlir::Value> wrapIndex(mlir::OpBuilder &b,
                                              mlir::Location loc,
                                              mlir::Value index,
                                              mlir::Value extent);

/// Emits at `b`'s insertion point the scalar f32 arithmetic of `kernel` at
/// one point, the same step definitions as buildKernelFunction's body (for
/// other lowerings of the kernel: PtxKernels.h): given the inputs' elements
/// there, returns the inputs followed by the value of every step but a
/// trailing reduction (whose operand is among them; the caller combines it
/// over the reduced dimensions; a concat's are the inputs alone: the caller
/// reads the one whose part holds the point). Fails (with a diagnostic at `loc`, naming
/// `name`) on a kernel that buildKernelFunction refuses or on a wrong number
/// of inputs.
///
/// In a row kernel, a reduction step before the last takes its value from
/// `reductions` (the row's results of the reductions before it, in step
/// order; a reduction past them is 0: what depends on it is not computed
/// yet, and dies).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
emitKernelSteps(mlir::OpBuilder &b, mlir::Location loc, llvm::StringRef name,
                const KernelSpec &kernel, llvm::ArrayRef<mlir::Value> inputs,
                llvm::ArrayRef<mlir::Value> reductions = {});

} // namespace gpipe

#endif // GPIPE_CONVERSION_KERNELTOLINALG_H
