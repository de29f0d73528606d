//===- MpiSession.h - This process's place in an MPI job ---------*- C++
//-*-===//
//
// One process per pipeline device: `mpirun -np K gpipe-run ...` starts K
// copies of a tool; each compiles the same program and runs device r =
// its rank (docs/Distributed.md). MpiSession starts MPI in such a process and
// ends it: MPI_Finalize after a success, MPI_Abort after a failure, so that
// the launcher stops the other ranks instead of leaving them waiting.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_MPI_MPISESSION_H
#define GPIPE_MPI_MPISESSION_H

#include "gpipe/runtime/base/Status.h"

#include <memory>

namespace gpipe::mpi {

class MpiSession {
public:
  /// Whether an MPI launcher (mpirun, srun) started this process: its
  /// environment names a rank. A tool run alone starts no MPI.
  static bool launchedByMpi();

  /// MPI_Init_thread; transfers run on a device's worker thread and
  /// collectives on the host thread, never at once, so MPI must give at
  /// least MPI_THREAD_SERIALIZED. Errors are returned, not fatal.
  static runtime::StatusOr<std::unique_ptr<MpiSession>> start();

  ~MpiSession();
  MpiSession(const MpiSession &) = delete;
  MpiSession &operator=(const MpiSession &) = delete;

  int rank() const { return worldRank; }
  int size() const { return worldSize; }

  /// Ends MPI and returns `exitStatus`: MPI_Finalize for 0; otherwise
  /// MPI_Abort with it, which ends every rank of the job. The destructor of
  /// an unfinished session finishes with 1.
  int finish(int exitStatus);

private:
  MpiSession(int rank, int size) : worldRank(rank), worldSize(size) {}
  int worldRank = 0, worldSize = 1;
  bool finished = false;
};

} // namespace gpipe::mpi

#endif // GPIPE_MPI_MPISESSION_H
