//===- Engine.cpp - One training interface over every backend -------------===//
//
// Two adapters: the CPU pipeline executor, and the device executor over a
// DeviceBackend. They go when the device executor runs on CPU threads with
// the compiler's placement (docs/Architecture.md), leaving one executor.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/exec/Engine.h"
#include "gpipe/runtime/kernels/BlasLibrary.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/runtime/backends/host/HostBackend.h"

#include <map>
#include <mutex>

using namespace gpipe::runtime;

std::optional<DeviceKind>
gpipe::runtime::parseDeviceKind(const std::string &name) {
  if (name == "cpu")
    return DeviceKind::Cpu;
  if (name == "cuda")
    return DeviceKind::Cuda;
  if (name == "host-emulation")
    return DeviceKind::HostEmulation;
  return std::nullopt;
}

const char *gpipe::runtime::deviceKindName(DeviceKind kind) {
  switch (kind) {
  case DeviceKind::Cpu:
    return "cpu";
  case DeviceKind::Cuda:
    return "cuda";
  case DeviceKind::HostEmulation:
    return "host-emulation";
  }
  return "unknown";
}

namespace {

/// The executors' string errors: an unknown name is NotFound, a size
/// mismatch InvalidArgument, anything else a device failure.
Status toStatus(const std::string &error) {
  if (error.empty())
    return Status();
  if (error.rfind("unknown parameter", 0) == 0)
    return Status(StatusCode::NotFound, error);
  if (error.find(" elements, got ") != std::string::npos ||
      error.find(" state tensors per parameter, no slot ") != std::string::npos)
    return Status(StatusCode::InvalidArgument, error);
  return Status(StatusCode::DeviceFailure, error);
}

std::mutex registryMutex;
std::map<DeviceKind, BackendFactory> &registry() {
  static std::map<DeviceKind, BackendFactory> factories;
  return factories;
}

/// ", over MPI: rank 1 of 2 runs device 1" for a transport across
/// processes; "" in one process.
std::string acrossProcesses(const device::Transport &transport) {
  return transport.spansProcesses() ? ", " + transport.describe() : "";
}

/// What both executors offer under the same names.
template <class Executor> class ExecutorEngine : public Engine {
public:
  ExecutorEngine(std::unique_ptr<Executor> executor,
                 const OptimizerConfig &optimizer)
      : executor(std::move(executor)), optimizer(optimizer) {}
  StepResult trainStep(const Batch &batch) override {
    return executor->trainStep(batch);
  }
  EvalResult evaluate(const Batch &batch, int64_t rows) override {
    return executor->evaluate(batch, rows);
  }
  void setLearningRate(float learningRate) override {
    executor->setLearningRate(learningRate);
  }
  const Timeline &timeline() const override { return executor->timeline(); }
  std::vector<int64_t> peakMemoryBytes() const override {
    return executor->peakMemoryBytes();
  }
  const Bundle &bundle() const override { return executor->bundle(); }
  Status setParameter(const std::string &name,
                      const std::vector<float> &values) override {
    return toStatus(executor->setParameter(name, values));
  }
  Status optimizerState(const std::string &name, unsigned slot,
                        std::vector<float> &values) override {
    return toStatus(executor->optimizerState(name, slot, values));
  }
  Status setOptimizerState(const std::string &name, unsigned slot,
                           const std::vector<float> &values) override {
    return toStatus(executor->setOptimizerState(name, slot, values));
  }
  Status parameter(const std::string &name,
                   std::vector<float> &values) override {
    return toStatus(executor->parameter(name, values));
  }
  Status gradient(const std::string &name,
                  std::vector<float> &values) override {
    return toStatus(executor->gradient(name, values));
  }
  OptimizerKind optimizerKind() const override { return optimizer.kind; }
  const OptimizerConfig &optimizerConfig() const override { return optimizer; }
  bool leads() const override { return executor->transport().leads(); }
  bool usesInput(const std::string &name) const override {
    return executor->usesInput(name);
  }
  int64_t batchRows() const override {
    return bundle().batch * executor->transport().replicas();
  }
  int64_t stepsDone() const override { return executor->stepsDone(); }
  void setStepsDone(int64_t steps) override { executor->setStepsDone(steps); }

protected:
  std::unique_ptr<Executor> executor;
  OptimizerConfig optimizer;
};

class CpuEngine final : public ExecutorEngine<PipelineExecutor> {
public:
  using ExecutorEngine::ExecutorEngine;
  std::string describe() const override {
    return executor->describeDevices() + acrossProcesses(executor->transport());
  }
};

class StreamEngine final : public ExecutorEngine<device::DeviceExecutor> {
public:
  using ExecutorEngine::ExecutorEngine;
  std::string describe() const override {
    return executor->backend().describe() +
           acrossProcesses(executor->transport());
  }
};

} // namespace

void gpipe::runtime::registerBackend(DeviceKind kind, BackendFactory factory) {
  std::lock_guard<std::mutex> lock(registryMutex);
  registry()[kind] = std::move(factory);
}

StatusOr<std::unique_ptr<Engine>>
gpipe::runtime::createEngine(Bundle bundle, const EngineOptions &options) {
  std::string error;
  if (options.device == DeviceKind::Cpu ||
      options.device == DeviceKind::HostEmulation)
    if (Status usable = cpu::checkBlas(); !usable.ok())
      return usable;
  if (options.device == DeviceKind::Cpu) {
    ExecutorConfig config;
    config.optimizer = options.optimizer;
    config.seed = options.seed;
    config.recvTimeout = options.timeout;
    config.recordTimeline = options.recordTimeline;
    config.transport = options.transport;
    config.threading = options.cpuThreading;
    config.profileOps = options.profileOps;
    auto executor = PipelineExecutor::create(std::move(bundle), config, error);
    if (!executor)
      return Status(StatusCode::InvalidBundle, error);
    return std::unique_ptr<Engine>(
        new CpuEngine(std::move(executor), options.optimizer));
  }
  const unsigned numDevices = bundle.numDevices();
  std::unique_ptr<device::DeviceBackend> backend;
  if (options.device == DeviceKind::HostEmulation) {
    backend = std::make_unique<device::HostBackend>(numDevices);
  } else {
    BackendFactory factory = options.cudaBackend;
    if (!factory) {
      std::lock_guard<std::mutex> lock(registryMutex);
      auto it = registry().find(DeviceKind::Cuda);
      if (it != registry().end())
        factory = it->second;
    }
    if (!factory)
      return Status(StatusCode::Unavailable,
                    "no CUDA device: this program has no CUDA backend (built "
                    "without a CUDA compiler, or it does not link "
                    "runtime/cuda)");
    backend = factory(numDevices, error);
    if (!backend)
      return Status(StatusCode::Unavailable, error);
  }
  device::DeviceExecutorConfig config;
  config.optimizer = options.optimizer;
  config.seed = options.seed;
  config.stepTimeout = options.timeout;
  config.recordTimeline = options.recordTimeline;
  config.profileOps = options.profileOps;
  config.transport = options.transport;
  auto executor = device::DeviceExecutor::create(
      std::move(bundle), std::move(backend), config, error);
  if (!executor)
    return Status(StatusCode::InvalidBundle, error);
  return std::unique_ptr<Engine>(
      new StreamEngine(std::move(executor), options.optimizer));
}
