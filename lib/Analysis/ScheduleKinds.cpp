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
  case ScheduleKind::Interleaved:
    return "interleaved";
  }
  return "unknown";
}

bool schedule::splitsBackward(ScheduleKind kind) {
  return kind == ScheduleKind::ZeroBubbleH1;
}

std::optional<ScheduleKind> schedule::parseScheduleKind(std::string_view name) {
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZeroBubbleH1,
        ScheduleKind::Interleaved})
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

/// Interleaved 1F1B on device d (Megatron-LM's order): micro-batches go in
/// groups of K, each group through the device's stages 0..V-1 forward and
/// V-1..0 backward. Device d runs 2(K-d-1) + (V-1)K forwards before its first
/// backward: enough for the first group to travel down every stage and for
/// its gradient to come back, after which one forward and one backward
/// alternate. When K does not divide M, the order is that of the next
/// multiple of K with the missing micro-batches left out: taking steps out of
/// an order that cannot deadlock leaves one that cannot either (every wait
/// that remains was there before), where a short last group would shift the
/// alternation and deadlock.
static std::vector<ComputeStep> interleavedOrder(unsigned numDevices,
                                                 unsigned numMicrobatches,
                                                 unsigned numVirtualStages,
                                                 unsigned d) {
  const unsigned padded =
      (numMicrobatches + numDevices - 1) / numDevices * numDevices;
  std::vector<ComputeStep> forwards, backwards;
  for (unsigned group = 0; group < padded; group += numDevices)
    for (unsigned v = 0; v < numVirtualStages; ++v)
      for (unsigned m = group; m < group + numDevices; ++m) {
        forwards.push_back({InstrKind::Forward, m, v});
        backwards.push_back({InstrKind::Backward, m, numVirtualStages - 1 - v});
      }
  const std::size_t total = forwards.size();
  std::size_t warmup = std::min<std::size_t>(
      2 * (numDevices - d - 1) + (numVirtualStages - 1) * numDevices, total);
  std::vector<ComputeStep> steps;
  auto add = [&](const ComputeStep &step) {
    if (step.microbatch < numMicrobatches)
      steps.push_back(step);
  };
  for (std::size_t i = 0; i < warmup; ++i)
    add(forwards[i]);
  for (std::size_t i = 0; i < total; ++i) {
    if (warmup + i < total)
      add(forwards[warmup + i]);
    add(backwards[i]);
  }
  return steps;
}

ComputeOrder schedule::computeOrderOf(ScheduleKind kind, unsigned numDevices,
                                      unsigned numMicrobatches,
                                      unsigned numVirtualStages) {
  if (kind == ScheduleKind::Interleaved && numVirtualStages > 1) {
    ComputeOrder order(numDevices);
    for (unsigned d = 0; d < numDevices; ++d)
      order[d] =
          interleavedOrder(numDevices, numMicrobatches, numVirtualStages, d);
    return order;
  }
  const unsigned numStages = numDevices;
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
    case ScheduleKind::Interleaved: // one stage per device: 1F1B
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

/// Where each device runs each of its stages' forwards and backwards.
struct ActionIndex {
  unsigned numMicrobatches = 0;
  /// [device][v * M + m]: the action index of the forward / backward / W of
  /// micro-batch m in the device's stage v.
  std::vector<std::vector<std::size_t>> forward, backward, weights;
  /// [device]: whether it splits its backwards (runs any W).
  std::vector<bool> splits;

  std::size_t &at(unsigned device, const ComputeStep &step) {
    return slots(step.kind)[device][step.virtualStage * numMicrobatches +
                                    step.microbatch];
  }
  std::size_t at(unsigned device, const ComputeStep &step) const {
    return const_cast<ActionIndex *>(this)->at(device, step);
  }
  std::vector<std::vector<std::size_t>> &slots(InstrKind kind) {
    return kind == InstrKind::Forward    ? forward
           : kind == InstrKind::Backward ? backward
                                         : weights;
  }
};

/// Names a step with its stage when devices run more than one.
class StepNames {
public:
  StepNames(unsigned numDevices, unsigned numVirtualStages)
      : numDevices(numDevices), numVirtualStages(numVirtualStages) {}

  std::string step(unsigned device, const ComputeStep &step) const {
    std::string text = describe(step);
    if (numVirtualStages > 1)
      text += " in stage " +
              std::to_string(device + step.virtualStage * numDevices);
    return text;
  }
  std::string action(unsigned device, std::size_t index,
                     const ComputeStep &step) const {
    return "device " + std::to_string(device) + " action #" +
           std::to_string(index) + " (" + this->step(device, step) + ")";
  }

private:
  unsigned numDevices, numVirtualStages;
};

/// Every forward and backward once per device and stage, each backward
/// after its forward; fills `index` and returns "" or the first problem.
std::string checkOrder(const ComputeOrder &order, const PipelineSpec &spec,
                       const StepNames &names, ActionIndex &index) {
  const unsigned numDevices = spec.numDevices(),
                 numLocal = spec.numVirtualStages,
                 numMicrobatches = spec.numMicrobatches;
  if (order.size() != numDevices) {
    std::string message = "the schedule has " + std::to_string(order.size()) +
                          " device(s), expected " + std::to_string(numDevices) +
                          (numLocal == 1 ? " (one per stage)" : "");
    // A file for fewer devices than stages: they may be meant to interleave.
    if (numLocal == 1 && order.size() >= 2 && order.size() < numDevices &&
        numDevices % order.size() == 0)
      message +=
          ", or virtual-stages=" + std::to_string(numDevices / order.size()) +
          " for " + std::to_string(order.size()) + " devices running " +
          std::to_string(numDevices / order.size()) + " stages each";
    return message;
  }
  index.numMicrobatches = numMicrobatches;
  index.forward.assign(numDevices, std::vector<std::size_t>(
                                       numLocal * numMicrobatches, kNoAction));
  index.backward = index.forward;
  index.weights = index.forward;
  index.splits.assign(numDevices, false);
  for (unsigned d = 0; d < numDevices; ++d) {
    for (std::size_t i = 0; i < order[d].size(); ++i) {
      const ComputeStep &step = order[d][i];
      if (!isCompute(step.kind))
        return "device " + std::to_string(d) + " action #" + std::to_string(i) +
               " is neither a forward nor a backward";
      if (step.microbatch >= numMicrobatches)
        return names.action(d, i, step) +
               " names a micro-batch out of range: " + "the schedule has " +
               std::to_string(numMicrobatches) + " micro-batch(es)";
      if (step.virtualStage >= numLocal)
        return names.action(d, i, step) + " names virtual stage " +
               std::to_string(step.virtualStage) + ", but each device runs " +
               std::to_string(numLocal);
      std::size_t &slot = index.at(d, step);
      if (step.kind == InstrKind::BackwardWeights)
        index.splits[d] = true;
      if (slot != kNoAction)
        return names.action(d, i, step) + " repeats action #" +
               std::to_string(slot) + ": each runs once per micro-batch";
      slot = i;
    }
    for (unsigned v = 0; v < numLocal; ++v)
      for (unsigned m = 0; m < numMicrobatches; ++m) {
        for (InstrKind kind : {InstrKind::Forward, InstrKind::Backward})
          if (index.at(d, {kind, m, v}) == kNoAction)
            return "device " + std::to_string(d) + " never runs the " +
                   names.step(d, ComputeStep{kind, m, v});
        std::size_t forward = index.at(d, {InstrKind::Forward, m, v}),
                    backward = index.at(d, {InstrKind::Backward, m, v});
        if (backward < forward)
          return names.action(d, backward, {InstrKind::Backward, m, v}) +
                 " runs before its forward (action #" +
                 std::to_string(forward) + ")";
        if (!index.splits[d])
          continue;
        ComputeStep w{InstrKind::BackwardWeights, m, v};
        std::size_t weights = index.at(d, w);
        if (weights == kNoAction)
          return "device " + std::to_string(d) + " never runs the " +
                 names.step(d, w) +
                 " (it splits its backwards, so each needs one)";
        if (weights < backward)
          return names.action(d, weights, w) +
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
                  const ActionIndex &index, const StepNames &names,
                  const std::vector<int64_t> &rows, Program &program)
      : spec(spec), order(order), index(index), names(names),
        numDevices(spec.numDevices()), numStages(spec.numStages),
        next(numDevices, 0), busy(numDevices, false),
        activationIn(numStages, std::vector<char>(spec.numMicrobatches, 0)),
        gradientIn(activationIn) {
    program.numVirtualStages = spec.numVirtualStages;
    program.devices.resize(numDevices);
    for (unsigned d = 0; d < numDevices; ++d) {
      program.devices[d].device = d;
      builders.emplace_back(program.devices[d], rows);
    }
  }

  /// "" when every device ran its order; otherwise the wait cycle.
  std::string run() {
    for (unsigned d = 0; d < numDevices; ++d)
      tryStart(d, 0);
    while (!events.empty()) {
      Event event = events.top();
      events.pop();
      finish(event.device, event.time);
    }
    for (unsigned d = 0; d < numDevices; ++d)
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

  unsigned stageOf(unsigned d, const ComputeStep &step) const {
    return d + step.virtualStage * numDevices;
  }
  unsigned deviceOf(unsigned stage) const {
    return deviceOfStage(stage, numDevices);
  }
  /// The step of the adjacent stage that `step` on device `d` waits for,
  /// with its device, if any.
  std::optional<std::pair<unsigned, ComputeStep>>
  producerOf(unsigned d, const ComputeStep &step) const {
    unsigned s = stageOf(d, step), m = step.microbatch;
    unsigned producer;
    if (step.kind == InstrKind::Forward) {
      if (s == 0 || activationIn[s][m])
        return std::nullopt;
      producer = s - 1;
    } else if (step.kind == InstrKind::Backward) {
      if (s + 1 == numStages || gradientIn[s][m])
        return std::nullopt;
      producer = s + 1;
    } else {
      return std::nullopt; // its backward ran earlier on this device
    }
    return std::make_pair(deviceOf(producer),
                          ComputeStep{step.kind, m, producer / numDevices});
  }

  void tryStart(unsigned d, double now) {
    if (busy[d] || next[d] == order[d].size())
      return;
    const ComputeStep &step = order[d][next[d]];
    if (producerOf(d, step))
      return;
    unsigned s = stageOf(d, step);
    if (step.kind == InstrKind::Forward)
      for (const std::string &name : spec.stageInputs[s])
        builders[d].addLoad(name, s, step.microbatch);
    builders[d].addCompute(step.kind, s, step.microbatch);
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
    unsigned m = step.microbatch, s = stageOf(d, step);
    if (step.kind == InstrKind::Forward && s + 1 < numStages) {
      unsigned to = deviceOf(s + 1);
      builders[d].addTransfers(InstrKind::Send, Direction::Activation, s, to,
                               spec.boundaries[s], m);
      builders[to].addTransfers(InstrKind::Recv, Direction::Activation, s + 1,
                                d, spec.boundaries[s], m);
      activationIn[s + 1][m] = 1;
      tryStart(to, now);
    }
    if (step.kind == InstrKind::Backward && s > 0) {
      unsigned to = deviceOf(s - 1);
      builders[d].addTransfers(InstrKind::Send, Direction::Gradient, s, to,
                               spec.boundaries[s - 1], m);
      builders[to].addTransfers(InstrKind::Recv, Direction::Gradient, s - 1, d,
                                spec.boundaries[s - 1], m);
      gradientIn[s - 1][m] = 1;
      tryStart(to, now);
    }
    tryStart(d, now);
  }

  /// Follows who waits for whom from device `start` (which is stuck) until a
  /// device repeats, and names that cycle.
  std::string describeDeadlock(unsigned start) const {
    std::vector<unsigned> path;
    std::vector<std::size_t> seenAt(numDevices, kNoAction);
    unsigned d = start;
    while (seenAt[d] == kNoAction) {
      seenAt[d] = path.size();
      path.push_back(d);
      // A stuck device is idle at a step whose input has not arrived, and
      // its producer is stuck before producing it.
      d = producerOf(d, order[d][next[d]])->first;
    }
    std::string message = "the schedule deadlocks: ";
    for (std::size_t i = seenAt[d]; i < path.size(); ++i) {
      unsigned waiter = path[i];
      const ComputeStep &step = order[waiter][next[waiter]];
      auto [producer, awaited] = *producerOf(waiter, step);
      if (i != seenAt[d])
        message += "; ";
      message += names.action(waiter, next[waiter], step) +
                 " waits for device " + std::to_string(producer) + "'s " +
                 names.step(producer, awaited) + " (its action #" +
                 std::to_string(index.at(producer, awaited)) + ")";
    }
    return message;
  }

  const PipelineSpec &spec;
  const ComputeOrder &order;
  const ActionIndex &index;
  const StepNames &names;
  unsigned numDevices, numStages;
  std::vector<ProgramBuilder> builders;
  std::vector<std::size_t> next; ///< per device: its next step
  std::vector<bool> busy;
  /// [stage][m]: whether the activation (gradient) of m has arrived.
  std::vector<std::vector<char>> activationIn, gradientIn;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  unsigned long sequence = 0;
};
} // namespace

std::string schedule::checkVirtualStages(ScheduleKind kind, unsigned numStages,
                                         unsigned numVirtualStages) {
  if (numVirtualStages == 0)
    return "the number of virtual stages must be at least 1";
  if (numVirtualStages == 1)
    return "";
  if (kind != ScheduleKind::Interleaved)
    return std::string("the ") + scheduleKindName(kind) +
           " schedule runs one stage per device, got " +
           std::to_string(numVirtualStages) +
           " virtual stages (only the interleaved schedule runs more)";
  if (numStages % numVirtualStages != 0)
    return std::to_string(numStages) + " stages cannot be split into " +
           std::to_string(numVirtualStages) +
           " virtual stages per device: " + std::to_string(numVirtualStages) +
           " must divide the stages";
  if (numStages / numVirtualStages < 2)
    return "interleaving needs at least 2 devices, got " +
           std::to_string(numStages / numVirtualStages) + " for " +
           std::to_string(numStages) + " stages in " +
           std::to_string(numVirtualStages) + " virtual stages";
  return "";
}

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
  if (spec.numVirtualStages > 1) {
    build.error = checkVirtualStages(ScheduleKind::Interleaved, spec.numStages,
                                     spec.numVirtualStages);
    if (!build.error.empty())
      return build;
  }
  ActionIndex index;
  StepNames names(spec.numDevices(), spec.numVirtualStages);
  build.error = checkOrder(order, spec, names, index);
  if (build.error.empty())
    build.error =
        OrderSimulation(spec, order, index, names, split.rows, build.program)
            .run();
  if (!build.error.empty())
    build.program.devices.clear();
  return build;
}

Program schedule::buildSchedule(const PipelineSpec &spec, ScheduleKind kind) {
  if (kind == ScheduleKind::GPipe)
    return buildGPipeSchedule(spec);
  ScheduleBuild build = buildFromComputeOrder(
      spec, computeOrderOf(kind, spec.numDevices(), spec.numMicrobatches,
                           spec.numVirtualStages));
  assert(build.error.empty() && "built-in compute orders are consistent");
  return std::move(build.program);
}
