//===- HostBackend.h - The device backend, emulated on the host --*- C++ -*-===//
//
// Runs the device executor on the CPU with the kernels the GPU runs
// (DeviceKernels.h) and CBLAS for the GEMMs. Every stream is a queue; nothing
// runs when it is issued. `synchronize` runs the queued work one task at a
// time, each time from a stream chosen at random among those whose next task
// may run (stream order and event waits are the only constraints), from a
// seeded generator. An executor that forgets an event then reads a buffer
// before it is written, or overwrites one still being read, and its results
// differ from the CPU executor's: the host tests catch missing
// synchronization without a GPU. Different seeds give different
// interleavings.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_HOSTBACKEND_H
#define GPIPE_RUNTIME_DEVICE_HOSTBACKEND_H

#include "gpipe/runtime/backends/HostWork.h"
#include "gpipe/runtime/kernels/KernelsByFunctor.h"

#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <vector>

namespace gpipe::runtime::device {

class HostBackend final
    : public KernelsByFunctor<HostBackend, HostStreamBackend> {
public:
  explicit HostBackend(unsigned numDevices, uint64_t scheduleSeed = 1);
  ~HostBackend() override;

  std::string describe() const override;
  unsigned numDevices() const override { return devices; }
  std::string allocate(unsigned device, int64_t bytes, void **pointer) override;
  /// Stages as the CUDA backend does, so that the tests run that path.
  std::string allocateStaging(int64_t bytes, void **pointer) override;
  void copyToDevice(StreamId s, void *dst, const void *hostSrc,
                    int64_t bytes) override;
  StreamId computeStream(unsigned device) override { return 2 * device; }
  StreamId copyStream(unsigned device) override { return 2 * device + 1; }
  EventId recordEvent(StreamId stream) override;
  void waitEvent(StreamId stream, EventId event) override;
  std::string synchronize(std::chrono::milliseconds timeout) override;
  std::string error() const override { return firstError; }
  /// TF32 and bf16 as the GPU computes them: every GEMM's operands rounded
  /// (to nearest, ties to even) to that precision, then multiplied and
  /// accumulated in f32.
  std::string usePrecision(Precision precision) override;
  void gemm(StreamId stream, const GemmBatch &call) override;

  /// Of the tasks the last `synchronize` ran, how many came from another
  /// stream than the task before: how much the run interleaved streams.
  int64_t streamSwitches() const { return switches; }
  int64_t tasksRun() const { return ran; }
  /// Of the copies to a device that the last `synchronize` ran, those whose
  /// source was not staging memory (allocateStaging's), and those whose was.
  int64_t unstagedCopies() const { return unstaged; }
  int64_t stagedCopies() const { return staged; }

private:
  struct Task {
    enum Kind { Run, Record, Wait } kind = Run;
    std::function<void()> work;
    EventId event = 0;
  };
  void enqueue(StreamId stream, std::function<void()> work) override;
  std::string streamName(StreamId stream) const;

  unsigned devices;
  std::vector<std::deque<Task>> streams;
  std::vector<char> eventDone;
  std::vector<StreamId> eventStream;
  std::vector<HostBlock> allocations;
  std::vector<std::pair<const char *, int64_t>> stagingBlocks;
  std::mt19937_64 random;
  Precision precision = Precision::F32;
  std::string firstError;
  int64_t switches = 0, ran = 0, unstaged = 0, staged = 0;
  int64_t pendingUnstaged = 0, pendingStaged = 0; ///< since the last sync
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_HOSTBACKEND_H
