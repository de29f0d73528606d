//===- MpiProcessGroup.cpp - The ranks of a job, and host collectives -----===//

#include "MpiProcessGroup.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

using namespace gpipe::mpi;

/// The largest message of one MPI call (its count is an int).
static constexpr int64_t kMaxMessage = int64_t(1) << 30;

std::string gpipe::mpi::mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, length);
}

/// "rank 1" or "one of ranks 1, 2, 3": whom a collective waits for.
static std::string ranksNamed(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "one of ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::string gpipe::mpi::checkJobSize(int size, unsigned replicas,
                                     unsigned devices) {
  if (replicas != 0 && unsigned(size) == replicas * devices)
    return {};
  return "the MPI job has " + std::to_string(size) + " processes, but " +
         (replicas == 1
              ? "the pipeline has " + std::to_string(devices) + " devices"
              : std::to_string(replicas) + " replicas of a " +
                    std::to_string(devices) + "-device pipeline need " +
                    std::to_string(replicas * devices)) +
         ": start one process per device (mpirun -np " +
         std::to_string(replicas * devices) + ")";
}

MpiProcessGroup::MpiProcessGroup(int rank, int size, unsigned replicas,
                                 MpiTransportOptions options)
    : worldRank(rank), worldSize(size),
      pipelineDevices(unsigned(size) / replicas), replicaCount(replicas),
      transportOptions(options) {
  MPI_Comm_split(MPI_COMM_WORLD, int(replica()), int(device()), &pipelineComm);
  MPI_Comm_split(MPI_COMM_WORLD, int(device()), int(replica()), &replicaComm);
  for (MPI_Comm comm : {pipelineComm, replicaComm})
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
}

MpiProcessGroup::~MpiProcessGroup() {
  MPI_Comm_free(&pipelineComm);
  MPI_Comm_free(&replicaComm);
}

std::string MpiProcessGroup::describe() const {
  return "MPI: rank " + std::to_string(worldRank) + " of " +
         std::to_string(worldSize) + " runs device " +
         std::to_string(device()) +
         (replicaCount > 1 ? " of replica " + std::to_string(replica()) : "");
}

std::string MpiProcessGroup::who() const {
  return "rank " + std::to_string(worldRank) +
         (replicaCount > 1 ? " (replica " + std::to_string(replica()) +
                                 ", device " + std::to_string(device()) + ")"
                           : "") +
         ": ";
}

std::string MpiProcessGroup::wait(int code, MPI_Request &request,
                                  const std::string &what,
                                  const std::string &peer) const {
  if (code != MPI_SUCCESS)
    return who() + what + " failed: " + mpiErrorText(code);
  const auto start = std::chrono::steady_clock::now();
  const std::atomic<int> *stop = transportOptions.stop;
  // Spin first: a hand-off between pipeline neighbours is microseconds.
  for (int64_t polls = 0;; ++polls) {
    int done = 0;
    code = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS)
      return who() + what + " failed: " + mpiErrorText(code);
    if (done)
      return {};
    if (stop && stop->load() != 0)
      return who() + "stopped by signal " + std::to_string(stop->load()) +
             " while waiting: " + what;
    if (polls < 4096)
      continue;
    if (std::chrono::steady_clock::now() - start > transportOptions.peerTimeout)
      return who() + what + " did not complete within " +
             std::to_string(transportOptions.peerTimeout.count()) +
             " ms: " + peer + " has failed or stalled (peer timeout)";
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::string MpiProcessGroup::broadcast(unsigned d, void *data, int64_t bytes,
                                       const std::string &name) const {
  const std::string what =
      "broadcast of " + name + " of device " + std::to_string(d) +
      (d == device() ? " to the other devices"
                     : " from rank " + std::to_string(rankOf(d))) +
      " after " + passName;
  std::vector<int> others;
  for (unsigned other = 0; other < pipelineDevices; ++other)
    if (other != device())
      others.push_back(rankOf(other));
  const std::string peer =
      d == device() ? ranksNamed(others) : "rank " + std::to_string(rankOf(d));
  for (int64_t at = 0; at < bytes; at += kMaxMessage) {
    MPI_Request request;
    int code = MPI_Ibcast(static_cast<char *>(data) + at,
                          int(std::min(kMaxMessage, bytes - at)), MPI_BYTE,
                          int(d), pipelineComm, &request);
    std::string error = wait(code, request, what, peer);
    if (!error.empty())
      return error;
  }
  return {};
}

std::string MpiProcessGroup::average(float *data, int64_t count,
                                     const std::string &what) const {
  const int64_t chunk = kMaxMessage / 4;
  const bool root = replica() == 0;
  std::vector<int> others;
  for (unsigned r = 0; r < replicaCount; ++r)
    if (r != replica())
      others.push_back(int(r * pipelineDevices + device()));
  const std::string peers = ranksNamed(others);
  for (int64_t at = 0; at < count; at += chunk) {
    int n = int(std::min(chunk, count - at));
    float *part = data + at;
    MPI_Request request;
    int code = MPI_Ireduce(root ? MPI_IN_PLACE : part, root ? part : nullptr, n,
                           MPI_FLOAT, MPI_SUM, 0, replicaComm, &request);
    std::string error = wait(code, request, what, peers);
    if (!error.empty())
      return error;
    if (root)
      for (int i = 0; i < n; ++i)
        part[i] /= float(replicaCount);
    code = MPI_Ibcast(part, n, MPI_FLOAT, 0, replicaComm, &request);
    error = wait(code, request, what, peers);
    if (!error.empty())
      return error;
  }
  return {};
}
