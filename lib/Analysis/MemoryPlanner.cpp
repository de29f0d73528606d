//===- MemoryPlanner.cpp - Static per-device memory plans -----------------===//

#include "gpipe/Analysis/MemoryPlanner.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <unordered_map>

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
  std::vector<char> stashed;         ///< stage inputs read after the forward
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
    std::vector<char> isInput(n, 0);
    for (int id : stage.inputs)
      isInput[id] = 1;
    readByWeights.assign(n, 0);
    for (const std::vector<PlannedOp> *ops :
         {&stage.backward, &stage.backwardWeights})
      for (const PlannedOp &op : *ops)
        for (int id : op.operands) {
          keptForBackward[id] = 1;
          stashed[id] |= isInput[id];
          readByWeights[id] |= ops == &stage.backwardWeights;
        }
    for (const PlannedOp &op : stage.recompute)
      for (int id : op.operands)
        stashed[id] |= isInput[id];
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
  case PlannedInstrKind::OptimizerStep:
    return "optimizer_step";
  }
  return "?";
}

/// The replay: live buffers per (micro-batch, value), events in order.
class Replay {
public:
  Replay(const DeviceProgram &program, DeviceMemoryPlan &plan)
      : program(program), stage(program.stage), plan(plan), live(program.stage),
        slots(program.microbatchRows.size(),
              std::vector<int>(program.stage.values.size(), -1)) {}

  std::string run() {
    plan = DeviceMemoryPlan();
    plan.residentBytes = stage.residentBytes;
    current = plan.peakBytes = total = stage.residentBytes;
    const size_t numMicrobatches = program.microbatchRows.size();
    kept.assign(numMicrobatches, program.keep == KeepPolicy::All);
    weightsRan.assign(numMicrobatches, 0);
    splitsBackward =
        std::any_of(program.instrs.begin(), program.instrs.end(),
                    [](const PlannedInstr &in) {
                      return in.kind == PlannedInstrKind::BackwardWeights;
                    });
    if (program.keep == KeepPolicy::Last)
      for (auto it = program.instrs.rbegin(); it != program.instrs.rend(); ++it)
        if (it->kind == PlannedInstrKind::Forward) {
          kept.at(it->microbatch) = 1;
          break;
        }
    plan.buffers.reserve(maxBuffers());
    activationSent.assign(numMicrobatches,
                          std::vector<char>(stage.outputs.size(), 0));
    gradientSent.assign(numMicrobatches,
                        std::vector<char>(stage.inputGrads.size(), 0));
    for (instr = 0; instr < program.instrs.size(); ++instr) {
      plan.instrStart.push_back(now);
      std::string error = step(program.instrs[instr]);
      if (!error.empty())
        return "op #" + std::to_string(instr) + " (" +
               instrName(program.instrs[instr].kind) + "): " + error;
    }
    plan.instrStart.push_back(now);
    for (auto &values : slots)
      for (int &slot : values)
        release(slot);
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
    const size_t forward = opBuffers(stage.forward);
    const size_t recompute = opBuffers(stage.recompute);
    const size_t backward = opBuffers(stage.backward);
    const size_t weights = opBuffers(stage.backwardWeights);
    size_t count = 0;
    for (const PlannedInstr &in : program.instrs) {
      switch (in.kind) {
      case PlannedInstrKind::LoadInput:
      case PlannedInstrKind::RecvActivation:
        count += stage.inputs.size();
        break;
      case PlannedInstrKind::RecvGradient:
      case PlannedInstrKind::SendActivation:
      case PlannedInstrKind::SendGradient:
        count += 1;
        break;
      case PlannedInstrKind::Forward:
        count += forward;
        break;
      case PlannedInstrKind::Backward:
        count += recompute + backward + weights;
        break;
      case PlannedInstrKind::BackwardWeights:
        count += weights;
        break;
      case PlannedInstrKind::OptimizerStep:
        break;
      }
    }
    return count;
  }

  std::string step(const PlannedInstr &in) {
    const unsigned m = in.microbatch;
    if (in.kind != PlannedInstrKind::OptimizerStep && m >= slots.size())
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
    case PlannedInstrKind::Forward: {
      bool keep = kept[m];
      std::string error =
          runOps(m, stage.forward, live.forwardFree[keep], "forward");
      if (!error.empty())
        return error;
      for (size_t id = 0; id < stage.values.size(); ++id)
        if (!live.neededAfterForward(int(id), keep) && !live.isOutput[id])
          release(slots[m][id]);
      return {};
    }
    case PlannedInstrKind::Backward: {
      bool keep = kept[m];
      if (!keep) {
        std::string error =
            runOps(m, stage.recompute, live.recomputeFree, "recompute");
        if (!error.empty())
          return error;
      }
      std::string error =
          runOps(m, stage.backward, live.backwardFree[keep], "backward");
      if (!error.empty())
        return error;
      // A program without BackwardWeights runs W here, at once.
      if (!splitsBackward)
        return runWeights(m);
      // W runs later: what it reads stays.
      releaseAllBut(m, live.readByWeights);
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
    weightsRan[m] = 1;
    std::string error =
        runOps(m, stage.backwardWeights, live.weightsFree[kept[m] ? 1 : 0],
               "backward_weights");
    if (!error.empty())
      return error;
    releaseAllBut(m, {});
    // An input gradient that W read after its send (which kept it) goes too.
    for (size_t c = 0; c < stage.inputGrads.size(); ++c)
      if (gradientSent[m][c])
        release(slots[m][stage.inputGrads[c]]);
    return {};
  }

  /// Releases micro-batch m's values except the input gradients and those
  /// `also` marks (when not empty).
  void releaseAllBut(unsigned m, const std::vector<char> &also) {
    std::vector<char> isInputGrad(stage.values.size(), 0);
    for (int id : stage.inputGrads)
      isInputGrad[id] = 1;
    for (size_t id = 0; id < stage.values.size(); ++id)
      if (!isInputGrad[id] && (also.empty() || !also[id]))
        release(slots[m][id]);
  }

  std::string runOps(unsigned m, const std::vector<PlannedOp> &ops,
                     const std::vector<std::vector<int>> &freeAfter,
                     const char *section) {
    for (size_t k = 0; k < ops.size(); ++k) {
      const PlannedOp &op = ops[k];
      for (int id : op.operands)
        if (slots[m][id] < 0)
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
        release(slots[m][id]);
    }
    return {};
  }

  std::string send(const PlannedInstr &in) {
    const unsigned m = in.microbatch;
    bool activation = in.kind == PlannedInstrKind::SendActivation;
    const std::vector<int> &ids = activation ? stage.outputs : stage.inputGrads;
    std::vector<char> &sent = activation ? activationSent[m] : gradientSent[m];
    if (in.channel >= ids.size())
      return "no channel " + std::to_string(in.channel);
    int id = ids[in.channel];
    if (slots[m][id] < 0)
      return "sends value " + std::to_string(id) + ", which is not live";
    bool needed =
        activation ? live.neededAfterForward(id, kept[m])
                   // An input gradient W reads too (a skip's).
                   : splitsBackward && live.readByWeights[id] && !weightsRan[m];
    for (size_t c = 0; c < ids.size() && !needed; ++c)
      needed = c != in.channel && ids[c] == id && !sent[c];
    sent[in.channel] = 1;
    if (needed) {
      int copy = allocate(plan.buffers[slots[m][id]].bytes, -1, id);
      release(copy);
    } else {
      release(slots[m][id]);
    }
    return {};
  }

  /// Allocates value `id` of micro-batch m, replacing a live one.
  void define(unsigned m, int id) {
    release(slots[m][id]);
    slots[m][id] = allocate(
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

  void release(int &buffer) {
    if (buffer < 0)
      return;
    plan.buffers[buffer].end = now++;
    current -= plan.buffers[buffer].bytes;
    buffer = -1;
  }

  const DeviceProgram &program;
  const PlannedStage &stage;
  DeviceMemoryPlan &plan;
  StageLiveness live;
  std::vector<std::vector<int>> slots; ///< [mb][value] -> buffer or -1
  std::vector<char> kept;
  bool splitsBackward = false; ///< the program has BackwardWeights
  std::vector<char> weightsRan; ///< per micro-batch
  std::vector<std::vector<char>> activationSent, gradientSent;
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

namespace {

/// The bytes a placed buffer occupies, [low, high).
using ByteRange = std::pair<int64_t, int64_t>;

/// The union of byte ranges, as sorted ranges that neither overlap nor
/// touch. For a buffer of b > 0 bytes a range [low, high) rules out the
/// offsets in (low - b, high), so a union rules out what its parts do: the
/// placed buffers live together are mostly packed, and their union is a few
/// ranges where the buffers are thousands.
class RangeUnion {
public:
  void insert(ByteRange range) {
    // Most unions stay one range: it is kept inline, as a heap allocation
    // per node would cost more than the rest of a small placement.
    if (ranges.empty()) {
      if (one.first > one.second) {
        one = range;
        return;
      }
      if (range.first <= one.second && one.first <= range.second) {
        one = {std::min(one.first, range.first),
               std::max(one.second, range.second)};
        return;
      }
      ranges.push_back(one);
      one = kNone;
    }
    // The first range that ends at or after range's start, then those it
    // overlaps or touches.
    auto first = std::lower_bound(
        ranges.begin(), ranges.end(), range.first,
        [](const ByteRange &other, int64_t low) { return other.second < low; });
    auto last = first;
    for (; last != ranges.end() && last->first <= range.second; ++last) {
      range.first = std::min(range.first, last->first);
      range.second = std::max(range.second, last->second);
    }
    if (first == last) {
      ranges.insert(first, range);
      return;
    }
    *first = range;
    ranges.erase(first + 1, last);
  }

  /// Appends the ranges, ascending.
  void appendTo(std::vector<ByteRange> &out) const {
    if (one.first <= one.second)
      out.push_back(one);
    else
      out.insert(out.end(), ranges.begin(), ranges.end());
  }

private:
  static constexpr ByteRange kNone{1, 0};
  ByteRange one = kNone;         ///< the union while it is one range
  std::vector<ByteRange> ranges; ///< the union when it is more
};

/// The byte ranges of the placed buffers, indexed by lifetime, over times
/// 0..horizon-1: a segment tree whose nodes hold the union of the buffers
/// covering them (for "live at t"), and one whose nodes hold the union of
/// the buffers starting within them (for "starts within [s, e)"). A query
/// gathers the unions of O(log horizon) nodes, a few ranges each where the
/// buffers live with the one being placed may be thousands.
class LifetimeIndex {
public:
  explicit LifetimeIndex(int64_t horizon)
      : size(horizon), live(2 * horizon), started(2 * horizon) {}

  /// Inserts a buffer live during [start, end) (none if empty) that starts
  /// at `start`.
  void insert(int64_t start, int64_t end, ByteRange bytes) {
    for (int64_t node = start + size; node >= 1; node /= 2)
      started[node].insert(bytes);
    // The canonical nodes of [start, end), bottom-up.
    for (int64_t lo = start + size, hi = end + size; lo < hi;
         lo /= 2, hi /= 2) {
      if (lo & 1)
        live[lo++].insert(bytes);
      if (hi & 1)
        live[--hi].insert(bytes);
    }
  }

  /// Appends the ranges of the buffers live at `at` or starting within
  /// [from, to), each node's union as one ascending run.
  void overlapping(int64_t at, int64_t from, int64_t to,
                   std::vector<ByteRange> &out) const {
    for (int64_t node = at + size; node >= 1; node /= 2)
      live[node].appendTo(out);
    for (int64_t lo = from + size, hi = to + size; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1)
        started[lo++].appendTo(out);
      if (hi & 1)
        started[--hi].appendTo(out);
    }
  }

private:
  int64_t size;
  std::vector<RangeUnion> live, started;
};

/// Sorts `ranges` by merging its ascending runs pairwise: they come from a
/// few unions, each sorted, and std::sort was 2-4x slower on such input.
void sortRuns(std::vector<ByteRange> &ranges, std::vector<ByteRange> &scratch,
              std::vector<size_t> &runs) {
  runs.clear();
  for (size_t i = 0; i < ranges.size(); ++i)
    if (i == 0 || ranges[i] < ranges[i - 1])
      runs.push_back(i);
  runs.push_back(ranges.size());
  scratch.resize(ranges.size());
  while (runs.size() > 2) {
    size_t kept = 0;
    for (size_t r = 0; r + 1 < runs.size(); r += 2) {
      size_t begin = runs[r], middle = runs[r + 1];
      size_t end = r + 2 < runs.size() ? runs[r + 2] : middle;
      std::merge(ranges.begin() + begin, ranges.begin() + middle,
                 ranges.begin() + middle, ranges.begin() + end,
                 scratch.begin() + begin);
      runs[kept++] = begin;
    }
    runs[kept++] = ranges.size();
    runs.resize(kept);
    ranges.swap(scratch);
  }
}

} // namespace

int64_t gpipe::assignOffsets(std::vector<PlannedBuffer> &buffers) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].start < buffers[b].start;
  });
  // Only the order of the starts and ends matters: where the events are
  // sparse (a few blocks may span millions of events), index them by rank so
  // that the index's size follows the buffers.
  int64_t horizon = 1;
  for (const PlannedBuffer &buffer : buffers)
    horizon = std::max({horizon, buffer.start + 1, buffer.end + 1});
  std::vector<int64_t> times;
  if (horizon > 4 * int64_t(buffers.size())) {
    times.reserve(2 * buffers.size());
    for (const PlannedBuffer &buffer : buffers) {
      times.push_back(buffer.start);
      times.push_back(buffer.end);
    }
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
    horizon = int64_t(times.size()) + 1;
  }
  auto rank = [&](int64_t time) {
    if (times.empty())
      return time;
    return int64_t(std::lower_bound(times.begin(), times.end(), time) -
                   times.begin());
  };
  // Two buffers meet when each starts before the other ends; an empty
  // lifetime [t, t) meets what is live across t, never another empty one.
  // The index finds the buffers live at a buffer's first instant or starting
  // after it within its lifetime. With empty lifetimes, times are doubled:
  // [s, e) becomes [2s + 1, 2e) and [t, t) the instant 2t, which the index
  // holds only as a start; then the same query follows the rule.
  const bool anyEmpty =
      std::any_of(buffers.begin(), buffers.end(), [](const PlannedBuffer &b) {
        return b.bytes > 0 && b.start >= b.end;
      });
  const int64_t scale = anyEmpty ? 2 : 1;
  LifetimeIndex placed(scale * horizon + 1);
  std::vector<ByteRange> ranges, scratch;
  std::vector<size_t> runs;
  int64_t arena = 0;
  for (size_t index : order) {
    PlannedBuffer &buffer = buffers[index];
    // Zero-byte buffers come last, and offset 0 always fits them.
    if (buffer.bytes == 0) {
      buffer.offset = 0;
      continue;
    }
    const int64_t start = rank(buffer.start), end = rank(buffer.end);
    const bool empty = start >= end;
    const int64_t first = empty ? scale * start : scale * start + scale - 1;
    const int64_t last = empty ? first : scale * end;
    ranges.clear();
    placed.overlapping(first, first + 1, last, ranges);
    // The lowest offset that fits, scanning the ranges by offset.
    sortRuns(ranges, scratch, runs);
    int64_t offset = 0;
    for (const auto &[low, high] : ranges) {
      if (offset + buffer.bytes <= low)
        break;
      offset = std::max(offset, high);
    }
    buffer.offset = offset;
    arena = std::max(arena, offset + buffer.bytes);
    placed.insert(first, last, {offset, offset + buffer.bytes});
  }
  return arena;
}

namespace {
/// One instruction's own buffers, relative to its first event: what makes
/// two instructions' placements interchangeable.
struct Pattern {
  std::vector<int64_t> key; ///< bytes, start, end per buffer
  bool operator==(const Pattern &other) const { return key == other.key; }
};
struct PatternHash {
  size_t operator()(const Pattern &pattern) const {
    uint64_t hash = 1469598103934665603ull;
    for (int64_t word : pattern.key)
      hash = (hash ^ uint64_t(word)) * 1099511628211ull;
    return size_t(hash);
  }
};
struct PatternPlacement {
  std::vector<int64_t> offsets; ///< per buffer, in the block
  int64_t bytes = 0;            ///< the block
};
} // namespace

int64_t gpipe::assignOffsetsInTimeOrder(std::vector<PlannedBuffer> &buffers) {
  // Events at time t: the frees of buffers ending at t, then the buffers of
  // empty lifetime [t, t) (live only with what spans t: placed and released
  // at once), then the allocations of buffers starting at t.
  enum Phase { Free = 0, Instant = 1, Allocate = 2 };
  std::vector<std::pair<int64_t, int64_t>> events; // (3 t + phase, index)
  events.reserve(2 * buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const PlannedBuffer &b = buffers[i];
    if (b.start >= b.end) {
      events.push_back({3 * b.start + Instant, int64_t(i)});
      continue;
    }
    events.push_back({3 * b.start + Allocate, int64_t(i)});
    events.push_back({3 * b.end + Free, int64_t(i)});
  }
  std::sort(events.begin(), events.end());
  std::map<int64_t, int64_t> holes;            // offset -> bytes
  std::multimap<int64_t, int64_t> holesBySize; // bytes -> offset
  auto addHole = [&](int64_t offset, int64_t bytes) {
    // Merge with the neighbours.
    auto next = holes.lower_bound(offset);
    if (next != holes.end() && offset + bytes == next->first) {
      auto range = holesBySize.equal_range(next->second);
      for (auto it = range.first; it != range.second; ++it)
        if (it->second == next->first) {
          holesBySize.erase(it);
          break;
        }
      bytes += next->second;
      next = holes.erase(next);
    }
    if (next != holes.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        auto range = holesBySize.equal_range(prev->second);
        for (auto it = range.first; it != range.second; ++it)
          if (it->second == prev->first) {
            holesBySize.erase(it);
            break;
          }
        offset = prev->first;
        bytes += prev->second;
        holes.erase(prev);
      }
    }
    holes[offset] = bytes;
    holesBySize.emplace(bytes, offset);
  };
  int64_t top = 0;
  for (const auto &[when, index] : events) {
    PlannedBuffer &buffer = buffers[size_t(index)];
    Phase phase = Phase(when % 3);
    if (phase == Free) {
      if (buffer.bytes > 0)
        addHole(buffer.offset, buffer.bytes);
      continue;
    }
    auto fit = holesBySize.lower_bound(buffer.bytes); // best fit
    if (buffer.bytes == 0) {
      buffer.offset = 0;
    } else if (fit == holesBySize.end()) {
      buffer.offset = top;
      top += buffer.bytes;
    } else {
      int64_t offset = fit->second, bytes = fit->first;
      holesBySize.erase(fit);
      holes.erase(offset);
      buffer.offset = offset;
      if (bytes > buffer.bytes)
        addHole(offset + buffer.bytes, bytes - buffer.bytes);
    }
    if (phase == Instant && buffer.bytes > 0)
      addHole(buffer.offset, buffer.bytes);
  }
  return top;
}

/// The greedy where it is affordable, else the placement in time order.
static int64_t placeBuffers(std::vector<PlannedBuffer> &buffers) {
  return buffers.size() <= kExactPlacementLimit
             ? assignOffsets(buffers)
             : assignOffsetsInTimeOrder(buffers);
}

int64_t gpipe::assignOffsetsByInstruction(DeviceMemoryPlan &plan) {
  std::vector<PlannedBuffer> &buffers = plan.buffers;
  const std::vector<int64_t> &instrStart = plan.instrStart;
  const size_t numInstrs = instrStart.empty() ? 0 : instrStart.size() - 1;
  // Buffers that die in the instruction that allocated them, per instruction.
  std::vector<std::vector<size_t>> own(numInstrs);
  std::vector<size_t> crossing;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const PlannedBuffer &buffer = buffers[i];
    size_t instr = size_t(buffer.instr);
    if (instr < numInstrs && buffer.end <= instrStart[instr + 1] &&
        buffer.start >= instrStart[instr])
      own[instr].push_back(i);
    else
      crossing.push_back(i);
  }

  // Each distinct pattern placed once; one block per instruction.
  std::unordered_map<Pattern, PatternPlacement, PatternHash> placed;
  std::vector<const PatternPlacement *> placementOf(numInstrs, nullptr);
  std::vector<PlannedBuffer> reduced;
  for (size_t instr = 0; instr < numInstrs; ++instr) {
    if (own[instr].empty())
      continue;
    const int64_t base = instrStart[instr];
    Pattern pattern;
    pattern.key.reserve(3 * own[instr].size());
    for (size_t i : own[instr]) {
      pattern.key.push_back(buffers[i].bytes);
      pattern.key.push_back(buffers[i].start - base);
      pattern.key.push_back(buffers[i].end - base);
    }
    auto [it, inserted] = placed.try_emplace(std::move(pattern));
    if (inserted) {
      std::vector<PlannedBuffer> local;
      for (size_t i : own[instr]) {
        PlannedBuffer copy = buffers[i];
        copy.start -= base;
        copy.end -= base;
        local.push_back(copy);
      }
      it->second.bytes = placeBuffers(local);
      for (const PlannedBuffer &buffer : local)
        it->second.offsets.push_back(buffer.offset);
    }
    placementOf[instr] = &it->second;
    PlannedBuffer block;
    block.bytes = it->second.bytes;
    block.start = instrStart[instr];
    block.end = instrStart[instr + 1];
    block.instr = int64_t(instr);
    reduced.push_back(block);
  }
  const size_t numBlocks = reduced.size();
  for (size_t i : crossing)
    reduced.push_back(buffers[i]);
  int64_t arena = placeBuffers(reduced);

  for (size_t k = 0; k < crossing.size(); ++k)
    buffers[crossing[k]].offset = reduced[numBlocks + k].offset;
  for (size_t b = 0; b < numBlocks; ++b) {
    size_t instr = size_t(reduced[b].instr);
    const PatternPlacement &placement = *placementOf[instr];
    for (size_t j = 0; j < own[instr].size(); ++j)
      buffers[own[instr][j]].offset = reduced[b].offset + placement.offsets[j];
  }
  return arena;
}
