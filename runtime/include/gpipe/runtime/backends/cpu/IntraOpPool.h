//===- IntraOpPool.h - One CPU device's threads for one kernel --*- C++ -*-===//
//
// When a machine has more cores than pipeline devices, each CPU device runs
// its kernels on several threads: the device's worker (the caller) and
// `threads - 1` helpers that split one kernel's index range. Each index is
// computed by exactly one thread, with the arithmetic of the single-threaded
// loop, so the results do not depend on the number of threads.
//
// A hand-off must cost microseconds, not a scheduler tick: helpers spin
// briefly on the generation counter before they sleep, and small ranges run
// on the caller alone (`grain`).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_INTRAOPPOOL_H
#define GPIPE_RUNTIME_DEVICE_INTRAOPPOOL_H

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace gpipe::runtime::device {

/// How long a thread that waits for another spins before it sleeps or
/// yields: longer than the gap between two kernels of a step, far shorter
/// than a scheduler tick (a sleeping thread's wake-up costs tens of
/// microseconds on a virtual machine).
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(50);

/// Spins until `done()` or kSpinBeforeSleep passed; whether `done()` held.
template <class Done> bool spinUntil(Done done) {
  auto until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
  for (unsigned i = 1;; ++i) {
    if (done())
      return true;
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
    if (i % 64 == 0 && std::chrono::steady_clock::now() > until)
      return false;
  }
}

struct CpuThreading {
  /// Threads per device, the device's worker included; 0: the allowed cores
  /// divided among the devices (defaultThreadsPerDevice).
  unsigned threadsPerDevice = 0;
  /// Pin every thread to one allowed core. Off by default: two programs
  /// pinned to the same cores would share them.
  bool pinThreads = false;
  /// GEMMs whose B is a parameter multiply a copy packed once per step
  /// (PackedGemm.h) where the CPU has AVX-512 or AVX2 with FMA; off: every
  /// GEMM calls the BLAS.
  bool packWeights = true;
  /// The devices' threads flush denormal floats to zero (x86's FTZ and DAZ,
  /// as TensorFlow's compute threads do). Adam's first moment decays by
  /// beta1 each step where a gradient is 0 and falls below 1e-38 after some
  /// 800 steps: every operation on such a number takes a microcode assist,
  /// and the optimizer step grew 20x slower near the end of an epoch of the
  /// MLP. Only the devices' threads change; the caller's keep their mode.
  bool flushDenormals = true;
  /// Clipping and the non-finite guard decide each step on the devices
  /// (DeviceGating.h) instead of on the host after a mid-step synchronize.
  bool decideOnDevices = true;
};

/// Sets (or clears) flushing denormal floats to zero on the calling thread,
/// results (FTZ) and inputs (DAZ); false where the CPU has no such mode.
bool flushDenormalsOnThisThread(bool flush);

/// max(1, allowed cores / numDevices).
unsigned defaultThreadsPerDevice(unsigned numDevices);

/// The cores this process may run on (sched_getaffinity), in order; at
/// least one entry.
std::vector<int> allowedCores();

/// Pins the calling thread to `core`; false where the system refuses.
bool pinThisThread(int core);

class IntraOpPool {
public:
  /// `threads` >= 1 counts the caller. `cores`: one per thread (the caller's
  /// first) to pin the helpers to, or empty to leave them unpinned. The
  /// helpers flush denormals as `flushDenormals` says (the caller sets its
  /// own mode).
  IntraOpPool(unsigned threads, std::vector<int> cores,
              bool flushDenormals = false);
  ~IntraOpPool();
  IntraOpPool(const IntraOpPool &) = delete;
  IntraOpPool &operator=(const IntraOpPool &) = delete;

  unsigned threads() const { return numThreads; }

  /// Calls body(begin, end) over [0, n) in at most threads() contiguous
  /// chunks whose sizes are multiples of `grain` (the last excepted) and
  /// returns when all are done. Ranges under two grains run on the caller.
  template <class Body> void parallelFor(int64_t n, int64_t grain, Body body) {
    if (n <= 0)
      return;
    if (numThreads == 1 || n < 2 * grain) {
      body(int64_t(0), n);
      return;
    }
    run(n, grain, &body, [](void *b, int64_t begin, int64_t end) {
      (*static_cast<Body *>(b))(begin, end);
    });
  }

private:
  using Trampoline = void (*)(void *, int64_t, int64_t);
  void run(int64_t n, int64_t grain, void *body, Trampoline call);
  void helperLoop(unsigned index);
  /// Chunk `index` of the current job.
  void runChunk(unsigned index);

  const unsigned numThreads;
  std::vector<int> cores;
  const bool flushDenormals;
  std::vector<std::thread> helpers; ///< started on the first parallel job

  // The current job, published by bumping `generation`.
  void *jobBody = nullptr;
  Trampoline jobCall = nullptr;
  int64_t jobSize = 0, jobChunk = 0;
  std::atomic<uint64_t> generation{0};
  std::atomic<unsigned> pending{0}; ///< helpers still running the job
  std::atomic<bool> stopping{false};
  std::mutex mutex;
  std::condition_variable wake;
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_INTRAOPPOOL_H
