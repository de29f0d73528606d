//===- MpiTransport.cpp - Pipeline transfers between MPI ranks ------------===//

#include "gpipe/mpi/MpiTransport.h"

#include "gpipe/runtime/device/HostWork.h"

#include <mpi.h>

#include <climits>
#include <stdexcept>
#include <thread>

using namespace gpipe;
using namespace gpipe::mpi;
using namespace gpipe::runtime::device;

namespace {

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, length);
}

/// Channels per (direction, micro-batch) in a tag.
constexpr unsigned kTagChannels = 256;
/// The largest message of one MPI call (its count is an int).
constexpr int64_t kMaxMessage = int64_t(1) << 30;

class MpiTransport final : public Transport {
public:
  MpiTransport(HostStreamBackend &backend, int rank, int size,
               MpiTransportOptions options)
      : backend(backend), rank(rank), size(size), options(options) {
    int *upperBound = nullptr, found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &upperBound, &found);
    tagLimit = found && upperBound ? *upperBound : 32767; // MPI's minimum
  }

  std::string describe() const override {
    return "MPI: rank " + std::to_string(rank) + " of " + std::to_string(size) +
           " runs device " + std::to_string(rank);
  }
  bool spansProcesses() const override { return size > 1; }
  bool runsDevice(unsigned device) const override {
    return device == unsigned(rank);
  }
  bool leads() const override { return rank == 0; }
  int64_t stagingBytes(unsigned) const override { return 0; }
  void beginPass(const std::string &name) override { pass = name; }

  std::string send(StreamId stream, const TransferKey &key, const void *source,
                   int64_t bytes) override {
    return post(stream, key, const_cast<void *>(source), bytes, true);
  }
  std::string recv(StreamId stream, const TransferKey &key, void *destination,
                   int64_t bytes) override {
    return post(stream, key, destination, bytes, false);
  }

  std::string shareFrom(unsigned device, void *data, int64_t bytes,
                        const std::string &name) override {
    const int root = int(device);
    std::string what = "broadcast of " + name + " of device " +
                       std::to_string(device) +
                       (root == rank ? " to the other ranks"
                                     : " from rank " + std::to_string(root)) +
                       " after " + pass;
    for (int64_t at = 0; at < bytes; at += kMaxMessage) {
      int count = int(std::min(kMaxMessage, bytes - at));
      MPI_Request request;
      int code = MPI_Ibcast(static_cast<char *>(data) + at, count, MPI_BYTE,
                            int(device), MPI_COMM_WORLD, &request);
      std::string error =
          wait(code, request, what,
               root == rank ? "another rank" : "rank " + std::to_string(root));
      if (!error.empty())
        return error;
    }
    return {};
  }

private:
  /// Queues the message of `key` on `stream`: a send to key.to or a receive
  /// from key.from, then the wait for it.
  std::string post(StreamId stream, const TransferKey &key, void *data,
                   int64_t bytes, bool sending) {
    const int peer = int(sending ? key.to : key.from);
    if (peer >= size)
      return "device " + std::to_string(peer) +
             " has no MPI rank (the job has " + std::to_string(size) + ")";
    if (key.channel >= kTagChannels)
      return "channel " + std::to_string(key.channel) +
             " is past the MPI transport's " + std::to_string(kTagChannels);
    int64_t tag = (int64_t(key.microbatch) * kTagChannels + key.channel) * 2 +
                  key.direction;
    if (tag > tagLimit)
      return "micro-batch " + std::to_string(key.microbatch) +
             " needs MPI tag " + std::to_string(tag) + ", past this MPI's " +
             std::to_string(tagLimit);
    if (bytes > INT_MAX)
      return "a transfer of " + std::to_string(bytes) +
             " bytes is past one MPI message's " + std::to_string(INT_MAX);
    std::string what = std::string(sending ? "send" : "recv") + " of the " +
                       (key.direction == 0 ? "activation" : "gradient") +
                       " (channel " + std::to_string(key.channel) +
                       ", micro-batch " + std::to_string(key.microbatch) +
                       ") " + (sending ? "to" : "from") + " rank " +
                       std::to_string(peer) + " in " + pass;
    backend.runInStreamOrder(stream, [=] {
      MPI_Request request;
      int code = sending ? MPI_Isend(data, int(bytes), MPI_BYTE, peer, int(tag),
                                     MPI_COMM_WORLD, &request)
                         : MPI_Irecv(data, int(bytes), MPI_BYTE, peer, int(tag),
                                     MPI_COMM_WORLD, &request);
      std::string error =
          wait(code, request, what, "rank " + std::to_string(peer));
      if (!error.empty())
        throw std::runtime_error(error);
    });
    return {};
  }

  /// Waits for `request` (posted with `code`) to complete: "" or why not,
  /// naming this rank, `what` and the `peer` waited for.
  std::string wait(int code, MPI_Request &request, const std::string &what,
                   const std::string &peer) {
    const std::string who = "rank " + std::to_string(rank) + ": ";
    if (code != MPI_SUCCESS)
      return who + what + " failed: " + mpiErrorText(code);
    const auto start = std::chrono::steady_clock::now();
    // Spin first: a hand-off between pipeline neighbours is microseconds.
    for (int64_t polls = 0;; ++polls) {
      int done = 0;
      code = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (code != MPI_SUCCESS)
        return who + what + " failed: " + mpiErrorText(code);
      if (done)
        return {};
      if (options.stop && options.stop->load() != 0)
        return who + "stopped by signal " +
               std::to_string(options.stop->load()) + " while waiting: " + what;
      if (polls < 4096)
        continue;
      if (std::chrono::steady_clock::now() - start > options.peerTimeout)
        return who + what + " did not complete within " +
               std::to_string(options.peerTimeout.count()) + " ms: " + peer +
               " has failed or stalled (peer timeout)";
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  HostStreamBackend &backend;
  const int rank, size;
  const MpiTransportOptions options;
  int64_t tagLimit = 32767;
  std::string pass = "the first step";
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
    if (backend.numDevices() != unsigned(size))
      return "the MPI job has " + std::to_string(size) +
             " processes, but the pipeline has " +
             std::to_string(backend.numDevices()) +
             " devices: start one process per device (mpirun -np " +
             std::to_string(backend.numDevices()) + ")";
    transport = std::make_unique<MpiTransport>(*host, rank, size, options);
    return {};
  };
}
