//===- ScheduleVerifier.cpp - Proves a bundle's schedule can run ----------===//
//
// Pairing first (so that a lost message is named as such, not as a stall),
// then, under a send window, each send's wait and the window; then a replay
// that runs every device as far as it can, in device order, until all of
// them stop; linear in the number of instructions.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/verify/ScheduleVerifier.h"
#include "gpipe/runtime/verify/ProgramAnalysis.h"

#include <map>
#include <tuple>

using namespace gpipe::runtime;

namespace {

/// A transfer: direction (0 activation, 1 gradient), sender, receiver,
/// micro-batch, channel, and the boundary it crosses (between that stage and
/// the next: devices that run several stages exchange over several).
using TransferKey =
    std::tuple<int, unsigned, unsigned, unsigned, unsigned, unsigned>;

bool isSend(InstrKind kind) {
  return kind == InstrKind::SendActivation || kind == InstrKind::SendGradient;
}
bool isRecv(InstrKind kind) {
  return kind == InstrKind::RecvActivation || kind == InstrKind::RecvGradient;
}
bool isWait(InstrKind kind) {
  return kind == InstrKind::WaitSendActivation ||
         kind == InstrKind::WaitSendGradient;
}

TransferKey keyOf(const Instr &instr, unsigned device) {
  int direction = instr.kind == InstrKind::SendActivation ||
                          instr.kind == InstrKind::RecvActivation ||
                          instr.kind == InstrKind::WaitSendActivation
                      ? 0
                      : 1;
  unsigned boundary = instr.kind == InstrKind::SendActivation ||
                              instr.kind == InstrKind::WaitSendActivation ||
                              instr.kind == InstrKind::RecvGradient
                          ? instr.stage
                          : instr.stage - 1;
  if (isSend(instr.kind) || isWait(instr.kind))
    return {direction,        device,        instr.peer,
            instr.microbatch, instr.channel, boundary};
  return {direction,        instr.peer,    device,
          instr.microbatch, instr.channel, boundary};
}

std::string where(const Bundle &bundle, unsigned device, size_t index) {
  return "device " + std::to_string(device) + ": op #" +
         std::to_string(index) + " (" +
         describeInstruction(bundle.programs[device][index], device) + ")";
}

} // namespace

std::string gpipe::runtime::verifySchedule(const Bundle &bundle,
                                           std::vector<ScheduleStep> *order,
                                           bool rendezvous) {
  const unsigned numDevices = bundle.programs.size();

  // Every transfer is sent once and received once.
  std::map<TransferKey, std::pair<unsigned, size_t>> sends, recvs;
  for (unsigned d = 0; d < numDevices; ++d)
    for (size_t i = 0; i < bundle.programs[d].size(); ++i) {
      const Instr &instr = bundle.programs[d][i];
      if (!isSend(instr.kind) && !isRecv(instr.kind))
        continue;
      auto &side = isSend(instr.kind) ? sends : recvs;
      auto [it, inserted] = side.emplace(keyOf(instr, d), std::make_pair(d, i));
      if (!inserted)
        return where(bundle, d, i) + ": repeats op #" +
               std::to_string(it->second.second);
    }
  for (const auto &[key, at] : recvs)
    if (!sends.count(key))
      return where(bundle, at.first, at.second) + ": device " +
             std::to_string(std::get<1>(key)) + " never sends it";
  for (const auto &[key, at] : sends)
    if (!recvs.count(key))
      return where(bundle, at.first, at.second) + ": device " +
             std::to_string(std::get<2>(key)) + " never receives it";

  // Under a send window: each send waited for once, after it (and so before
  // the optimizer step, which validateBundle has made the last instruction);
  // never more in flight to a peer than the window.
  const unsigned window = bundle.sendWindow;
  for (unsigned d = 0; d < numDevices; ++d) {
    std::map<TransferKey, size_t> inFlight;
    std::map<unsigned, unsigned> toPeer;
    for (size_t i = 0; i < bundle.programs[d].size(); ++i) {
      const Instr &instr = bundle.programs[d][i];
      if (isSend(instr.kind) && window > 0) {
        inFlight[keyOf(instr, d)] = i;
        if (++toPeer[instr.peer] > window)
          return where(bundle, d, i) + ": puts " +
                 std::to_string(toPeer[instr.peer]) + " sends to device " +
                 std::to_string(instr.peer) +
                 " in flight, more than the bundle's send window of " +
                 std::to_string(window);
      }
      if (!isWait(instr.kind))
        continue;
      if (window == 0)
        return where(bundle, d, i) +
               ": waits for a send, but the bundle's sends complete as they "
               "are issued (it has no send_window)";
      auto it = inFlight.find(keyOf(instr, d));
      if (it == inFlight.end())
        return where(bundle, d, i) + ": has no send before it that it has "
                                     "not already waited for";
      inFlight.erase(it);
      --toPeer[instr.peer];
    }
    if (!inFlight.empty())
      return where(bundle, d, inFlight.begin()->second) +
             ": is never waited for: under the bundle's send window of " +
             std::to_string(window) +
             " each send needs a wait_send after it, before the optimizer "
             "step, up to which its buffer is kept";
  }

  // Progress: sends that never block, receives that wait for their send,
  // waits for their receive, the optimizer barrier.
  std::vector<size_t> pc(numDevices, 0);
  std::map<TransferKey, bool> sent, received;
  auto blocked = [&](unsigned d) {
    const std::vector<Instr> &program = bundle.programs[d];
    if (pc[d] >= program.size())
      return true;
    const Instr &instr = program[pc[d]];
    if (isRecv(instr.kind))
      return !sent.count(keyOf(instr, d));
    if (rendezvous && isSend(instr.kind)) {
      // Until the peer is at the receive, which then runs next.
      const std::vector<Instr> &peer = bundle.programs[instr.peer];
      size_t at = pc[instr.peer];
      return at >= peer.size() || !isRecv(peer[at].kind) ||
             keyOf(peer[at], instr.peer) != keyOf(instr, d);
    }
    if (isWait(instr.kind))
      return !received.count(keyOf(instr, d));
    return instr.kind == InstrKind::OptimizerStep;
  };
  if (order)
    order->clear();
  for (;;) {
    bool progress = false;
    for (unsigned d = 0; d < numDevices; ++d)
      while (!blocked(d)) {
        const Instr &instr = bundle.programs[d][pc[d]];
        if (isSend(instr.kind))
          sent[keyOf(instr, d)] = true;
        if (isRecv(instr.kind))
          received[keyOf(instr, d)] = true;
        if (order)
          order->push_back({d, pc[d]});
        ++pc[d];
        progress = true;
      }
    bool allAtBarrier = true, allDone = true;
    for (unsigned d = 0; d < numDevices; ++d) {
      const std::vector<Instr> &program = bundle.programs[d];
      allDone &= pc[d] >= program.size();
      allAtBarrier &= pc[d] >= program.size() ||
                      program[pc[d]].kind == InstrKind::OptimizerStep;
    }
    if (allDone)
      return {};
    if (allAtBarrier) {
      for (unsigned d = 0; d < numDevices; ++d)
        if (pc[d] < bundle.programs[d].size()) {
          if (order)
            order->push_back({d, pc[d]});
          ++pc[d];
        }
      continue;
    }
    if (!progress) {
      std::string who;
      for (unsigned d = 0; d < numDevices; ++d)
        if (pc[d] < bundle.programs[d].size())
          who += (who.empty() ? "" : "; ") + std::string("device ") +
                 std::to_string(d) + " waits at op #" +
                 std::to_string(pc[d]) + " (" +
                 describeInstruction(bundle.programs[d][pc[d]], d) + ")";
      return "the schedule cannot go on: " + who;
    }
  }
}
