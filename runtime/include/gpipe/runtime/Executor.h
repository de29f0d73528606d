//===- Executor.h - Runs a bundle's per-device GPipe programs ---*- C++ -*-===//
//
// The pipeline executor on K CPU devices: the device executor
// (device/DeviceExecutor.h) on CpuBackend, one worker thread per device. It
// runs the K instruction streams of a bundle (see Bundle.h) at the compiler's
// buffer placement, passes boundary activations and gradients through the
// Transport, accumulates the parameter gradients of all micro-batches and
// applies one synchronous optimizer step. A step computes the gradients of
// training on the whole mini-batch on one device (up to float summation
// order): the loss gradient of micro-batch m is scaled by rows_m / N and
// dropout masks depend on the global row, not on the split. For the same
// micro-batches and seed, K = 1, 2, 4 give bit-identical results.
//
// Errors are returned, never thrown or only printed: `create` checks the
// bundle (and proves its schedule and placement), `trainStep` checks the
// batch before anything runs ("device 2: op #5 (forward of stage 2,
// micro-batch 1): label 12 outside [0, 10) at position 3, in stage op 4
// (softmax_cross_entropy)"), so a failed step leaves the parameters and the
// optimizer state as they were.
//
// Thread safety: one call at a time per executor; distinct executors are
// independent (each has its own worker threads).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_EXECUTOR_H
#define GPIPE_RUNTIME_EXECUTOR_H

#include "gpipe/runtime/Bundle.h"
#include "gpipe/runtime/Optimizers.h"
#include "gpipe/runtime/Timeline.h"
#include "gpipe/runtime/device/IntraOpPool.h"
#include "gpipe/runtime/device/Transport.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
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

struct ExecutorConfig {
  OptimizerConfig optimizer;
  /// Seeds the parameter initializers (with each parameter's name).
  uint64_t seed = 0;
  /// How long a step may wait for a device (a receive for its send, the
  /// optimizer barrier) before it fails, naming who waited for whom.
  std::chrono::milliseconds recvTimeout{60000};
  /// Record a Timeline event per instruction (cheap; off saves two clock
  /// reads per instruction).
  bool recordTimeline = true;
  /// Transfers between devices (DeviceExecutorConfig::transport); empty:
  /// every device a thread of this process.
  device::TransportFactory transport;
  /// Threads per device and pinning (CpuBackend.h).
  device::CpuThreading threading;
  /// Time every op too (DeviceExecutorConfig::profileOps).
  bool profileOps = false;
};

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

/// Checks everything `PipelineExecutor` relies on (value ids, operand and
/// result counts, element types and shapes of every op, channels between
/// adjacent stages, the instruction streams). Returns "" or the first
/// problem, e.g. "stage 1: forward op 2 (dense): expects 2 or 3 operands, got
/// 1".
std::string validateBundle(const Bundle &bundle);

/// Checks that `batch` holds exactly the model inputs of `bundle`, at `rows`
/// rows; returns "" or what is missing, extra or misshapen.
/// `used`, when given, says which inputs this process reads: the others may
/// be missing from the batch (across processes).
std::string
checkBatch(const Bundle &bundle, const Batch &batch, int64_t rows,
           const std::function<bool(const std::string &)> &used = nullptr);

class PipelineExecutor {
public:
  /// Validates `bundle`, then initializes every parameter from
  /// (config.seed, name) with its zeroed gradient and optimizer slots on the
  /// device of its stage. Returns null and sets `error` on a bad bundle.
  static std::unique_ptr<PipelineExecutor>
  create(Bundle bundle, const ExecutorConfig &config, std::string &error);

  ~PipelineExecutor();
  PipelineExecutor(const PipelineExecutor &) = delete;
  PipelineExecutor &operator=(const PipelineExecutor &) = delete;

  /// One training step on a mini-batch of `bundle().batch` rows: zeroes the
  /// gradients, runs every device's instruction stream on its own thread and
  /// applies the optimizer once. Dropout uses step number stepsDone() + 1.
  StepResult trainStep(const Batch &batch);

  /// Forward only, every stage in order on the calling thread, on `rows`
  /// rows (any number >= 1; inputs have `rows` as dimension 0). Dropout is the
  /// identity. Touches neither gradients nor memory accounting.
  EvalResult evaluate(const Batch &batch, int64_t rows);

  /// The parameter / its gradient (accumulated over the micro-batches of the
  /// last step), or null for an unknown name (or a failed copy).
  const std::vector<float> *parameter(const std::string &name) const;
  const std::vector<float> *gradient(const std::string &name) const;
  /// The same into `values`: "" or the error (an unknown name, a device's,
  /// or across processes the owner's broadcast that failed).
  std::string parameter(const std::string &name,
                        std::vector<float> &values) const;
  std::string gradient(const std::string &name,
                       std::vector<float> &values) const;
  /// Overwrites a parameter (e.g. from a checkpoint); returns an error if the
  /// name is unknown or the size differs.
  std::string setParameter(const std::string &name,
                           const std::vector<float> &values);

  /// Optimizer state `slot` (0 to optimizerSlots(kind) - 1) of a parameter,
  /// read from / written to its device; "" or an error (unknown name or
  /// slot, wrong size, a device error).
  std::string optimizerState(const std::string &name, unsigned slot,
                             std::vector<float> &values) const;
  std::string setOptimizerState(const std::string &name, unsigned slot,
                                const std::vector<float> &values);

  /// Number of successful training steps (the optimizer's t).
  int64_t stepsDone() const;
  /// A resumed run: the next step is step `steps` + 1 (the optimizer's t and
  /// dropout's masks).
  void setStepsDone(int64_t steps);
  /// The learning rate of the next steps (for schedules such as cosine
  /// decay); the optimizer's state is kept.
  void setLearningRate(float learningRate);
  unsigned numDevices() const;
  const Bundle &bundle() const;
  const device::Transport &transport() const;
  /// "2 CPU devices x 1 thread" (CpuBackend::describe).
  std::string describeDevices() const;
  /// Whether this process's devices read model input `name`.
  bool usesInput(const std::string &name) const;

  /// The instructions of the last trainStep, one lane per device, times in
  /// microseconds from the start of the step (empty without recordTimeline).
  const Timeline &timeline() const;

  /// Per device, the memory a step uses: parameters, gradients and
  /// optimizer slots (each aligned) plus the arena of the compiler's
  /// placement, which holds every value, saved state and scratch.
  const std::vector<int64_t> &peakMemoryBytes() const;
  /// Per device, the bytes held between steps (parameters, gradients and
  /// optimizer slots).
  std::vector<int64_t> residentMemoryBytes() const;

  struct Impl;

private:
  explicit PipelineExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_EXECUTOR_H
