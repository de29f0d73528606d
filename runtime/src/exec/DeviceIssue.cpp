//===- DeviceIssue.cpp - A step's buffers and instructions, issued --------===//
//
// Where each value of a step lives (the compiler's buffer for it) and the
// issue of each instruction: loads, transfers, forward, backward, optimizer
// step.
//
//===----------------------------------------------------------------------===//

#include "exec/DeviceExecutorImpl.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <map>
#include <utility>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

/// The placement fails the first time; the dry run at creation reports it.
static char *misplaced(std::string &error, std::string message) {
  if (error.empty())
    error = std::move(message);
  return nullptr;
}

char *DeviceExecutor::Impl::valueBuffer(unsigned device, int id,
                                        int64_t bytes) {
  const DeviceRun &run = runs[device];
  const InstrBuffers &buffers = placement[device][run.planInstr];
  // The message is built only on a failure: this runs for every value.
  auto where = [&] {
    return "device " + std::to_string(device) + ": instruction " +
           std::to_string(run.planInstr) + " defines value " +
           std::to_string(id) + " (" + std::to_string(bytes) +
           " bytes) but the compiler's placement ";
  };
  auto found =
      std::lower_bound(buffers.values.begin(), buffers.values.end(), id,
                       [](const std::pair<int, const PlacedBuffer *> &entry,
                          int value) { return entry.first < value; });
  if (found == buffers.values.end() || found->first != id)
    return misplaced(placementError, where() + "has no buffer for it");
  const PlacedBuffer &buffer = *found->second;
  // A training step needs the planned bytes exactly; an evaluation chunk
  // may have fewer rows than the micro-batch whose buffers it uses.
  if (pass->evaluating ? bytes > buffer.bytes : bytes != buffer.bytes)
    return misplaced(placementError,
                     where() + "gives it " + std::to_string(buffer.bytes));
  return run.base ? run.base + buffer.offset : nullptr;
}

char *DeviceExecutor::Impl::scratchBuffer(unsigned device, int64_t bytes) {
  DeviceRun &run = runs[device];
  const InstrBuffers &buffers = placement[device][run.planInstr];
  size_t index = run.scratchTaken++;
  if (index >= buffers.scratch.size() || buffers.scratch[index]->bytes < bytes)
    return misplaced(
        placementError,
        "device " + std::to_string(device) + ": instruction " +
            std::to_string(run.planInstr) + " needs scratch #" +
            std::to_string(index) + " of " + std::to_string(bytes) +
            " bytes but the compiler's placement " +
            (index >= buffers.scratch.size()
                 ? "has " + std::to_string(buffers.scratch.size())
                 : "gives it " +
                       std::to_string(buffers.scratch[index]->bytes)));
  return run.base ? run.base + buffers.scratch[index]->offset : nullptr;
}

std::string DeviceExecutor::Impl::reserveWorkspace(unsigned device,
                                                   int64_t bytes) {
  workspace.resize(bundle.numDevices(), nullptr);
  workspaceBytes.resize(bundle.numDevices(), 0);
  if (workspaceBytes[device] >= bytes || issue != backend.get())
    return {}; // the dry run needs no memory
  void *memory = nullptr;
  std::string error = backend->allocate(device, bytes, &memory);
  if (!error.empty())
    return "scratch workspace: " + error;
  workspace[device] = static_cast<char *>(memory);
  workspaceBytes[device] = bytes;
  return {};
}

DeviceValue &DeviceExecutor::Impl::newValue(unsigned device, unsigned m,
                                            int id,
                                            std::vector<int64_t> extraBytes) {
  DeviceRun &run = runs[device];
  const ValueSpec &spec = bundle.stages[run.stage].values[id];
  // A recompute defines a forward value again, in a buffer of its own.
  DeviceValue &value = run.at(m)[id];
  value = DeviceValue();
  value.shape = spec.shape;
  if (spec.batched)
    value.shape[0] = rowsOf(m);
  // The compiler's buffer packs a value and its saved state, rounded up to
  // whole granules.
  int64_t total = value.numElements() * 4;
  for (int64_t extra : extraBytes)
    total += extra;
  value.data = valueBuffer(device, id,
                           (total + kPlacedBufferGranule - 1) /
                               kPlacedBufferGranule * kPlacedBufferGranule);
  int64_t at = value.numElements() * 4;
  for (size_t k = 0; k < extraBytes.size(); ++k) {
    value.saved[k] = value.data ? value.data + at : nullptr;
    at += extraBytes[k];
  }
  value.present = true;
  return value;
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

std::string DeviceExecutor::Impl::issueInstr(unsigned device,
                                             const Instr &instr,
                                             const Batch *batch) {
  DeviceRun &run = runs[device];
  const StageProgram &program = bundle.stages[run.stage];
  const unsigned m = instr.microbatch;
  switch (instr.kind) {
  case InstrKind::LoadInput: {
    for (const StageInput &input : program.inputs) {
      if (input.fromChannel || input.inputName != instr.inputName)
        continue;
      DeviceValue &value = newValue(device, m, input.value);
      if (batch) {
        const HostTensor &host = batch->at(instr.inputName);
        int64_t perRow = host.numElements() / host.shape[0];
        issue->copyToDevice(compute(device), value.data,
                            inputSource.at(instr.inputName) +
                                firstRow(m) * perRow * 4,
                            value.numElements() * 4);
      }
    }
    return {};
  }
  case InstrKind::RecvActivation:
  case InstrKind::RecvGradient: {
    bool activation = instr.kind == InstrKind::RecvActivation;
    int id = -1;
    if (activation) {
      for (const StageInput &input : program.inputs)
        if (input.fromChannel && input.channel == instr.channel)
          id = input.value;
    } else {
      id = program.outputGrads[instr.channel];
    }
    // Allocated at the receive, as a loaded value is.
    DeviceValue &value = newValue(device, m, id);
    TransferKey key{activation ? 0 : 1,
                    instr.peer,
                    device,
                    m,
                    instr.channel,
                    activation ? instr.stage - 1 : instr.stage};
    if (run.defersRecv) {
      run.deferredRecvs.push_back({key, value.data, value.numElements() * 4});
      return {};
    }
    return transfer->recv(compute(device), key, value.data,
                          value.numElements() * 4);
  }
  case InstrKind::SendActivation:
  case InstrKind::SendGradient: {
    // The transport reads the value in this stream's order.
    bool activation = instr.kind == InstrKind::SendActivation;
    int id = activation ? program.outputs[instr.channel]
                        : program.inputGrads[instr.channel];
    const DeviceValue &value = run.at(m)[id];
    if (!value.present)
      return "value " + std::to_string(id) + " was never defined";
    TransferKey key{
        activation ? 0 : 1, device,
        instr.peer,         m,
        instr.channel,      activation ? instr.stage : instr.stage - 1};
    // An evaluation's programs have no waits: its sends complete at once.
    if (bundle.sendWindow > 0 && !pass->evaluating)
      return transfer->postSend(compute(device), key, value.data,
                                value.numElements() * 4);
    return transfer->send(compute(device), key, value.data,
                          value.numElements() * 4);
  }
  case InstrKind::WaitSendActivation:
  case InstrKind::WaitSendGradient: {
    bool activation = instr.kind == InstrKind::WaitSendActivation;
    TransferKey key{
        activation ? 0 : 1, device,
        instr.peer,         m,
        instr.channel,      activation ? instr.stage : instr.stage - 1};
    return transfer->waitSend(compute(device), key);
  }
  case InstrKind::Forward: {
    ++run.computeCount;
    for (const StageInput &input : program.inputs)
      if (!run.at(m)[input.value].present)
        return input.fromChannel ? "channel " + std::to_string(input.channel) +
                                       " was not received before the forward"
                                 : "model input '" + input.inputName +
                                       "' was not loaded before the forward";
    run.keeps(m) = !pass->evaluating && keptForward[instr.stage].at(m) ? 1 : 0;
    std::string error = issueOps(device, m, program.forward, "forward", false);
    if (!error.empty() || program.loss < 0)
      return error;
    if (pass->evaluating)
      copyEvaluationOutputs(m);
    else
      issue->copyBetweenDevices(compute(device),
                                lossSlots ? lossSlots + m : nullptr, device,
                                run.at(m)[program.loss].data, device, 4);
    return {};
  }
  case InstrKind::Backward: {
    ++run.computeCount;
    for (size_t c = 0; c < program.outputGrads.size(); ++c)
      if (!run.at(m)[program.outputGrads[c]].present)
        return "the gradient of channel " + std::to_string(c) +
               " was not received before the backward";
    // Its recompute, if any, was issued before it (issueRecompute).
    // W waits for its own instruction only where the program has one.
    size_t end = splitsBackward[device] ? program.inputGradientEnd()
                                        : program.backward.size();
    return issueOps(device, m, program.backward, "backward", true, 0, end);
  }
  case InstrKind::BackwardWeights:
    ++run.computeCount;
    return issueOps(device, m, program.backward, "backward weights", true,
                    program.inputGradientEnd());
  case InstrKind::OptimizerStep: {
    ++run.computeCount;
    const StreamId s = compute(device);
    // Data parallelism: every replica steps with the mean gradient, that of
    // the whole mini-batch (taken already where the step measures them).
    for (DeviceParameter *param : paramsOf[device]) {
      if (gradientsAveraged)
        break;
      std::string error = transfer->averageOverReplicas(
          s, device, param->grad, param->size,
          "the gradient of '" + param->spec.name + "'");
      if (!error.empty())
        return error;
    }
    OptimizerConfig optimizer = config.optimizer;
    optimizer.gradientScale = gradientScale; // clipping
    std::string error = writeStepScalars(device, s, optimizer);
    if (!error.empty())
      return error;
    const StepScalars *scalars =
        stepScalars.empty() ? nullptr : stepScalars[device];
    // Decided on the devices: each update reads its device's gate.
    const StepGate *gate = decidingGating ? gates[device] : nullptr;
    for (DeviceParameter *param : paramsOf[device]) {
      // A frozen parameter is a constant of the model.
      if (param->runningStatistic || param->spec.frozen)
        continue;
      if (gate)
        decidingGating->gatedOptimizerStep(
            s, optimizer, param->value, param->grad, param->slots, param->size,
            scalars, gate, updatedFlagsOf(device, param));
      else
        issue->optimizerStep(s, optimizer, param->value, param->grad,
                             param->slots, param->size, scalars);
    }
    // Batch norms: once per mini-batch, from its micro-batches' sums.
    for (const DeviceRunningStatistics &stats : runningStatistics[device]) {
      if (gate)
        decidingGating->gatedBatchNormRunningUpdate(
            s, stats.mean->value, stats.variance->value, stats.mean->grad,
            stats.variance->grad, stats.mean->size, stats.count, stats.momentum,
            gate, updatedFlagsOf(device, stats.mean),
            updatedFlagsOf(device, stats.variance));
      else
        issue->batchNormRunningUpdate(s, stats.mean->value,
                                      stats.variance->value, stats.mean->grad,
                                      stats.variance->grad, stats.mean->size,
                                      stats.count, stats.momentum);
    }
    return {};
  }
  }
  return {};
}

static bool isSend(InstrKind kind) {
  return kind == InstrKind::SendActivation || kind == InstrKind::SendGradient;
}

/// Whether `program`'s instructions `index` and `index + 1` are both sends to
/// one peer.
static bool sendsGroupedWith(const std::vector<Instr> &program, size_t index) {
  return index + 1 < program.size() && isSend(program[index].kind) &&
         isSend(program[index + 1].kind) &&
         program[index].peer == program[index + 1].peer;
}

/// Issues one step: every device's program, in an order in which each send
/// is issued before its receive; the optimizer steps once every device has
/// reached its own.
std::string DeviceExecutor::Impl::issueStep(const Batch *batch, bool dryRun) {
  const unsigned numDevices = bundle.numDevices();
  const unsigned numMicrobatches = pass->rows.size();
  const std::vector<std::vector<Instr>> &programs = *pass->programs;
  runs.clear();
  runs.resize(numDevices);
  marks.clear();
  opMarks.clear();
  timeSlots.clear();
  if (!dryRun) // the timeline gets this step's side work only
    for (unsigned d = 0; d < numDevices; ++d)
      if (transfer->runsDevice(d))
        backend->takeWorkInWaits(d);
  for (unsigned d = 0; d < numDevices; ++d) {
    DeviceRun &run = runs[d];
    run.base = dryRun ? nullptr : arenaBase[d];
    for (unsigned st = d; st < bundle.stages.size(); st += numDevices)
      run.values.emplace_back(
          numMicrobatches,
          std::vector<DeviceValue>(bundle.stages[st].values.size()));
    run.kept.assign(run.values.size(), std::vector<char>(numMicrobatches, 0));
    // A batch norm's forwards sum its statistics there (markGradientsStale:
    // the rest).
    if (!pass->evaluating && transfer->runsDevice(d))
      for (DeviceParameter *param : paramsOf[d])
        if (param->runningStatistic)
          issue->fillZero(compute(d), param->grad, param->size * 4);
  }
  // verifySchedule proved this order: every receive follows its send, and
  // the optimizer steps come last, once every device has reached its own.
  const bool timed = recordTimeline && !dryRun;
  timingOps = timed && profileOps;
  gradientScale = 1.0f;
  gradientNorm.reset();
  gradientsAveraged = nonFinite = staleGradientsZeroed = false;
  decidingGating = nullptr;
  const bool measure = !dryRun && !pass->evaluating && measuresGradients();
  for (const ScheduleStep &step : pass->order) {
    const Instr &instr = programs[step.device][step.index];
    // Each gradient's first write of the step overwrites the last step's;
    // the few that no backward wrote are zeroed where the optimizer steps
    // begin (every backward is issued by then), before anything reads them.
    if (!pass->evaluating && instr.kind == InstrKind::Backward &&
        transfer->runsDevice(step.device) && !runs[step.device].gradientsMarked)
      markGradientsStale(step.device);
    if (!pass->evaluating && instr.kind == InstrKind::OptimizerStep &&
        !staleGradientsZeroed) {
      staleGradientsZeroed = true;
      for (unsigned d = 0; d < numDevices; ++d)
        if (transfer->runsDevice(d))
          zeroStaleGradients(d, timed);
      // Tied copies' gradients summed: before the norm and the updates.
      if (!dryRun) {
        std::string error = sumTiedGradients();
        if (!error.empty())
          return error;
      }
    }
    // Every process reaches the first optimizer step at the same point.
    if (measure && instr.kind == InstrKind::OptimizerStep &&
        !gradientsAveraged) {
      std::string error = prepareOptimizerStep();
      if (!error.empty())
        return error;
    }
    if (!transfer->runsDevice(step.device))
      continue; // another process issues it
    StreamId stream =
        isSend(instr.kind) ? issue->copyStream(step.device) : compute(step.device);
    DeviceRun &run = runs[step.device];
    run.planInstr = pass->planInstr.empty()
                        ? step.index
                        : pass->planInstr[step.device][step.index];
    run.scratchTaken = 0;
    if (instr.kind != InstrKind::OptimizerStep) {
      run.stage = instr.stage;
      run.local = bundle.localStage(instr.stage);
    }
    auto failed = [&](const std::string &error) {
      return "device " + std::to_string(step.device) + ": op #" +
             std::to_string(step.index) + " (" +
             describeInstruction(instr, step.device) + "): " + error;
    };
    run.defersRecv =
        !pass->evaluating && recomputesWhileReceiving[step.device][step.index];
    if (instr.kind == InstrKind::Backward && !run.keeps(instr.microbatch)) {
      std::string error = issueRecompute(step.device, instr, timed);
      if (!error.empty())
        return failed(error);
    }
    // A deferred receive is marked where it waits.
    const bool marked = timed && !run.defersRecv;
    TimelineMark mark;
    if (marked)
      mark = startMark(step.device, instr, stream);
    // A boundary's sends to one peer go as one group.
    const std::vector<Instr> &program = programs[step.device];
    const bool groupedWithPrevious =
        step.index > 0 && sendsGroupedWith(program, step.index - 1);
    const bool groupedWithNext = sendsGroupedWith(program, step.index);
    if (groupedWithNext && !groupedWithPrevious) {
      std::string error = transfer->beginSendGroup(step.device, instr.peer);
      if (!error.empty())
        return failed(error);
    }
    std::string error = issueInstr(step.device, instr, batch);
    // A failed send closes its group too.
    if ((groupedWithPrevious || groupedWithNext) &&
        (!groupedWithNext || !error.empty())) {
      std::string ended = transfer->endSendGroup(step.device, instr.peer);
      if (error.empty())
        error = ended;
    }
    if (!error.empty())
      return failed(error);
    if (marked)
      endMark(mark, stream);
  }
  // A pass without optimizer steps leaves no stale gradient to be read.
  if (!pass->evaluating && !staleGradientsZeroed)
    for (unsigned d = 0; d < numDevices; ++d)
      if (transfer->runsDevice(d) && runs[d].gradientsMarked)
        zeroStaleGradients(d, timed);
  // gradientsAveraged: prepareOptimizerStep ran (a program has steps).
  if (measure && gradientsAveraged && config.optimizer.checkFinite)
    return issueParameterCheck();
  return {};
}

void DeviceExecutor::Impl::markGradientsStale(unsigned device) {
  runs[device].gradientsMarked = true;
  for (DeviceParameter *param : paramsOf[device])
    param->gradientStale = !param->runningStatistic;
}

void DeviceExecutor::Impl::zeroStaleGradients(unsigned device, bool timed) {
  // A device that ran no backward this step steps with zero gradients.
  if (!runs[device].gradientsMarked)
    markGradientsStale(device);
  if (std::none_of(paramsOf[device].begin(), paramsOf[device].end(),
                   [](const DeviceParameter *p) { return p->gradientStale; }))
    return;
  const StreamId stream = compute(device);
  TimelineMark mark;
  if (timed) {
    mark.device = device;
    mark.zeroing = true;
    mark.start = &timeSlots.emplace_back(0.0);
    mark.end = &timeSlots.emplace_back(0.0);
    issue->recordTime(stream, mark.start);
  }
  for (DeviceParameter *param : paramsOf[device])
    if (std::exchange(param->gradientStale, false))
      issue->fillZero(stream, param->grad, param->size * 4);
  if (timed)
    endMark(mark, stream);
}

TimelineMark DeviceExecutor::Impl::startMark(unsigned device,
                                             const Instr &instr,
                                             StreamId stream) {
  TimelineMark mark;
  mark.device = device;
  mark.kind = instr.kind;
  const bool step = instr.kind == InstrKind::OptimizerStep;
  mark.microbatch = step ? -1 : int64_t(instr.microbatch);
  mark.stage = step ? -1 : int64_t(instr.stage);
  mark.start = &timeSlots.emplace_back(0.0);
  mark.end = &timeSlots.emplace_back(0.0);
  issue->recordTime(stream, mark.start);
  return mark;
}

void DeviceExecutor::Impl::endMark(const TimelineMark &mark, StreamId stream) {
  issue->recordTime(stream, mark.end);
  marks.push_back(mark);
}

std::string DeviceExecutor::Impl::issueRecompute(unsigned device,
                                                 const Instr &backward,
                                                 bool timed) {
  DeviceRun &run = runs[device];
  const StreamId stream = compute(device);
  TimelineMark mark;
  if (timed) {
    mark = startMark(device, backward, stream);
    mark.recompute = true;
  }
  recomputing = true;
  std::string error =
      issueOps(device, backward.microbatch, bundle.stages[run.stage].recompute,
               "recompute", false);
  recomputing = false;
  if (!error.empty())
    return error;
  if (timed)
    endMark(mark, stream);
  // The gradients it needs may have arrived meanwhile.
  Instr receive = backward;
  receive.kind = InstrKind::RecvGradient;
  for (const DeviceRun::DeferredRecv &recv : run.deferredRecvs) {
    if (timed)
      mark = startMark(device, receive, stream);
    error = transfer->recv(stream, recv.key, recv.data, recv.bytes);
    if (!error.empty())
      return error;
    if (timed)
      endMark(mark, stream);
  }
  run.deferredRecvs.clear();
  return {};
}

std::string DeviceExecutor::Impl::buildTimeline() {
  // Each event as five doubles: kind, micro-batch, stage, start, end (the
  // host's steady clock, shared by the processes of one machine). A
  // recompute is its backward's kind as kRecomputeEvent; side work (the
  // zeroing of the gradients, the backend's packing ahead in waits) is
  // kZeroingEvent or kPackingEvent.
  constexpr size_t kWords = 5;
  constexpr double kRecomputeEvent = -1, kZeroingEvent = -2, kPackingEvent = -3;
  std::vector<std::vector<double>> events(bundle.numDevices());
  for (const TimelineMark &mark : marks)
    events[mark.device].insert(events[mark.device].end(),
                               {mark.zeroing     ? kZeroingEvent
                                : mark.recompute ? kRecomputeEvent
                                                 : double(mark.kind),
                                double(mark.microbatch), double(mark.stage),
                                *mark.start, *mark.end});
  for (unsigned d = 0; d < events.size(); ++d)
    if (transport->runsDevice(d))
      for (const auto &[start, end] : backend->takeWorkInWaits(d))
        events[d].insert(events[d].end(),
                         {kPackingEvent, -1.0, -1.0, start, end});
  // Across processes, every process gets every device's lane.
  if (transport->spansProcesses())
    for (unsigned d = 0; d < events.size(); ++d) {
      int64_t count = int64_t(events[d].size());
      std::string error =
          transport->shareFrom(d, &count, sizeof count, "the timeline");
      if (error.empty()) {
        events[d].resize(size_t(count));
        error = transport->shareFrom(d, events[d].data(), count * 8,
                                     "the timeline");
      }
      if (!error.empty())
        return error;
    }
  timeline = Timeline(bundle.numDevices());
  std::vector<std::map<std::string, OpTotal>> totals(bundle.numDevices());
  for (const OpMark &mark : opMarks) {
    std::string name = std::string(mark.section) + " " + mark.first;
    if (mark.second)
      name += std::string("+") + mark.second;
    OpTotal &total = totals[mark.device][name];
    total.name = name;
    ++total.calls;
    total.us += *mark.end - *mark.start;
  }
  for (unsigned d = 0; d < totals.size(); ++d) {
    std::vector<OpTotal> sorted;
    for (auto &entry : totals[d])
      sorted.push_back(std::move(entry.second));
    std::stable_sort(
        sorted.begin(), sorted.end(),
        [](const OpTotal &a, const OpTotal &b) { return a.us > b.us; });
    timeline.setOpTotals(d, std::move(sorted));
  }
  double origin = std::numeric_limits<double>::infinity();
  for (const std::vector<double> &lane : events)
    for (size_t i = 0; i < lane.size(); i += kWords)
      origin = std::min(origin, lane[i + 3]);
  for (unsigned d = 0; d < events.size(); ++d)
    for (size_t i = 0; i < events[d].size(); i += kWords) {
      if (events[d][i] == kZeroingEvent || events[d][i] == kPackingEvent) {
        timeline.recordSideWork(d, {events[d][i] == kZeroingEvent
                                        ? "zero gradients"
                                        : "pack weights ahead",
                                    true, -1, events[d][i + 3] - origin,
                                    events[d][i + 4] - events[d][i + 3], -1});
        continue;
      }
      const bool recompute = events[d][i] == kRecomputeEvent;
      InstrKind kind =
          recompute ? InstrKind::Backward : InstrKind(int(events[d][i]));
      bool computeWork = kind == InstrKind::Forward ||
                         kind == InstrKind::Backward ||
                         kind == InstrKind::BackwardWeights ||
                         kind == InstrKind::OptimizerStep;
      timeline.record(
          d, {recompute ? "recompute" : instructionName(kind), computeWork,
              int64_t(events[d][i + 1]), events[d][i + 3] - origin,
              events[d][i + 4] - events[d][i + 3], int64_t(events[d][i + 2])});
    }
  return {};
}

/// Ids, labels and a gather's indices come from the batch, so they are
/// checked here, on the host, with the CPU executor's messages, before
/// anything is issued.
std::string DeviceExecutor::Impl::checkModelInputs(const Batch &batch) const {
  for (unsigned st = 0; st < bundle.stages.size(); ++st) {
    const unsigned d = bundle.deviceOfStage(st);
    if (!transport->runsDevice(d))
      continue; // its process checks its inputs
    const StageProgram &program = bundle.stages[st];
    for (size_t k = 0; k < program.forward.size(); ++k) {
      const Op &op = program.forward[k];
      // Each operand of ids, labels or indices, and the range it must be in.
      struct Range {
        int operand;
        int64_t low, limit;
        const char *what;
      };
      std::vector<Range> ranges;
      if (op.kind == OpKind::Embedding)
        ranges.push_back({op.operands[0], 0,
                          program.values[op.operands[1]].shape[0],
                          "embedding id "});
      else if (op.kind == OpKind::SoftmaxCrossEntropy)
        ranges.push_back({op.operands[1], 0,
                          program.values[op.operands[0]].shape.back(),
                          "label "});
      else if (op.kind == OpKind::Kernel) {
        const GeneratedKernelSpec &spec = bundle.code.kernels[op.kernel];
        for (size_t j = 0; j < spec.indexBounds.size(); ++j)
          if (spec.indexBounds[j] > 0)
            ranges.push_back({op.operands[j], -spec.indexBounds[j],
                              spec.indexBounds[j], "gather index "});
      }
      for (const Range &range : ranges) {
        if (std::string problem =
                checkInputRange(batch, st, d, k, op, range.operand, range.low,
                                range.limit, range.what);
            !problem.empty())
          return problem;
      }
    }
  }
  return {};
}

/// The values of model input `operand` of stage `st` (on device `d`), read
/// by forward op `k`, each in [low, limit), or the first that is not.
std::string DeviceExecutor::Impl::checkInputRange(
    const Batch &batch, unsigned st, unsigned d, size_t k, const Op &op,
    int operand, int64_t low, int64_t limit, const char *what) const {
  const StageProgram &program = bundle.stages[st];
  const StageInput *source = nullptr;
  for (const StageInput &input : program.inputs)
    if (input.value == operand && !input.fromChannel)
      source = &input;
  // Not the batch's: a gather's indices computed in the stage (a frozen
  // parameter cast to i32); ids and labels are always model inputs.
  if (!source)
    return {};
  const HostTensor &host = batch.at(source->inputName);
  int64_t perRow = host.numElements() / host.shape[0];
  for (unsigned m = 0; m < pass->rows.size(); ++m)
    for (int64_t p = 0; p < rowsOf(m) * perRow; ++p) {
      int32_t v = host.i32[firstRow(m) * perRow + p];
      if (v >= low && v < limit)
        continue;
      size_t at = 0;
      const std::vector<Instr> &instrs = (*pass->programs)[d];
      while (at < instrs.size() &&
             !(instrs[at].kind == InstrKind::Forward &&
               instrs[at].microbatch == m && instrs[at].stage == st))
        ++at;
      return "device " + std::to_string(d) + ": op #" + std::to_string(at) +
             " (" + describeInstruction(instrs[at], d) + "): " + what +
             std::to_string(v) + " outside [" + std::to_string(low) + ", " +
             std::to_string(limit) + ") at position " + std::to_string(p) +
             " of the micro-batch, in forward op " + std::to_string(k) + " (" +
             opKindName(op.kind) + ")";
    }
  return {};
}

