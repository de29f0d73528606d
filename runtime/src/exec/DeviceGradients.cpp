//===- DeviceGradients.cpp - Gradient norm, clipping, non-finite guard ----===//
//
// What a step does before and after its optimizer steps when it clips the
// gradients by their global norm or guards against values that are not
// finite (OptimizerConfig::clipGradNorm, checkFinite).
//
// The gradients of a pipeline live on K devices, so their norm spans them
// all. At the first optimizer step, once every device has issued its last
// backward (the schedule's barrier), each device takes its replicas' means
// and sums the squares of each gradient into kSquareParts partial sums in
// double (KernelApi::sumOfSquares: the same parts on every backend); one
// synchronize brings them to the host, across processes every pipeline
// device shares its own. The host adds each parameter's parts in order and
// the parameters in the bundle's order, so the norm does not depend on K:
// K = 1, 2 and 4 give the same bits. Every device then steps with the same
// factor min(1, max / (norm + 1e-6)).
//
// Where the backend can (DeviceGating.h), the devices take that decision
// themselves, each from every device's sums, and the host checks the same
// sums after the step's one synchronize (checkDecisions).
//
// The step's scalars the updates read (StepScalars: the learning rate, the
// factor and Adam's bias corrections) are written to each device here too.
//
//===----------------------------------------------------------------------===//

#include "exec/DeviceExecutorImpl.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

namespace {

/// Partial sums per parameter: enough for a GPU's threads to share a large
/// gradient, few enough to copy back at once.
constexpr int64_t kSquareParts = 256;

/// " (stage S on device D)".
std::string placeOf(unsigned stage, unsigned device) {
  return " (stage " + std::to_string(stage) + " on device " +
         std::to_string(device) + ")";
}

} // namespace

/// Issues, on each device this process runs, the partial sums of squares of
/// `values` (each parameter's gradient or value) and their copy to the
/// host; "" or an allocation error.
template <class Values>
static std::string issueSquares(DeviceExecutor::Impl &impl,
                                DeviceExecutor::Impl::SquareSums &into,
                                const Values &values) {
  const unsigned numDevices = impl.bundle.numDevices();
  into.device.resize(numDevices, nullptr);
  into.host.resize(numDevices);
  for (unsigned d = 0; d < numDevices; ++d) {
    const std::vector<DeviceParameter *> &params = impl.paramsOf[d];
    if (!impl.transport->runsDevice(d) || params.empty())
      continue;
    const int64_t count = int64_t(params.size()) * kSquareParts;
    if (!into.device[d]) {
      void *memory = nullptr;
      std::string error =
          impl.backend->allocate(d, count * int64_t(sizeof(double)), &memory);
      if (!error.empty())
        return "the gradient norm's partial sums: " + error;
      into.device[d] = static_cast<double *>(memory);
    }
    into.host[d].assign(size_t(count), 0.0);
    const StreamId s = impl.compute(d);
    impl.backend->fillZero(s, into.device[d], count * 8);
    for (size_t j = 0; j < params.size(); ++j)
      impl.backend->sumOfSquares(s, values(*params[j]), params[j]->size,
                                 into.device[d] + j * kSquareParts,
                                 std::min(params[j]->size, kSquareParts));
    impl.backend->copyToHost(s, into.host[d].data(), into.device[d], count * 8);
  }
  return {};
}

/// After the synchronize: every device's partial sums on every process, then
/// each parameter's sum of squares, by name.
static std::string
gatherSquares(DeviceExecutor::Impl &impl,
              DeviceExecutor::Impl::SquareSums &from,
              std::unordered_map<const DeviceParameter *, double> &sums) {
  const unsigned numDevices = impl.bundle.numDevices();
  for (unsigned d = 0; d < numDevices; ++d) {
    std::vector<double> &host = from.host[d];
    host.resize(impl.paramsOf[d].size() * kSquareParts, 0.0);
    if (impl.transport->spansProcesses() && !host.empty()) {
      std::string error = impl.transport->shareFrom(
          d, host.data(), int64_t(host.size()) * 8, "the gradient norm");
      if (!error.empty())
        return error;
    }
    for (size_t j = 0; j < impl.paramsOf[d].size(); ++j) {
      double sum = 0;
      for (int64_t r = 0; r < kSquareParts; ++r)
        sum += host[j * kSquareParts + r];
      sums[impl.paramsOf[d][j]] = sum;
    }
  }
  return {};
}

std::string DeviceExecutor::Impl::prepareOptimizerStep() {
  gradientsAveraged = true;
  const unsigned numDevices = bundle.numDevices();
  // The replicas' means first: the norm is the whole mini-batch's.
  for (unsigned d = 0; d < numDevices; ++d) {
    if (!transport->runsDevice(d))
      continue;
    for (DeviceParameter *param : paramsOf[d]) {
      std::string error = transport->averageOverReplicas(
          compute(d), d, param->grad, param->size,
          "the gradient of '" + param->spec.name + "'");
      if (!error.empty())
        return error;
    }
  }
  std::string error =
      issueSquares(*this, gradientSquares,
                   [](const DeviceParameter &param) { return param.grad; });
  // One process, one replica: every sum is in this address space.
  DeviceGating *gating = issue->gating();
  if (error.empty() && gating && !transport->spansProcesses() &&
      transport->replicas() == 1)
    return issueDecisions(*gating);
  const unsigned lastStage = bundle.stages.size() - 1;
  const unsigned lossDevice = bundle.deviceOfStage(lastStage);
  std::vector<float> losses(pass->rows.size(), 0.0f);
  if (error.empty() && lossSlots)
    backend->copyToHost(compute(lossDevice), losses.data(), lossSlots,
                        int64_t(losses.size()) * 4);
  std::string syncError = synchronizePass();
  if (error.empty())
    error = syncError;
  std::unordered_map<const DeviceParameter *, double> sums;
  if (error.empty())
    error = gatherSquares(*this, gradientSquares, sums);
  if (error.empty() && config.optimizer.checkFinite) {
    // Every process decides on the same losses: the pipeline's, then the
    // replicas' mean.
    error = transport->shareFrom(lossDevice, losses.data(),
                                 int64_t(losses.size()) * 4, "the losses");
    if (error.empty())
      error = transport->averageOverReplicasNow(
          losses.data(), int64_t(losses.size()), "the losses");
  }
  if (!error.empty())
    return error;
  return judgeGradients(losses, sums);
}

std::string DeviceExecutor::Impl::judgeGradients(
    const std::vector<float> &losses,
    const std::unordered_map<const DeviceParameter *, double> &sums) {
  const std::string stepName = "step " + std::to_string(steps + 1);
  const unsigned lastStage = bundle.stages.size() - 1;
  const char *unchanged = "; the step stopped before the update, the "
                          "parameters are unchanged";
  if (config.optimizer.checkFinite) {
    for (size_t m = 0; m < losses.size(); ++m)
      if (!std::isfinite(losses[m])) {
        nonFinite = true;
        return stepName + ": the loss of micro-batch " + std::to_string(m) +
               " is " + nonFiniteName(losses[m]) +
               placeOf(lastStage, bundle.deviceOfStage(lastStage)) + unchanged;
      }
  }
  // The bundle's order, whatever device holds each parameter: the same sum
  // for every K.
  double total = 0;
  for (const ParamSpec &spec : bundle.params) {
    const DeviceParameter *param = paramByName.at(spec.name);
    if (param->runningStatistic)
      continue; // a batch norm's statistics, not a gradient
    if (param->tiedRoot)
      continue; // a tied copy: its root's gradient, counted once
    const auto found = sums.find(param);
    const double sum = found == sums.end() ? 0.0 : found->second;
    if (config.optimizer.checkFinite && !std::isfinite(sum)) {
      nonFinite = true;
      return stepName + ": the gradient of parameter '" + spec.name + "' is " +
             nonFiniteName(sum) + placeOf(spec.stage, param->device) +
             unchanged;
    }
    total += sum;
  }
  gradientNorm = std::sqrt(total);
  gradientScale = clipScale(*gradientNorm, config.optimizer.clipGradNorm);
  return {};
}

std::string DeviceExecutor::Impl::issueDecisions(DeviceGating &gating) {
  const unsigned numDevices = bundle.numDevices();
  GateRequest request;
  request.partsPerParameter = kSquareParts;
  for (const ParamSpec &spec : bundle.params) {
    const DeviceParameter *param = paramByName.at(spec.name);
    if (param->runningStatistic || param->tiedRoot)
      continue;
    request.parts.push_back(gradientSquares.device[param->device] +
                            indexOnDevice(param) * kSquareParts);
  }
  request.losses = lossSlots;
  request.numLosses = lossSlots ? int64_t(pass->rows.size()) : 0;
  request.checkFinite = config.optimizer.checkFinite;
  request.clipGradNorm = config.optimizer.clipGradNorm;
  gates.resize(numDevices, nullptr);
  for (unsigned d = 0; d < numDevices; ++d)
    if (!gates[d]) {
      void *memory = nullptr;
      std::string error = backend->allocate(d, sizeof(StepGate), &memory);
      if (!error.empty())
        return "the step's decision: " + error;
      gates[d] = static_cast<StepGate *>(memory);
    }
  // The check after the update: flags the updates raise.
  const bool flagged = config.optimizer.checkFinite;
  updatedFlags.resize(numDevices, nullptr);
  hostUpdatedFlags.resize(numDevices);
  for (unsigned d = 0; d < numDevices && flagged; ++d) {
    const int64_t count = int64_t(paramsOf[d].size());
    if (count == 0)
      continue;
    if (!updatedFlags[d]) {
      void *memory = nullptr;
      std::string error = backend->allocate(d, count * 4, &memory);
      if (!error.empty())
        return "the update's checks: " + error;
      updatedFlags[d] = static_cast<int32_t *>(memory);
    }
    issue->fillZero(compute(d), updatedFlags[d], count * 4);
    hostUpdatedFlags[d].assign(size_t(count), 0);
  }
  // Each device's sums, and the loss device's losses, are written before
  // its event; every device decides once it has seen them all.
  std::vector<EventId> summed(numDevices);
  for (unsigned d = 0; d < numDevices; ++d)
    summed[d] = issue->recordEvent(compute(d));
  for (unsigned d = 0; d < numDevices; ++d) {
    for (unsigned e = 0; e < numDevices; ++e)
      if (e != d)
        issue->waitEvent(compute(d), summed[e]);
    gating.decide(compute(d), request, gates[d]);
  }
  decidingGating = &gating;
  return {};
}

std::string DeviceExecutor::Impl::checkDecisions() {
  if (!decidingGating)
    return {};
  std::unordered_map<const DeviceParameter *, double> sums;
  std::string error = gatherSquares(*this, gradientSquares, sums);
  if (!error.empty())
    return error;
  error = judgeGradients(hostLosses, sums);
  // The same arithmetic on the same sums: a device that decided otherwise
  // is a defect, and its update cannot be trusted.
  const int32_t apply = error.empty() ? 1 : 0;
  for (unsigned d = 0; d < gates.size(); ++d) {
    const StepGate &gate = *gates[d];
    if (gate.apply != apply || (apply && gate.scale != gradientScale))
      return "device " + std::to_string(d) +
             " decided the step differently from the host (update " +
             std::to_string(gate.apply) + " scale " +
             std::to_string(gate.scale) + ", the host: update " +
             std::to_string(apply) + " scale " + std::to_string(gradientScale) +
             ")";
  }
  return error;
}

int32_t *DeviceExecutor::Impl::updatedFlagsOf(unsigned device,
                                              const DeviceParameter *param) {
  if (!decidingGating || !config.optimizer.checkFinite || !updatedFlags[device])
    return nullptr;
  return updatedFlags[device] + indexOnDevice(param);
}

size_t DeviceExecutor::Impl::indexOnDevice(const DeviceParameter *param) const {
  const std::vector<DeviceParameter *> &mine = paramsOf[param->device];
  return size_t(std::find(mine.begin(), mine.end(), param) - mine.begin());
}

std::string DeviceExecutor::Impl::issueParameterCheck() {
  if (decidingGating) {
    // The updates flagged what they wrote.
    for (unsigned d = 0; d < updatedFlags.size(); ++d)
      if (updatedFlags[d] && transport->runsDevice(d))
        issue->copyToHost(compute(d), hostUpdatedFlags[d].data(),
                          updatedFlags[d],
                          int64_t(hostUpdatedFlags[d].size()) * 4);
    return {};
  }
  return issueSquares(*this, parameterSquares,
                      [](const DeviceParameter &param) { return param.value; });
}

std::string DeviceExecutor::Impl::checkParameters() {
  std::unordered_map<const DeviceParameter *, double> sums;
  if (decidingGating) {
    // Flags read as the sums they stand for: nan before inf.
    for (unsigned d = 0; d < hostUpdatedFlags.size(); ++d)
      for (size_t j = 0; j < hostUpdatedFlags[d].size(); ++j) {
        const int32_t flags = hostUpdatedFlags[d][j];
        sums[paramsOf[d][j]] =
            flags & kUpdatedNan   ? std::numeric_limits<double>::quiet_NaN()
            : flags & kUpdatedInf ? std::numeric_limits<double>::infinity()
                                  : 0.0;
      }
  } else {
    std::string error = gatherSquares(*this, parameterSquares, sums);
    if (!error.empty())
      return error;
  }
  for (const ParamSpec &spec : bundle.params) {
    const DeviceParameter *param = paramByName.at(spec.name);
    const double sum = sums[param];
    if (!std::isfinite(sum)) {
      nonFinite = true;
      return "step " + std::to_string(steps + 1) + ": parameter '" + spec.name +
             "' is " + nonFiniteName(sum) + " after the update" +
             placeOf(spec.stage, param->device);
    }
  }
  return {};
}

std::string
DeviceExecutor::Impl::writeStepScalars(unsigned device, StreamId s,
                                       const OptimizerConfig &optimizer) {
  if (issue != backend.get())
    return {}; // the dry run needs no memory
  const unsigned numDevices = bundle.numDevices();
  if (stepScalars.empty()) {
    // Copied from staging memory, as the inputs (page-locked on CUDA);
    // backends without it copy from the executor's own.
    void *staged = nullptr;
    std::string error = backend->allocateStaging(
        int64_t(numDevices * sizeof(StepScalars)), &staged);
    if (!error.empty())
      return "the step's learning rate and gradient scale: " + error;
    ownStepScalars.resize(staged ? 0 : numDevices);
    hostStepScalars = staged ? static_cast<StepScalars *>(staged)
                             : ownStepScalars.data();
    stepScalars.resize(numDevices, nullptr);
  }
  if (!stepScalars[device]) {
    void *memory = nullptr;
    std::string error =
        backend->allocate(device, sizeof(StepScalars), &memory);
    if (!error.empty())
      return "the step's learning rate and gradient scale: " + error;
    stepScalars[device] = static_cast<StepScalars *>(memory);
  }
  hostStepScalars[device] = stepScalarsOf(optimizer, steps + 1);
  issue->copyToDevice(s, stepScalars[device], &hostStepScalars[device],
                      sizeof(StepScalars));
  return {};
}
