//===- MpiProcessGroup.h - The ranks of a job, and host collectives -*- C++
//-*-===//
//
// Private to runtime/mpi. An MPI job as R replicas of a K-device pipeline,
// rank = replica * K + device (replica-major: one pipeline's devices are
// consecutive ranks, one node each with a by-node hostfile), split into two
// communicators: a replica's pipeline (rank = device) and a device's
// replicas (rank = replica). It holds what every MPI-based transport does on
// the host: waiting for a request with a deadline, broadcasting within the
// pipeline, averaging over the replicas, and the messages that name who
// waited for whom.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_MPI_SRC_MPIPROCESSGROUP_H
#define GPIPE_MPI_SRC_MPIPROCESSGROUP_H

#include "gpipe/mpi/MpiTransport.h"

#include <mpi.h>

#include <cstdint>
#include <string>

namespace gpipe::mpi {

class MpiProcessGroup {
public:
  /// Collective over MPI_COMM_WORLD (it splits it); size = replicas * K.
  MpiProcessGroup(int rank, int size, unsigned replicas,
                  MpiTransportOptions options);
  ~MpiProcessGroup();
  MpiProcessGroup(const MpiProcessGroup &) = delete;
  MpiProcessGroup &operator=(const MpiProcessGroup &) = delete;

  int rank() const { return worldRank; }
  int size() const { return worldSize; }
  unsigned devices() const { return pipelineDevices; }
  unsigned replicas() const { return replicaCount; }
  unsigned device() const { return unsigned(worldRank) % pipelineDevices; }
  unsigned replica() const { return unsigned(worldRank) / pipelineDevices; }
  /// The world rank of device `d` of this replica.
  int rankOf(unsigned d) const { return int(replica() * pipelineDevices + d); }
  MPI_Comm pipeline() const { return pipelineComm; }
  MPI_Comm replicaGroup() const { return replicaComm; }
  const MpiTransportOptions &options() const { return transportOptions; }

  /// "MPI: rank 3 of 4 runs device 1 of replica 1".
  std::string describe() const;
  /// "rank 3 (replica 1, device 1): ", the start of every message.
  std::string who() const;
  /// What the operations that follow belong to ("step 3").
  void beginPass(const std::string &name) { passName = name; }
  const std::string &pass() const { return passName; }

  /// Waits for `request` (posted with `code`) to complete, at most the peer
  /// timeout: "" or why not, naming this rank, `what` and the `peer` waited
  /// for. A stop signal ends the wait at once.
  std::string wait(int code, MPI_Request &request, const std::string &what,
                   const std::string &peer) const;
  /// Transport::shareFrom over the pipeline communicator.
  std::string broadcast(unsigned device, void *data, int64_t bytes,
                        const std::string &name) const;
  /// The mean over the replicas, the same bits in each: a sum at replica 0
  /// in a fixed order, then its broadcast (an all-reduce may round
  /// differently on different ranks, and the replicas would drift apart).
  std::string average(float *data, int64_t count,
                      const std::string &what) const;

private:
  const int worldRank, worldSize;
  const unsigned pipelineDevices, replicaCount;
  const MpiTransportOptions transportOptions;
  MPI_Comm pipelineComm = MPI_COMM_NULL, replicaComm = MPI_COMM_NULL;
  std::string passName = "the first step";
};

/// What every transport of an MPI job says the same way: which device this
/// rank runs, who leads, the replicas, and the host-side results (MPI
/// collectives over the group). Subclasses move the device data.
class GroupTransport : public runtime::device::Transport {
public:
  GroupTransport(int rank, int size, unsigned replicas,
                 MpiTransportOptions options)
      : group(rank, size, replicas, options) {}

  bool spansProcesses() const override { return group.size() > 1; }
  bool runsDevice(unsigned d) const override { return d == group.device(); }
  bool leads() const override { return group.rank() == 0; }
  int64_t stagingBytes(unsigned) const override { return 0; }
  int64_t bytesSent() const override { return sent; }
  void beginPass(const std::string &name) override { group.beginPass(name); }
  unsigned replicas() const override { return group.replicas(); }
  unsigned replica() const override { return group.replica(); }
  std::string shareFrom(unsigned d, void *data, int64_t bytes,
                        const std::string &name) override {
    return group.broadcast(d, data, bytes, name);
  }
  std::string averageOverReplicasNow(float *data, int64_t count,
                                     const std::string &name) override {
    if (group.replicas() == 1)
      return {};
    return group.average(data, count,
                         "all-reduce of " + name + " over the " +
                             std::to_string(group.replicas()) +
                             " replicas after " + group.pass());
  }

protected:
  MpiProcessGroup group;
  int64_t sent = 0;
};

/// MPI's text for an error code.
std::string mpiErrorText(int code);

/// "" when a job of `size` ranks holds `replicas` copies of a pipeline of
/// `devices` devices, else the refusal.
std::string checkJobSize(int size, unsigned replicas, unsigned devices);

} // namespace gpipe::mpi

#endif // GPIPE_MPI_SRC_MPIPROCESSGROUP_H
