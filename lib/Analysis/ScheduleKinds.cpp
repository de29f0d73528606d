//===- ScheduleKinds.cpp - Compute orders and the programs that run them --===//

#include "gpipe/Analysis/ScheduleKinds.h"
#include "ProgramBuilder.h"

#include <algorithm>
#include <cassert>
#include <queue>

using namespace gpipe;
using namespace gpipe::schedule;

const char *schedule::scheduleKindName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::ZeroBubbleH1:
    return "zb-h1";
  }
  return "unknown";
}

bool schedule::splitsBackward(ScheduleKind kind) {
  return kind == ScheduleKind::ZeroBubbleH1;
}

std::optional<ScheduleKind> schedule::parseScheduleKind(std::string_view name) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::ZeroBubbleH1})
    if (name == scheduleKindName(kind))
      return kind;
  return std::nullopt;
}

std::string schedule::describe(const ComputeStep &step) {
  const char *what = step.kind == InstrKind::Forward    ? "forward"
                     : step.kind == InstrKind::Backward ? "backward"
                                                        : "weight-gradient "
                                                          "backward";
  return std::string(what) + " of micro-batch " +
         std::to_string(step.microbatch);
}

ComputeOrder schedule::computeOrderOf(ScheduleKind kind, unsigned numStages,
                                      unsigned numMicrobatches) {
  ComputeOrder order(numStages);
  for (unsigned s = 0; s < numStages; ++s) {
    std::vector<ComputeStep> &steps = order[s];
    auto add = [&](InstrKind stepKind, unsigned m) {
      steps.push_back({stepKind, m});
    };
    switch (kind) {
    case ScheduleKind::GPipe:
      for (unsigned m = 0; m < numMicrobatches; ++m)
        add(InstrKind::Forward, m);
      for (unsigned m = numMicrobatches; m-- > 0;)
        add(InstrKind::Backward, m);
      break;
    case ScheduleKind::OneFOneB:
    case ScheduleKind::ZeroBubbleH1: {
      // Device s must forward K-s-1 micro-batches before the first gradient
      // can come back from the last stage; then each backward frees the
      // slot the next forward takes. ZB-H1 splits each backward and runs
      // W(m) after B(m + s): device s holds K - s micro-batches between F
      // and B, as in 1F1B, and s more between B and W, K in all, as 1F1B's
      // first device.
      const bool split = kind == ScheduleKind::ZeroBubbleH1;
      unsigned warmup = std::min(numStages - 1 - s, numMicrobatches);
      for (unsigned m = 0; m < warmup; ++m)
        add(InstrKind::Forward, m);
      for (unsigned m = 0; m < numMicrobatches; ++m) {
        if (warmup + m < numMicrobatches)
          add(InstrKind::Forward, warmup + m);
        add(InstrKind::Backward, m);
        if (split && m >= s)
          add(InstrKind::BackwardWeights, m - s);
      }
      for (unsigned m = numMicrobatches > s ? numMicrobatches - s : 0;
           split && m < numMicrobatches; ++m)
        add(InstrKind::BackwardWeights, m);
      break;
    }
    }
  }
  return order;
}

//===----------------------------------------------------------------------===//
// Checking a compute order
//===----------------------------------------------------------------------===//

namespace {
/// No action index.
constexpr std::size_t kNoAction = ~std::size_t(0);

/// Where each device runs each micro-batch's forward and backward.
struct ActionIndex {
  /// [device][m]: the action index of the forward / backward / W.
  std::vector<std::vector<std::size_t>> forward, backward, weights;
  /// [device]: whether it splits its backwards (runs any W).
  std::vector<bool> splits;

  std::size_t at(unsigned device, const ComputeStep &step) const {
    return slots(step.kind)[device][step.microbatch];
  }
  std::vector<std::vector<std::size_t>> &slots(InstrKind kind) {
    return kind == InstrKind::Forward    ? forward
           : kind == InstrKind::Backward ? backward
                                         : weights;
  }
  const std::vector<std::vector<std::size_t>> &slots(InstrKind kind) const {
    return const_cast<ActionIndex *>(this)->slots(kind);
  }
};

std::string actionAt(unsigned device, std::size_t index,
                     const ComputeStep &step) {
  return "device " + std::to_string(device) + " action #" +
         std::to_string(index) + " (" + describe(step) + ")";
}

/// Every forward and backward once per device, each backward after its
/// forward; fills `index` and returns "" or the first problem.
std::string checkOrder(const ComputeOrder &order, unsigned numStages,
                       unsigned numMicrobatches, ActionIndex &index) {
  if (order.size() != numStages)
    return "the schedule has " + std::to_string(order.size()) +
           " device(s), expected " + std::to_string(numStages) +
           " (one per stage)";
  index.forward.assign(numStages,
                       std::vector<std::size_t>(numMicrobatches, kNoAction));
  index.backward = index.forward;
  index.weights = index.forward;
  index.splits.assign(numStages, false);
  for (unsigned d = 0; d < numStages; ++d) {
    for (std::size_t i = 0; i < order[d].size(); ++i) {
      const ComputeStep &step = order[d][i];
      if (!isCompute(step.kind))
        return "device " + std::to_string(d) + " action #" + std::to_string(i) +
               " is neither a forward nor a backward";
      if (step.microbatch >= numMicrobatches)
        return actionAt(d, i, step) +
               " names a micro-batch out of range: " + "the schedule has " +
               std::to_string(numMicrobatches) + " micro-batch(es)";
      std::size_t &slot = index.slots(step.kind)[d][step.microbatch];
      if (step.kind == InstrKind::BackwardWeights)
        index.splits[d] = true;
      if (slot != kNoAction)
        return actionAt(d, i, step) + " repeats action #" +
               std::to_string(slot) + ": each runs once per micro-batch";
      slot = i;
    }
    for (unsigned m = 0; m < numMicrobatches; ++m) {
      for (InstrKind kind : {InstrKind::Forward, InstrKind::Backward})
        if (index.at(d, {kind, m}) == kNoAction)
          return "device " + std::to_string(d) + " never runs the " +
                 describe(ComputeStep{kind, m});
      std::size_t forward = index.forward[d][m],
                  backward = index.backward[d][m];
      if (backward < forward)
        return actionAt(d, backward, {InstrKind::Backward, m}) +
               " runs before its forward (action #" + std::to_string(forward) +
               ")";
      if (!index.splits[d])
        continue;
      std::size_t weights = index.weights[d][m];
      if (weights == kNoAction)
        return "device " + std::to_string(d) + " never runs the " +
               describe(ComputeStep{InstrKind::BackwardWeights, m}) +
               " (it splits its backwards, so each needs one)";
      if (weights < backward)
        return actionAt(d, weights, {InstrKind::BackwardWeights, m}) +
               " runs before its backward (action #" +
               std::to_string(backward) + ")";
    }
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Simulation that places the transfers
//===----------------------------------------------------------------------===//

/// Runs the devices through their compute orders in simulated time and
/// writes their programs. A transfer is written to the sender's and the
/// receiver's program at the moment its producer finishes, so the order in
/// which instructions are written is itself an execution in which each send
/// meets its receive: the programs cannot deadlock.
class OrderSimulation {
public:
  OrderSimulation(const PipelineSpec &spec, const ComputeOrder &order,
                  const ActionIndex &index, const std::vector<int64_t> &rows,
                  Program &program)
      : spec(spec), order(order), index(index), numStages(spec.numStages),
        next(numStages, 0), busy(numStages, false),
        activationIn(numStages, std::vector<char>(spec.numMicrobatches, 0)),
        gradientIn(activationIn) {
    program.devices.resize(numStages);
    for (unsigned d = 0; d < numStages; ++d) {
      program.devices[d].device = d;
      builders.emplace_back(program.devices[d], rows);
    }
  }

  /// "" when every device ran its order; otherwise the wait cycle.
  std::string run() {
    for (unsigned d = 0; d < numStages; ++d)
      tryStart(d, 0);
    while (!events.empty()) {
      Event event = events.top();
      events.pop();
      finish(event.device, event.time);
    }
    for (unsigned d = 0; d < numStages; ++d)
      if (next[d] < order[d].size())
        return describeDeadlock(d);
    for (ProgramBuilder &builder : builders)
      builder.addOptimizerStep();
    return "";
  }

private:
  struct Event {
    double time;
    unsigned long sequence; ///< ties break in the order of issue
    unsigned device;
    bool operator>(const Event &other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };

  /// The device that produces what `step` on device `d` waits for, if any.
  std::optional<unsigned> producerOf(unsigned d,
                                     const ComputeStep &step) const {
    if (step.kind == InstrKind::Forward)
      return d > 0 && !activationIn[d][step.microbatch]
                 ? std::optional<unsigned>(d - 1)
                 : std::nullopt;
    if (step.kind == InstrKind::BackwardWeights)
      return std::nullopt; // its backward ran earlier on this device
    return d + 1 < numStages && !gradientIn[d][step.microbatch]
               ? std::optional<unsigned>(d + 1)
               : std::nullopt;
  }

  void tryStart(unsigned d, double now) {
    if (busy[d] || next[d] == order[d].size())
      return;
    const ComputeStep &step = order[d][next[d]];
    if (producerOf(d, step))
      return;
    if (step.kind == InstrKind::Forward)
      for (const std::string &name : spec.stageInputs[d])
        builders[d].addLoad(name, step.microbatch);
    builders[d].addCompute(step.kind, d, step.microbatch);
    busy[d] = true;
    // A backward costs about twice a forward (B and W one each when split);
    // only the relative times matter, and only for where receives land,
    // never for correctness.
    double duration =
        step.kind == InstrKind::Backward && !index.splits[d] ? 2.0 : 1.0;
    events.push({now + duration, sequence++, d});
  }

  void finish(unsigned d, double now) {
    const ComputeStep step = order[d][next[d]];
    busy[d] = false;
    ++next[d];
    unsigned m = step.microbatch;
    if (step.kind == InstrKind::Forward && d + 1 < numStages) {
      builders[d].addTransfers(InstrKind::Send, Direction::Activation, d + 1,
                               spec.boundaries[d], m);
      builders[d + 1].addTransfers(InstrKind::Recv, Direction::Activation, d,
                                   spec.boundaries[d], m);
      activationIn[d + 1][m] = 1;
      tryStart(d + 1, now);
    }
    if (step.kind == InstrKind::Backward && d > 0) {
      builders[d].addTransfers(InstrKind::Send, Direction::Gradient, d - 1,
                               spec.boundaries[d - 1], m);
      builders[d - 1].addTransfers(InstrKind::Recv, Direction::Gradient, d,
                                   spec.boundaries[d - 1], m);
      gradientIn[d - 1][m] = 1;
      tryStart(d - 1, now);
    }
    tryStart(d, now);
  }

  /// Follows who waits for whom from device `start` (which is stuck) until a
  /// device repeats, and names that cycle.
  std::string describeDeadlock(unsigned start) const {
    std::vector<unsigned> path;
    std::vector<std::size_t> seenAt(numStages, kNoAction);
    unsigned d = start;
    while (seenAt[d] == kNoAction) {
      seenAt[d] = path.size();
      path.push_back(d);
      // A stuck device is idle at a step whose input has not arrived, and
      // its producer is stuck before producing it.
      d = *producerOf(d, order[d][next[d]]);
    }
    std::string message = "the schedule deadlocks: ";
    for (std::size_t i = seenAt[d]; i < path.size(); ++i) {
      unsigned waiter = path[i];
      unsigned producer = i + 1 < path.size() ? path[i + 1] : d;
      const ComputeStep &step = order[waiter][next[waiter]];
      if (i != seenAt[d])
        message += "; ";
      message += actionAt(waiter, next[waiter], step) + " waits for device " +
                 std::to_string(producer) + "'s " + describe(step) +
                 " (its action #" + std::to_string(index.at(producer, step)) +
                 ")";
    }
    return message;
  }

  const PipelineSpec &spec;
  const ComputeOrder &order;
  const ActionIndex &index;
  unsigned numStages;
  std::vector<ProgramBuilder> builders;
  std::vector<std::size_t> next; ///< per device: its next step
  std::vector<bool> busy;
  /// [device][m]: whether the activation (gradient) of m has arrived.
  std::vector<std::vector<char>> activationIn, gradientIn;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  unsigned long sequence = 0;
};
} // namespace

ScheduleBuild schedule::buildFromComputeOrder(const PipelineSpec &spec,
                                              const ComputeOrder &order) {
  ScheduleBuild build;
  build.program.numMicrobatches = spec.numMicrobatches;
  MicrobatchSplit split =
      splitMicrobatches(spec.batchSize, spec.numMicrobatches);
  if (!split.error.empty()) {
    build.error = split.error;
    return build;
  }
  if (spec.numStages == 0 || spec.boundaries.size() + 1 != spec.numStages ||
      spec.stageInputs.size() != spec.numStages) {
    build.error = "the pipeline description is inconsistent: expected one "
                  "boundary between adjacent stages and the inputs of each";
    return build;
  }
  ActionIndex index;
  build.error = checkOrder(order, spec.numStages, spec.numMicrobatches, index);
  if (build.error.empty())
    build.error =
        OrderSimulation(spec, order, index, split.rows, build.program).run();
  if (!build.error.empty())
    build.program.devices.clear();
  return build;
}

Program schedule::buildSchedule(const PipelineSpec &spec, ScheduleKind kind) {
  if (kind == ScheduleKind::GPipe)
    return buildGPipeSchedule(spec);
  ScheduleBuild build = buildFromComputeOrder(
      spec, computeOrderOf(kind, spec.numStages, spec.numMicrobatches));
  assert(build.error.empty() && "built-in compute orders are consistent");
  return std::move(build.program);
}
