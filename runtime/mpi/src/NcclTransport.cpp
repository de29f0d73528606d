//===- NcclTransport.cpp - Pipeline transfers between GPUs of ranks -------===//

#include "gpipe/mpi/NcclTransport.h"

#include "MpiProcessGroup.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <map>
#include <utility>
#include <vector>

using namespace gpipe;
using namespace gpipe::mpi;
using namespace gpipe::runtime::device;

namespace {

class NcclTransport final : public GroupTransport {
public:
  NcclTransport(DeviceBackend &backend, int rank, int size, unsigned replicas,
                MpiTransportOptions options)
      : GroupTransport(rank, size, replicas, options), backend(backend) {}

  ~NcclTransport() override {
    for (ncclComm_t comm : {pipeline, replicaGroup})
      if (comm)
        (void)(aborted ? ncclCommAbort(comm) : ncclCommDestroy(comm));
  }

  /// The communicators of this rank's pipeline and of its device's
  /// replicas, on the device's GPU: "" or why not. Collective.
  std::string init() {
    const int gpu = backend.nativeDevice(group.device());
    if (cudaError_t err = cudaSetDevice(gpu); err != cudaSuccess)
      return group.who() + "cudaSetDevice(" + std::to_string(gpu) +
             "): " + cudaGetErrorString(err);
    std::string error = communicator(group.pipeline(), group.devices(),
                                     group.device(), pipeline);
    if (error.empty() && group.replicas() > 1)
      error = communicator(group.replicaGroup(), group.replicas(),
                           group.replica(), replicaGroup);
    return error;
  }

  std::string describe() const override {
    return group.describe() + ", NCCL between GPUs";
  }

  // Every NCCL transfer of the device runs on its copy stream, in program
  // order: NCCL does not promise that two of its operations progress
  // concurrently, and one stream keeps them in the order whose rendezvous
  // the executor proves. Compute goes on beside a send until its wait.
  bool sendsAwaitTheirReceive() const override { return true; }

  std::string send(StreamId stream, const TransferKey &key, const void *source,
                   int64_t bytes) override {
    std::string error = postSend(stream, key, source, bytes);
    if (!error.empty())
      return error;
    if (grouping) {
      groupSends.back().second = true; // awaited at the group's end
      return {};
    }
    return waitSend(stream, key);
  }

  std::string postSend(StreamId stream, const TransferKey &key,
                       const void *source, int64_t bytes) override {
    const StreamId transfers = afterCompute(stream, key.from);
    sent += bytes;
    std::string error =
        check(ncclSend(source, size_t(bytes), ncclUint8, int(key.to), pipeline,
                       cudaStream(transfers)),
              "ncclSend to device " + std::to_string(key.to), key);
    if (!error.empty())
      return error;
    if (grouping)
      groupSends.push_back({key, false}); // launched at the group's end
    else
      posted[key] = backend.recordEvent(transfers);
    return {};
  }

  std::string waitSend(StreamId stream, const TransferKey &key) override {
    auto it = posted.find(key);
    if (it == posted.end())
      return group.who() + "waits for a send to device " +
             std::to_string(key.to) + " that was not posted (channel " +
             std::to_string(key.channel) + ", micro-batch " +
             std::to_string(key.microbatch) + ")";
    backend.waitEvent(stream, it->second);
    posted.erase(it);
    return {};
  }

  std::string beginSendGroup(unsigned, unsigned peer) override {
    std::string error = check(ncclGroupStart(),
                              "ncclGroupStart of the sends to device " +
                                  std::to_string(peer));
    grouping = error.empty();
    return error;
  }

  // The group's kernel is launched here, so its event is recorded here; a
  // plain send of it (no window) makes compute wait for it now.
  std::string endSendGroup(unsigned device, unsigned peer) override {
    grouping = false;
    std::string error =
        check(ncclGroupEnd(),
              "ncclGroupEnd of the sends to device " + std::to_string(peer));
    const EventId done = backend.recordEvent(backend.copyStream(device));
    bool awaitedNow = false;
    for (const auto &[key, plain] : groupSends) {
      awaitedNow |= plain;
      if (!plain)
        posted[key] = done;
    }
    if (awaitedNow)
      backend.waitEvent(backend.computeStream(device), done);
    groupSends.clear();
    return error;
  }

  std::string recv(StreamId stream, const TransferKey &key, void *destination,
                   int64_t bytes) override {
    const StreamId transfers = afterCompute(stream, key.to);
    std::string error =
        check(ncclRecv(destination, size_t(bytes), ncclUint8, int(key.from),
                       pipeline, cudaStream(transfers)),
              "ncclRecv from device " + std::to_string(key.from), key);
    if (error.empty())
      backend.waitEvent(stream, backend.recordEvent(transfers));
    return error;
  }

  std::string averageOverReplicas(StreamId stream, unsigned, float *data,
                                  int64_t count,
                                  const std::string &name) override {
    if (group.replicas() == 1)
      return {};
    ncclResult_t result =
        ncclAllReduce(data, data, size_t(count), ncclFloat, ncclAvg,
                      replicaGroup, cudaStream(stream));
    if (result == ncclSuccess)
      return {};
    return group.who() + "ncclAllReduce of " + name + " in " + group.pass() +
           ": " + ncclGetErrorString(result);
  }

  std::string abandon() override {
    if (aborted)
      return {};
    aborted = true;
    std::string why;
    for (ncclComm_t comm : {pipeline, replicaGroup}) {
      ncclResult_t async = ncclSuccess;
      if (comm && ncclCommGetAsyncError(comm, &async) == ncclSuccess &&
          async != ncclSuccess && why.empty())
        why = std::string(": ") + ncclGetErrorString(async);
      if (comm)
        (void)ncclCommAbort(comm);
    }
    pipeline = replicaGroup = nullptr;
    return group.who() + "aborted its NCCL communicators in " + group.pass() +
           " (a peer has failed or stalled" + why + ")";
  }

private:
  /// `device`'s copy stream, which from now on runs after the work queued
  /// so far on `compute` (what a send reads, what last used a receive's
  /// buffer).
  StreamId afterCompute(StreamId compute, unsigned device) {
    const StreamId transfers = backend.copyStream(device);
    backend.waitEvent(transfers, backend.recordEvent(compute));
    return transfers;
  }

  cudaStream_t cudaStream(StreamId s) {
    return static_cast<cudaStream_t>(backend.nativeStream(s));
  }

  /// One NCCL communicator over the MPI communicator `comm` of `members`
  /// ranks, this one at `index`: the first rank's unique id, broadcast.
  std::string communicator(MPI_Comm comm, unsigned members, unsigned index,
                           ncclComm_t &out) {
    ncclUniqueId id;
    if (index == 0)
      if (ncclResult_t result = ncclGetUniqueId(&id); result != ncclSuccess)
        return group.who() + "ncclGetUniqueId: " + ncclGetErrorString(result);
    MPI_Request request;
    int code = MPI_Ibcast(&id, sizeof id, MPI_BYTE, 0, comm, &request);
    std::string error =
        group.wait(code, request, "broadcast of the NCCL id", "another rank");
    if (!error.empty())
      return error;
    ncclResult_t result = ncclCommInitRank(&out, int(members), id, int(index));
    if (result != ncclSuccess)
      return group.who() + "ncclCommInitRank: " + ncclGetErrorString(result);
    return {};
  }

  std::string check(ncclResult_t result, const std::string &what,
                    const TransferKey &key) {
    return check(result, what + " (channel " + std::to_string(key.channel) +
                             ", micro-batch " + std::to_string(key.microbatch) +
                             ")");
  }
  std::string check(ncclResult_t result, const std::string &what) {
    if (result == ncclSuccess)
      return {};
    return group.who() + what + " in " + group.pass() + ": " +
           ncclGetErrorString(result);
  }

  DeviceBackend &backend;
  ncclComm_t pipeline = nullptr, replicaGroup = nullptr;
  bool aborted = false;
  /// Posted sends, by the event that ends each on the copy stream.
  std::map<TransferKey, EventId> posted;
  /// Between beginSendGroup and endSendGroup: the sends issued so far, and
  /// whether each is a plain send (awaited at the group's end).
  bool grouping = false;
  std::vector<std::pair<TransferKey, bool>> groupSends;
};

} // namespace

TransportFactory gpipe::mpi::ncclTransport(const MpiSession &session,
                                           MpiTransportOptions options) {
  const int rank = session.rank(), size = session.size();
  return [=](DeviceBackend &backend,
             std::unique_ptr<Transport> &transport) -> std::string {
    if (!backend.nativeStream(backend.computeStream(0)))
      return "the NCCL transport runs GPU devices (--device cuda), not " +
             backend.describe() + "; CPU devices use the MPI transport";
    std::string error =
        checkJobSize(size, options.replicas, backend.numDevices());
    if (!error.empty())
      return error;
    auto nccl = std::make_unique<NcclTransport>(backend, rank, size,
                                                options.replicas, options);
    error = nccl->init();
    if (!error.empty())
      return error;
    transport = std::move(nccl);
    return {};
  };
}
