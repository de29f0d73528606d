//===- BundleOps.h - A stage's values and ops in a bundle -------*- C++ -*-===//
//
// Private to lib/Target: how the bundle emission (BundleEmitter.cpp) numbers
// a stage's values and writes its compute and gradient ops
// (docs/BundleFormat.md).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_TARGET_BUNDLEOPS_H
#define GPIPE_LIB_TARGET_BUNDLEOPS_H

#include "gpipe/Target/KernelRegions.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <vector>

namespace gpipe::bundle_detail {

/// Numbers the values of one stage and describes them.
class ValueTable {
public:
  ValueTable(int64_t batch) : batch(batch) {}

  /// `batched` says whether the value is per example (decided by dataflow:
  /// a weight's first dimension may well equal the batch).
  int define(mlir::Value value, bool batched);
  bool isBatched(int id) const { return batchedIds[id]; }
  int64_t batchSize() const { return batch; }
  /// What the kernel fusion needs of value `id`.
  ValueInfo info(int64_t id) const {
    if (id < 0 || size_t(id) >= shapes.size())
      return {};
    return {shapes[id], batchedIds[id], elements[id]};
  }
  void alias(mlir::Value value, int id) { ids[value] = id; }
  mlir::FailureOr<int> lookup(mlir::Operation *user, mlir::Value value) const {
    auto it = ids.find(value);
    if (it == ids.end())
      return user->emitOpError() << "uses a value the bundle cannot name";
    return it->second;
  }
  llvm::json::Array takeSpecs() { return std::move(specs); }

private:
  int64_t batch;
  llvm::DenseMap<mlir::Value, int> ids;
  llvm::json::Array specs;
  std::vector<bool> batchedIds;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<KernelElement> elements;
};

/// Emits `op` (a compute or gradient op) into `list`, defining its results
/// in `values` unless they are already named (recompute ops reuse the
/// forward's ids). With `dropUnused`, a result nothing reads is written as
/// -1 (not computed).
mlir::LogicalResult emitOp(mlir::Operation *op, ValueTable &values,
                           llvm::json::Array &list, bool defineResults,
                           bool dropUnused = false);

} // namespace gpipe::bundle_detail

#endif // GPIPE_LIB_TARGET_BUNDLEOPS_H
