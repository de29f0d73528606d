//===- Batch.h - A step's inputs and results on the host --------*- C++ -*-===//
//
// What every executor takes and returns: the model inputs of a mini-batch as
// host tensors, and the results of a training step and of an evaluation.
// Below both executors (PipelineExecutor, DeviceExecutor), so that neither
// includes the other for its types.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_EXEC_BATCH_H
#define GPIPE_RUNTIME_EXEC_BATCH_H

#include "gpipe/runtime/bundle/Bundle.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpipe::runtime {

/// A dense row-major host tensor: a model input of a batch, or an output of
/// `evaluate`. Exactly one of `f32` / `i32` holds the elements, per `type`.
struct HostTensor {
  ElementType type = ElementType::F32;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int32_t> i32;

  static HostTensor floats(std::vector<int64_t> shape, std::vector<float> data);
  static HostTensor ints(std::vector<int64_t> shape, std::vector<int32_t> data);
  /// The product of `shape` (1 for a scalar).
  int64_t numElements() const;
};

/// Model input name -> tensor.
using Batch = std::map<std::string, HostTensor>;

struct StepResult {
  std::string error; ///< empty on success
  /// The mini-batch loss: sum over micro-batches of (rows_m / N) * loss_m.
  double loss = 0.0;
  /// loss_m, in micro-batch order.
  std::vector<double> microbatchLosses;
  /// The L2 norm of every parameter gradient of every stage (the replicas'
  /// mean under data parallelism), before clipping: measured when the
  /// optimizer clips or guards against non-finite values
  /// (OptimizerConfig::clipGradNorm, checkFinite).
  std::optional<double> gradientNorm;
  /// The error is the guard's (OptimizerConfig::checkFinite): a loss, a
  /// gradient or a parameter that is not finite.
  bool nonFinite = false;
  bool ok() const { return error.empty(); }
};

struct EvalResult {
  std::string error; ///< empty on success
  double loss = 0.0;
  /// The operands of the loss op: for softmax cross-entropy the logits and
  /// the labels, for MSE the prediction and the target.
  HostTensor prediction;
  HostTensor target;
  /// The error is the guard's (OptimizerConfig::checkFinite): a loss that
  /// is not finite.
  bool nonFinite = false;
  bool ok() const { return error.empty(); }
};

/// Checks that `batch` holds exactly the model inputs of `bundle`, at `rows`
/// rows; returns "" or what is missing, extra or misshapen.
/// `used`, when given, says which inputs this process reads: the others may
/// be missing from the batch (across processes).
std::string
checkBatch(const Bundle &bundle, const Batch &batch, int64_t rows,
           const std::function<bool(const std::string &)> &used = nullptr);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_EXEC_BATCH_H
