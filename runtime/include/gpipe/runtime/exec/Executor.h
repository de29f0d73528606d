//===- Executor.h - Runs a bundle's per-device GPipe programs ---*- C++ -*-===//
//
// The pipeline executor on K CPU devices: the device executor
// (exec/DeviceExecutor.h) on CpuBackend, one worker thread per device. It
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

#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/exec/Batch.h"
#include "gpipe/runtime/kernels/Optimizers.h"
#include "gpipe/runtime/exec/Timeline.h"
#include "gpipe/runtime/backends/cpu/IntraOpPool.h"
#include "gpipe/runtime/transport/Transport.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpipe::runtime {

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
