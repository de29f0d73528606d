//===- DeviceExecutor.h - Runs a bundle on a DeviceBackend -------*- C++
//-*-===//
//
// The pipeline executor for devices with streams: CPU threads (CpuBackend),
// GPUs (CudaBackend) or their host emulation (HostBackend). It runs the same
// bundles as the CPU executor (Executor.h) and computes the same gradients,
// up to float summation order and the GEMM precision of the backend.
//
// How a step runs. One host thread issues every device's instruction stream
// as asynchronous work: device d's ops go to its compute stream; a send and
// a receive go to the Transport (Transport.h), in the sender's and the
// receiver's stream order (in one process: a staging copy and an event). No
// device blocks the host. Instructions are issued in the order
// verifySchedule proved, in which every send comes before its receive. The
// step ends with one synchronize, bounded by `stepTimeout`.
//
// Memory is the compiler's static plan: every value lives in the buffer the
// bundle's placement gives it (memory_plan.devices[d].buffers, checked on
// load by PlacementVerifier), in one arena per device of the planned size.
// The executor plans nothing: `create` issues one step and one evaluation
// against a backend that runs nothing, to check that every buffer the
// programs define is in the placement with the bytes it needs. Parameters,
// gradients and optimizer slots live in a separate resident block per
// device.
//
// Model inputs are checked on the host before anything is issued (ids and
// labels in range), so a bad batch fails the step with the CPU executor's
// message and leaves parameters and optimizer state untouched.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_DEVICEEXECUTOR_H
#define GPIPE_RUNTIME_DEVICE_DEVICEEXECUTOR_H

#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/exec/Batch.h"
#include "gpipe/runtime/exec/Timeline.h"
#include "gpipe/runtime/kernels/Optimizers.h"
#include "gpipe/runtime/backends/DeviceBackend.h"
#include "gpipe/runtime/transport/Transport.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace gpipe::runtime::device {

struct DeviceExecutorConfig {
  OptimizerConfig optimizer;
  /// Seeds the parameter initializers, as ExecutorConfig::seed does.
  uint64_t seed = 0;
  /// How long a step may take on the devices before it is reported stuck.
  std::chrono::milliseconds stepTimeout{60000};
  /// Mark every instruction's start and end on its stream (timeline()).
  bool recordTimeline = true;
  /// With recordTimeline: also time every op (two more clock marks per op)
  /// and sum them per op kind and device (Timeline::opTotals).
  bool profileOps = false;
  /// The transfers between devices; empty: in-process staging copies. A
  /// transport across processes (MPI) runs some devices here: the executor
  /// allocates, initializes and issues only theirs, and shares the results
  /// the caller reads (losses, evaluation outputs, parameters).
  TransportFactory transport;
};

/// The memory of one device, in bytes.
struct DeviceMemoryLayout {
  int64_t residentBytes = 0; ///< parameters, gradients, optimizer slots
  /// The arena: the plan's arena less its resident bytes.
  int64_t arenaBytes = 0;
  int64_t plannedArenaBytes =
      0; ///< the bundle's memory plan, resident included
  /// Held by the transport for transfers to this device (staging), outside
  /// the arena; known after the first step.
  int64_t stagingBytes = 0;
  /// Held by the backend outside the arena (DeviceBackend::workspaceBytes:
  /// the CPU backend's packed parameters); known after the first step.
  int64_t workspaceBytes = 0;
};

class DeviceExecutor {
public:
  /// Validates the bundle and its placement, allocates the arenas on `backend`
  /// (which must have one device per stage) and initializes the parameters
  /// exactly as the CPU executor does (pretrained ones from the bundle's
  /// weights file, read once). Null and `error` on failure.
  static std::unique_ptr<DeviceExecutor>
  create(Bundle bundle, std::unique_ptr<DeviceBackend> backend,
         const DeviceExecutorConfig &config, std::string &error);

  ~DeviceExecutor();
  DeviceExecutor(const DeviceExecutor &) = delete;
  DeviceExecutor &operator=(const DeviceExecutor &) = delete;

  /// One training step on `bundle().batch` rows (see PipelineExecutor).
  StepResult trainStep(const Batch &batch);

  /// Forward only, every stage in order, on `rows` rows (any number >= 1;
  /// inputs have `rows` as dimension 0), with dropout as the identity, in
  /// chunks of at most the first micro-batch's rows that reuse its training
  /// buffers. Touches neither parameters nor gradients. The loss is the
  /// row-weighted mean of the chunks' losses.
  EvalResult evaluate(const Batch &batch, int64_t rows);

  /// Each instruction of the last trainStep on its device's lane, with its
  /// start and end as its stream reached them (recordTimeline).
  const Timeline &timeline() const;
  /// Per device: resident bytes plus the static arena, which every step
  /// reuses.
  std::vector<int64_t> peakMemoryBytes() const;
  /// Per device: parameters, gradients and optimizer slots, unaligned.
  std::vector<int64_t> residentBytes() const;

  /// Copies a parameter / its gradient of the last step back to the host;
  /// "" or an error (unknown name, a device error). Across processes every
  /// process calls these in the same order (the owner shares the values);
  /// the setters write only where the parameter's device runs.
  std::string parameter(const std::string &name, std::vector<float> &values);
  std::string gradient(const std::string &name, std::vector<float> &values);
  std::string setParameter(const std::string &name,
                           const std::vector<float> &values);

  /// Optimizer state `slot` (0 to optimizerSlots(kind) - 1: Adam's m and v,
  /// momentum's velocity, ...) of a parameter; "" or an error.
  std::string optimizerState(const std::string &name, unsigned slot,
                             std::vector<float> &values);
  std::string setOptimizerState(const std::string &name, unsigned slot,
                                const std::vector<float> &values);

  int64_t stepsDone() const;
  /// A resumed run: the next step is step `steps` + 1 (Adam's bias
  /// correction, dropout's masks).
  void setStepsDone(int64_t steps);
  void setLearningRate(float learningRate);
  const Bundle &bundle() const;
  DeviceBackend &backend();
  const Transport &transport() const;
  /// Whether a device this process runs loads model input `name`.
  bool usesInput(const std::string &name) const;
  const std::vector<DeviceMemoryLayout> &memory() const;

  struct Impl;

private:
  explicit DeviceExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_DEVICEEXECUTOR_H
