//===- MpiSession.cpp - This process's place in an MPI job ----------------===//

#include "gpipe/mpi/MpiSession.h"

#include <mpi.h>

#include <cstdlib>
#include <string>

using namespace gpipe;
using namespace gpipe::mpi;

bool MpiSession::launchedByMpi() {
  // Open MPI's mpirun, PMIx launchers (srun --mpi=pmix) and PMI-1/2 ones.
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(name))
      return true;
  return false;
}

runtime::StatusOr<std::unique_ptr<MpiSession>> MpiSession::start() {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) !=
      MPI_SUCCESS)
    return runtime::Status(runtime::StatusCode::Unavailable,
                           "MPI_Init_thread failed");
  // Transfers report their errors (with the peer and the micro-batch)
  // instead of MPI aborting the job on the first one.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::unique_ptr<MpiSession> session(new MpiSession(rank, size));
  if (provided < MPI_THREAD_SERIALIZED) {
    session->finish(0);
    return runtime::Status(
        runtime::StatusCode::Unavailable,
        "this MPI library gives thread level " + std::to_string(provided) +
            "; gpipe needs MPI_THREAD_SERIALIZED (" +
            std::to_string(MPI_THREAD_SERIALIZED) + ") or more");
  }
  return session;
}

int MpiSession::finish(int exitStatus) {
  if (finished)
    return exitStatus;
  finished = true;
  if (exitStatus != 0)
    MPI_Abort(MPI_COMM_WORLD, exitStatus);
  MPI_Finalize();
  return exitStatus;
}

// Leaving without finish is leaving on an error path: abort, so that no other
// rank waits for this one in a collective.
MpiSession::~MpiSession() { finish(1); }
