//===- HandOffBenchmark.cpp - What a hand-off between threads costs -------===//
//
// Two hand-offs bound how finely the CPU devices can split work:
//   BM_IntraOpHandOff  one empty job split over a device's T threads
//                      (IntraOpPool::parallelFor): wake the helpers, wait
//                      for them; per job.
//   BM_DeviceHandOff   a ping-pong of events between two CPU devices
//                      (CpuBackend: one records, the other waits, and back),
//                      N = 256 each way per synchronize; per hand-off.
// Both with and without pinned threads (pin = 1). Standard Google Benchmark
// flags apply (--benchmark_min_time, --benchmark_repetitions, ...).
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/backends/cpu/IntraOpPool.h"

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>

#include <sched.h>

using namespace gpipe::runtime::device;

namespace {

/// The process's cores, read once: a thread created after the caller pinned
/// itself inherits that one core, and so would allowedCores().
const std::vector<int> &processCores() {
  static const std::vector<int> cores = allowedCores();
  return cores;
}

std::vector<int> firstCores(unsigned count) {
  std::vector<int> cores;
  for (unsigned t = 0; t < count; ++t)
    cores.push_back(processCores()[t % processCores().size()]);
  return cores;
}

/// Lets the calling thread run on every core of the process again.
void unpinThisThread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int core : processCores())
    CPU_SET(core, &set);
  sched_setaffinity(0, sizeof set, &set);
}

void BM_IntraOpHandOff(benchmark::State &state) {
  processCores(); // before any pinning
  const unsigned threads = state.range(0);
  const bool pin = state.range(1) != 0;
  std::vector<int> cores = pin ? firstCores(threads) : std::vector<int>();
  if (pin)
    pinThisThread(cores.front());
  IntraOpPool pool(threads, cores);
  std::atomic<int64_t> chunks{0};
  for (auto _ : state)
    pool.parallelFor(threads, 1, [&](int64_t, int64_t) {
      chunks.fetch_add(1, std::memory_order_relaxed);
    });
  benchmark::DoNotOptimize(chunks.load());
  if (pin)
    unpinThisThread();
  state.SetLabel(std::to_string(threads) + " threads" +
                 (pin ? ", pinned" : ""));
}

void BM_DeviceHandOff(benchmark::State &state) {
  const bool pin = state.range(0) != 0;
  CpuBackend backend(2, {1, pin});
  constexpr int kRounds = 256;
  for (auto _ : state) {
    for (int r = 0; r < kRounds; ++r) {
      EventId ping = backend.recordEvent(backend.computeStream(0));
      backend.waitEvent(backend.computeStream(1), ping);
      EventId pong = backend.recordEvent(backend.computeStream(1));
      backend.waitEvent(backend.computeStream(0), pong);
    }
    std::string error = backend.synchronize(std::chrono::seconds(60));
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      return;
    }
  }
  state.SetItemsProcessed(state.iterations() * 2 * kRounds);
  // Seconds per hand-off, printed with an SI prefix (u: microseconds).
  state.counters["per_hand_off"] = benchmark::Counter(
      double(state.iterations() * 2 * kRounds),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(pin ? "pinned" : "not pinned");
}

} // namespace

BENCHMARK(BM_IntraOpHandOff)
    ->ArgNames({"threads", "pin"})
    ->ArgsProduct({{2, 3}, {0, 1}})
    ->UseRealTime();
BENCHMARK(BM_DeviceHandOff)->ArgNames({"pin"})->Arg(0)->Arg(1)->UseRealTime();
