//===- DeviceParameters.cpp - Parameters and optimizer state, read, set ---===//
//
// The device executor's host view of its parameters, their gradients and
// the optimizer's state. Across processes (a transport that runs some
// devices here) reading is collective: the process that runs a tensor's
// device copies it back and shares it with the others; writing happens only
// there.
//
//===----------------------------------------------------------------------===//

#include "exec/DeviceExecutorImpl.h"

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

/// Copies `n` floats at `src` on `device` to the host, in every process:
/// the one that runs the device reads them and shares them.
static std::string copyBack(DeviceExecutor::Impl &impl, unsigned device,
                            const float *src, int64_t n,
                            std::vector<float> &values,
                            const std::string &what) {
  std::lock_guard<std::mutex> lock(impl.copyBacks);
  values.assign(n, 0.0f);
  if (impl.transport->runsDevice(device)) {
    DeviceBackend &backend = *impl.backend;
    backend.copyToHost(backend.computeStream(device), values.data(), src,
                       n * 4);
    std::string error = backend.synchronize(impl.config.stepTimeout);
    if (!error.empty())
      return error;
  }
  return impl.transport->shareFrom(device, values.data(), n * 4, what);
}

std::string DeviceExecutor::parameter(const std::string &name,
                                      std::vector<float> &values) {
  auto it = impl->paramByName.find(name);
  if (it == impl->paramByName.end())
    return "unknown parameter '" + name + "'";
  return copyBack(*impl, it->second->device, it->second->value,
                  it->second->size, values, "parameter '" + name + "'");
}

std::string DeviceExecutor::gradient(const std::string &name,
                                     std::vector<float> &values) {
  auto it = impl->paramByName.find(name);
  if (it == impl->paramByName.end())
    return "unknown parameter '" + name + "'";
  return copyBack(*impl, it->second->device, it->second->grad, it->second->size,
                  values, "the gradient of '" + name + "'");
}

std::string DeviceExecutor::setParameter(const std::string &name,
                                         const std::vector<float> &values) {
  auto it = impl->paramByName.find(name);
  if (it == impl->paramByName.end())
    return "unknown parameter '" + name + "'";
  if (int64_t(values.size()) != it->second->size)
    return "parameter '" + name + "' has " + std::to_string(it->second->size) +
           " elements, got " + std::to_string(values.size());
  // A tied parameter's copies take the same values.
  DeviceBackend &backend = *impl->backend;
  for (DeviceParameter *copy : impl->copiesOf(it->second))
    if (impl->transport->runsDevice(copy->device)) // else its process sets it
      backend.copyToDevice(backend.computeStream(copy->device), copy->value,
                           values.data(), copy->size * 4);
  return backend.synchronize(impl->config.stepTimeout);
}

/// The parameter `name` and its optimizer slot `slot`, or an error.
static std::string findSlot(DeviceExecutor::Impl &impl, const std::string &name,
                            unsigned slot, DeviceParameter *&param) {
  auto it = impl.paramByName.find(name);
  if (it == impl.paramByName.end())
    return "unknown parameter '" + name + "'";
  const unsigned slots = optimizerSlots(impl.config.optimizer.kind);
  if (slot >= slots)
    return "the optimizer has " + std::to_string(slots) +
           " state tensors per parameter, no slot " + std::to_string(slot);
  param = it->second;
  return {};
}

std::string DeviceExecutor::optimizerState(const std::string &name,
                                           unsigned slot,
                                           std::vector<float> &values) {
  DeviceParameter *param = nullptr;
  std::string error = findSlot(*impl, name, slot, param);
  if (!error.empty())
    return error;
  return copyBack(*impl, param->device, param->slots[slot], param->size, values,
                  "the optimizer state of '" + name + "'");
}

std::string
DeviceExecutor::setOptimizerState(const std::string &name, unsigned slot,
                                  const std::vector<float> &values) {
  DeviceParameter *param = nullptr;
  std::string error = findSlot(*impl, name, slot, param);
  if (!error.empty())
    return error;
  if (int64_t(values.size()) != param->size)
    return "optimizer state " + std::to_string(slot) + " of parameter '" +
           name + "' has " + std::to_string(param->size) + " elements, got " +
           std::to_string(values.size());
  DeviceBackend &backend = *impl->backend;
  for (DeviceParameter *copy : impl->copiesOf(param))
    if (impl->transport->runsDevice(copy->device)) // else its process sets it
      backend.copyToDevice(backend.computeStream(copy->device),
                           copy->slots[slot], values.data(), copy->size * 4);
  return backend.synchronize(impl->config.stepTimeout);
}
