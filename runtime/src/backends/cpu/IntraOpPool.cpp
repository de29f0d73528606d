//===- IntraOpPool.cpp - One CPU device's threads for one kernel ----------===//

#include "gpipe/runtime/backends/cpu/IntraOpPool.h"

#include <sched.h>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

using namespace gpipe::runtime::device;

std::vector<int> gpipe::runtime::device::allowedCores() {
  std::vector<int> cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set))
        cores.push_back(c);
  if (cores.empty())
    cores.push_back(0);
  return cores;
}

unsigned gpipe::runtime::device::defaultThreadsPerDevice(unsigned numDevices) {
  unsigned cores = allowedCores().size();
  return numDevices == 0 || cores <= numDevices ? 1 : cores / numDevices;
}

bool gpipe::runtime::device::pinThisThread(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

bool gpipe::runtime::device::flushDenormalsOnThisThread(bool flush) {
#if defined(__SSE__) || defined(__x86_64__)
  constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
  unsigned mode = _mm_getcsr();
  _mm_setcsr(flush ? mode | kFlushToZero | kDenormalsAreZero
                   : mode & ~(kFlushToZero | kDenormalsAreZero));
  return true;
#else
  (void)flush;
  return false;
#endif
}

IntraOpPool::IntraOpPool(unsigned threads, std::vector<int> cores,
                         bool flushDenormals)
    : numThreads(threads < 1 ? 1 : threads), cores(std::move(cores)),
      flushDenormals(flushDenormals) {}

IntraOpPool::~IntraOpPool() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  for (std::thread &helper : helpers)
    helper.join();
}

void IntraOpPool::run(int64_t n, int64_t grain, void *body, Trampoline call) {
  if (helpers.empty())
    for (unsigned i = 1; i < numThreads; ++i)
      helpers.emplace_back([this, i] { helperLoop(i); });
  int64_t grains = (n + grain - 1) / grain;
  jobBody = body;
  jobCall = call;
  jobSize = n;
  jobChunk = (grains + numThreads - 1) / numThreads * grain;
  pending.store(numThreads - 1, std::memory_order_relaxed);
  generation.fetch_add(1, std::memory_order_release);
  { std::lock_guard<std::mutex> lock(mutex); } // no helper misses the wake
  wake.notify_all();
  runChunk(0);
  auto done = [&] { return pending.load(std::memory_order_acquire) == 0; };
  while (!spinUntil(done))
    std::this_thread::yield(); // a helper lost its core: let it run
}

void IntraOpPool::runChunk(unsigned index) {
  int64_t begin = int64_t(index) * jobChunk;
  int64_t end = begin + jobChunk < jobSize ? begin + jobChunk : jobSize;
  if (begin < end)
    jobCall(jobBody, begin, end);
}

void IntraOpPool::helperLoop(unsigned index) {
  if (!cores.empty())
    pinThisThread(cores[index % cores.size()]);
  if (flushDenormals)
    flushDenormalsOnThisThread(true);
  uint64_t seen = 0;
  for (;;) {
    auto fresh = [&] {
      return stopping.load(std::memory_order_relaxed) ||
             generation.load(std::memory_order_acquire) != seen;
    };
    if (!spinUntil(fresh)) {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, fresh);
    }
    if (stopping)
      return;
    seen = generation.load(std::memory_order_acquire);
    runChunk(index);
    pending.fetch_sub(1, std::memory_order_release);
  }
}
