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
//   - Under a send window (Bundle::sendWindow) the executor calls
//     `postSend` instead of `send`: the transport may read the sent buffer
//     until `waitSend` of the same transfer, which the compiler placed where
//     the plan lets the buffer go. A transport that copies or completes at
//     the send keeps the defaults (a `send`, and nothing to wait for).
//   - Consecutive sends of one device to one peer (a boundary's channels)
//     are issued between `beginSendGroup` and `endSendGroup`, so that a
//     transport may make them one operation.
// Implementations:
//   - in-process (createInProcessTransport): the sender copies into a
//     staging buffer the transport owns (one per transfer, on the receiving
//     device, reused every step), and the receiver copies it out after the
//     copy's event; the schedule's proof orders every send before its
//     receive. A posted send copies on the sender's copy stream, after the
//     compute stream's work so far, so compute goes on meanwhile; its
//     wait_send makes the compute stream wait for the copy;
//   - MPI (runtime/mpi, MpiTransport.h): one process per pipeline device;
//     the transfers are host work in stream order. A posted send hands MPI
//     the value's own buffer and the stream goes on; its wait_send awaits
//     it. A send without a window copies the value to a staging buffer of
//     its transfer and posts that, awaited at the step's end
//     (completeSends). A receive waits for its message, at most the peer
//     timeout;
//   - NCCL (runtime/mpi, NcclTransport.h): ncclSend/ncclRecv, every one of
//     them on the device's copy stream in program order, ordered against
//     compute by events. A send holds the copy stream until its peer
//     receives (rendezvous, which the executor proves the schedule under
//     too), while compute goes on to the send's wait; a receive makes
//     compute wait for it. A send group is one ncclGroupStart/End.
// A transport across processes also says which devices this process runs
// (the executor issues only theirs) and shares the host results that only
// one process has (the losses, an evaluation's outputs, a parameter).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_TRANSPORT_H
#define GPIPE_RUNTIME_DEVICE_TRANSPORT_H

#include "gpipe/runtime/backends/DeviceBackend.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace gpipe::runtime::device {

/// One transfer of a step: direction (0: activation, 1: gradient), sender,
/// receiver, micro-batch, channel and the stage boundary it crosses
/// (between stage `boundary` and the next: devices that run several stages
/// exchange over several).
struct TransferKey {
  int direction = 0;
  unsigned from = 0, to = 0, microbatch = 0, channel = 0, boundary = 0;
  bool operator<(const TransferKey &other) const;
};

class Transport {
public:
  virtual ~Transport() = default;
  virtual std::string describe() const = 0;
  /// "" or an error (e.g. staging memory that cannot be allocated).
  virtual std::string send(StreamId senderStream, const TransferKey &key,
                           const void *source, int64_t bytes) = 0;
  /// Under a send window: as `send`, but the transport may go on reading
  /// `source` until `waitSend(key)` is issued on the sender's stream.
  virtual std::string postSend(StreamId senderStream, const TransferKey &key,
                               const void *source, int64_t bytes) {
    return send(senderStream, key, source, bytes);
  }
  /// In the sender stream's order: later work on it may overwrite the
  /// buffer `postSend(key)` read. "" or an error at issue.
  virtual std::string waitSend(StreamId senderStream, const TransferKey &key) {
    (void)senderStream, (void)key;
    return {};
  }
  /// Around a run of sends (`send` or `postSend`) of `device` to `peer`
  /// with nothing of that device's between them; other devices' work may be
  /// issued in between. "" or an error at issue.
  virtual std::string beginSendGroup(unsigned device, unsigned peer) {
    (void)device, (void)peer;
    return {};
  }
  virtual std::string endSendGroup(unsigned device, unsigned peer) {
    (void)device, (void)peer;
    return {};
  }
  /// The send of `key` has been issued before (in-process) or is posted by
  /// the peer (across processes).
  virtual std::string recv(StreamId receiverStream, const TransferKey &key,
                           void *destination, int64_t bytes) = 0;
  /// Whether a send holds its sender until the peer has received it
  /// (rendezvous): the executor then also proves the schedule under those
  /// semantics.
  virtual bool sendsAwaitTheirReceive() const { return false; }
  /// Bytes of memory the transport holds on `device` (staging).
  virtual int64_t stagingBytes(unsigned device) const = 0;
  /// Bytes of the sends this process has issued so far (activations and
  /// gradients between devices; not the replicas' gradient means).
  virtual int64_t bytesSent() const = 0;

  /// Whether the devices run in more than one process.
  virtual bool spansProcesses() const { return false; }
  /// Whether this process runs pipeline device `device`: in one process,
  /// every device.
  virtual bool runsDevice(unsigned device) const {
    (void)device;
    return true;
  }
  /// Whether this process prints and writes files (MPI: rank 0 only).
  virtual bool leads() const { return true; }
  /// Host-blocking, with no stream work pending: copies `bytes` at `data` in
  /// the process that runs `device` to `data` in every other process. Every
  /// process calls it, in the same order. `what` names the data in errors
  /// ("the losses"). "" or an error.
  virtual std::string shareFrom(unsigned device, void *data, int64_t bytes,
                                const std::string &what) {
    (void)device, (void)data, (void)bytes, (void)what;
    return {};
  }
  /// What the transfers that follow belong to ("step 3"), for messages.
  virtual void beginPass(const std::string &name) { (void)name; }
  /// Host-blocking, once the streams have finished a pass's work: waits
  /// until every message this process sent has completed (a transport whose
  /// sends complete in the background), at most the peer timeout. "" or an
  /// error naming the send and the peer.
  virtual std::string completeSends() { return {}; }
  /// After a step whose synchronize failed: stops what the transport still
  /// has in flight (NCCL: aborts its communicators, whose kernels would spin
  /// for a dead peer) and says so, or "" when there is nothing to stop.
  virtual std::string abandon() { return {}; }

  /// Data parallelism: R replicas of the whole pipeline, each training on
  /// its slice of the mini-batch; this process belongs to replica
  /// `replica()`. One replica: nothing to reduce.
  virtual unsigned replicas() const { return 1; }
  virtual unsigned replica() const { return 0; }
  /// In `stream`'s order on `device`: replaces the `count` floats at `data`
  /// by their mean over the replicas (the gradients before the optimizer
  /// step). "" or an error at issue.
  virtual std::string averageOverReplicas(StreamId stream, unsigned device,
                                          float *data, int64_t count,
                                          const std::string &what) {
    (void)stream, (void)device, (void)data, (void)count, (void)what;
    return {};
  }
  /// The same on the host, blocking, with no stream work pending (the
  /// losses); every process calls it, in the same order.
  virtual std::string averageOverReplicasNow(float *data, int64_t count,
                                             const std::string &what) {
    (void)data, (void)count, (void)what;
    return {};
  }
};

/// Makes the transport of an executor over `backend` (which outlives it):
/// "" and `transport`, or an error (a backend the transport cannot drive).
using TransportFactory = std::function<std::string(
    DeviceBackend &backend, std::unique_ptr<Transport> &transport)>;

/// The transport of K pipeline devices in one process, over `backend` (which
/// must outlive it).
std::unique_ptr<Transport> createInProcessTransport(DeviceBackend &backend);

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_TRANSPORT_H
