//===- MemoryPlanner.cpp - Static per-device memory plans -----------------===//

#include "gpipe/Analysis/MemoryPlanner.h"
#include "gpipe/runtime/verify/KeptForwardValues.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

using namespace gpipe;

namespace {

/// Per op of each list, the values whose last read or definition over the
/// concatenation of `lists` is that op, except those in `keep`.
std::vector<std::vector<std::vector<int>>>
lastUses(const std::vector<const std::vector<PlannedOp> *> &lists,
         size_t numValues, const std::vector<char> &keep) {
  std::vector<std::pair<int, int>> last(numValues, {-1, -1});
  std::vector<std::vector<std::vector<int>>> free(lists.size());
  for (size_t l = 0; l < lists.size(); ++l) {
    free[l].resize(lists[l]->size());
    for (size_t k = 0; k < lists[l]->size(); ++k) {
      const PlannedOp &op = (*lists[l])[k];
      for (int id : op.operands)
        last[id] = {int(l), int(k)};
      for (int id : op.results)
        last[id] = {int(l), int(k)};
    }
  }
  for (size_t id = 0; id < numValues; ++id)
    if (last[id].first >= 0 && !keep[id])
      free[last[id].first][last[id].second].push_back(int(id));
  return free;
}

/// The liveness rules of MemoryPlanner.h for one stage.
struct StageLiveness {
  std::vector<char> keptForBackward; ///< read by the backward
  /// Read after the forward and not recomputed: the stage inputs, and
  /// under remat selective the results the recompute reads as they are.
  std::vector<char> stashed;
  std::vector<char> isOutput;
  std::vector<std::vector<int>> forwardFree[2]; ///< [kept]
  std::vector<std::vector<int>> recomputeFree;
  std::vector<std::vector<int>> backwardFree[2]; ///< [kept]
  std::vector<std::vector<int>> weightsFree[2];  ///< [kept]
  std::vector<char> readByWeights;               ///< operands of W ops

  explicit StageLiveness(const PlannedStage &stage) {
    const size_t n = stage.values.size();
    keptForBackward.assign(n, 0);
    stashed.assign(n, 0);
    isOutput.assign(n, 0);
    // What the backward may read without its recompute: the inputs and the
    // forward's results the recompute does not define again.
    std::vector<char> fromForward(n, 0);
    for (int id : stage.inputs)
      fromForward[id] = 1;
    for (const PlannedOp &op : stage.forward)
      for (int id : op.results)
        if (id >= 0)
          fromForward[id] = 1;
    for (const PlannedOp &op : stage.recompute)
      for (int id : op.results)
        if (id >= 0)
          fromForward[id] = 0;
    readByWeights.assign(n, 0);
    for (const std::vector<PlannedOp> *ops :
         {&stage.backward, &stage.backwardWeights})
      for (const PlannedOp &op : *ops)
        for (int id : op.operands) {
          keptForBackward[id] = 1;
          stashed[id] |= fromForward[id];
          readByWeights[id] |= ops == &stage.backwardWeights;
        }
    for (const PlannedOp &op : stage.recompute)
      for (int id : op.operands)
        stashed[id] |= fromForward[id];
    for (int id : stage.outputs)
      isOutput[id] = 1;
    for (int kept = 0; kept < 2; ++kept) {
      std::vector<char> keep = kept ? keptForBackward : stashed;
      for (int id : stage.outputs)
        keep[id] = 1;
      if (stage.loss >= 0)
        keep[stage.loss] = 1; // read when the forward ends
      forwardFree[kept] = lastUses({&stage.forward}, n, keep).front();
    }
    std::vector<char> keep(n, 0);
    for (int id : stage.inputGrads)
      keep[id] = 1;
    // B and W are one sequence, whether W runs at once or later.
    auto kept = lastUses({&stage.backward, &stage.backwardWeights}, n, keep);
    backwardFree[1] = std::move(kept[0]);
    weightsFree[1] = std::move(kept[1]);
    auto all = lastUses(
        {&stage.recompute, &stage.backward, &stage.backwardWeights}, n, keep);
    recomputeFree = std::move(all[0]);
    backwardFree[0] = std::move(all[1]);
    weightsFree[0] = std::move(all[2]);
  }

  bool neededAfterForward(int id, bool kept) const {
    return kept ? keptForBackward[id] : stashed[id];
  }
};

const char *instrName(PlannedInstrKind kind) {
  switch (kind) {
  case PlannedInstrKind::LoadInput:
    return "load_input";
  case PlannedInstrKind::Forward:
    return "forward";
  case PlannedInstrKind::Backward:
    return "backward";
  case PlannedInstrKind::BackwardWeights:
    return "backward_weights";
  case PlannedInstrKind::SendActivation:
    return "send_activation";
  case PlannedInstrKind::RecvActivation:
    return "recv_activation";
  case PlannedInstrKind::SendGradient:
    return "send_gradient";
  case PlannedInstrKind::RecvGradient:
    return "recv_gradient";
  case PlannedInstrKind::WaitSendActivation:
    return "wait_send_activation";
  case PlannedInstrKind::WaitSendGradient:
    return "wait_send_gradient";
  case PlannedInstrKind::OptimizerStep:
    return "optimizer_step";
  }
  return "?";
}

/// The replay: live buffers per (stage, micro-batch, value), events in
/// order.
class Replay {
public:
  Replay(const DeviceProgram &program, DeviceMemoryPlan &plan)
      : program(program), plan(plan) {}

  std::string run() {
    plan = DeviceMemoryPlan();
    const size_t numMicrobatches = program.microbatchRows.size();
    for (const PlannedStage &stage : program.stages)
      plan.residentBytes += stage.residentBytes;
    current = plan.peakBytes = total = plan.residentBytes;
    splitsBackward =
        std::any_of(program.instrs.begin(), program.instrs.end(),
                    [](const PlannedInstr &in) {
                      return in.kind == PlannedInstrKind::BackwardWeights;
                    });
    waitsForSends = std::any_of(
        program.instrs.begin(), program.instrs.end(),
        [](const PlannedInstr &in) {
          return in.kind == PlannedInstrKind::WaitSendActivation ||
                 in.kind == PlannedInstrKind::WaitSendGradient;
        });
    states.reserve(program.stages.size());
    for (const PlannedStage &stage : program.stages) {
      StageState &s = states.emplace_back(stage);
      s.slots.assign(numMicrobatches,
                     std::vector<int>(stage.values.size(), -1));
      s.weightsRan.assign(numMicrobatches, 0);
      s.activationSent.assign(numMicrobatches,
                              std::vector<char>(stage.outputs.size(), 0));
      s.gradientSent.assign(numMicrobatches,
                            std::vector<char>(stage.inputGrads.size(), 0));
    }
    for (const PlannedInstr &in : program.instrs)
      if (in.kind != PlannedInstrKind::OptimizerStep &&
          in.stage >= states.size())
        return "op #" + std::to_string(&in - program.instrs.data()) + " (" +
               instrName(in.kind) + "): stage " + std::to_string(in.stage) +
               " out of range: the device runs " +
               std::to_string(states.size());
    // As the runtime decides (keptForwardValuesOf): the plan places the
    // buffers it fills.
    auto kept = runtime::keptForwardValues(
        program.instrs, unsigned(states.size()), unsigned(numMicrobatches),
        keptBeyondAdjacentOf(program.keep), [](const PlannedInstr &in) {
          runtime::ComputeRole role;
          role.stage = in.stage;
          role.microbatch = in.microbatch;
          switch (in.kind) {
          case PlannedInstrKind::Forward:
            role.kind = runtime::ComputeRole::Forward;
            break;
          case PlannedInstrKind::Backward:
            role.kind = runtime::ComputeRole::Backward;
            break;
          case PlannedInstrKind::BackwardWeights:
          case PlannedInstrKind::OptimizerStep:
            role.kind = runtime::ComputeRole::OtherCompute;
            break;
          default:
            break;
          }
          return role;
        });
    for (size_t v = 0; v < states.size(); ++v)
      states[v].kept = std::move(kept[v]);
    plan.buffers.reserve(maxBuffers());
    for (instr = 0; instr < program.instrs.size(); ++instr) {
      plan.instrStart.push_back(now);
      std::string error = step(program.instrs[instr]);
      if (!error.empty())
        return "op #" + std::to_string(instr) + " (" +
               instrName(program.instrs[instr].kind) + "): " + error;
    }
    plan.instrStart.push_back(now);
    for (StageState &s : states)
      for (auto &values : s.slots)
        for (int &slot : values)
          release(slot);
    // The verifier proves every send waited for; a program that is not
    // verified still ends with its buffers released.
    for (auto &[send, buffer] : sendsInFlight)
      unhold(buffer);
    sendsInFlight.clear();
    plan.peakWhere = peakWhere.str();
    // Every offset and arena end is at most this sum, so it alone is checked.
    if (overflowed)
      return "its buffers over a training step, with its resident bytes, sum "
             "to 2^63 bytes or more; the model is too large to plan";
    return {};
  }

private:
  /// At least as many buffers as the replay allocates: reserving them spares
  /// the copies of a growing vector of millions of buffers.
  size_t maxBuffers() const {
    auto opBuffers = [](const std::vector<PlannedOp> &ops) {
      size_t count = 0;
      for (const PlannedOp &op : ops)
        count += op.results.size() +
                 (op.scratch.fixed != 0 || op.scratch.perRow != 0);
      return count;
    };
    struct Counts {
      size_t forward, recompute, backward, weights, inputs;
    };
    std::vector<Counts> counts;
    for (const PlannedStage &stage : program.stages)
      counts.push_back({opBuffers(stage.forward), opBuffers(stage.recompute),
                        opBuffers(stage.backward),
                        opBuffers(stage.backwardWeights), stage.inputs.size()});
    size_t count = 0;
    for (const PlannedInstr &in : program.instrs) {
      if (in.kind == PlannedInstrKind::OptimizerStep)
        continue;
      const Counts &stage = counts[in.stage];
      switch (in.kind) {
      case PlannedInstrKind::LoadInput:
      case PlannedInstrKind::RecvActivation:
        count += stage.inputs;
        break;
      case PlannedInstrKind::RecvGradient:
      case PlannedInstrKind::SendActivation:
      case PlannedInstrKind::SendGradient:
        count += 1;
        break;
      case PlannedInstrKind::Forward:
        count += stage.forward;
        break;
      case PlannedInstrKind::Backward:
        count += stage.recompute + stage.backward + stage.weights;
        break;
      case PlannedInstrKind::BackwardWeights:
        count += stage.weights;
        break;
      case PlannedInstrKind::WaitSendActivation:
      case PlannedInstrKind::WaitSendGradient:
      case PlannedInstrKind::OptimizerStep:
        break;
      }
    }
    return count;
  }

  std::string step(const PlannedInstr &in) {
    const unsigned m = in.microbatch;
    if (in.kind == PlannedInstrKind::OptimizerStep)
      return {};
    state = &states[in.stage];
    const PlannedStage &stage = *state->stage;
    if (m >= program.microbatchRows.size())
      return "micro-batch " + std::to_string(m) + " out of range";
    where = {instrName(in.kind), nullptr, 0, m};
    switch (in.kind) {
    case PlannedInstrKind::LoadInput:
      for (size_t i = 0; i < stage.inputs.size(); ++i)
        if (stage.inputChannels[i] == ~0u &&
            stage.inputNames[i] == in.inputName)
          define(m, stage.inputs[i]);
      return {};
    case PlannedInstrKind::RecvActivation:
      for (size_t i = 0; i < stage.inputs.size(); ++i)
        if (stage.inputChannels[i] == in.channel)
          define(m, stage.inputs[i]);
      return {};
    case PlannedInstrKind::RecvGradient:
      if (in.channel >= stage.outputGrads.size())
        return "no output gradient channel " + std::to_string(in.channel);
      define(m, stage.outputGrads[in.channel]);
      return {};
    case PlannedInstrKind::SendActivation:
    case PlannedInstrKind::SendGradient:
      return send(in);
    case PlannedInstrKind::WaitSendActivation:
    case PlannedInstrKind::WaitSendGradient:
      return waitSend(in);
    case PlannedInstrKind::Forward: {
      bool keep = state->kept[m];
      std::string error =
          runOps(m, stage.forward, state->live.forwardFree[keep], "forward");
      if (!error.empty())
        return error;
      for (size_t id = 0; id < stage.values.size(); ++id)
        if (!state->live.neededAfterForward(int(id), keep) &&
            !state->live.isOutput[id])
          release(state->slots[m][id]);
      return {};
    }
    case PlannedInstrKind::Backward: {
      bool keep = state->kept[m];
      if (!keep) {
        std::string error =
            runOps(m, stage.recompute, state->live.recomputeFree, "recompute");
        if (!error.empty())
          return error;
      }
      std::string error =
          runOps(m, stage.backward, state->live.backwardFree[keep], "backward");
      if (!error.empty())
        return error;
      // A program without BackwardWeights runs W here, at once.
      if (!splitsBackward)
        return runWeights(m);
      // W runs later: what it reads stays.
      releaseAllBut(m, state->live.readByWeights);
      return {};
    }
    case PlannedInstrKind::BackwardWeights:
      return runWeights(m);
    case PlannedInstrKind::OptimizerStep:
      return {};
    }
    return {};
  }

  /// The W ops of micro-batch m, then the end of its backward: every value
  /// but the input gradients (being sent) goes.
  std::string runWeights(unsigned m) {
    const PlannedStage &stage = *state->stage;
    state->weightsRan[m] = 1;
    std::string error = runOps(m, stage.backwardWeights,
                               state->live.weightsFree[state->kept[m] ? 1 : 0],
                               "backward_weights");
    if (!error.empty())
      return error;
    releaseAllBut(m, {});
    // An input gradient that W read after its send (which kept it) goes too.
    for (size_t c = 0; c < stage.inputGrads.size(); ++c)
      if (state->gradientSent[m][c])
        release(state->slots[m][stage.inputGrads[c]]);
    return {};
  }

  /// Releases micro-batch m's values except the input gradients and those
  /// `also` marks (when not empty).
  void releaseAllBut(unsigned m, const std::vector<char> &also) {
    const PlannedStage &stage = *state->stage;
    std::vector<char> isInputGrad(stage.values.size(), 0);
    for (int id : stage.inputGrads)
      isInputGrad[id] = 1;
    for (size_t id = 0; id < stage.values.size(); ++id)
      if (!isInputGrad[id] && (also.empty() || !also[id]))
        release(state->slots[m][id]);
  }

  std::string runOps(unsigned m, const std::vector<PlannedOp> &ops,
                     const std::vector<std::vector<int>> &freeAfter,
                     const char *section) {
    for (size_t k = 0; k < ops.size(); ++k) {
      const PlannedOp &op = ops[k];
      for (int id : op.operands)
        if (state->slots[m][id] < 0)
          return std::string(section) + " op " + std::to_string(k) + " (" +
                 op.name + ") reads value " + std::to_string(id) +
                 ", which is not live";
      where = {section, &op.name, k, m};
      for (int id : op.results)
        define(m, id);
      int64_t scratch = bytesAt(op.scratch, program.microbatchRows[m]);
      if (scratch > 0) {
        int buffer = allocate(scratch, -1, -1);
        release(buffer);
      }
      for (int id : freeAfter[k])
        release(state->slots[m][id]);
    }
    return {};
  }

  std::string send(const PlannedInstr &in) {
    const PlannedStage &stage = *state->stage;
    const unsigned m = in.microbatch;
    bool activation = in.kind == PlannedInstrKind::SendActivation;
    const std::vector<int> &ids = activation ? stage.outputs : stage.inputGrads;
    std::vector<char> &sent =
        activation ? state->activationSent[m] : state->gradientSent[m];
    if (in.channel >= ids.size())
      return "no channel " + std::to_string(in.channel);
    int id = ids[in.channel];
    if (state->slots[m][id] < 0)
      return "sends value " + std::to_string(id) + ", which is not live";
    bool needed = activation
                      ? state->live.neededAfterForward(id, state->kept[m])
                      // An input gradient W reads too (a skip's).
                      : splitsBackward && state->live.readByWeights[id] &&
                            !state->weightsRan[m];
    for (size_t c = 0; c < ids.size() && !needed; ++c)
      needed = c != in.channel && ids[c] == id && !sent[c];
    sent[in.channel] = 1;
    if (waitsForSends) {
      // Zero-copy: the transport reads the value's own buffer until the
      // wait, whatever frees the value meanwhile.
      int buffer = state->slots[m][id];
      ++holds[buffer];
      sendsInFlight.emplace(sendKey(in), buffer);
      if (!needed)
        release(state->slots[m][id]);
    } else if (needed) {
      int copy = allocate(plan.buffers[state->slots[m][id]].bytes, -1, id);
      release(copy);
    } else {
      release(state->slots[m][id]);
    }
    return {};
  }

  std::string waitSend(const PlannedInstr &in) {
    auto it = sendsInFlight.find(sendKey(in));
    if (it == sendsInFlight.end())
      return "waits for a send that is not in flight";
    unhold(it->second);
    sendsInFlight.erase(it);
    return {};
  }

  /// A send as its wait names it: direction, stage, micro-batch, channel.
  using SendKey = std::tuple<bool, unsigned, unsigned, unsigned>;
  static SendKey sendKey(const PlannedInstr &in) {
    bool activation = in.kind == PlannedInstrKind::SendActivation ||
                      in.kind == PlannedInstrKind::WaitSendActivation;
    return {activation, in.stage, in.microbatch, in.channel};
  }

  /// Ends one send's hold on `buffer`: the buffer goes once the last hold
  /// ends, if its value was freed meanwhile.
  void unhold(int buffer) {
    auto it = holds.find(buffer);
    if (it == holds.end() || --it->second > 0)
      return;
    holds.erase(it);
    if (heldOnly.erase(buffer)) {
      sentHeld -= plan.buffers[buffer].bytes;
      endBuffer(buffer);
    }
  }

  /// Allocates value `id` of micro-batch m, replacing a live one.
  void define(unsigned m, int id) {
    const PlannedStage &stage = *state->stage;
    release(state->slots[m][id]);
    state->slots[m][id] = allocate(
        bytesAt(stage.values[id], program.microbatchRows[m]), int(m), id);
  }

  /// `size` at `rows` rows; 0 (and overflowed) past int64.
  int64_t bytesAt(const ByteSize &size, int64_t rows) {
    int64_t bytes;
    if (__builtin_mul_overflow(size.perRow, rows, &bytes) ||
        __builtin_add_overflow(bytes, size.fixed, &bytes) ||
        bytes > INT64_MAX - kBufferGranule) {
      overflowed = true;
      return 0;
    }
    return bytes;
  }

  int allocate(int64_t bytes, int microbatch, int value) {
    PlannedBuffer buffer;
    buffer.bytes =
        (bytes + kBufferGranule - 1) / kBufferGranule * kBufferGranule;
    overflowed |= __builtin_add_overflow(total, buffer.bytes, &total);
    buffer.start = now++;
    buffer.end = -1;
    buffer.microbatch = microbatch;
    buffer.value = value;
    buffer.instr = int64_t(instr);
    plan.buffers.push_back(buffer);
    current += buffer.bytes;
    if (current > plan.peakBytes) {
      plan.peakBytes = current;
      plan.peakInstr = instr;
      peakWhere = where;
    }
    return int(plan.buffers.size()) - 1;
  }

  /// Frees a value's buffer, or, while a send still reads it, marks it to
  /// go at the send's wait.
  void release(int &buffer) {
    if (buffer < 0)
      return;
    if (holds.count(buffer)) {
      heldOnly.insert(buffer);
      sentHeld += plan.buffers[buffer].bytes;
      plan.sendHeldBytes = std::max(plan.sendHeldBytes, sentHeld);
    } else {
      endBuffer(buffer);
    }
    buffer = -1;
  }

  void endBuffer(int buffer) {
    plan.buffers[buffer].end = now++;
    current -= plan.buffers[buffer].bytes;
  }

  /// The replay's state of one of the device's stages.
  struct StageState {
    explicit StageState(const PlannedStage &stage)
        : stage(&stage), live(stage) {}
    const PlannedStage *stage;
    StageLiveness live;
    std::vector<std::vector<int>> slots; ///< [mb][value] -> buffer or -1
    std::vector<char> kept;
    std::vector<char> weightsRan; ///< per micro-batch
    std::vector<std::vector<char>> activationSent, gradientSent;
  };

  const DeviceProgram &program;
  DeviceMemoryPlan &plan;
  std::vector<StageState> states;
  StageState *state = nullptr; ///< the current instruction's stage
  bool splitsBackward = false; ///< the program has BackwardWeights
  /// The program waits for its sends: a sent value stays in its buffer
  /// until the wait, instead of a copy being made at the send.
  bool waitsForSends = false;
  std::map<SendKey, int> sendsInFlight; ///< send -> the buffer it reads
  std::unordered_map<int, int> holds;   ///< buffer -> sends reading it
  std::unordered_set<int> heldOnly;     ///< freed, kept for their sends
  int64_t sentHeld = 0;                 ///< bytes of heldOnly
  int64_t now = 0;
  int64_t current = 0;
  /// Resident bytes plus every buffer's, checked; `overflowed` past int64.
  int64_t total = 0;
  bool overflowed = false;
  size_t instr = 0;
  /// Where the replay is, spelled out only for the peak: building the
  /// string at every op would dominate the replay's cost.
  struct Place {
    const char *section = nullptr; ///< null: nothing allocated yet
    const std::string *opName = nullptr; ///< null: the instruction itself
    size_t op = 0;
    unsigned microbatch = 0;
    std::string str() const {
      if (!section)
        return {};
      std::string text = section;
      if (opName)
        text += " op " + std::to_string(op) + " (" + *opName + ")";
      return text + " of micro-batch " + std::to_string(microbatch);
    }
  } where, peakWhere;
};

} // namespace

std::string gpipe::replayDeviceMemory(const DeviceProgram &program,
                                      DeviceMemoryPlan &plan) {
  return Replay(program, plan).run();
}

std::string gpipe::planDeviceMemory(const DeviceProgram &program,
                                    DeviceMemoryPlan &plan) {
  std::string error = replayDeviceMemory(program, plan);
  if (!error.empty())
    return error;
  // Zero-byte values (parameter views) need no room.
  plan.buffers.erase(std::remove_if(plan.buffers.begin(), plan.buffers.end(),
                                    [](const PlannedBuffer &buffer) {
                                      return buffer.bytes == 0;
                                    }),
                     plan.buffers.end());
  plan.arenaBytes =
      plan.residentBytes + (plan.buffers.size() <= kExactPlacementLimit
                                ? assignOffsets(plan.buffers)
                                : assignOffsetsByInstruction(plan));
  return {};
}
