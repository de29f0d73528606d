//===- MpiStepBench.cpp - One process per device against threads ----------===//
//
//   mpirun -np K gpipe-mpi-bench BUNDLE.json [--steps N] [--rounds R]
//
// Times the training step of a compiled bundle (gpipe-run --bundle) two ways
// in one job, alternating R rounds of N steps so that both see the same
// machine: rank 0 alone with every device a thread (the in-process
// transport, the other ranks asleep), then all K ranks, device r in rank r
// (MPI). Prints the median step time of each and their ratio, and the bytes
// each transport sent per step against the bytes the compiled program's
// stage boundaries carry: the partition's cut values at the full batch,
// forward (activations) and back (their gradients). They must be equal:
// exit status 1 otherwise.
//
//===----------------------------------------------------------------------===//

#include "gpipe/mpi/MpiTransport.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/data/SyntheticBatch.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

using namespace gpipe;
using namespace gpipe::runtime;

namespace {

/// The bytes the stage boundaries carry per step: each stage's outputs
/// forward and its input gradients back, at the full batch (a value without
/// a batch dimension crosses once per micro-batch).
int64_t boundaryBytes(const Bundle &bundle) {
  const int64_t microbatches = int64_t(bundle.microbatchRows.size());
  auto bytesOf = [&](const ValueSpec &spec) {
    int64_t n = 4;
    for (int64_t dim : spec.shape)
      n *= dim;
    return spec.batched ? n : n * microbatches;
  };
  int64_t total = 0;
  for (const StageProgram &stage : bundle.stages) {
    for (int id : stage.outputs)
      total += bytesOf(stage.values[id]);
    for (int id : stage.inputGrads)
      total += bytesOf(stage.values[id]);
  }
  return total;
}

/// Waits for every rank without spinning: the sleeping ranks must leave
/// the cores to rank 0's threads.
void sleepyBarrier() {
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  for (int done = 0; !done;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "gpipe-mpi-bench: error: %s\n", message.c_str());
  return 1;
}

/// Milliseconds per step of `steps` steps.
double timeSteps(device::DeviceExecutor &executor, const Batch &batch,
                 int steps, std::string &error) {
  auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps && error.empty(); ++s)
    error = executor.trainStep(batch).error;
  std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  return elapsed.count() / steps;
}

int run(int argc, char **argv, const mpi::MpiSession &session) {
  std::string path;
  int steps = 10, rounds = 5;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto count = [&](int &out) {
      char *end = nullptr;
      long value = i + 1 < argc ? std::strtol(argv[++i], &end, 10) : 0;
      if (!end || *end || value < 1 || value > 1000000)
        return false;
      out = int(value);
      return true;
    };
    if (arg == "--steps" || arg == "--rounds") {
      if (!count(arg == "--steps" ? steps : rounds))
        return fail(arg + " expects a whole number from 1 to 1000000");
    } else if (path.empty() && arg.rfind("--", 0) != 0) {
      path = arg;
    } else {
      return fail("unexpected argument '" + arg +
                  "'; usage: gpipe-mpi-bench BUNDLE.json [--steps N] "
                  "[--rounds R]");
    }
  }
  if (path.empty())
    return fail("expects a bundle (gpipe-run --bundle FILE writes one)");
  StatusOr<Bundle> bundle = loadBundle(path);
  if (!bundle.ok())
    return fail(bundle.status().message());
  const unsigned k = bundle->numDevices(); // stages / V when interleaved
  if (session.size() != int(k))
    return fail("the bundle has " + std::to_string(k) +
                " devices: run it under mpirun -np " + std::to_string(k));
  const Batch batch = syntheticBatch(*bundle, 1);
  device::DeviceExecutorConfig config;
  config.optimizer.kind = OptimizerKind::Adam;
  config.optimizer.learningRate = 1e-4f;
  config.recordTimeline = false;
  std::string error;
  std::unique_ptr<device::DeviceExecutor> threads;
  if (session.rank() == 0) {
    threads = device::DeviceExecutor::create(
        *bundle, std::make_unique<device::CpuBackend>(k), config, error);
    if (!threads)
      return fail(error);
  }
  config.transport = mpi::mpiTransport(session, {});
  auto ranks = device::DeviceExecutor::create(
      *bundle, std::make_unique<device::CpuBackend>(k), config, error);
  if (!ranks)
    return fail(error);
  // One untimed step each: first touches of every buffer.
  if (threads)
    timeSteps(*threads, batch, 1, error);
  sleepyBarrier();
  timeSteps(*ranks, batch, 1, error);
  std::vector<double> threaded, processes;
  for (int r = 0; r < rounds && error.empty(); ++r) {
    if (threads)
      threaded.push_back(timeSteps(*threads, batch, steps, error));
    sleepyBarrier();
    if (error.empty())
      processes.push_back(timeSteps(*ranks, batch, steps, error));
  }
  if (!error.empty())
    return fail(error);
  const int64_t doneSteps = 1 + int64_t(rounds) * steps;
  long long mine = ranks->transport().bytesSent(), sent = 0;
  MPI_Reduce(&mine, &sent, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (session.rank() != 0)
    return 0;
  const int64_t expected = boundaryBytes(*bundle);
  const int64_t threadBytes = threads->transport().bytesSent() / doneSteps;
  const int64_t mpiBytes = sent / doneSteps;
  double t = median(threaded), p = median(processes);
  std::printf("bundle %s: %u devices, %zu micro-batches of %lld rows, batch "
              "%lld; %d rounds of %d steps\n",
              path.c_str(), k, bundle->microbatchRows.size(),
              (long long)bundle->microbatchRows.front(),
              (long long)bundle->batch, rounds, steps);
  std::printf("step time, median of the rounds: threads %.3f ms, processes "
              "(MPI) %.3f ms, processes / threads %.3f\n",
              t, p, p / t);
  std::printf("bytes per step: MPI sent %lld, the in-process transport %lld, "
              "the program's stage boundaries %lld: %s\n",
              (long long)mpiBytes, (long long)threadBytes, (long long)expected,
              mpiBytes == expected && threadBytes == expected ? "equal"
                                                              : "DIFFERENT");
  return mpiBytes == expected && threadBytes == expected ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  StatusOr<std::unique_ptr<mpi::MpiSession>> session = mpi::MpiSession::start();
  if (!session.ok())
    return fail(session.status().message());
  return (*session)->finish(run(argc, argv, **session));
}
