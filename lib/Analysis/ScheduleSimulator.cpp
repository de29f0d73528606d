//===- ScheduleSimulator.cpp - Predicted timeline of a step ---------------===//

#include "gpipe/Analysis/ScheduleSimulator.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

using namespace gpipe;
using namespace gpipe::schedule;

double schedule::idealBubbleFraction(unsigned numStages,
                                     unsigned numMicrobatches) {
  if (numStages == 0 || numMicrobatches == 0)
    return 0.0;
  return double(numStages - 1) / double(numMicrobatches + numStages - 1);
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
  case InstrKind::Send:
    return activation ? "send activation" : "send gradient";
  case InstrKind::Recv:
    return activation ? "recv activation" : "recv gradient";
  case InstrKind::OptimizerStep:
    return "optimizer step";
  }
  return "unknown";
}

namespace {
/// Direction, sender, receiver, micro-batch, channel.
using TransferKey = std::tuple<int, unsigned, unsigned, unsigned, unsigned>;

class Simulator {
public:
  Simulator(const Program &program, const SimulationCosts &costs)
      : program(program), costs(costs), next(program.devices.size(), 0),
        computeClock(program.devices.size(), 0.0),
        copyClock(program.devices.size(), 0.0),
        lastForward(program.devices.size(), 0) {
    result.simulation.lanes.resize(program.devices.size());
    for (std::size_t d = 0; d < program.devices.size(); ++d)
      for (const Instr &instr : program.devices[d].instrs)
        if (instr.kind == InstrKind::Forward)
          lastForward[d] = instr.microbatch;
  }

  SimulationResult run() {
    const std::size_t numDevices = program.devices.size();
    if (costs.devices.size() != numDevices) {
      result.error = "expected the costs of " + std::to_string(numDevices) +
                     " device(s), got " + std::to_string(costs.devices.size());
      return std::move(result);
    }
    std::vector<unsigned> ready;
    for (unsigned d = numDevices; d-- > 0;)
      ready.push_back(d);
    while (!ready.empty()) {
      unsigned device = ready.back();
      ready.pop_back();
      advance(device, ready);
    }
    for (unsigned d = 0; d < numDevices; ++d) {
      if (next[d] == program.devices[d].instrs.size())
        continue;
      result.error +=
          std::string(result.error.empty() ? "the program cannot finish: "
                                           : "; ") +
          "device " + std::to_string(d) + " waits at op #" +
          std::to_string(next[d]) + " (" +
          describe(program.devices[d].instrs[next[d]]) + ")";
    }
    if (!result.error.empty())
      return std::move(result);
    summarize();
    return std::move(result);
  }

private:
  /// Runs `device` until it finishes or waits for a transfer; wakes the
  /// devices its sends unblock.
  void advance(unsigned device, std::vector<unsigned> &ready) {
    const std::vector<Instr> &instrs = program.devices[device].instrs;
    const DeviceCosts &cost = costs.devices[device];
    double &clock = computeClock[device];
    while (next[device] < instrs.size()) {
      const Instr &instr = instrs[next[device]];
      double start = clock, duration = 0;
      switch (instr.kind) {
      case InstrKind::LoadInput:
        duration = cost.loadPerRow * double(instr.rows);
        break;
      case InstrKind::Forward:
        duration = cost.forwardFixed + cost.forwardPerRow * double(instr.rows);
        break;
      case InstrKind::Backward:
        duration =
            cost.backwardFixed + cost.backwardPerRow * double(instr.rows);
        if (recomputes(device, instr.microbatch))
          duration +=
              cost.forwardFixed + cost.recomputePerRow * double(instr.rows);
        break;
      case InstrKind::OptimizerStep:
        duration = cost.optimizerStep;
        break;
      case InstrKind::Send: {
        // The copy stream starts once the value exists: when the compute
        // stream has reached this point.
        start = std::max(copyClock[device], clock);
        duration =
            cost.sendFixed + cost.sendPerByte * double(transferBytes(instr));
        copyClock[device] = start + duration;
        TransferKey key{int(instr.direction), device, instr.peer,
                        instr.microbatch, instr.channel};
        arrival[key] = start + duration + costs.latency;
        auto waiter = waiting.find(key);
        if (waiter != waiting.end()) {
          ready.push_back(waiter->second);
          waiting.erase(waiter);
        }
        record(device, instr, start, duration);
        ++next[device];
        continue;
      }
      case InstrKind::Recv: {
        TransferKey key{int(instr.direction), instr.peer, device,
                        instr.microbatch, instr.channel};
        auto sent = arrival.find(key);
        if (sent == arrival.end()) {
          waiting[key] = device;
          return;
        }
        // The event spans the wait, as the runtime's timeline records it.
        double done = std::max(clock, sent->second) + cost.recvFixed +
                      cost.recvPerByte * double(transferBytes(instr));
        duration = done - clock;
        break;
      }
      }
      record(device, instr, start, duration);
      clock = start + duration;
      ++next[device];
    }
  }

  /// As the runtime decides (keepsForwardValues): except-last keeps the
  /// micro-batch the device forwards last.
  bool recomputes(unsigned device, unsigned microbatch) const {
    switch (costs.keep) {
    case KeepPolicy::All:
      return false;
    case KeepPolicy::None:
      return true;
    case KeepPolicy::Last:
      break;
    }
    return microbatch != lastForward[device];
  }

  void record(unsigned device, const Instr &instr, double start,
              double duration) {
    SimulatedEvent event;
    event.name = eventName(instr);
    event.compute = instr.kind == InstrKind::Forward ||
                    instr.kind == InstrKind::Backward ||
                    instr.kind == InstrKind::OptimizerStep;
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
  std::vector<std::size_t> next;
  std::vector<double> computeClock, copyClock;
  std::vector<unsigned> lastForward; ///< per device
  std::map<TransferKey, double> arrival;
  std::map<TransferKey, unsigned> waiting;
  SimulationResult result;
};
} // namespace

SimulationResult schedule::simulateSchedule(const Program &program,
                                            const SimulationCosts &costs) {
  return Simulator(program, costs).run();
}
