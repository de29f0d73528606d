//===- Engine.h - One training interface over every backend -----*- C++ -*-===//
//
// What a training loop (Training.h), a tool or an application needs from the
// runtime, whichever backend runs the bundle:
//   - `cpu`: K CPU devices (the pipeline executor, Executor.h);
//   - `cuda`: the device executor (exec/DeviceExecutor.h) on CUDA GPUs;
//   - `host-emulation`: the device executor on the host emulation of streams
//     (backends/host/HostBackend.h), for tests and debugging without a GPU.
// The CUDA backend lives in its own library (runtime/cuda); a program that
// links it hands its factory in EngineOptions, so that this library does not
// depend on CUDA. Without one, `cuda` is Unavailable with "no CUDA device".
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_ENGINE_H
#define GPIPE_RUNTIME_ENGINE_H

#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/base/Status.h"
#include "gpipe/runtime/exec/Timeline.h"
#include "gpipe/runtime/backends/DeviceBackend.h"
#include "gpipe/runtime/transport/Transport.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpipe::runtime {

enum class DeviceKind { Cpu, Cuda, HostEmulation };

/// "cpu", "cuda", "host-emulation", or nothing for another name.
std::optional<DeviceKind> parseDeviceKind(const std::string &name);
const char *deviceKindName(DeviceKind kind);

/// Makes the backend of `numDevices` pipeline devices, or null with an error
/// that says why ("no CUDA device available: ...").
using BackendFactory = std::function<std::unique_ptr<device::DeviceBackend>(
    unsigned numDevices, std::string &error)>;

struct EngineOptions {
  DeviceKind device = DeviceKind::Cpu;
  OptimizerConfig optimizer;
  uint64_t seed = 0;
  /// How long a device waits for a peer (cpu) or a step may take (devices
  /// with streams) before the step fails, naming who waited for what.
  std::chrono::milliseconds timeout{60000};
  bool recordTimeline = true;
  /// Also time every op (Timeline::opTotals); costs two clock marks per op.
  bool profileOps = false;
  /// The CPU devices' threads (cpu only).
  device::CpuThreading cpuThreading;
  /// The CUDA backend's factory (runtime/cuda), for DeviceKind::Cuda; empty:
  /// the registered one (registerBackend).
  BackendFactory cudaBackend;
  /// Transfers between devices; empty: all devices in this process. MPI
  /// (runtime/mpi) runs one device per process, on the CPU backend.
  device::TransportFactory transport;
};

class Engine {
public:
  virtual ~Engine() = default;

  /// One training step on a mini-batch of batchRows() rows.
  virtual StepResult trainStep(const Batch &batch) = 0;
  /// The rows of a training mini-batch: the bundle's batch, times the
  /// data-parallel replicas, each of which trains on its slice.
  virtual int64_t batchRows() const { return bundle().batch; }
  /// Whether this process's devices read model input `name`; across
  /// processes a batch may leave out the inputs this process does not read.
  virtual bool usesInput(const std::string &name) const {
    (void)name;
    return true;
  }
  /// Forward only on `rows` rows, dropout off.
  virtual EvalResult evaluate(const Batch &batch, int64_t rows) = 0;
  virtual void setLearningRate(float learningRate) = 0;
  /// The last step's instructions, one lane per device.
  virtual const Timeline &timeline() const = 0;
  /// Per device, the memory a step uses: the resident block plus the arena
  /// of the compiler's placement.
  virtual std::vector<int64_t> peakMemoryBytes() const = 0;
  virtual const Bundle &bundle() const = 0;
  unsigned numDevices() const { return bundle().numDevices(); }
  /// Copies parameter `name` / its gradient of the last step; NotFound for a
  /// name the model does not have.
  virtual Status parameter(const std::string &name,
                           std::vector<float> &values) = 0;
  virtual Status gradient(const std::string &name,
                          std::vector<float> &values) = 0;
  /// Overwrites a parameter (a checkpoint, pretrained weights).
  virtual Status setParameter(const std::string &name,
                              const std::vector<float> &values) = 0;
  /// Optimizer state `slot` (0 to optimizerSlots(optimizerKind()) - 1:
  /// Adam's m and v, ...) of a parameter, read or written.
  virtual Status optimizerState(const std::string &name, unsigned slot,
                                std::vector<float> &values) = 0;
  virtual Status setOptimizerState(const std::string &name, unsigned slot,
                                   const std::vector<float> &values) = 0;
  virtual OptimizerKind optimizerKind() const = 0;
  /// The optimizer the engine was created with (its learning rate the
  /// initial one; setLearningRate changes the steps' rate, not this):
  /// what a checkpoint records of the run's update rule.
  virtual const OptimizerConfig &optimizerConfig() const = 0;
  /// Successful training steps so far.
  virtual int64_t stepsDone() const = 0;
  /// A resumed run: the next step is step `steps` + 1 (the optimizer's t,
  /// dropout's masks).
  virtual void setStepsDone(int64_t steps) = 0;
  /// "4 CPU devices", "host emulation of 2 devices ...", the GPUs.
  virtual std::string describe() const = 0;
  /// Whether this process prints and writes files: across processes (MPI),
  /// only the first does; each process runs the same loop, and the calls
  /// that read a device's state (parameter, gradient, optimizerState) are
  /// collective.
  virtual bool leads() const { return true; }
};

/// Makes `kind` available to every later createEngine without a factory in
/// its options: the CUDA library registers itself this way
/// (gpipe::cuda::registerCudaBackend), so that the C API reaches it too.
/// Thread-safe.
void registerBackend(DeviceKind kind, BackendFactory factory);

/// The engine of `options.device` for `bundle`: InvalidBundle if the bundle
/// fails the loader's proofs, Unavailable (exit status 2 in the tools) if
/// the device kind cannot run here.
StatusOr<std::unique_ptr<Engine>> createEngine(Bundle bundle,
                                               const EngineOptions &options);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_ENGINE_H
