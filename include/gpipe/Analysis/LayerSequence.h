//===- LayerSequence.h - A model seen as a sequence of layers ---*- C++ -*-===//

#ifndef GPIPE_ANALYSIS_LAYERSEQUENCE_H
#define GPIPE_ANALYSIS_LAYERSEQUENCE_H

#include "gpipe/Analysis/Partitioner.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace gpipe {

/// The layers of a model in order, with what the partitioner needs to know
/// of them.
struct LayerSequence {
  llvm::SmallVector<LayerOp> layers;
  std::vector<LayerCost> costs;   ///< one per layer
  std::vector<uint64_t> cutBytes; ///< size layers.size() + 1, see PartitionProblem
  /// Size layers.size() + 1, see PartitionProblem: the cuts that a value of
  /// another element type than a float (an i1 mask, i32 indices) crosses.
  std::vector<std::string> joined;
};

/// Collects the layers directly in `model`'s body. Fails with a diagnostic on
/// the first layer that has no cost.
mlir::FailureOr<LayerSequence> buildLayerSequence(ModelOp model);

/// Bytes of the parameters a layer owns.
uint64_t layerParamBytes(LayerOp layer);

} // namespace gpipe

#endif // GPIPE_ANALYSIS_LAYERSEQUENCE_H
