//===- KernelRegions.h - Element-wise runs of a stage program as kernels -*- C++
//-*-===//
//
// The bundle emission's choice of what its generated kernels compute. In a
// stage's op list (forward or backward, as the bundle writes it), a run of
// consecutive element-wise ops that forms an in-tree becomes one `kernel` op:
// each value inside the run is read once, by a later op of the run, and only
// the run's last value is written. Runs are consecutive so that no other op
// runs between the reads of an input and the kernel: the memory plan, made
// for the unfused ops, keeps every input live until then.
//
// The general element-wise ops (GPipeElementwiseOps.td) always become
// kernels, alone if need be. The named ones that the runtime also has kernels
// for (relu, gelu, add, ...) become kernels only under codegen=native, and
// never when they are half of a pair the runtime runs as one library kernel
// (a dense op's activation, its GEMM's epilogue; an add and the layer norm
// after it): `pinned` says which. A named op that broadcasts is generated.
//
// A kernel's iteration space is the shape of what it writes, or, when its
// last op is a reduction (reduce_sum/mean/max, sum_to, reduce_max_count), of
// what that reduction reads: a reduction ends its run, since a kernel
// computes its steps at every point. Each operand is placed in the space by
// its op's broadcasting (NumPy's, or along a reduction gradient's axes); the
// space's size-1 dimensions go, and the runs of dimensions that every operand
// has or lacks alike merge, so that a bias add over [B, S, D] is a rank-2
// kernel. The kernel op carries the merged sizes at the full batch (`space`)
// and whether the first holds the batch (`batched`).
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TARGET_KERNELREGIONS_H
#define GPIPE_TARGET_KERNELREGIONS_H

#include "gpipe/Target/NativeKernels.h"
#include "gpipe/runtime/bundle/OpTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/FunctionExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <vector>

namespace gpipe {

/// The distinct kernels of one bundle: identical runs share one kernel.
class KernelTable {
public:
  /// `fuseNamedOps`: whether the named element-wise ops join kernels too.
  explicit KernelTable(bool fuseNamedOps) : fuseNamedOps(fuseNamedOps) {}
  const bool fuseNamedOps;

  /// The index of the kernel computing `spec`, added if new.
  unsigned intern(const KernelSpec &spec);
  llvm::ArrayRef<NamedKernel> kernels() const { return table; }
  /// Records why an op could not become a kernel (the bundle emission
  /// reports these as errors).
  void refuse(std::string why) { refusals.push_back(std::move(why)); }
  llvm::ArrayRef<std::string> refused() const { return refusals; }
  /// The bundle's `code.kernels` list.
  llvm::json::Array describe() const;

private:
  std::vector<NamedKernel> table;
  llvm::StringMap<unsigned> indexOf;
  std::vector<std::string> refusals;
};

/// What the kernels need of a stage's value: its full-batch shape and
/// whether dimension 0 is the batch.
struct ValueInfo {
  std::vector<int64_t> shape;
  bool batched = false;
  KernelElement element = KernelElement::F32;
};
using ValueInfoFn = llvm::function_ref<ValueInfo(int64_t id)>;

/// Reads of each value id by a whole stage (every op list, its outputs, its
/// loss and its input gradients).
using ValueUses = llvm::DenseMap<int64_t, unsigned>;

/// Counts the reads of the ops of `ops` into `uses`.
void countOperandUses(const llvm::json::Array &ops, ValueUses &uses);

/// Replaces the runs of ops[begin, end) by kernel ops (of `table`), leaving
/// the other ops as they are. A run of several ops is fused only if
/// `allowed` accepts its positions [first, last]; else its ops become
/// kernels one by one. An op at a `pinned` position stays as it is. Returns
/// each old position's new one (an op fused into a run maps to the run's
/// kernel op).
std::vector<size_t>
fuseKernelRegions(llvm::json::Array &ops, size_t begin, size_t end,
                  const ValueUses &uses, const ValueInfoFn &info,
                  KernelTable &table,
                  llvm::function_ref<bool(size_t first, size_t last)> allowed,
                  llvm::function_ref<bool(size_t index)> pinned);

/// The pairs of ops (consecutive: `ops`, a bundle op list, has no params)
/// that the runtime runs as one library kernel, as OpTable.h's
/// chooseFusions picks them: each pair's kind at its first op.
std::vector<runtime::FusionKind>
chooseLibraryFusions(const llvm::json::Array &ops);

/// Fuses a stage's element-wise runs into kernels of `table`: the
/// forward's, the backward's (`grads`; its B and W parts apart at
/// `weightsFrom`), and renumbers what points into them (`recomputed`, the
/// forward indices the recompute copies; `weightsFrom`). A forward run is
/// fused only if the backward recomputes all of it or none of it; both ops
/// of a library pair stay, and so does a named op of one shape whose
/// operands are not all batched alike (`info`). `readLists` are the stage's
/// other reads (outputs, input gradients, the loss). An op that cannot be a
/// kernel even alone is recorded in `table.refused()`.
void fuseStageKernels(llvm::json::Array &forward, llvm::json::Array &grads,
                      std::vector<size_t> &recomputed,
                      std::optional<int64_t> &weightsFrom,
                      llvm::ArrayRef<const llvm::json::Array *> readLists,
                      const ValueInfoFn &info, KernelTable &table);

} // namespace gpipe

#endif // GPIPE_TARGET_KERNELREGIONS_H
