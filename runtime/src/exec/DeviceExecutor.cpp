//===- DeviceExecutor.cpp - Runs a bundle on a DeviceBackend --------------===//
//
// Creation (checks, the compiler's placement indexed and verified by a dry
// run, device memory, parameters), the training step and the rest of the
// public API (evaluation: DeviceEvaluation.cpp; parameters and optimizer
// state: DeviceParameters.cpp). DeviceExecutorImpl.h explains how a step is issued and
// its hazards.
//
//===----------------------------------------------------------------------===//

#include "exec/DeviceExecutorImpl.h"
#include "exec/PretrainedWeights.h"

#include "gpipe/runtime/bundle/Initializers.h"
#include "gpipe/runtime/verify/BundleValidation.h"
#include "gpipe/runtime/kernels/KernelsByFunctor.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstring>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

namespace {

/// Issues nothing: `create` runs a step against it to check the placement.
class NullBackend final : public KernelsByFunctor<NullBackend, DeviceBackend> {
public:
  explicit NullBackend(unsigned devices) : devices(devices) {}
  template <class F> void forEach(StreamId, int64_t, const F &) {}
  template <class F> void forEachRow(StreamId, int64_t, const F &) {}
  template <class F> void forEachColumn(StreamId, int64_t, const F &) {}
  std::string describe() const override { return "placement check"; }
  unsigned numDevices() const override { return devices; }
  std::string allocate(unsigned, int64_t, void **pointer) override {
    *pointer = nullptr;
    return {};
  }
  StreamId computeStream(unsigned d) override { return 2 * d; }
  StreamId copyStream(unsigned d) override { return 2 * d + 1; }
  EventId recordEvent(StreamId) override { return 0; }
  void waitEvent(StreamId, EventId) override {}
  std::string allocateStaging(int64_t, void **pointer) override {
    *pointer = nullptr;
    return {};
  }
  void copyToDevice(StreamId, void *, const void *, int64_t) override {}
  void copyToHost(StreamId, void *, const void *, int64_t) override {}
  void copyBetweenDevices(StreamId, void *, unsigned, const void *, unsigned,
                          int64_t) override {}
  void fillZero(StreamId, void *, int64_t) override {}
  void recordTime(StreamId, double *) override {}
  void gemm(StreamId, const GemmBatch &) override {}
  void generated(StreamId, const GeneratedCall &) override {}
  std::string synchronize(std::chrono::milliseconds) override { return {}; }
  std::string error() const override { return {}; }

private:
  unsigned devices;
};

/// The bundle's generated kernels, loaded for `backend` once, before any
/// step issues them; "" or why they cannot run there.
std::string loadGeneratedCode(const Bundle &bundle, DeviceBackend &backend,
                              std::unique_ptr<LoadedCode> &code) {
  if (bundle.code.kernels.empty())
    return {};
  // A GPU loads them in its own form (CUDA: code.cuda's PTX).
  if (!backend.runsHostCode())
    return backend.loadGeneratedKernels(bundle.code);
  std::string error;
  code = LoadedCode::load(bundle.code, hostCpuFeatures(), error);
  return error;
}

/// The resident block's tensors start at multiples of this (cudaMalloc's
/// alignment).
constexpr int64_t kResidentAlignment = 256;

int64_t residentSize(int64_t bytes) {
  int64_t n = bytes > 0 ? bytes : 1;
  return (n + kResidentAlignment - 1) / kResidentAlignment * kResidentAlignment;
}

} // namespace

//===----------------------------------------------------------------------===//
// The executor
//===----------------------------------------------------------------------===//

DeviceExecutor::DeviceExecutor(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}

DeviceExecutor::~DeviceExecutor() = default;

std::unique_ptr<DeviceExecutor>
DeviceExecutor::create(Bundle bundle, std::unique_ptr<DeviceBackend> backend,
                       const DeviceExecutorConfig &config, std::string &error) {
  error = validateBundle(bundle);
  if (!error.empty())
    return nullptr;
  const unsigned numDevices = bundle.numDevices();
  if (!backend || backend->numDevices() != numDevices) {
    error = "the bundle has " + std::to_string(numDevices) +
            " pipeline devices, the backend " +
            (backend ? std::to_string(backend->numDevices()) : "is missing");
    return nullptr;
  }
  if (config.stepTimeout.count() <= 0) {
    error = "expects a positive step timeout, got " +
            std::to_string(config.stepTimeout.count()) + " ms";
    return nullptr;
  }
  error = checkOptimizerConfig(config.optimizer);
  if (!error.empty())
    return nullptr;
  auto impl = std::make_unique<Impl>();
  Impl &s = *impl;
  error = loadGeneratedCode(bundle, *backend, s.code);
  if (!error.empty())
    return nullptr;
  if (bundle.precision) {
    error = backend->usePrecision(*bundle.precision);
    if (!error.empty()) {
      error = "the bundle's precision: " + error;
      return nullptr;
    }
  }
  s.config = config;
  s.backend = std::move(backend);
  s.bundle = std::move(bundle);
  const Bundle &b = s.bundle;
  s.training.programs = &b.programs;
  error = verifySchedule(b, &s.training.order);
  if (!error.empty())
    return nullptr;
  s.paramsOf.resize(numDevices);
  s.layout.resize(numDevices);
  const unsigned numSlots = optimizerSlots(config.optimizer.kind);
  for (const ParamSpec &spec : b.params) {
    auto param = std::make_unique<DeviceParameter>();
    param->spec = spec;
    param->device = b.deviceOfStage(spec.stage);
    param->size = product(spec.shape);
    s.layout[param->device].residentBytes +=
        residentSize(param->size * 4) * (2 + numSlots);
    s.paramsOf[param->device].push_back(param.get());
    s.paramByName[spec.name] = param.get();
    s.params.push_back(std::move(param));
  }
  std::unordered_map<std::string, size_t> groupOf;
  for (const std::unique_ptr<DeviceParameter> &param : s.params) {
    if (param->spec.tied.empty())
      continue;
    param->tiedRoot = s.paramByName.at(param->spec.tied);
    auto [group, added] = groupOf.try_emplace(param->spec.tied,
                                              s.tiedGroups.size());
    if (added)
      s.tiedGroups.push_back({param->tiedRoot});
    s.tiedGroups[group->second].push_back(param.get());
  }
  s.runningStatistics.resize(numDevices);
  for (const RunningStatistics &stats : runningStatisticsOf(b)) {
    DeviceRunningStatistics running;
    running.mean = s.paramByName.at(stats.mean);
    running.variance = s.paramByName.at(stats.variance);
    running.mean->runningStatistic = running.variance->runningStatistic = true;
    running.count = stats.count;
    running.momentum = stats.momentum;
    s.runningStatistics[b.deviceOfStage(stats.stage)].push_back(running);
  }
  const unsigned numMicrobatches = b.microbatchRows.size();
  const unsigned lossDevice = b.deviceOfStage(b.stages.size() - 1);
  s.layout[lossDevice].residentBytes += residentSize(numMicrobatches * 4);
  for (const StageProgram &stage : b.stages)
    s.fusion.push_back(fuseGradientAccumulation(stage));
  s.keptForward = keptForwardValuesOf(b);
  s.recomputesWhileReceiving = recomputesWhileReceivingOf(b, s.keptForward);
  for (unsigned d = 0; d < numDevices; ++d) {
    bool splits = false;
    for (const Instr &instr : b.programs[d])
      splits |= instr.kind == InstrKind::BackwardWeights;
    s.splitsBackward.push_back(splits);
  }
  s.training.rows = b.microbatchRows;
  int64_t offset = 0;
  for (int64_t rows : b.microbatchRows) {
    s.training.offsets.push_back(offset);
    offset += rows;
  }
  // The compiler's placement (validateBundle checked it: inside the arena,
  // no two live buffers sharing a byte); a dry run of a training step and of
  // an evaluation checks that every buffer the programs define is there.
  error = s.indexPlacement();
  if (error.empty())
    error = s.verifyPass(s.training);
  if (error.empty())
    error = s.prepareEvaluation(b.microbatchRows.front());
  if (!error.empty())
    return nullptr;
  s.residentExact.assign(numDevices, 0);
  for (const ParamSpec &spec : b.params)
    s.residentExact[b.deviceOfStage(spec.stage)] +=
        product(spec.shape) * 4 * (2 + numSlots);
  for (unsigned d = 0; d < numDevices; ++d) {
    const PlannedDeviceMemory &plan = b.memoryPlan.devices[d];
    s.layout[d].arenaBytes = plan.arenaBytes - plan.residentBytes;
    s.layout[d].plannedArenaBytes = plan.arenaBytes;
  }

  // Device memory, then the parameters, initialized as the CPU executor does:
  // only for the devices this process runs.
  s.issue = s.backend.get();
  if (config.transport) {
    error = config.transport(*s.backend, s.transport);
    if (error.empty() && !s.transport)
      error = "the transport factory made no transport";
    if (!error.empty())
      return nullptr;
  } else {
    s.transport = createInProcessTransport(*s.backend);
  }
  const Transport &transport = *s.transport;
  if (transport.sendsAwaitTheirReceive()) {
    error = verifySchedule(b, nullptr, /*rendezvous=*/true);
    if (!error.empty()) {
      error = "under " + transport.describe() +
              ", whose sends wait for their receive: " + error;
      return nullptr;
    }
  }
  // Pretrained values first, so that an error returns before any copy is in
  // flight; the file is read only if a parameter held here needs it, and
  // the tensors no parameter here takes are freed before the allocations.
  // A tied copy starts from its root's values: the root's tensor where the
  // root is held elsewhere.
  std::vector<std::vector<float>> initial(s.params.size());
  std::unordered_map<const DeviceParameter *, size_t> indexOf;
  for (size_t i = 0; i < s.params.size(); ++i)
    indexOf[s.params[i].get()] = i;
  {
    PretrainedWeights pretrained(b.weights);
    for (size_t i = 0; i < s.params.size(); ++i) {
      const DeviceParameter &param = *s.params[i];
      if (param.spec.init != InitKind::Pretrained ||
          !transport.runsDevice(param.device))
        continue;
      const DeviceParameter *root = param.tiedRoot;
      if (!root)
        error = pretrained.take(param.spec, initial[i]);
      else if (transport.runsDevice(root->device))
        initial[i] = initial[indexOf.at(root)];
      else
        error = pretrained.copy(root->spec, initial[i]);
      if (!error.empty())
        return nullptr;
    }
  }
  std::vector<char *> resident(numDevices, nullptr);
  for (unsigned d = 0; d < numDevices; ++d) {
    void *arena = nullptr, *res = nullptr;
    if (!transport.runsDevice(d)) {
      s.arenaBase.push_back(nullptr);
      continue;
    }
    error = s.backend->allocate(d, s.layout[d].arenaBytes, &arena);
    if (error.empty())
      error = s.backend->allocate(d, s.layout[d].residentBytes, &res);
    if (!error.empty())
      return nullptr;
    s.arenaBase.push_back(static_cast<char *>(arena));
    resident[d] = static_cast<char *>(res);
  }
  std::vector<int64_t> used(numDevices, 0);
  auto take = [&](unsigned d, int64_t elements) {
    float *p = reinterpret_cast<float *>(resident[d] + used[d]);
    used[d] += residentSize(elements * 4);
    return p;
  };
  for (size_t i = 0; i < s.params.size(); ++i) {
    DeviceParameter *param = s.params[i].get();
    unsigned d = param->device;
    if (!transport.runsDevice(d))
      continue;
    param->value = take(d, param->size);
    param->grad = take(d, param->size);
    for (unsigned k = 0; k < numSlots; ++k) {
      param->slots[k] = take(d, param->size);
      s.backend->fillZero(s.backend->computeStream(d), param->slots[k],
                          param->size * 4);
    }
    if (param->spec.init != InitKind::Pretrained) {
      // A tied copy draws its root's values (the seed and the root's name).
      initial[i].resize(param->size);
      const ParamSpec &drawn = param->tiedRoot ? param->tiedRoot->spec
                                               : param->spec;
      initializeParameter(drawn.init, drawn.scale, drawn.shape, config.seed,
                          drawn.name, initial[i].data());
    }
    s.backend->copyToDevice(s.backend->computeStream(d), param->value,
                            initial[i].data(), param->size * 4);
  }
  if (transport.runsDevice(lossDevice))
    s.lossSlots = take(lossDevice, numMicrobatches);
  error = s.backend->synchronize(config.stepTimeout);
  if (!error.empty())
    return nullptr;
  return std::unique_ptr<DeviceExecutor>(new DeviceExecutor(std::move(impl)));
}

std::string DeviceExecutor::Impl::indexPlacement() {
  const unsigned numDevices = bundle.numDevices();
  placement.assign(numDevices, {});
  for (unsigned d = 0; d < numDevices; ++d) {
    std::vector<InstrBuffers> &byInstr = placement[d];
    byInstr.resize(bundle.programs[d].size());
    const std::vector<PlacedBuffer> &buffers =
        bundle.memoryPlan.devices[d].buffers;
    for (size_t i = 0; i < buffers.size(); ++i) {
      const PlacedBuffer &buffer = buffers[i];
      if (buffer.instr < 0 || size_t(buffer.instr) >= byInstr.size())
        return "device " + std::to_string(d) + ": buffer #" +
               std::to_string(i) + " is defined by instruction " +
               std::to_string(buffer.instr) + ", outside the program";
      InstrBuffers &at = byInstr[buffer.instr];
      if (buffer.isScratch()) {
        at.scratch.push_back(&buffer);
      } else if (buffer.holdsValue()) {
        at.values.emplace_back(int(buffer.value), &buffer);
      }
      // A send's copy (micro-batch -1, a value): the transport stages from
      // the value itself, so the executor leaves that room unused.
    }
    // Sorted by value for the lookups of every step; a value twice is an
    // error.
    for (size_t instr = 0; instr < byInstr.size(); ++instr) {
      auto &values = byInstr[instr].values;
      std::stable_sort(
          values.begin(), values.end(),
          [](const auto &a, const auto &b) { return a.first < b.first; });
      for (size_t k = 1; k < values.size(); ++k)
        if (values[k].first == values[k - 1].first)
          return "device " + std::to_string(d) + ": buffers #" +
                 std::to_string(values[k - 1].second - buffers.data()) +
                 " and #" + std::to_string(values[k].second - buffers.data()) +
                 " both hold value " + std::to_string(values[k].first) +
                 " of instruction " + std::to_string(instr);
    }
  }
  return {};
}

std::string DeviceExecutor::Impl::verifyPass(const IssuePass &toCheck) {
  NullBackend dry(bundle.numDevices());
  std::unique_ptr<Transport> dryTransport = createInProcessTransport(dry);
  issue = &dry;
  transfer = dryTransport.get();
  pass = &toCheck;
  placementError.clear();
  std::string error = issueStep(nullptr, true);
  return error.empty() ? placementError : error;
}

std::string DeviceExecutor::Impl::stageInputs(const Batch &batch) {
  // The previous pass has been synchronized, so its copies have read their
  // staging bytes: one buffer for the whole batch suffices (a second one
  // would pay only once steps overlap, and issue waits for none).
  constexpr int64_t kAlign = 64;
  int64_t needed = 0;
  for (const auto &entry : batch)
    needed += (entry.second.numElements() * 4 + kAlign - 1) / kAlign * kAlign;
  inputSource.clear();
  if (!stagesNothing && needed > stagingBytes) {
    void *fresh = nullptr;
    std::string error = backend->allocateStaging(needed, &fresh);
    if (!error.empty())
      return error;
    staging = static_cast<char *>(fresh);
    stagingBytes = fresh ? needed : 0;
    stagesNothing = !fresh;
  }
  int64_t at = 0;
  for (const auto &[name, tensor] : batch) {
    const char *src = tensor.type == ElementType::F32
                          ? reinterpret_cast<const char *>(tensor.f32.data())
                          : reinterpret_cast<const char *>(tensor.i32.data());
    const int64_t bytes = tensor.numElements() * 4;
    if (!staging) {
      inputSource[name] = src;
      continue;
    }
    std::memcpy(staging + at, src, size_t(bytes));
    inputSource[name] = staging + at;
    at += (bytes + kAlign - 1) / kAlign * kAlign;
  }
  return {};
}

std::string DeviceExecutor::Impl::synchronizePass() {
  std::string error = backend->synchronize(config.stepTimeout);
  if (error.empty())
    error = transport->completeSends();
  if (!error.empty()) {
    std::string stopped = transport->abandon();
    if (!stopped.empty())
      error += "; " + stopped;
  }
  return error;
}

std::string DeviceExecutor::Impl::runPass(const IssuePass &toRun,
                                          const Batch &batch) {
  issue = backend.get();
  transfer = transport.get();
  pass = &toRun;
  recordTimeline = config.recordTimeline;
  profileOps = config.profileOps;
  std::string error = stageInputs(batch);
  if (!error.empty())
    return error;
  error = issueStep(&batch, false);
  if (toRun.evaluating)
    return error; // copyEvaluationOutputs took the losses
  const unsigned numMicrobatches = toRun.rows.size();
  hostLosses.assign(numMicrobatches, 0.0f);
  const unsigned last = bundle.deviceOfStage(bundle.stages.size() - 1);
  if (error.empty() && lossSlots)
    backend->copyToHost(backend->computeStream(last), hostLosses.data(),
                        lossSlots, numMicrobatches * 4);
  return error;
}

StepResult DeviceExecutor::trainStep(const Batch &batch) {
  Impl &s = *impl;
  StepResult result;
  const auto started = std::chrono::steady_clock::now();
  s.pass = &s.training;
  // Data parallelism: the whole mini-batch, of which this replica takes its
  // slice.
  const Transport &transport = *s.transport;
  auto used = [this](const std::string &name) { return usesInput(name); };
  result.error =
      checkBatch(s.bundle, batch, s.bundle.batch * transport.replicas(), used);
  s.rowBase = int64_t(transport.replica()) * s.bundle.batch;
  if (result.error.empty())
    result.error = s.checkModelInputs(batch);
  if (result.error.empty())
    result.error = s.backend->error();
  if (result.error.empty() && s.steps >= kMaxStepsDone)
    result.error = "the run has done " + std::to_string(s.steps) +
                   " steps, the most it counts: step " +
                   std::to_string(s.steps) + " + 1 would not be an int64";
  if (!result.error.empty())
    return result;
  s.transport->beginPass("step " + std::to_string(s.steps + 1));
  result.error = s.runPass(s.training, batch);
  std::string syncError = s.synchronizePass();
  if (result.error.empty())
    result.error = syncError;
  if (result.error.empty())
    result.error = s.transport->shareFrom(
        s.bundle.deviceOfStage(s.bundle.stages.size() - 1), s.hostLosses.data(),
        int64_t(s.hostLosses.size()) * 4, "the losses");
  if (result.error.empty())
    result.error = s.transport->averageOverReplicasNow(
        s.hostLosses.data(), int64_t(s.hostLosses.size()), "the losses");
  if (result.error.empty())
    result.error = s.checkDecisions();
  if (result.error.empty() && s.gradientsAveraged &&
      s.config.optimizer.checkFinite)
    result.error = s.checkParameters();
  result.nonFinite = s.nonFinite;
  result.gradientNorm = s.gradientNorm;
  if (!result.error.empty())
    return result;
  ++s.steps;
  for (unsigned d = 0; d < s.layout.size(); ++d) {
    s.layout[d].stagingBytes = s.transport->stagingBytes(d);
    s.layout[d].workspaceBytes = s.backend->workspaceBytes(d);
  }
  if (s.recordTimeline) {
    result.error = s.buildTimeline();
    s.timeline.setStepUs(std::chrono::duration<double, std::micro>(
                             std::chrono::steady_clock::now() - started)
                             .count());
  }
  if (!result.error.empty())
    return result;
  for (size_t m = 0; m < s.hostLosses.size(); ++m) {
    double loss = s.hostLosses[m];
    result.microbatchLosses.push_back(loss);
    result.loss +=
        double(s.bundle.microbatchRows[m]) / double(s.bundle.batch) * loss;
  }
  return result;
}


const Timeline &DeviceExecutor::timeline() const { return impl->timeline; }

std::vector<int64_t> DeviceExecutor::residentBytes() const {
  return impl->residentExact;
}

std::vector<int64_t> DeviceExecutor::peakMemoryBytes() const {
  std::vector<int64_t> bytes;
  for (const DeviceMemoryLayout &device : impl->layout)
    bytes.push_back(device.residentBytes + device.arenaBytes);
  return bytes;
}

int64_t DeviceExecutor::stepsDone() const { return impl->steps; }

void DeviceExecutor::setStepsDone(int64_t steps) {
  assert(checkStepsDone(steps).empty() && "checkStepsDone");
  impl->steps = steps;
}

void DeviceExecutor::setLearningRate(float learningRate) {
  impl->config.optimizer.learningRate = learningRate;
}

const Bundle &DeviceExecutor::bundle() const { return impl->bundle; }

DeviceBackend &DeviceExecutor::backend() { return *impl->backend; }

const Transport &DeviceExecutor::transport() const { return *impl->transport; }

bool DeviceExecutor::usesInput(const std::string &name) const {
  const Bundle &bundle = impl->bundle;
  for (unsigned s = 0; s < bundle.stages.size(); ++s)
    if (impl->transport->runsDevice(bundle.deviceOfStage(s)))
      for (const StageInput &input : bundle.stages[s].inputs)
        if (!input.fromChannel && input.inputName == name)
          return true;
  return false;
}

const std::vector<DeviceMemoryLayout> &DeviceExecutor::memory() const {
  return impl->layout;
}
