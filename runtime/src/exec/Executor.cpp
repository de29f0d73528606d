//===- Executor.cpp - The pipeline executor on CPU threads ----------------===//
//
// PipelineExecutor is the device executor (exec/DeviceExecutor.h) on
// CpuBackend: one worker thread per pipeline device, the bundle's memory
// placement, the Transport's staged transfers. What it adds is the host
// view the CPU callers expect: parameters and gradients as host vectors
// (copied back on request), and each device's memory (its resident block
// and the compiler's arena).
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/verify/BundleValidation.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"

#include <map>
#include <mutex>

using namespace gpipe::runtime;

struct PipelineExecutor::Impl {
  std::unique_ptr<device::DeviceExecutor> executor;
  /// Host copies of parameters and gradients, refreshed when asked after
  /// a step or a setParameter. The const readers fill them, and may run
  /// concurrently (the C API's contract): hostCopies guards both maps.
  std::map<std::string, std::vector<float>> parameters, gradients;
  std::mutex hostCopies;
  std::vector<int64_t> peak;
};

PipelineExecutor::PipelineExecutor(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}

PipelineExecutor::~PipelineExecutor() = default;

std::unique_ptr<PipelineExecutor>
PipelineExecutor::create(Bundle bundle, const ExecutorConfig &config,
                         std::string &error) {
  const unsigned numDevices = bundle.numDevices();
  if (numDevices == 0) {
    error = validateBundle(bundle);
    if (error.empty())
      error = "expects at least one stage, got 0";
    return nullptr;
  }
  if (config.recvTimeout.count() <= 0) {
    error = "expects a positive receive timeout, got " +
            std::to_string(config.recvTimeout.count()) + " ms";
    return nullptr;
  }
  device::DeviceExecutorConfig deviceConfig;
  deviceConfig.optimizer = config.optimizer;
  deviceConfig.seed = config.seed;
  deviceConfig.stepTimeout = config.recvTimeout;
  deviceConfig.recordTimeline = config.recordTimeline;
  deviceConfig.transport = config.transport;
  deviceConfig.profileOps = config.profileOps;
  auto impl = std::make_unique<Impl>();
  impl->executor = device::DeviceExecutor::create(
      std::move(bundle),
      std::make_unique<device::CpuBackend>(numDevices, config.threading),
      deviceConfig, error);
  if (!impl->executor)
    return nullptr;
  impl->peak = impl->executor->peakMemoryBytes();
  return std::unique_ptr<PipelineExecutor>(
      new PipelineExecutor(std::move(impl)));
}

StepResult PipelineExecutor::trainStep(const Batch &batch) {
  StepResult result = impl->executor->trainStep(batch);
  if (result.ok()) {
    impl->parameters.clear();
    impl->gradients.clear();
  }
  return result;
}

EvalResult PipelineExecutor::evaluate(const Batch &batch, int64_t rows) {
  return impl->executor->evaluate(batch, rows);
}

/// The host copy of `name` in `cache`, read from the device if absent;
/// null and `error` on failure.
static const std::vector<float> *
hostCopy(std::map<std::string, std::vector<float>> &cache,
         const std::string &name, device::DeviceExecutor &executor,
         bool gradient, std::string &error) {
  auto it = cache.find(name);
  if (it != cache.end())
    return &it->second;
  std::vector<float> values;
  error = gradient ? executor.gradient(name, values)
                   : executor.parameter(name, values);
  if (!error.empty())
    return nullptr;
  return &(cache[name] = std::move(values));
}

const std::vector<float> *
PipelineExecutor::parameter(const std::string &name) const {
  std::lock_guard<std::mutex> lock(impl->hostCopies);
  std::string error;
  return hostCopy(impl->parameters, name, *impl->executor, false, error);
}

const std::vector<float> *
PipelineExecutor::gradient(const std::string &name) const {
  std::lock_guard<std::mutex> lock(impl->hostCopies);
  std::string error;
  return hostCopy(impl->gradients, name, *impl->executor, true, error);
}

std::string PipelineExecutor::parameter(const std::string &name,
                                        std::vector<float> &values) const {
  std::lock_guard<std::mutex> lock(impl->hostCopies);
  std::string error;
  if (const std::vector<float> *copy =
          hostCopy(impl->parameters, name, *impl->executor, false, error))
    values = *copy;
  return error;
}

std::string PipelineExecutor::gradient(const std::string &name,
                                       std::vector<float> &values) const {
  std::lock_guard<std::mutex> lock(impl->hostCopies);
  std::string error;
  if (const std::vector<float> *copy =
          hostCopy(impl->gradients, name, *impl->executor, true, error))
    values = *copy;
  return error;
}

std::string PipelineExecutor::setParameter(const std::string &name,
                                           const std::vector<float> &values) {
  std::string error = impl->executor->setParameter(name, values);
  std::lock_guard<std::mutex> lock(impl->hostCopies);
  impl->parameters.erase(name);
  return error;
}

std::string PipelineExecutor::optimizerState(const std::string &name,
                                             unsigned slot,
                                             std::vector<float> &values) const {
  return impl->executor->optimizerState(name, slot, values);
}

std::string
PipelineExecutor::setOptimizerState(const std::string &name, unsigned slot,
                                    const std::vector<float> &values) {
  return impl->executor->setOptimizerState(name, slot, values);
}

int64_t PipelineExecutor::stepsDone() const {
  return impl->executor->stepsDone();
}

void PipelineExecutor::setStepsDone(int64_t steps) {
  impl->executor->setStepsDone(steps);
}

void PipelineExecutor::setLearningRate(float learningRate) {
  impl->executor->setLearningRate(learningRate);
}

unsigned PipelineExecutor::numDevices() const {
  return impl->executor->bundle().numDevices();
}

const Bundle &PipelineExecutor::bundle() const {
  return impl->executor->bundle();
}

bool PipelineExecutor::usesInput(const std::string &name) const {
  return impl->executor->usesInput(name);
}

std::string PipelineExecutor::describeDevices() const {
  return impl->executor->backend().describe();
}

const device::Transport &PipelineExecutor::transport() const {
  return impl->executor->transport();
}

const Timeline &PipelineExecutor::timeline() const {
  return impl->executor->timeline();
}

const std::vector<int64_t> &PipelineExecutor::peakMemoryBytes() const {
  return impl->peak;
}

std::vector<int64_t> PipelineExecutor::residentMemoryBytes() const {
  return impl->executor->residentBytes();
}
