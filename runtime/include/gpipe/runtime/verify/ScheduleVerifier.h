//===- ScheduleVerifier.h - Proves a bundle's schedule can run --*- C++ -*-===//
//
// The runtime's proof, at load, that the per-device programs of a bundle
// cannot hang: every transfer is sent once and received once, and under the
// runtime's channel semantics the programs run to their end. The semantics
// (docs/BundleFormat.md): a send never blocks, a receive waits for its send,
// a wait_send (under a send window) waits for the receive of its send, and
// the optimizer step is a barrier that every device passes together. Under
// a send window each send also needs its wait, and no point of a program
// may have more sends to one peer in flight than the window. Executors
// replay the interleaving it finds.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SCHEDULEVERIFIER_H
#define GPIPE_RUNTIME_SCHEDULEVERIFIER_H

#include "gpipe/runtime/bundle/Bundle.h"

#include <cstddef>
#include <string>
#include <vector>

namespace gpipe::runtime {

/// One instruction of the whole schedule: `device`'s instruction `index`.
struct ScheduleStep {
  unsigned device = 0;
  size_t index = 0;
};

/// Checks the transfers and the progress of `bundle.programs` (whose
/// instructions validateBundle has checked one by one). Returns "" and, if
/// `order` is given, an interleaving of every instruction in which each
/// receive follows its send, each wait its receive, and the optimizer steps
/// come last; or the first
/// problem:
///   "device 0: op #9 (recv gradient from device 1, micro-batch 1, channel
///    0): device 1 never sends it"
///   "the schedule cannot go on: device 0 waits at op #3 (...); device 1
///    waits at op #2 (...)"
/// With `rendezvous`, a send also waits until its peer has reached the
/// receive (a transport whose sends hold the sender until received).
std::string verifySchedule(const Bundle &bundle,
                           std::vector<ScheduleStep> *order = nullptr,
                           bool rendezvous = false);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_SCHEDULEVERIFIER_H
