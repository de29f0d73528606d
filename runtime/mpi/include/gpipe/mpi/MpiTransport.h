//===- MpiTransport.h - Pipeline transfers between MPI ranks ----*- C++ -*-===//
//
// The device executor's Transport (transport/Transport.h) for one process per
// pipeline device: rank r of MPI_COMM_WORLD runs device r % K of replica
// r / K (data parallelism: R replicas, R * K ranks), on a backend
// whose streams are host queues (CpuBackend). A send or a receive is host
// work in its stream's order. A send completes in the background: under a
// send window it posts the value's own buffer (MPI_Isend), and the stream
// goes on until the wait_send the compiler placed for it, which the memory
// plan keeps the buffer for; without one, the value is copied to its
// transfer's staging buffer and posted, and awaited before that buffer is
// reused (the same transfer, next step) and at the step's end. A receive
// posts its message and waits for it. The runtime's schedule proof
// (verifySchedule) assumes exactly that, so the programs cannot deadlock;
// a peer that died or stalled ends a wait after the peer timeout
// with a message naming this rank, the peer, the transfer, its micro-batch
// and the step.
//
// The tag of a transfer encodes direction, channel and micro-batch, so
// messages match by meaning, not by arrival order. Before the optimizer
// step, each gradient becomes its mean over the replicas, the same bits in
// every replica.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_MPI_MPITRANSPORT_H
#define GPIPE_MPI_MPITRANSPORT_H

#include "gpipe/mpi/MpiSession.h"
#include "gpipe/runtime/transport/Transport.h"

#include <atomic>
#include <chrono>

namespace gpipe::mpi {

struct MpiTransportOptions {
  /// How long a transfer or a collective waits for its peer.
  std::chrono::milliseconds peerTimeout{60000};
  /// Non-zero (a signal's number): waits end at once, naming what they
  /// waited for. Null: none.
  const std::atomic<int> *stop = nullptr;
  /// Data-parallel replicas R of the pipeline: the job has R * K ranks.
  unsigned replicas = 1;
};

/// The factory of DeviceExecutorConfig::transport / EngineOptions::transport.
/// It refuses a backend without host streams, and a job whose size is not
/// replicas times the pipeline's devices.
runtime::device::TransportFactory mpiTransport(const MpiSession &session,
                                               MpiTransportOptions options);

} // namespace gpipe::mpi

#endif // GPIPE_MPI_MPITRANSPORT_H
