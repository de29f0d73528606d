//===- MpiTransport.cpp - Pipeline transfers between MPI ranks ------------===//
//
// Ranks are replica-major: rank = replica * K + device, so one pipeline's K
// devices are consecutive ranks (one node each, with a by-node hostfile).
// Two communicators split the world: a replica's pipeline (transfers and its
// broadcasts, where rank = device) and a device's replicas (the gradient
// mean).
//
//===----------------------------------------------------------------------===//

#include "gpipe/mpi/MpiTransport.h"

#include "gpipe/runtime/device/HostWork.h"

#include <mpi.h>

#include <algorithm>
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
               unsigned replicaCount, MpiTransportOptions options)
      : backend(backend), rank(rank), size(size),
        devices(unsigned(size) / replicaCount), replicaCount(replicaCount),
        options(options) {
    int *upperBound = nullptr, found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &upperBound, &found);
    tagLimit = found && upperBound ? *upperBound : 32767; // MPI's minimum
    MPI_Comm_split(MPI_COMM_WORLD, int(replica()), int(device()), &pipeline);
    MPI_Comm_split(MPI_COMM_WORLD, int(device()), int(replica()),
                   &replicaGroup);
    for (MPI_Comm comm : {pipeline, replicaGroup})
      MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  }
  ~MpiTransport() override {
    MPI_Comm_free(&pipeline);
    MPI_Comm_free(&replicaGroup);
  }

  std::string describe() const override {
    return "MPI: rank " + std::to_string(rank) + " of " + std::to_string(size) +
           " runs device " + std::to_string(device()) +
           (replicaCount > 1 ? " of replica " + std::to_string(replica()) : "");
  }
  bool spansProcesses() const override { return size > 1; }
  bool runsDevice(unsigned d) const override { return d == device(); }
  bool leads() const override { return rank == 0; }
  int64_t stagingBytes(unsigned) const override { return 0; }
  int64_t bytesSent() const override { return sent; }
  void beginPass(const std::string &name) override { pass = name; }
  unsigned replicas() const override { return replicaCount; }
  unsigned replica() const override { return unsigned(rank) / devices; }

  std::string send(StreamId stream, const TransferKey &key, const void *source,
                   int64_t bytes) override {
    return post(stream, key, const_cast<void *>(source), bytes, true);
  }
  std::string recv(StreamId stream, const TransferKey &key, void *destination,
                   int64_t bytes) override {
    return post(stream, key, destination, bytes, false);
  }

  std::string shareFrom(unsigned d, void *data, int64_t bytes,
                        const std::string &name) override {
    std::string what =
        "broadcast of " + name + " of device " + std::to_string(d) +
        (d == device() ? " to the other devices"
                       : " from rank " + std::to_string(rankOf(d))) +
        " after " + pass;
    std::string peer =
        d == device() ? "another rank" : "rank " + std::to_string(rankOf(d));
    for (int64_t at = 0; at < bytes; at += kMaxMessage) {
      MPI_Request request;
      int code = MPI_Ibcast(static_cast<char *>(data) + at,
                            int(std::min(kMaxMessage, bytes - at)), MPI_BYTE,
                            int(d), pipeline, &request);
      std::string error = wait(code, request, what, peer);
      if (!error.empty())
        return error;
    }
    return {};
  }

  std::string averageOverReplicas(StreamId stream, unsigned, float *data,
                                  int64_t count,
                                  const std::string &name) override {
    if (replicaCount == 1)
      return {};
    std::string what = "all-reduce of " + name + " over the " +
                       std::to_string(replicaCount) + " replicas in " + pass;
    backend.runInStreamOrder(stream, [=] {
      std::string error = average(data, count, what);
      if (!error.empty())
        throw std::runtime_error(error);
    });
    return {};
  }

  std::string averageOverReplicasNow(float *data, int64_t count,
                                     const std::string &name) override {
    if (replicaCount == 1)
      return {};
    return average(data, count,
                   "all-reduce of " + name + " over the " +
                       std::to_string(replicaCount) + " replicas after " +
                       pass);
  }

private:
  unsigned device() const { return unsigned(rank) % devices; }
  int rankOf(unsigned d) const { return int(replica() * devices + d); }
  std::string who() const {
    return "rank " + std::to_string(rank) +
           (replicaCount > 1 ? " (replica " + std::to_string(replica()) +
                                   ", device " + std::to_string(device()) + ")"
                             : "") +
           ": ";
  }

  /// The mean over the replicas, the same bits in each: a sum at replica 0
  /// in a fixed order, then its broadcast (an all-reduce may round
  /// differently on different ranks, and the replicas would drift apart).
  std::string average(float *data, int64_t count, const std::string &what) {
    const int64_t chunk = kMaxMessage / 4;
    for (int64_t at = 0; at < count; at += chunk) {
      int n = int(std::min(chunk, count - at));
      float *part = data + at;
      MPI_Request request;
      int code = MPI_Ireduce(replica() == 0 ? MPI_IN_PLACE : part,
                             replica() == 0 ? part : nullptr, n, MPI_FLOAT,
                             MPI_SUM, 0, replicaGroup, &request);
      std::string error = wait(code, request, what, "another replica");
      if (!error.empty())
        return error;
      if (replica() == 0)
        for (int i = 0; i < n; ++i)
          part[i] /= float(replicaCount);
      code = MPI_Ibcast(part, n, MPI_FLOAT, 0, replicaGroup, &request);
      error = wait(code, request, what, "another replica");
      if (!error.empty())
        return error;
    }
    return {};
  }

  /// Queues the message of `key` on `stream`: a send to key.to or a receive
  /// from key.from, then the wait for it.
  std::string post(StreamId stream, const TransferKey &key, void *data,
                   int64_t bytes, bool sending) {
    const unsigned peerDevice = sending ? key.to : key.from;
    if (peerDevice >= devices)
      return "device " + std::to_string(peerDevice) +
             " has no MPI rank (the pipeline has " + std::to_string(devices) +
             ")";
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
    if (sending)
      sent += bytes;
    std::string peer = "rank " + std::to_string(rankOf(peerDevice));
    std::string what = std::string(sending ? "send" : "recv") + " of the " +
                       (key.direction == 0 ? "activation" : "gradient") +
                       " (channel " + std::to_string(key.channel) +
                       ", micro-batch " + std::to_string(key.microbatch) +
                       ") " + (sending ? "to " : "from ") + peer + " in " +
                       pass;
    backend.runInStreamOrder(stream, [=] {
      MPI_Request request;
      int code = sending
                     ? MPI_Isend(data, int(bytes), MPI_BYTE, int(peerDevice),
                                 int(tag), pipeline, &request)
                     : MPI_Irecv(data, int(bytes), MPI_BYTE, int(peerDevice),
                                 int(tag), pipeline, &request);
      std::string error = wait(code, request, what, peer);
      if (!error.empty())
        throw std::runtime_error(error);
    });
    return {};
  }

  /// Waits for `request` (posted with `code`) to complete: "" or why not,
  /// naming this rank, `what` and the `peer` waited for.
  std::string wait(int code, MPI_Request &request, const std::string &what,
                   const std::string &peer) {
    if (code != MPI_SUCCESS)
      return who() + what + " failed: " + mpiErrorText(code);
    const auto start = std::chrono::steady_clock::now();
    // Spin first: a hand-off between pipeline neighbours is microseconds.
    for (int64_t polls = 0;; ++polls) {
      int done = 0;
      code = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (code != MPI_SUCCESS)
        return who() + what + " failed: " + mpiErrorText(code);
      if (done)
        return {};
      if (options.stop && options.stop->load() != 0)
        return who() + "stopped by signal " +
               std::to_string(options.stop->load()) + " while waiting: " + what;
      if (polls < 4096)
        continue;
      if (std::chrono::steady_clock::now() - start > options.peerTimeout)
        return who() + what + " did not complete within " +
               std::to_string(options.peerTimeout.count()) + " ms: " + peer +
               " has failed or stalled (peer timeout)";
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  HostStreamBackend &backend;
  const int rank, size;
  const unsigned devices, replicaCount;
  const MpiTransportOptions options;
  MPI_Comm pipeline = MPI_COMM_NULL, replicaGroup = MPI_COMM_NULL;
  int64_t tagLimit = 32767;
  int64_t sent = 0;
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
    const unsigned k = backend.numDevices(), r = options.replicas;
    if (r == 0 || unsigned(size) != r * k)
      return "the MPI job has " + std::to_string(size) + " processes, but " +
             (r == 1
                  ? "the pipeline has " + std::to_string(k) + " devices"
                  : std::to_string(r) + " replicas of a " + std::to_string(k) +
                        "-device pipeline need " + std::to_string(r * k)) +
             ": start one process per device (mpirun -np " +
             std::to_string(r * k) + ")";
    transport = std::make_unique<MpiTransport>(*host, rank, size, r, options);
    return {};
  };
}
