//===- MpiTestMain.h - main() of a GoogleTest binary run by mpirun --------===//
//
// Every rank runs every test; rank 0 alone prints them, and the job fails
// when any rank fails (its exit status aborts the job).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_MPI_TESTS_MPITESTMAIN_H
#define GPIPE_MPI_TESTS_MPITESTMAIN_H

#include "gpipe/mpi/MpiSession.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace gpipe::mpi::testing {

/// Starts MPI, sets `session` for the tests and runs them.
inline int runTestsUnderMpi(int argc, char **argv, MpiSession *&session) {
  ::testing::InitGoogleTest(&argc, argv);
  runtime::StatusOr<std::unique_ptr<MpiSession>> started = MpiSession::start();
  if (!started.ok()) {
    std::fprintf(stderr, "%s\n", started.status().message().c_str());
    return 1;
  }
  session = started->get();
  if (session->rank() != 0) {
    auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return (*started)->finish(RUN_ALL_TESTS());
}

} // namespace gpipe::mpi::testing

#endif // GPIPE_MPI_TESTS_MPITESTMAIN_H
