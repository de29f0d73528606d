//===- SendWaits.cpp - Where a device waits for its sends -----------------===//
//
// Sends that complete in the background need a point where the sender knows
// its value has gone: the WaitSend the compiler places, and up to which the
// memory plan keeps the sent buffer. Placing it as late as the window allows
// lets the device compute on while its peer takes the message.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/PipelineSchedule.h"

#include <algorithm>
#include <cassert>
#include <deque>
#include <map>

using namespace gpipe::schedule;

static Instr waitFor(const Instr &send) {
  Instr wait = send;
  wait.kind = InstrKind::WaitSend;
  wait.shape.clear();
  wait.elementType.clear();
  return wait;
}

void gpipe::schedule::placeSendWaits(Program &program, unsigned window) {
  assert(window >= 1 && "a send window holds at least one send");
  program.sendWindow = window;
  for (DeviceProgram &device : program.devices) {
    std::vector<Instr> placed;
    placed.reserve(device.instrs.size() * 3 / 2);
    // Per peer, oldest first: the index in `placed` of each send in flight.
    std::map<unsigned, std::deque<size_t>> inFlight;
    auto drain = [&] {
      // Oldest first over all peers: the order the sends were posted in.
      std::vector<size_t> sends;
      for (auto &[peer, atPeer] : inFlight)
        sends.insert(sends.end(), atPeer.begin(), atPeer.end());
      std::sort(sends.begin(), sends.end());
      for (size_t send : sends)
        placed.push_back(waitFor(placed[send]));
      inFlight.clear();
    };
    for (Instr &instr : device.instrs) {
      if (instr.kind == InstrKind::OptimizerStep)
        drain();
      if (instr.kind == InstrKind::Send) {
        std::deque<size_t> &sends = inFlight[instr.peer];
        if (sends.size() == window) {
          placed.push_back(waitFor(placed[sends.front()]));
          sends.pop_front();
        }
        sends.push_back(placed.size());
      }
      placed.push_back(std::move(instr));
    }
    drain();
    device.instrs = std::move(placed);
  }
}
