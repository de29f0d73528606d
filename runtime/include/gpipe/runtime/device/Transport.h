//===- Transport.h - Boundary tensors between pipeline devices --*- C++ -*-===//
//
// How the device executor moves activations forward and gradients back.
// Both calls are stream-ordered, like kernels:
//   - `send` queues, on the sender's compute stream, everything that reads
//     the sent buffer; once it returns, later work on that stream may reuse
//     the buffer. So the memory plan can free a sent value at its send.
//   - `recv` queues, on the receiver's compute stream, the writes into a
//     buffer the receiver allocated at the receive. So the plan allocates a
//     received value at its receive, as it does a loaded one.
// Implementations:
//   - in-process (createInProcessTransport): the sender copies into a
//     staging buffer the transport owns (one per transfer, on the receiving
//     device, reused every step), and the receiver copies it out after the
//     sender's event; the schedule's proof orders every send before its
//     receive;
//   - NCCL (grouped ncclSend/ncclRecv, rendezvous in stream order) and MPI
//     for one process per device come next (issue 15).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_TRANSPORT_H
#define GPIPE_RUNTIME_DEVICE_TRANSPORT_H

#include "gpipe/runtime/device/DeviceBackend.h"

#include <cstdint>
#include <memory>
#include <string>

namespace gpipe::runtime::device {

/// One transfer of a step: direction (0: activation, 1: gradient), sender,
/// receiver, micro-batch and channel.
struct TransferKey {
  int direction = 0;
  unsigned from = 0, to = 0, microbatch = 0, channel = 0;
  bool operator<(const TransferKey &other) const;
};

class Transport {
public:
  virtual ~Transport() = default;
  virtual std::string describe() const = 0;
  /// "" or an error (e.g. staging memory that cannot be allocated).
  virtual std::string send(StreamId senderStream, const TransferKey &key,
                           const void *source, int64_t bytes) = 0;
  /// The send of `key` has been issued before (in-process) or is posted by
  /// the peer (across processes).
  virtual std::string recv(StreamId receiverStream, const TransferKey &key,
                           void *destination, int64_t bytes) = 0;
  /// Bytes of memory the transport holds on `device` (staging).
  virtual int64_t stagingBytes(unsigned device) const = 0;
};

/// The transport of K pipeline devices in one process, over `backend` (which
/// must outlive it).
std::unique_ptr<Transport> createInProcessTransport(DeviceBackend &backend);

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_TRANSPORT_H
