//===- DistributedFlags.h - A training tool's processes ---------*- C++ -*-===//
//
// A training tool started by an MPI launcher (`mpirun -np K gpipe-run ...`)
// runs pipeline device r in rank r (runtime/mpi); started alone, every device
// is a thread of the one process. This header has the --data-parallel and
// --peer-timeout options in their own help category (the second cl::Hidden:
// --help-hidden lists it), and `Processes`, which starts MPI when a launcher
// started the tool, gives the engine its transport, silences the ranks that
// do not lead, and ends MPI with the tool's exit status. Header-only: it
// defines the options, so exactly one source file of a tool includes it.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TOOLS_DISTRIBUTEDFLAGS_H
#define GPIPE_TOOLS_DISTRIBUTEDFLAGS_H

#include "gpipe/Support/OptionParsers.h"
#include "gpipe/runtime/exec/Engine.h"
#ifdef GPIPE_HAVE_MPI
#include "gpipe/mpi/MpiTransport.h"
#endif
#ifdef GPIPE_HAVE_NCCL
#include "gpipe/mpi/NcclTransport.h"
#endif

#include "llvm/Support/CommandLine.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace gpipe::tools {

static llvm::cl::OptionCategory
    distributedCategory("Distributed (one process per device, under mpirun)");
static Real<double> peerTimeout(
    "peer-timeout", llvm::cl::init(60.0),
    llvm::cl::desc("seconds a process waits for a peer's transfer or "
                   "broadcast before it fails, naming the peer"),
    llvm::cl::Hidden, llvm::cl::cat(distributedCategory));
static Count dataParallel(
    "data-parallel", llvm::cl::init(1),
    llvm::cl::desc("data-parallel replicas R of the pipeline, each training "
                   "on 1/R of every mini-batch (mpirun -np R*K)"),
    llvm::cl::cat(distributedCategory));

/// This tool's processes: one, or one per pipeline device under MPI.
class Processes {
public:
  /// Starts MPI when a launcher started this process, and then routes the
  /// engine's transfers through it; `stop` ends a wait on a signal.
  runtime::Status start(runtime::EngineOptions &options,
                        const std::atomic<int> *stop) {
    if (!(peerTimeout > 0.0 && peerTimeout < 1e9))
      return runtime::Status(runtime::StatusCode::InvalidArgument,
                             "--peer-timeout expects a positive number of "
                             "seconds, got " +
                                 std::to_string(double(peerTimeout)));
    if (dataParallel < 1)
      return runtime::Status(runtime::StatusCode::InvalidArgument,
                             "--data-parallel expects at least 1 replica, "
                             "got 0");
    const runtime::Status alone(
        runtime::StatusCode::InvalidArgument,
        "--data-parallel " + std::to_string(unsigned(dataParallel)) +
            " runs one process per device of each replica: start it with "
            "mpirun -np R*K");
#ifdef GPIPE_HAVE_MPI
    if (!mpi::MpiSession::launchedByMpi())
      return dataParallel > 1 ? alone : runtime::Status();
    runtime::StatusOr<std::unique_ptr<mpi::MpiSession>> started =
        mpi::MpiSession::start();
    if (!started.ok())
      return started.status();
    session = std::move(*started);
    mpi::MpiTransportOptions transport;
    transport.peerTimeout =
        std::chrono::milliseconds(int64_t(double(peerTimeout) * 1000.0 + 0.5));
    transport.stop = stop;
    transport.replicas = dataParallel;
    // CPU devices transfer through MPI, GPUs (backends with native streams)
    // through NCCL when it was built.
    runtime::device::TransportFactory cpu =
        mpi::mpiTransport(*session, transport);
#ifdef GPIPE_HAVE_NCCL
    runtime::device::TransportFactory gpu =
        mpi::ncclTransport(*session, transport);
#endif
    options.transport = [=](runtime::device::DeviceBackend &backend,
                            std::unique_ptr<runtime::device::Transport> &made) {
#ifdef GPIPE_HAVE_NCCL
      if (backend.nativeStream(backend.computeStream(0)))
        return gpu(backend, made);
#endif
      return cpu(backend, made);
    };
    if (session->rank() != 0)
      quiet = std::fopen("/dev/null", "w");
    return {};
#else
    (void)options, (void)stop;
    if (dataParallel > 1)
      return alone;
    for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
      if (std::getenv(name))
        return runtime::Status(runtime::StatusCode::Unavailable,
                               "an MPI launcher started this process, but "
                               "this build has no MPI transport (configure "
                               "with an MPI library installed)");
    return {};
#endif
  }

  /// Whether this process prints: the only one, or rank 0.
  bool leads() const { return quiet == nullptr; }
  /// Where this process prints `stream`'s output: it, or nowhere.
  std::FILE *out(std::FILE *stream) const { return quiet ? quiet : stream; }

  /// Ends MPI with the tool's exit status (Mpisession::finish: a failure
  /// aborts the job, so no rank is left waiting) and returns it.
  int finish(int exitStatus) {
#ifdef GPIPE_HAVE_MPI
    if (session)
      exitStatus = session->finish(exitStatus);
#endif
    return exitStatus;
  }

  ~Processes() {
    if (quiet)
      std::fclose(quiet);
  }

private:
#ifdef GPIPE_HAVE_MPI
  std::unique_ptr<mpi::MpiSession> session;
#endif
  std::FILE *quiet = nullptr;
};

} // namespace gpipe::tools

#endif // GPIPE_TOOLS_DISTRIBUTEDFLAGS_H
