//===- ScheduleReplay.cpp - Predicted timeline of a pipeline schedule -----===//

#include "gpipe/Analysis/ScheduleReplay.h"

#include <algorithm>
#include <map>
#include <tuple>

using namespace gpipe::schedule;

namespace {
/// Identifies one transfer: direction, sender, receiver, micro-batch, channel.
using TransferKey = std::tuple<int, unsigned, unsigned, unsigned, unsigned>;
} // namespace

std::optional<ReplayResult>
gpipe::schedule::replaySchedule(
    const Program &program,
    const std::function<double(const Instr &)> &duration) {
  size_t numDevices = program.devices.size();
  std::vector<size_t> next(numDevices, 0);
  std::vector<double> clock(numDevices, 0.0);
  ReplayResult result;
  result.busy.assign(numDevices, 0.0);
  std::map<TransferKey, double> sentAt;
  // Devices blocked on a receive, woken when the matching send is replayed.
  std::map<TransferKey, unsigned> waiting;
  std::vector<unsigned> ready;
  for (unsigned d = 0; d < numDevices; ++d)
    ready.push_back(d);

  while (!ready.empty()) {
    unsigned device = ready.back();
    ready.pop_back();
    const std::vector<Instr> &instrs = program.devices[device].instrs;
    while (next[device] < instrs.size()) {
      const Instr &instr = instrs[next[device]];
      if (instr.kind == InstrKind::Forward ||
          instr.kind == InstrKind::Backward) {
        double time = duration(instr);
        clock[device] += time;
        result.busy[device] += time;
      } else if (instr.kind == InstrKind::Send) {
        TransferKey key{int(instr.direction), device, instr.peer,
                        instr.microbatch, instr.channel};
        sentAt[key] = clock[device];
        auto it = waiting.find(key);
        if (it != waiting.end()) {
          ready.push_back(it->second);
          waiting.erase(it);
        }
      } else if (instr.kind == InstrKind::Recv) {
        TransferKey key{int(instr.direction), instr.peer, device,
                        instr.microbatch, instr.channel};
        auto it = sentAt.find(key);
        if (it == sentAt.end()) {
          waiting[key] = device;
          break;
        }
        clock[device] = std::max(clock[device], it->second);
      }
      ++next[device];
    }
  }
  for (unsigned d = 0; d < numDevices; ++d)
    if (next[d] < program.devices[d].instrs.size())
      return std::nullopt;

  result.makespan = *std::max_element(clock.begin(), clock.end());
  double totalBusy = 0;
  for (double busy : result.busy)
    totalBusy += busy;
  result.bubbleFraction =
      result.makespan > 0 ? 1.0 - totalBusy / (numDevices * result.makespan)
                          : 0.0;
  return result;
}

double gpipe::schedule::balancedBubbleFraction(unsigned numStages,
                                               unsigned numMicrobatches) {
  return double(numStages - 1) / double(numMicrobatches + numStages - 1);
}
