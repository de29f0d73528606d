//===- ScheduleSimulator.cpp - Predicted timeline of a step ---------------===//

#include "gpipe/Analysis/ScheduleSimulator.h"
#include "gpipe/runtime/verify/KeptForwardValues.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

using namespace gpipe;
using namespace gpipe::schedule;

double schedule::idealBubbleFraction(unsigned numDevices,
                                     unsigned numMicrobatches,
                                     unsigned numVirtualStages) {
  if (numDevices == 0 || numMicrobatches == 0 || numVirtualStages == 0)
    return 0.0;
  return double(numDevices - 1) /
         double(numVirtualStages * numMicrobatches + numDevices - 1);
}

int64_t schedule::transferBytes(const Instr &instr) {
  int64_t elementBytes = 4;
  const std::string &type = instr.elementType;
  if (type == "f16" || type == "bf16" || type == "i16")
    elementBytes = 2;
  else if (type == "f64" || type == "i64")
    elementBytes = 8;
  else if (type == "i8" || type == "i1")
    elementBytes = 1;
  int64_t bytes = elementBytes;
  for (int64_t dim : instr.shape)
    bytes *= std::max<int64_t>(dim, 0);
  return bytes;
}

/// The runtime timeline's name of an instruction.
static const char *eventName(const Instr &instr) {
  bool activation = instr.direction == Direction::Activation;
  switch (instr.kind) {
  case InstrKind::LoadInput:
    return "load input";
  case InstrKind::Forward:
    return "forward";
  case InstrKind::Backward:
    return "backward";
  case InstrKind::BackwardWeights:
    return "backward weights";
  case InstrKind::Send:
    return activation ? "send activation" : "send gradient";
  case InstrKind::Recv:
    return activation ? "recv activation" : "recv gradient";
  case InstrKind::WaitSend:
    return activation ? "wait send activation" : "wait send gradient";
  case InstrKind::OptimizerStep:
    return "optimizer step";
  }
  return "unknown";
}

/// What the recompute rule (KeptForwardValues.h) needs of an instruction.
static runtime::ComputeRole computeRole(const Instr &instr) {
  runtime::ComputeRole role;
  role.stage = instr.stage;
  role.microbatch = instr.microbatch;
  switch (instr.kind) {
  case InstrKind::Forward:
    role.kind = runtime::ComputeRole::Forward;
    break;
  case InstrKind::Backward:
    role.kind = runtime::ComputeRole::Backward;
    break;
  case InstrKind::BackwardWeights:
  case InstrKind::OptimizerStep:
    role.kind = runtime::ComputeRole::OtherCompute;
    break;
  default:
    break;
  }
  return role;
}

namespace {
/// Direction, sender, receiver, micro-batch, channel, the sender's stage.
using TransferKey =
    std::tuple<int, unsigned, unsigned, unsigned, unsigned, unsigned>;

/// The stage that sends what `instr` (a Send, WaitSend or Recv) carries.
unsigned senderStage(const Instr &instr) {
  if (instr.kind != InstrKind::Recv)
    return instr.stage;
  return instr.direction == Direction::Activation ? instr.stage - 1
                                                  : instr.stage + 1;
}

/// The transfer `instr` (a Send, WaitSend or Recv of `device`) names.
TransferKey transferOf(const Instr &instr, unsigned device) {
  bool received = instr.kind == InstrKind::Recv;
  return {int(instr.direction),    received ? instr.peer : device,
          received ? device : instr.peer, instr.microbatch,
          instr.channel,           senderStage(instr)};
}

/// Simulates the devices in time order. A device's compute stream runs one
/// instruction at a time; with `processors` set, a load, forward, backward
/// or optimizer step also needs one of them, taken first come, first served
/// (devices that share cores, as CPU threads do).
class Simulator {
public:
  Simulator(const Program &program, const SimulationCosts &costs)
      : program(program), costs(costs), devices(program.devices.size()),
        freeProcessors(costs.processors),
        numStages(program.devices.size() *
                  std::max(program.numVirtualStages, 1u)),
        kept(numStages) {
    result.simulation.lanes.resize(program.devices.size());
    runtime::KeptBeyondAdjacent beyond = keptBeyondAdjacentOf(costs.keep);
    for (std::size_t d = 0; d < program.devices.size(); ++d) {
      auto ofDevice = runtime::keptForwardValues(
          program.devices[d].instrs, unsigned(numStages),
          program.numMicrobatches, beyond, computeRole);
      for (std::size_t s = d; s < numStages; s += program.devices.size())
        kept[s] = std::move(ofDevice[s]);
      for (const Instr &instr : program.devices[d].instrs)
        devices[d].splitsBackward |= instr.kind == InstrKind::BackwardWeights;
    }
    for (std::size_t d = 0; d < program.devices.size(); ++d)
      devices[d].recomputesWhileReceiving = runtime::recomputesWhileReceiving(
          program.devices[d].instrs, kept, computeRole, [](const Instr &in) {
            return in.kind == InstrKind::Recv &&
                   in.direction == Direction::Gradient;
          });
  }

  SimulationResult run() {
    const std::size_t numDevices = program.devices.size();
    if (costs.stages.size() != numStages) {
      result.error = "expected the costs of " + std::to_string(numStages) +
                     " stage(s), got " + std::to_string(costs.stages.size());
      return std::move(result);
    }
    for (unsigned d = 0; d < numDevices; ++d)
      for (const Instr &instr : program.devices[d].instrs)
        if (instr.kind != InstrKind::OptimizerStep &&
            instr.stage >= numStages) {
          result.error = "device " + std::to_string(d) + "'s " +
                         describe(instr) + " names stage " +
                         std::to_string(instr.stage) + " of " +
                         std::to_string(numStages);
          return std::move(result);
        }
    for (unsigned d = 0; d < numDevices; ++d)
      advance(d, 0);
    while (!events.empty()) {
      Event event = events.top();
      events.pop();
      DeviceState &device = devices[event.device];
      if (event.finishes) {
        device.busy = false;
        device.readyAt = event.time;
        // A recompute ahead of its gradient leaves the device at the receive.
        if (device.recomputing)
          device.recomputedAhead = true;
        else {
          ++device.next;
          if (program.devices[event.device].instrs[device.next - 1].kind ==
              InstrKind::Backward)
            device.recomputedAhead = false;
        }
        device.recomputing = false;
        if (event.heldProcessor)
          releaseProcessor(event.time);
      }
      advance(event.device, event.time);
    }
    for (unsigned d = 0; d < numDevices; ++d) {
      if (devices[d].next == program.devices[d].instrs.size())
        continue;
      result.error +=
          std::string(result.error.empty() ? "the program cannot finish: "
                                           : "; ") +
          "device " + std::to_string(d) + " waits at op #" +
          std::to_string(devices[d].next) + " (" +
          describe(program.devices[d].instrs[devices[d].next]) + ")";
    }
    if (!result.error.empty())
      return std::move(result);
    summarize();
    return std::move(result);
  }

private:
  struct DeviceState {
    std::size_t next = 0; ///< the instruction the compute stream is at
    bool busy = false;    ///< running it
    bool queued = false;  ///< waiting for a processor
    double readyAt = 0;   ///< when the compute stream reached it
    double copyClock = 0; ///< when the copy stream is free
    bool splitsBackward = false; ///< its Backwards leave W to BackwardWeights
    /// Per instruction: a gradient receive the device waits for after the
    /// next backward's recompute (KeptForwardValues.h), as the runtime does.
    std::vector<char> recomputesWhileReceiving;
    bool recomputing = false;     ///< running such a recompute
    bool recomputedAhead = false; ///< done it: the backward runs without
  };

  struct Event {
    double time;
    unsigned long sequence; ///< ties break in the order of issue
    unsigned device;
    bool finishes;      ///< the device's instruction ends (else: data came)
    bool heldProcessor; ///< it ran on a processor, now free
    bool operator>(const Event &other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };

  void push(double time, unsigned device, bool finishes, bool heldProcessor) {
    events.push({time, sequence++, device, finishes, heldProcessor});
  }

  /// Runs `d` from `now` until it starts an instruction that takes time,
  /// waits for a transfer or a processor, or ends.
  void advance(unsigned d, double now) {
    DeviceState &device = devices[d];
    const std::vector<Instr> &instrs = program.devices[d].instrs;
    while (!device.busy && !device.queued && device.next < instrs.size()) {
      const Instr &instr = instrs[device.next];
      const StageCosts &cost =
          costs
              .stages[instr.kind == InstrKind::OptimizerStep ? d : instr.stage];
      if (instr.kind == InstrKind::Send) {
        // The copy stream starts once the value exists: when the compute
        // stream has reached this point.
        double start = std::max(device.copyClock, now);
        double duration =
            cost.sendFixed + cost.sendPerByte * double(transferBytes(instr));
        device.copyClock = start + duration;
        TransferKey key = transferOf(instr, d);
        double arrives = start + duration + costs.latency;
        arrival[key] = arrives;
        auto waiter = waiting.find(key);
        if (waiter != waiting.end()) {
          push(arrives, waiter->second, /*finishes=*/false, false);
          waiting.erase(waiter);
        }
        record(d, instr, start, duration);
        ++device.next;
        device.readyAt = now;
        continue;
      }
      if (instr.kind == InstrKind::WaitSend) {
        // Until the peer has taken the message (sends complete in the
        // background, each awaited here).
        TransferKey key = transferOf(instr, d);
        auto taken = received.find(key);
        if (taken == received.end()) {
          waitingForReceipt[key] = d;
          return;
        }
        if (taken->second > now) {
          push(taken->second, d, /*finishes=*/false, false);
          return;
        }
        if (taken->second > device.readyAt)
          record(d, instr, device.readyAt, taken->second - device.readyAt);
        ++device.next;
        device.readyAt = now;
        continue;
      }
      const bool recomputeFirst =
          instr.kind == InstrKind::Recv &&
          device.recomputesWhileReceiving[device.next] &&
          !device.recomputedAhead;
      if (instr.kind == InstrKind::Recv && !recomputeFirst) {
        TransferKey key = transferOf(instr, d);
        auto sent = arrival.find(key);
        if (sent == arrival.end()) {
          waiting[key] = d;
          return;
        }
        if (sent->second > now) {
          push(sent->second, d, /*finishes=*/false, false);
          return;
        }
        // The event spans the wait, as the runtime's timeline records it.
        double done = now + cost.recvFixed +
                      cost.recvPerByte * double(transferBytes(instr));
        received[key] = done;
        auto sender = waitingForReceipt.find(key);
        if (sender != waitingForReceipt.end()) {
          push(done, sender->second, /*finishes=*/false, false);
          waitingForReceipt.erase(sender);
        }
        record(d, instr, device.readyAt, done - device.readyAt);
        device.busy = true;
        push(done, d, /*finishes=*/true, false);
        return;
      }
      if (costs.processors > 0 && freeProcessors == 0) {
        device.queued = true;
        processorQueue.push_back(d);
        return;
      }
      start(d, now);
    }
  }

  /// Starts the compute instruction `d` is at, on a processor if they are
  /// counted.
  void start(unsigned d, double now) {
    DeviceState &device = devices[d];
    const Instr &instr = program.devices[d].instrs[device.next];
    bool counted = costs.processors > 0;
    if (counted)
      --freeProcessors;
    device.busy = true;
    if (instr.kind == InstrKind::Recv) {
      // The recompute of the backward after it (advance's recomputeFirst).
      const std::vector<Instr> &instrs = program.devices[d].instrs;
      std::size_t backward = device.next;
      while (instrs[backward].kind != InstrKind::Backward)
        ++backward;
      double duration = recomputeTime(instrs[backward]);
      record(d, instrs[backward], now, duration, "recompute");
      device.recomputing = true;
      push(now + duration, d, /*finishes=*/true, counted);
      return;
    }
    double duration = computeTime(d, instr);
    // A recompute is an event of its own, as in the runtime's timeline.
    double recompute = instr.kind == InstrKind::Backward &&
                               !device.recomputedAhead &&
                               recomputes(instr.stage, instr.microbatch)
                           ? recomputeTime(instr)
                           : 0.0;
    if (recompute > 0)
      record(d, instr, now, recompute, "recompute");
    record(d, instr, now + recompute, duration - recompute);
    push(now + duration, d, /*finishes=*/true, counted);
  }

  double recomputeTime(const Instr &instr) const {
    const StageCosts &cost = costs.stages[instr.stage];
    return cost.forwardFixed + cost.recomputePerRow * double(instr.rows);
  }

  /// A processor is free at `now`: the device that waited longest takes it.
  void releaseProcessor(double now) {
    ++freeProcessors;
    if (processorQueue.empty())
      return;
    unsigned d = processorQueue.front();
    processorQueue.pop_front();
    devices[d].queued = false;
    start(d, now);
  }

  double computeTime(unsigned d, const Instr &instr) const {
    if (instr.kind == InstrKind::OptimizerStep) {
      // The device steps the parameters of all its stages.
      double total = 0;
      for (unsigned s = d; s < numStages; s += program.devices.size())
        total += costs.stages[s].optimizerStep;
      return total;
    }
    const StageCosts &cost = costs.stages[instr.stage];
    double rows = double(instr.rows);
    switch (instr.kind) {
    case InstrKind::LoadInput:
      return cost.loadPerRow * rows;
    case InstrKind::Forward:
      return cost.forwardFixed + cost.forwardPerRow * rows;
    case InstrKind::Backward: {
      double share = devices[d].splitsBackward ? 1.0 - cost.weightShare : 1.0;
      return share * (cost.backwardFixed + cost.backwardPerRow * rows) +
             (recomputes(instr.stage, instr.microbatch) &&
                      !devices[d].recomputedAhead
                  ? recomputeTime(instr)
                  : 0.0);
    }
    case InstrKind::BackwardWeights:
      return cost.weightShare *
             (cost.backwardFixed + cost.backwardPerRow * rows);
    case InstrKind::OptimizerStep:
    case InstrKind::Send:
    case InstrKind::Recv:
    case InstrKind::WaitSend:
      break;
    }
    return 0.0;
  }

  /// As the runtime decides (keptForwardValuesOf).
  bool recomputes(unsigned stage, unsigned microbatch) const {
    return stage >= kept.size() || microbatch >= kept[stage].size() ||
           !kept[stage][microbatch];
  }

  /// `name` overrides the instruction's: a recompute.
  void record(unsigned device, const Instr &instr, double start,
              double duration, const char *name = nullptr) {
    SimulatedEvent event;
    event.name = name ? name : eventName(instr);
    event.compute =
        name || isCompute(instr.kind) || instr.kind == InstrKind::OptimizerStep;
    event.microbatch =
        instr.kind == InstrKind::OptimizerStep ? -1 : int64_t(instr.microbatch);
    event.startUs = start;
    event.durationUs = duration;
    result.simulation.lanes[device].push_back(std::move(event));
  }

  void summarize() {
    Simulation &simulation = result.simulation;
    double first = std::numeric_limits<double>::infinity(), last = 0, busy = 0;
    for (const std::vector<SimulatedEvent> &lane : simulation.lanes)
      for (const SimulatedEvent &event : lane) {
        first = std::min(first, event.startUs);
        last = std::max(last, event.startUs + event.durationUs);
        if (event.compute)
          busy += event.durationUs;
      }
    simulation.makespanUs = last > first ? last - first : 0;
    simulation.stepUs = simulation.makespanUs + costs.stepOverhead;
    std::size_t lanes = simulation.lanes.size();
    simulation.bubbleFraction =
        simulation.makespanUs > 0 && lanes > 0
            ? 1.0 - busy / (double(lanes) * simulation.makespanUs)
            : 0.0;
  }

  const Program &program;
  const SimulationCosts &costs;
  std::vector<DeviceState> devices;
  unsigned freeProcessors;
  std::size_t numStages;
  std::vector<std::vector<char>> kept; ///< [stage][micro-batch]
  std::deque<unsigned> processorQueue;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  unsigned long sequence = 0;
  std::map<TransferKey, double> arrival;
  std::map<TransferKey, unsigned> waiting;
  /// When each transfer's receive completed, and the sender waiting for it.
  std::map<TransferKey, double> received;
  std::map<TransferKey, unsigned> waitingForReceipt;
  SimulationResult result;
};
} // namespace

SimulationResult schedule::simulateSchedule(const Program &program,
                                            const SimulationCosts &costs) {
  return Simulator(program, costs).run();
}
