//===- MpiTransport.cpp - Pipeline transfers between MPI ranks ------------===//
//
// Host-stream backends (CpuBackend): every transfer and gradient mean is
// host work in stream order over MpiProcessGroup's communicators.
//
//===----------------------------------------------------------------------===//

#include "gpipe/mpi/MpiTransport.h"

#include "MpiProcessGroup.h"
#include "gpipe/runtime/backends/HostWork.h"

#include <climits>
#include <cstring>
#include <map>
#include <stdexcept>
#include <vector>

using namespace gpipe;
using namespace gpipe::mpi;
using namespace gpipe::runtime::device;

namespace {

/// Channels per (direction, micro-batch) in a tag.
constexpr unsigned kTagChannels = 256;

class MpiTransport final : public GroupTransport {
public:
  MpiTransport(HostStreamBackend &backend, int rank, int size,
               unsigned replicas, MpiTransportOptions options)
      : GroupTransport(rank, size, replicas, options), backend(backend) {
    int *upperBound = nullptr, found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &upperBound, &found);
    tagLimit = found && upperBound ? *upperBound : 32767; // MPI's minimum
  }

  std::string describe() const override { return group.describe(); }

  ~MpiTransport() override {
    // Only after a failed step can a send still be in flight. MPI may still
    // read its buffer, so a staging buffer is left allocated (the job is
    // ending; a posted send's buffer is the arena's).
    for (auto &[key, slot] : staged)
      if (slot.request != MPI_REQUEST_NULL) {
        MPI_Request_free(&slot.request);
        new std::vector<char>(std::move(slot.buffer));
      }
  }

  // A send without a send window: the value is copied to this transfer's
  // staging buffer and posted, and the stream goes on computing. The copy
  // lets the memory plan reuse the value at once, as it does; the message
  // completes in the background and is awaited before the staging buffer is
  // overwritten (the same transfer next step) and at the step's end
  // (completeSends).
  std::string send(StreamId stream, const TransferKey &key, const void *source,
                   int64_t bytes) override {
    return post(stream, key, source, bytes, /*copy=*/true);
  }

  // A send under a send window: MPI reads the value's own buffer, which the
  // memory plan keeps until the compiler's wait_send for it (waitSend).
  std::string postSend(StreamId stream, const TransferKey &key,
                       const void *source, int64_t bytes) override {
    return post(stream, key, source, bytes, /*copy=*/false);
  }

  std::string waitSend(StreamId stream, const TransferKey &key) override {
    auto it = staged.find(key);
    if (it == staged.end())
      return "waits for a send that was never posted";
    StagedSend *slot = &it->second;
    backend.runInStreamOrder(stream, [=] {
      if (slot->request == MPI_REQUEST_NULL)
        return;
      std::string error =
          group.wait(MPI_SUCCESS, slot->request, slot->what, slot->peer);
      if (!error.empty())
        throw std::runtime_error(error);
    });
    return {};
  }

  // A receive: its message is posted and waited for in stream order.
  std::string recv(StreamId stream, const TransferKey &key, void *destination,
                   int64_t bytes) override {
    Message message;
    if (std::string error = prepare(key, bytes, false, message); !error.empty())
      return error;
    backend.runInStreamOrder(stream, [=] {
      MPI_Request request;
      int code = MPI_Irecv(destination, int(bytes), MPI_BYTE,
                           message.peerDevice, message.tag, group.pipeline(),
                           &request);
      std::string error =
          group.wait(code, request, message.what, message.peer);
      if (!error.empty())
        throw std::runtime_error(error);
    });
    return {};
  }

  int64_t stagingBytes(unsigned device) const override {
    if (device != group.device())
      return 0;
    int64_t bytes = 0;
    for (const auto &[key, slot] : staged)
      bytes += int64_t(slot.buffer.size());
    return bytes;
  }

  std::string completeSends() override {
    for (auto &[key, slot] : staged)
      if (slot.request != MPI_REQUEST_NULL) {
        std::string error =
            group.wait(MPI_SUCCESS, slot.request, slot.what, slot.peer);
        if (!error.empty())
          return error;
      }
    return {};
  }

  std::string averageOverReplicas(StreamId stream, unsigned, float *data,
                                  int64_t count,
                                  const std::string &name) override {
    if (group.replicas() == 1)
      return {};
    std::string what = "all-reduce of " + name + " over the " +
                       std::to_string(group.replicas()) + " replicas in " +
                       group.pass();
    backend.runInStreamOrder(stream, [=] {
      std::string error = group.average(data, count, what);
      if (!error.empty())
        throw std::runtime_error(error);
    });
    return {};
  }

private:
  /// A transfer's message: its peer, its tag, and its names in errors.
  struct Message {
    int peerDevice = 0, tag = 0;
    std::string what, peer;
  };

  /// In `stream`'s order: awaits the transfer's message still in flight (the
  /// staging buffer's last, or a failed step's), then posts `bytes` at
  /// `source`, or at a staging copy of them.
  std::string post(StreamId stream, const TransferKey &key, const void *source,
                   int64_t bytes, bool copy) {
    Message message;
    if (std::string error = prepare(key, bytes, true, message); !error.empty())
      return error;
    sent += bytes;
    StagedSend *slot = &staged[key];
    backend.runInStreamOrder(stream, [=] {
      std::string error;
      if (slot->request != MPI_REQUEST_NULL)
        error = group.wait(MPI_SUCCESS, slot->request, slot->what, slot->peer);
      if (error.empty()) {
        const void *data = source;
        if (copy) {
          slot->buffer.resize(size_t(bytes));
          std::memcpy(slot->buffer.data(), source, size_t(bytes));
          data = slot->buffer.data();
        }
        slot->what = message.what;
        slot->peer = message.peer;
        int code = MPI_Isend(data, int(bytes), MPI_BYTE, message.peerDevice,
                             message.tag, group.pipeline(), &slot->request);
        if (code != MPI_SUCCESS)
          error = group.who() + message.what + " failed: " + mpiErrorText(code);
      }
      if (!error.empty())
        throw std::runtime_error(error);
    });
    return {};
  }

  /// The message of `key` (a send to key.to or a receive from key.from), or
  /// why it cannot be one.
  std::string prepare(const TransferKey &key, int64_t bytes, bool sending,
                      Message &message) const {
    const unsigned peerDevice = sending ? key.to : key.from;
    if (peerDevice >= group.devices())
      return "device " + std::to_string(peerDevice) +
             " has no MPI rank (the pipeline has " +
             std::to_string(group.devices()) + ")";
    if (key.channel >= kTagChannels)
      return "channel " + std::to_string(key.channel) +
             " is past the MPI transport's " + std::to_string(kTagChannels);
    // Devices that run several stages (interleaving) exchange the same
    // micro-batch and channel over several boundaries under one tag: MPI
    // matches such messages in the order they are posted, and both ends post
    // them in the order of the stages, as every schedule that can run must
    // (the later boundary's message depends on the earlier one's).
    int64_t tag = (int64_t(key.microbatch) * kTagChannels + key.channel) * 2 +
                  key.direction;
    if (tag > tagLimit)
      return "micro-batch " + std::to_string(key.microbatch) +
             " needs MPI tag " + std::to_string(tag) + ", past this MPI's " +
             std::to_string(tagLimit);
    if (bytes > INT_MAX)
      return "a transfer of " + std::to_string(bytes) +
             " bytes is past one MPI message's " + std::to_string(INT_MAX);
    message.peerDevice = int(peerDevice);
    message.tag = int(tag);
    message.peer = "rank " + std::to_string(group.rankOf(peerDevice));
    message.what = std::string(sending ? "send" : "recv") + " of the " +
                   (key.direction == 0 ? "activation" : "gradient") +
                   " (channel " + std::to_string(key.channel) +
                   ", micro-batch " + std::to_string(key.microbatch) + ") " +
                   (sending ? "to " : "from ") + message.peer + " in " +
                   group.pass();
    return {};
  }

  /// A transfer's message in flight, if any, and the staging buffer it
  /// reads (empty for a posted send, which reads the value's own).
  struct StagedSend {
    std::vector<char> buffer;
    MPI_Request request = MPI_REQUEST_NULL;
    std::string what, peer;
  };

  HostStreamBackend &backend;
  int64_t tagLimit = 32767;
  /// By transfer; std::map: a slot stays where it is while others are made.
  std::map<TransferKey, StagedSend> staged;
};

} // namespace

TransportFactory gpipe::mpi::mpiTransport(const MpiSession &session,
                                          MpiTransportOptions options) {
  const int rank = session.rank(), size = session.size();
  return [=](DeviceBackend &backend,
             std::unique_ptr<Transport> &transport) -> std::string {
    auto *host = dynamic_cast<HostStreamBackend *>(&backend);
    if (!host)
      return "the MPI transport runs CPU devices (--device cpu), not " +
             backend.describe() + "; GPUs need the NCCL transport";
    std::string error =
        checkJobSize(size, options.replicas, backend.numDevices());
    if (!error.empty())
      return error;
    transport = std::make_unique<MpiTransport>(*host, rank, size,
                                               options.replicas, options);
    return {};
  };
}
