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
// Memory is a static plan: value lifetimes follow ProgramAnalysis.h (those of
// the CPU executor and of gpipe-plan-memory); `create` issues one step
// against an unbounded ArenaAllocator without running anything, which gives
// every buffer's offset and the arena size, allocates one arena per device,
// and every step repeats the same placement. Parameters, gradients and
// optimizer slots live in a separate resident block per device.
//
// Model inputs are checked on the host before anything is issued (ids and
// labels in range), so a bad batch fails the step with the CPU executor's
// message and leaves parameters and optimizer state untouched.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_DEVICEEXECUTOR_H
#define GPIPE_RUNTIME_DEVICE_DEVICEEXECUTOR_H

#include "gpipe/runtime/Bundle.h"
#include "gpipe/runtime/Executor.h"
#include "gpipe/runtime/Optimizers.h"
#include "gpipe/runtime/device/DeviceBackend.h"

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
};

/// The memory of one device, in bytes.
struct DeviceMemoryLayout {
  int64_t residentBytes = 0; ///< parameters, gradients, optimizer slots
  int64_t arenaBytes = 0;    ///< this executor's static placement
  int64_t plannedArenaBytes = -1; ///< the bundle's memory plan (-1: none)
  /// The arena follows the compiler's placement (the bundle's buffers);
  /// arenaBytes is then the plan's arena less its resident bytes.
  bool compilerPlaced = false;
  /// Held by the transport for transfers to this device (staging), outside
  /// the arena; known after the first step.
  int64_t stagingBytes = 0;
};

class DeviceExecutor {
public:
  /// Validates the bundle, plans the arenas, allocates them on `backend`
  /// (which must have one device per stage) and initializes the parameters
  /// exactly as the CPU executor does. Null and `error` on failure.
  static std::unique_ptr<DeviceExecutor>
  create(Bundle bundle, std::unique_ptr<DeviceBackend> backend,
         const DeviceExecutorConfig &config, std::string &error);

  ~DeviceExecutor();
  DeviceExecutor(const DeviceExecutor &) = delete;
  DeviceExecutor &operator=(const DeviceExecutor &) = delete;

  /// One training step on `bundle().batch` rows (see PipelineExecutor).
  StepResult trainStep(const Batch &batch);

  /// Forward only, every stage in order, on `rows` rows (any number >= 1;
  /// inputs have `rows` as dimension 0), with dropout as the identity. Uses
  /// arenas of its own, sized by a dry run for `rows` and kept until an
  /// evaluation with other rows. Touches neither parameters nor gradients.
  EvalResult evaluate(const Batch &batch, int64_t rows);

  /// Each instruction of the last trainStep on its device's lane, with its
  /// start and end as its stream reached them (recordTimeline).
  const Timeline &timeline() const;
  /// Per device: resident bytes plus the static arena, which every step
  /// reuses.
  std::vector<int64_t> peakMemoryBytes() const;
  /// Per device: parameters, gradients and optimizer slots (unaligned) plus
  /// the most bytes a training step holds live at once, in the order its
  /// program allocates and frees them: what the compiler's plan calls the
  /// peak (gpipe.memory peak_bytes).
  std::vector<int64_t> liveBytesPeak() const;
  /// Per device: parameters, gradients and optimizer slots, unaligned.
  std::vector<int64_t> residentBytes() const;

  /// Copies a parameter / its gradient of the last step back to the host;
  /// "" or an error (unknown name, a device error).
  std::string parameter(const std::string &name, std::vector<float> &values);
  std::string gradient(const std::string &name, std::vector<float> &values);
  std::string setParameter(const std::string &name,
                           const std::vector<float> &values);

  int64_t stepsDone() const;
  void setLearningRate(float learningRate);
  const Bundle &bundle() const;
  DeviceBackend &backend();
  const std::vector<DeviceMemoryLayout> &memory() const;

  struct Impl;

private:
  explicit DeviceExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_DEVICEEXECUTOR_H
