//===- DeviceIssue.cpp - A step's buffers and instructions, issued --------===//
//
// The arena bookkeeping of one step (values placed when defined, freed after
// their last use, sent buffers held until their copy is done) and the issue
// of each instruction: loads, transfers, forward, backward, optimizer step.
//
//===----------------------------------------------------------------------===//

#include "DeviceExecutorImpl.h"

#include <algorithm>
#include <cassert>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

char *DeviceExecutor::Impl::allocateBlock(unsigned device, int64_t bytes,
                                          int64_t &offset) {
  DeviceRun &run = runs[device];
  run.live += (bytes + 3) / 4 * 4;
  run.liveHigh = std::max(run.liveHigh, run.live);
  if (!pass->planned) {
    offset = run.arena.allocate(bytes);
    assert(offset >= 0 && "the placement of the dry run fits the arena");
    run.liveAt[offset] = (bytes + 3) / 4 * 4;
    return run.base ? run.base + offset : nullptr;
  }
  // The compiler's placement: the program's n-th buffer is the plan's n-th.
  const std::vector<PlacedBuffer> &planned =
      bundle.memoryPlan.devices[device].buffers;
  size_t index = run.placed++;
  int64_t wanted = (bytes + 3) / 4 * 4;
  if (index >= planned.size() || planned[index].bytes != wanted) {
    if (placementError.empty())
      placementError =
          "device " + std::to_string(device) + ": the program's buffer #" +
          std::to_string(index) + " needs " + std::to_string(wanted) +
          " bytes, but the compiler's placement " +
          (index >= planned.size()
               ? "lists only " + std::to_string(planned.size()) + " buffers"
               : "gives it " + std::to_string(planned[index].bytes));
    offset = -1;
    return nullptr;
  }
  offset = planned[index].offset;
  run.liveAt[offset] = wanted;
  return run.base ? run.base + offset : nullptr;
}

std::string DeviceExecutor::Impl::reserveWorkspace(unsigned device,
                                                   int64_t bytes) {
  workspace.resize(bundle.stages.size(), nullptr);
  workspaceBytes.resize(bundle.stages.size(), 0);
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

void DeviceExecutor::Impl::releaseBlock(unsigned device, int64_t offset) {
  DeviceRun &run = runs[device];
  auto it = run.liveAt.find(offset);
  if (it != run.liveAt.end()) {
    run.live -= it->second;
    run.liveAt.erase(it);
  }
  if (!pass->planned && offset >= 0)
    run.arena.free(offset);
}

DeviceValue &DeviceExecutor::Impl::newValue(unsigned device, unsigned m,
                                            int id,
                                            std::vector<int64_t> extraBytes) {
  const ValueSpec &spec = bundle.stages[device].values[id];
  DeviceValue &value = runs[device].values[m][id];
  assert(!value.present && "a value is defined once per micro-batch");
  value = DeviceValue();
  value.shape = spec.shape;
  if (spec.batched)
    value.shape[0] = rowsOf(m);
  // The compiler's layout packs a value and its saved state; the executor's
  // own placement aligns each part.
  auto size = [&](int64_t bytes) {
    return pass->planned ? bytes : ArenaAllocator::roundUp(bytes);
  };
  int64_t mainBytes = size(value.numElements() * 4);
  int64_t total = mainBytes;
  for (int64_t extra : extraBytes)
    total += size(extra);
  value.data = allocateBlock(device, total, value.offset);
  value.blockBytes = total;
  int64_t at = mainBytes;
  for (size_t k = 0; k < extraBytes.size(); ++k) {
    value.saved[k] = value.data ? value.data + at : nullptr;
    at += size(extraBytes[k]);
  }
  value.present = true;
  return value;
}

void DeviceExecutor::Impl::freeValue(unsigned device, DeviceValue &value) {
  if (!value.present)
    return;
  releaseBlock(device, value.offset);
  value = DeviceValue();
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

std::string DeviceExecutor::Impl::send(unsigned device, const Instr &instr) {
  const StageProgram &program = bundle.stages[device];
  DeviceRun &run = runs[device];
  const unsigned m = instr.microbatch;
  bool activation = instr.kind == InstrKind::SendActivation;
  int id = activation ? program.outputs[instr.channel]
                      : program.inputGrads[instr.channel];
  DeviceValue &value = run.values[m][id];
  if (!value.present)
    return "value " + std::to_string(id) + " is no longer available";
  // The transport reads the value in this stream's order: the value may be
  // freed right away.
  TransferKey key{activation ? 0 : 1, device, instr.peer, m, instr.channel};
  std::string error =
      transfer->send(compute(device), key, value.data, value.numElements() * 4);
  if (!error.empty())
    return error;
  sent.insert(MessageKey{activation ? 0 : 1, device, m, instr.channel});
  // Keep it if this device still needs it: the backward, or the send of
  // another channel that carries the same value.
  bool needed = activation &&
                liveness[device].neededAfterForward(id, run.kept[m] != 0);
  const std::vector<int> &ids = activation ? program.outputs : program.inputGrads;
  for (unsigned c = 0; c < ids.size() && !needed; ++c)
    needed = ids[c] == id &&
             !sent.count(MessageKey{activation ? 0 : 1, device, m, c});
  if (!needed) {
    freeValue(device, value);
  } else if (pass->planned) {
    // The plan holds a copy for the transfer while the device keeps the
    // value; the transport stages from the value itself.
    int64_t copyOffset;
    allocateBlock(device, value.blockBytes, copyOffset);
    releaseBlock(device, copyOffset);
  }
  return {};
}

std::string DeviceExecutor::Impl::issueInstr(unsigned device,
                                             const Instr &instr,
                                             const Batch *batch) {
  const StageProgram &program = bundle.stages[device];
  DeviceRun &run = runs[device];
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
        const void *src = host.type == ElementType::F32
                              ? static_cast<const void *>(host.f32.data())
                              : static_cast<const void *>(host.i32.data());
        issue->copyToDevice(compute(device), value.data,
                            static_cast<const char *>(src) +
                                pass->offsets[m] * perRow * 4,
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
    TransferKey key{activation ? 0 : 1, instr.peer, device, m, instr.channel};
    return transfer->recv(compute(device), key, value.data,
                          value.numElements() * 4);
  }
  case InstrKind::SendActivation:
  case InstrKind::SendGradient:
    return send(device, instr);
  case InstrKind::Forward: {
    ++run.computeCount;
    for (const StageInput &input : program.inputs)
      if (!run.values[m][input.value].present)
        return input.fromChannel ? "channel " + std::to_string(input.channel) +
                                       " was not received before the forward"
                                 : "model input '" + input.inputName +
                                       "' was not loaded before the forward";
    run.kept[m] = !pass->evaluating && keepsForwardValues(bundle.remat, m,
                                                          lastForward[device])
                      ? 1
                      : 0;
    const StageLiveness &live = liveness[device];
    std::string error = issueOps(device, m, program.forward, "forward",
                                 &live.forwardFree[run.kept[m] ? 1 : 0], false);
    if (!error.empty())
      return error;
    if (program.loss >= 0)
      issue->copyBetweenDevices(compute(device), lossSlots ? lossSlots + m
                                                           : nullptr,
                                device, run.values[m][program.loss].data,
                                device, 4);
    std::vector<char> keep(program.values.size(), 0);
    for (size_t id = 0; id < keep.size(); ++id)
      keep[id] = live.neededAfterForward(int(id), run.kept[m] != 0) ||
                 keepsForEvaluation(device, int(id));
    for (int id : program.outputs)
      keep[id] = 1;
    for (size_t id = 0; id < keep.size(); ++id)
      if (!keep[id])
        freeValue(device, run.values[m][id]);
    return {};
  }
  case InstrKind::Backward: {
    ++run.computeCount;
    for (size_t c = 0; c < program.outputGrads.size(); ++c)
      if (!run.values[m][program.outputGrads[c]].present)
        return "the gradient of channel " + std::to_string(c) +
               " was not received before the backward";
    const StageLiveness &live = liveness[device];
    if (!run.kept[m]) {
      std::string error = issueOps(device, m, program.recompute, "recompute",
                                   &live.recomputeFree, false);
      if (!error.empty())
        return error;
    }
    std::string error = issueOps(device, m, program.backward, "backward",
                                 &live.backwardFree[run.kept[m] ? 1 : 0], true);
    if (!error.empty())
      return error;
    std::vector<char> keep(program.values.size(), 0);
    for (int id : program.inputGrads)
      keep[id] = 1;
    for (size_t id = 0; id < keep.size(); ++id)
      if (!keep[id])
        freeValue(device, run.values[m][id]);
    return {};
  }
  case InstrKind::OptimizerStep: {
    ++run.computeCount;
    const StreamId s = compute(device);
    for (DeviceParameter *param : paramsOf[device])
      issue->optimizerStep(s, config.optimizer, param->value, param->grad,
                           param->slots, param->size, steps + 1);
    return {};
  }
  }
  return {};
}

/// Issues one step: every device's program, in an order in which each send
/// is issued before its receive; the optimizer steps once every device has
/// reached its own.
std::string DeviceExecutor::Impl::issueStep(const Batch *batch, bool dryRun) {
  const unsigned numDevices = bundle.stages.size();
  const unsigned numMicrobatches = pass->rows.size();
  const std::vector<std::vector<Instr>> &programs = *pass->programs;
  runs.clear();
  runs.resize(numDevices);
  sent.clear();
  marks.clear();
  timeSlots.clear();
  for (unsigned d = 0; d < numDevices; ++d) {
    DeviceRun &run = runs[d];
    run.arena = dryRun ? ArenaAllocator() : ArenaAllocator(pass->arenaBytes[d]);
    run.base = dryRun ? nullptr : pass->arenaBase[d];
    run.values.assign(numMicrobatches, std::vector<DeviceValue>(
                                           bundle.stages[d].values.size()));
    run.kept.assign(numMicrobatches, 0);
    if (!pass->evaluating)
      for (DeviceParameter *param : paramsOf[d])
        issue->fillZero(compute(d), param->grad, param->size * 4);
  }
  // verifySchedule proved this order: every receive follows its send.
  const bool timed = recordTimeline && !dryRun;
  for (const ScheduleStep &step : pass->order) {
    const Instr &instr = programs[step.device][step.index];
    StreamId stream = instr.kind == InstrKind::SendActivation ||
                              instr.kind == InstrKind::SendGradient
                          ? issue->copyStream(step.device)
                          : compute(step.device);
    TimelineMark mark;
    if (timed) {
      mark.device = step.device;
      mark.kind = instr.kind;
      mark.microbatch = instr.kind == InstrKind::OptimizerStep
                            ? -1
                            : int64_t(instr.microbatch);
      mark.start = &timeSlots.emplace_back(0.0);
      mark.end = &timeSlots.emplace_back(0.0);
      issue->recordTime(stream, mark.start);
    }
    std::string error = issueInstr(step.device, instr, batch);
    if (!error.empty())
      return "device " + std::to_string(step.device) + ": op #" +
             std::to_string(step.index) + " (" +
             describeInstruction(instr, step.device) + "): " + error;
    if (timed) {
      issue->recordTime(stream, mark.end);
      marks.push_back(mark);
    }
  }
  return {};
}

void DeviceExecutor::Impl::buildTimeline() {
  timeline = Timeline(bundle.stages.size());
  double origin = 0;
  for (size_t i = 0; i < marks.size(); ++i)
    origin = i == 0 ? *marks[i].start : std::min(origin, *marks[i].start);
  for (const TimelineMark &mark : marks) {
    bool computeWork = mark.kind == InstrKind::Forward ||
                       mark.kind == InstrKind::Backward ||
                       mark.kind == InstrKind::OptimizerStep;
    timeline.record(mark.device,
                    {instructionName(mark.kind), computeWork, mark.microbatch,
                     *mark.start - origin, *mark.end - *mark.start});
  }
}

/// Ids and labels come from the batch, so they are checked here, on the
/// host, with the CPU executor's messages, before anything is issued.
std::string DeviceExecutor::Impl::checkModelInputs(const Batch &batch) const {
  for (unsigned d = 0; d < bundle.stages.size(); ++d) {
    const StageProgram &program = bundle.stages[d];
    for (size_t k = 0; k < program.forward.size(); ++k) {
      const Op &op = program.forward[k];
      int operand;
      int64_t limit;
      const char *what;
      if (op.kind == OpKind::Embedding) {
        operand = op.operands[0];
        limit = program.values[op.operands[1]].shape[0];
        what = "embedding id ";
      } else if (op.kind == OpKind::SoftmaxCrossEntropy) {
        operand = op.operands[1];
        limit = program.values[op.operands[0]].shape.back();
        what = "label ";
      } else {
        continue;
      }
      const StageInput *source = nullptr;
      for (const StageInput &input : program.inputs)
        if (input.value == operand && !input.fromChannel)
          source = &input;
      if (!source)
        continue; // validateBundle: i32 values are model inputs
      const HostTensor &host = batch.at(source->inputName);
      int64_t perRow = host.numElements() / host.shape[0];
      for (unsigned m = 0; m < pass->rows.size(); ++m)
        for (int64_t p = 0; p < rowsOf(m) * perRow; ++p) {
          int32_t v = host.i32[pass->offsets[m] * perRow + p];
          if (v >= 0 && v < limit)
            continue;
          size_t at = 0;
          const std::vector<Instr> &instrs = (*pass->programs)[d];
          while (at < instrs.size() &&
                 !(instrs[at].kind == InstrKind::Forward &&
                   instrs[at].microbatch == m))
            ++at;
          return "device " + std::to_string(d) + ": op #" +
                 std::to_string(at) + " (" +
                 describeInstruction(instrs[at], d) + "): " + what +
                 std::to_string(v) + " outside [0, " + std::to_string(limit) +
                 ") at position " + std::to_string(p) +
                 " of the micro-batch, in forward op " + std::to_string(k) +
                 " (" + opKindName(op.kind) + ")";
        }
    }
  }
  return {};
}

