//===- DeviceTiedParameters.cpp - One update for a tied parameter's copies ===//
//
// A tied parameter (an output projection that is the token embedding's
// table) has a copy in every layer that reads it, wherever the partitioner
// puts those layers: on one device, or on several. Each copy's gradient
// holds its own layer's contribution. Once every backward of the step is
// issued, the group's gradients meet on the host, are summed in the group's
// order (the bundle's: the root first, then its copies in layer order, the
// same for every K) and written back into each copy, so that every copy
// takes the same update and they stay equal. Across processes, each copy's
// process shares it (Transport::shareFrom), and every process sums alike.
//
//===----------------------------------------------------------------------===//

#include "exec/DeviceExecutorImpl.h"

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

std::string DeviceExecutor::Impl::sumTiedGradients() {
  if (tiedGroups.empty())
    return {};
  std::string error = synchronizePass(); // every backward has run
  for (const std::vector<DeviceParameter *> &group : tiedGroups) {
    if (!error.empty())
      return error;
    const int64_t size = group.front()->size;
    std::vector<std::vector<float>> grads(group.size(),
                                          std::vector<float>(size_t(size)));
    for (size_t k = 0; k < group.size(); ++k)
      if (transport->runsDevice(group[k]->device))
        backend->copyToHost(compute(group[k]->device), grads[k].data(),
                            group[k]->grad, size * 4);
    error = synchronizePass();
    for (size_t k = 0; k < group.size() && error.empty(); ++k)
      if (transport->spansProcesses())
        error = transport->shareFrom(group[k]->device, grads[k].data(),
                                     size * 4,
                                     "the gradient of tied parameter '" +
                                         group[k]->spec.name + "'");
    if (!error.empty())
      return error;
    std::vector<float> &sum = grads.front();
    for (size_t k = 1; k < group.size(); ++k)
      for (int64_t i = 0; i < size; ++i)
        sum[size_t(i)] += grads[k][size_t(i)];
    for (DeviceParameter *copy : group)
      if (transport->runsDevice(copy->device))
        backend->copyToDevice(compute(copy->device), copy->grad, sum.data(),
                              size * 4);
    error = synchronizePass(); // before `sum` goes
  }
  return error;
}
