//===- DeviceExecutor.cpp - Runs a bundle on a DeviceBackend --------------===//
//
// Creation (checks, the placement dry run, device memory, parameters), the
// training step and the public API. DeviceExecutorImpl.h explains how a step
// is issued and its hazards.
//
//===----------------------------------------------------------------------===//

#include "DeviceExecutorImpl.h"

#include "gpipe/runtime/Initializers.h"
#include "gpipe/runtime/device/KernelsByFunctor.h"

#include <algorithm>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

namespace {

/// Issues nothing: `create` runs a step against it to learn the placement.
class NullBackend final : public KernelsByFunctor<NullBackend, DeviceBackend> {
public:
  explicit NullBackend(unsigned devices) : devices(devices) {}
  template <class F> void forEach(StreamId, int64_t, const F &) {}
  std::string describe() const override { return "placement dry run"; }
  unsigned numDevices() const override { return devices; }
  std::string allocate(unsigned, int64_t, void **pointer) override {
    *pointer = nullptr;
    return {};
  }
  StreamId computeStream(unsigned d) override { return 2 * d; }
  StreamId copyStream(unsigned d) override { return 2 * d + 1; }
  EventId recordEvent(StreamId) override { return 0; }
  void waitEvent(StreamId, EventId) override {}
  void copyToDevice(StreamId, void *, const void *, int64_t) override {}
  void copyToHost(StreamId, void *, const void *, int64_t) override {}
  void copyBetweenDevices(StreamId, void *, unsigned, const void *, unsigned,
                          int64_t) override {}
  void fillZero(StreamId, void *, int64_t) override {}
  void recordTime(StreamId, double *) override {}
  void gemm(StreamId, const GemmBatch &) override {}
  std::string synchronize(std::chrono::milliseconds) override { return {}; }
  std::string error() const override { return {}; }

private:
  unsigned devices;
};


} // namespace

//===----------------------------------------------------------------------===//
// The executor
//===----------------------------------------------------------------------===//

DeviceExecutor::DeviceExecutor(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}

DeviceExecutor::~DeviceExecutor() = default;

std::unique_ptr<DeviceExecutor>
DeviceExecutor::create(Bundle bundle, std::unique_ptr<DeviceBackend> backend,
                       const DeviceExecutorConfig &config,
                       std::string &error) {
  error = validateBundle(bundle);
  if (!error.empty())
    return nullptr;
  const unsigned numDevices = bundle.stages.size();
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
  auto impl = std::make_unique<Impl>();
  Impl &s = *impl;
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
    param->device = spec.stage;
    param->size = product(spec.shape);
    s.layout[spec.stage].residentBytes +=
        ArenaAllocator::roundUp(param->size * 4) * (2 + numSlots);
    s.paramsOf[spec.stage].push_back(param.get());
    s.paramByName[spec.name] = param.get();
    s.params.push_back(std::move(param));
  }
  const unsigned numMicrobatches = b.microbatchRows.size();
  s.layout.back().residentBytes += ArenaAllocator::roundUp(numMicrobatches * 4);
  for (unsigned d = 0; d < numDevices; ++d) {
    s.fusion.push_back(fuseGradientAccumulation(b.stages[d]));
    s.liveness.push_back(computeLiveness(b.stages[d], s.fusion[d].skip));
    unsigned last = 0;
    for (const Instr &instr : b.programs[d])
      if (instr.kind == InstrKind::Forward)
        last = instr.microbatch;
    s.lastForward.push_back(last);
  }
  s.training.rows = b.microbatchRows;
  int64_t offset = 0;
  for (int64_t rows : b.microbatchRows) {
    s.training.offsets.push_back(offset);
    offset += rows;
  }
  s.keptForEvaluation.assign(b.stages.back().values.size(), 0);
  for (const Op &op : b.stages.back().forward)
    if (!op.results.empty() && op.results[0] == b.stages.back().loss)
      for (int id : op.operands)
        s.keptForEvaluation[id] = 1;

  // The compiler's placement when the bundle has it (validateBundle checked
  // it: inside the arena, no live overlap), else the dry run's. Either way
  // one step against the dry-run backend checks the program against it.
  s.training.planned = b.memoryPlan.devices.size() == numDevices;
  for (const PlannedDeviceMemory &device : b.memoryPlan.devices)
    s.training.planned &= !device.buffers.empty();
  error = s.placePass(s.training);
  if (error.empty())
    error = s.placementError;
  if (!error.empty())
    return nullptr;
  s.residentExact.assign(numDevices, 0);
  for (const ParamSpec &spec : b.params)
    s.residentExact[spec.stage] += product(spec.shape) * 4 * (2 + numSlots);
  for (unsigned d = 0; d < numDevices; ++d)
    s.livePeak.push_back(s.residentExact[d] + s.runs[d].liveHigh);
  for (unsigned d = 0; d < numDevices; ++d) {
    if (s.training.planned)
      s.training.arenaBytes[d] = b.memoryPlan.devices[d].arenaBytes -
                                 b.memoryPlan.devices[d].residentBytes;
    s.layout[d].arenaBytes = s.training.arenaBytes[d];
    s.layout[d].compilerPlaced = s.training.planned;
    if (d < b.memoryPlan.devices.size())
      s.layout[d].plannedArenaBytes = b.memoryPlan.devices[d].arenaBytes;
  }

  // Device memory, then the parameters, initialized as the CPU executor does.
  s.issue = s.backend.get();
  s.transport = createInProcessTransport(*s.backend);
  std::vector<char *> resident(numDevices, nullptr);
  for (unsigned d = 0; d < numDevices; ++d) {
    void *arena = nullptr, *res = nullptr;
    error = s.backend->allocate(d, s.layout[d].arenaBytes, &arena);
    if (error.empty())
      error = s.backend->allocate(d, s.layout[d].residentBytes, &res);
    if (!error.empty())
      return nullptr;
    s.training.arenaBase.push_back(static_cast<char *>(arena));
    resident[d] = static_cast<char *>(res);
  }
  std::vector<int64_t> used(numDevices, 0);
  auto take = [&](unsigned d, int64_t elements) {
    float *p = reinterpret_cast<float *>(resident[d] + used[d]);
    used[d] += ArenaAllocator::roundUp(elements * 4);
    return p;
  };
  std::vector<std::vector<float>> initial;
  for (auto &param : s.params) {
    unsigned d = param->device;
    param->value = take(d, param->size);
    param->grad = take(d, param->size);
    for (unsigned k = 0; k < numSlots; ++k) {
      param->slots[k] = take(d, param->size);
      s.backend->fillZero(s.backend->computeStream(d), param->slots[k],
                          param->size * 4);
    }
    initial.emplace_back(param->size);
    initializeParameter(param->spec.init, param->spec.scale,
                        param->spec.shape, config.seed, param->spec.name,
                        initial.back().data());
    s.backend->copyToDevice(s.backend->computeStream(d), param->value,
                            initial.back().data(), param->size * 4);
  }
  s.lossSlots = take(numDevices - 1, numMicrobatches);
  error = s.backend->synchronize(config.stepTimeout);
  if (!error.empty())
    return nullptr;
  return std::unique_ptr<DeviceExecutor>(new DeviceExecutor(std::move(impl)));
}

std::string DeviceExecutor::Impl::placePass(IssuePass &placed) {
  NullBackend dry(bundle.stages.size());
  std::unique_ptr<Transport> dryTransport = createInProcessTransport(dry);
  issue = &dry;
  transfer = dryTransport.get();
  pass = &placed;
  std::string error = issueStep(nullptr, true);
  placed.arenaBytes.clear();
  for (const DeviceRun &run : runs)
    placed.arenaBytes.push_back(run.arena.highWater());
  return error;
}

std::string DeviceExecutor::Impl::runPass(const IssuePass &toRun,
                                          const Batch &batch) {
  issue = backend.get();
  transfer = transport.get();
  pass = &toRun;
  recordTimeline = config.recordTimeline;
  std::string error = issueStep(&batch, false);
  const unsigned numMicrobatches = toRun.rows.size();
  hostLosses.assign(numMicrobatches, 0.0f);
  const unsigned last = bundle.stages.size() - 1;
  if (error.empty())
    backend->copyToHost(backend->computeStream(last), hostLosses.data(),
                        lossSlots, numMicrobatches * 4);
  return error;
}

StepResult DeviceExecutor::trainStep(const Batch &batch) {
  Impl &s = *impl;
  StepResult result;
  s.pass = &s.training;
  result.error = checkBatch(s.bundle, batch, s.bundle.batch);
  if (result.error.empty())
    result.error = s.checkModelInputs(batch);
  if (result.error.empty())
    result.error = s.backend->error();
  if (!result.error.empty())
    return result;
  result.error = s.runPass(s.training, batch);
  std::string syncError = s.backend->synchronize(s.config.stepTimeout);
  if (result.error.empty())
    result.error = syncError;
  if (!result.error.empty())
    return result;
  ++s.steps;
  for (unsigned d = 0; d < s.layout.size(); ++d)
    s.layout[d].stagingBytes = s.transport->stagingBytes(d);
  if (s.recordTimeline)
    s.buildTimeline();
  for (size_t m = 0; m < s.hostLosses.size(); ++m) {
    double loss = s.hostLosses[m];
    result.microbatchLosses.push_back(loss);
    result.loss += double(s.bundle.microbatchRows[m]) /
                   double(s.bundle.batch) * loss;
  }
  return result;
}

/// The evaluation pass of `rows` rows: each device loads its model inputs,
/// receives its channels, runs its forward and sends its outputs, devices in
/// order; placed by its own dry run and given its own arenas (kept while
/// the next evaluation has the same rows).
std::string DeviceExecutor::Impl::prepareEvaluation(int64_t rows) {
  if (evaluation && evaluation->rows.front() == rows)
    return {};
  const unsigned numDevices = bundle.stages.size();
  evaluationPrograms.assign(numDevices, {});
  auto pass = std::make_unique<IssuePass>();
  pass->programs = &evaluationPrograms;
  pass->rows = {rows};
  pass->offsets = {0};
  pass->evaluating = true;
  for (unsigned d = 0; d < numDevices; ++d) {
    const StageProgram &stage = bundle.stages[d];
    std::vector<Instr> &program = evaluationPrograms[d];
    auto add = [&](InstrKind kind, unsigned peer, unsigned channel,
                   std::string name) {
      Instr instr;
      instr.kind = kind;
      instr.stage = d;
      instr.peer = peer;
      instr.channel = channel;
      instr.inputName = std::move(name);
      program.push_back(std::move(instr));
    };
    std::vector<std::string> loaded;
    for (const StageInput &input : stage.inputs) {
      if (input.fromChannel)
        add(InstrKind::RecvActivation, d - 1, input.channel, "");
      else if (std::find(loaded.begin(), loaded.end(), input.inputName) ==
               loaded.end()) {
        loaded.push_back(input.inputName);
        add(InstrKind::LoadInput, 0, 0, input.inputName);
      }
    }
    add(InstrKind::Forward, 0, 0, "");
    for (unsigned c = 0; c < stage.outputs.size(); ++c)
      add(InstrKind::SendActivation, d + 1, c, "");
    for (size_t i = 0; i < program.size(); ++i)
      pass->order.push_back({d, i});
  }
  std::string error = placePass(*pass);
  if (!error.empty())
    return error;
  for (unsigned d = 0; d < numDevices; ++d) {
    void *arena = nullptr;
    error = backend->allocate(d, pass->arenaBytes[d], &arena);
    if (!error.empty())
      return error;
    pass->arenaBase.push_back(static_cast<char *>(arena));
  }
  evaluation = std::move(pass);
  return {};
}

EvalResult DeviceExecutor::evaluate(const Batch &batch, int64_t rows) {
  Impl &s = *impl;
  EvalResult result;
  if (rows < 1) {
    result.error =
        "evaluate: expects at least 1 row, got " + std::to_string(rows);
    return result;
  }
  result.error = checkBatch(s.bundle, batch, rows);
  if (result.error.empty())
    result.error = s.prepareEvaluation(rows);
  if (result.error.empty()) {
    s.pass = s.evaluation.get();
    result.error = s.checkModelInputs(batch);
  }
  if (result.error.empty())
    result.error = s.backend->error();
  if (!result.error.empty()) {
    result.error = "evaluate: " + result.error;
    return result;
  }
  bool timeline = s.config.recordTimeline;
  s.config.recordTimeline = false; // the timeline is the training step's
  result.error = s.runPass(*s.evaluation, batch);
  s.config.recordTimeline = timeline;
  // The loss op's operands, kept on the last device past the forward.
  const unsigned last = s.bundle.stages.size() - 1;
  const StageProgram &stage = s.bundle.stages.back();
  for (const Op &op : stage.forward) {
    if (!result.error.empty() || op.results.empty() ||
        op.results[0] != stage.loss)
      continue;
    HostTensor *outs[2] = {&result.prediction, &result.target};
    for (size_t k = 0; k < 2 && k < op.operands.size(); ++k) {
      const DeviceValue &value = s.runs[last].values[0][op.operands[k]];
      HostTensor &host = *outs[k];
      host.type = stage.values[op.operands[k]].type;
      host.shape = value.shape;
      void *dst;
      if (host.type == ElementType::F32) {
        host.f32.assign(value.numElements(), 0.0f);
        dst = host.f32.data();
      } else {
        host.i32.assign(value.numElements(), 0);
        dst = host.i32.data();
      }
      s.backend->copyToHost(s.backend->computeStream(last), dst, value.data,
                            value.numElements() * 4);
    }
  }
  std::string syncError = s.backend->synchronize(s.config.stepTimeout);
  if (result.error.empty())
    result.error = syncError;
  if (!result.error.empty()) {
    result.error = "evaluate: " + result.error;
    return result;
  }
  result.loss = s.hostLosses.front();
  return result;
}

const Timeline &DeviceExecutor::timeline() const { return impl->timeline; }

std::vector<int64_t> DeviceExecutor::liveBytesPeak() const {
  return impl->livePeak;
}

std::vector<int64_t> DeviceExecutor::residentBytes() const {
  return impl->residentExact;
}

std::vector<int64_t> DeviceExecutor::peakMemoryBytes() const {
  std::vector<int64_t> bytes;
  for (const DeviceMemoryLayout &device : impl->layout)
    bytes.push_back(device.residentBytes + device.arenaBytes);
  return bytes;
}

static std::string copyBack(DeviceBackend &backend, unsigned device,
                            const float *src, int64_t n,
                            std::vector<float> &values,
                            std::chrono::milliseconds timeout) {
  values.assign(n, 0.0f);
  backend.copyToHost(backend.computeStream(device), values.data(), src, n * 4);
  return backend.synchronize(timeout);
}

std::string DeviceExecutor::parameter(const std::string &name,
                                      std::vector<float> &values) {
  auto it = impl->paramByName.find(name);
  if (it == impl->paramByName.end())
    return "unknown parameter '" + name + "'";
  return copyBack(*impl->backend, it->second->device, it->second->value,
                  it->second->size, values, impl->config.stepTimeout);
}

std::string DeviceExecutor::gradient(const std::string &name,
                                     std::vector<float> &values) {
  auto it = impl->paramByName.find(name);
  if (it == impl->paramByName.end())
    return "unknown parameter '" + name + "'";
  return copyBack(*impl->backend, it->second->device, it->second->grad,
                  it->second->size, values, impl->config.stepTimeout);
}

std::string DeviceExecutor::setParameter(const std::string &name,
                                         const std::vector<float> &values) {
  auto it = impl->paramByName.find(name);
  if (it == impl->paramByName.end())
    return "unknown parameter '" + name + "'";
  if (int64_t(values.size()) != it->second->size)
    return "parameter '" + name + "' has " + std::to_string(it->second->size) +
           " elements, got " + std::to_string(values.size());
  DeviceBackend &backend = *impl->backend;
  backend.copyToDevice(backend.computeStream(it->second->device),
                       it->second->value, values.data(), it->second->size * 4);
  return backend.synchronize(impl->config.stepTimeout);
}

int64_t DeviceExecutor::stepsDone() const { return impl->steps; }

void DeviceExecutor::setLearningRate(float learningRate) {
  impl->config.optimizer.learningRate = learningRate;
}

const Bundle &DeviceExecutor::bundle() const { return impl->bundle; }

DeviceBackend &DeviceExecutor::backend() { return *impl->backend; }

const std::vector<DeviceMemoryLayout> &DeviceExecutor::memory() const {
  return impl->layout;
}
