//===- CpuBackend.cpp - K pipeline devices as CPU threads -----------------===//
//
// Issue and run are separate phases: the host fills the queues while the
// workers sleep, so the queues need no lock; `synchronize` publishes them by
// bumping a generation under the mutex, and each worker drains its own
// queue. Events are flags written by one worker and read by others, with a
// condition variable for the waits.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/kernels/BlasLibrary.h"

#include "backends/cpu/CpuGemm.h"
#include "gpipe/runtime/kernels/CpuKernels.h"
#include "gpipe/runtime/backends/HostWork.h"
#include "gpipe/runtime/kernels/PackedGemm.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

namespace {

struct Task {
  enum Kind { Run, Record, Wait } kind = Run;
  std::function<void()> work;
  EventId event = 0;
};

} // namespace

struct CpuBackend::Impl {
  std::vector<std::vector<Task>> queues; ///< per device
  /// Per event: the device that records it, and whether it has been.
  std::vector<unsigned> eventDevice;
  std::unique_ptr<std::atomic<bool>[]> eventDone;

  std::mutex mutex;
  std::condition_variable wake;   ///< workers: a new generation or stop
  std::condition_variable events; ///< waiters: an event was recorded
  std::condition_variable done;   ///< the host: a worker finished
  uint64_t generation = 0;
  unsigned running = 0;
  bool stopping = false;
  std::atomic<bool> aborted{false};
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds timeout{0};
  std::string firstError;
  std::vector<std::thread> workers;
  std::vector<std::unique_ptr<IntraOpPool>> pools; ///< per device
  /// Per device, its parameters' packed copies; empty without packing. (A
  /// deque: the caches do not move.)
  std::deque<PackedWeightCache> packed;
  /// Per device, the stretches of packAheadUntil since takeWorkInWaits, at
  /// most kMaxWorkInWaits (a caller that never takes them loses the rest).
  std::vector<std::vector<std::pair<double, double>>> workInWaits;
  static constexpr size_t kMaxWorkInWaits = 4096;
  bool decideOnDevices = true;
  std::vector<int> workerCores; ///< per device; empty: not pinned
  bool flushDenormals = true;
  std::vector<HostBlock> allocations;

  void fail(std::string message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (firstError.empty())
      firstError = std::move(message);
    aborted = true;
    events.notify_all();
  }

  void runQueue(unsigned device) {
    for (Task &task : queues[device]) {
      if (aborted)
        return;
      switch (task.kind) {
      case Task::Run:
        try {
          task.work();
        } catch (const std::bad_alloc &) {
          fail("device " + std::to_string(device) + ": out of host memory");
        } catch (const std::exception &e) {
          fail("device " + std::to_string(device) + ": " + e.what());
        }
        break;
      case Task::Record: {
        eventDone[task.event].store(true, std::memory_order_release);
        std::lock_guard<std::mutex> lock(mutex);
        events.notify_all();
        break;
      }
      case Task::Wait: {
        auto ready = [&] {
          return aborted ||
                 eventDone[task.event].load(std::memory_order_acquire);
        };
        packAheadUntil(device, ready);
        // The peer is usually microseconds away: spin before sleeping.
        if (spinUntil(ready))
          break;
        std::unique_lock<std::mutex> lock(mutex);
        if (!events.wait_until(lock, deadline, ready)) {
          lock.unlock();
          fail("device " + std::to_string(device) + " waited longer than " +
               std::to_string(timeout.count()) + " ms for device " +
               std::to_string(eventDevice[task.event]) +
               " (a transfer or its computation did not finish)");
        }
        break;
      }
      }
    }
  }

  /// Packs the weights `device`'s GEMMs will multiply by, a few panels at a
  /// time, until `ready()` or none is left (PackedWeightCache::packAhead).
  template <class Ready> void packAheadUntil(unsigned device, Ready ready) {
    if (packed.empty())
      return;
    IntraOpPool &pool = *pools[device];
    // Two panels per thread: a peer's event waits about 10 us at k = 512.
    const int64_t panels = 2 * int64_t(pool.threads());
    const double start = hostMicroseconds();
    bool packedAny = false;
    try {
      while (!ready() &&
             packed[device].packAhead(panels, [&](int64_t n, auto body) {
               pool.parallelFor(n, 1, body);
             }))
        packedAny = true;
    } catch (const std::bad_alloc &) {
      fail("device " + std::to_string(device) + ": out of host memory");
    }
    std::vector<std::pair<double, double>> &spans = workInWaits[device];
    if (packedAny && spans.size() < kMaxWorkInWaits)
      spans.emplace_back(start, hostMicroseconds());
  }

  void workerLoop(unsigned device) {
    if (!workerCores.empty())
      pinThisThread(workerCores[device]);
    if (flushDenormals)
      flushDenormalsOnThisThread(true);
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || generation != seen; });
        if (stopping)
          return;
        seen = generation;
      }
      runQueue(device);
      std::lock_guard<std::mutex> lock(mutex);
      if (--running == 0)
        done.notify_all();
    }
  }
};

CpuBackend::CpuBackend(unsigned numDevices, CpuThreading threading)
    : devices(numDevices), threads(threading.threadsPerDevice > 0
                                       ? threading.threadsPerDevice
                                       : defaultThreadsPerDevice(numDevices)),
      impl(std::make_unique<Impl>()) {
  // The devices' own threads use the cores; OpenBLAS's pool would compete.
  cpu::useSingleThreadedBlas();
  std::vector<int> cores =
      threading.pinThreads ? allowedCores() : std::vector<int>();
  impl->queues.resize(numDevices);
  impl->workInWaits.resize(numDevices);
  impl->flushDenormals = threading.flushDenormals;
  impl->decideOnDevices = threading.decideOnDevices;
  if (threading.packWeights && packedGemmSupported())
    for (unsigned d = 0; d < numDevices; ++d)
      impl->packed.emplace_back();
  for (unsigned d = 0; d < numDevices; ++d) {
    std::vector<int> mine;
    for (unsigned t = 0; t < threads && !cores.empty(); ++t)
      mine.push_back(cores[(size_t(d) * threads + t) % cores.size()]);
    if (!mine.empty())
      impl->workerCores.push_back(mine.front());
    impl->pools.push_back(
        std::make_unique<IntraOpPool>(threads, mine, threading.flushDenormals));
  }
  for (unsigned d = 0; d < numDevices; ++d)
    impl->workers.emplace_back([this, d] { impl->workerLoop(d); });
}

DeviceGating *CpuBackend::gating() {
  return impl->decideOnDevices ? this : nullptr;
}

CpuBackend::~CpuBackend() {
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    impl->stopping = true;
  }
  impl->wake.notify_all();
  for (std::thread &worker : impl->workers)
    worker.join();
}

std::string CpuBackend::describe() const {
  return std::to_string(devices) + " CPU device" + (devices == 1 ? "" : "s") +
         " x " + std::to_string(threads) + " thread" +
         (threads == 1 ? "" : "s");
}

IntraOpPool *CpuBackend::poolOf(StreamId stream) const {
  return impl->pools.at(stream / 2).get();
}

template <class Body> void CpuBackend::split(StreamId s, int64_t n, Body body) {
  IntraOpPool *pool = poolOf(s);
  enqueue(s, [=] { pool->parallelFor(n, kElementGrain, body); });
}

template <class Body>
void CpuBackend::splitRows(StreamId s, int64_t rows, int64_t cols, Body body) {
  IntraOpPool *pool = poolOf(s);
  int64_t grain =
      std::max<int64_t>(1, kElementGrain / std::max<int64_t>(cols, 1));
  enqueue(s, [=] { pool->parallelFor(rows, grain, body); });
}

void CpuBackend::gemm(StreamId s, const GemmBatch &call) {
  IntraOpPool *pool = poolOf(s);
  if (call.bIsParameter && !impl->packed.empty() && !call.transA &&
      call.count == 1 && call.k > 0 && call.m > 0 && call.n > 0) {
    PackedWeightCache *cache = &impl->packed[s / 2];
    cache->expect(call.b, call.ldb, call.transB, call.k, call.n);
    enqueue(s, [call, pool, cache] { runPackedGemm(call, *pool, *cache); });
    return;
  }
  enqueue(s, [call, pool] { runGemmSplit(call, *pool); });
}

void CpuBackend::matmul(StreamId s, const MatmulCall &call) {
  IntraOpPool *pool = poolOf(s);
  enqueue(s, [call, pool] { runMatmulSplit(call, *pool); });
}

int64_t CpuBackend::panelsPackedAhead(unsigned device) const {
  return impl->packed.empty() ? 0 : impl->packed.at(device).panelsPackedAhead();
}

std::vector<std::pair<double, double>>
CpuBackend::takeWorkInWaits(unsigned device) {
  std::vector<std::pair<double, double>> spans;
  if (device < devices)
    spans.swap(impl->workInWaits[device]);
  return spans;
}

int64_t CpuBackend::workspaceBytes(unsigned device) const {
  return impl->packed.empty() ? 0 : impl->packed.at(device).bytes();
}

std::string CpuBackend::error() const {
  std::lock_guard<std::mutex> lock(impl->mutex);
  return impl->firstError;
}

std::string CpuBackend::allocate(unsigned device, int64_t bytes,
                                 void **pointer) {
  *pointer = nullptr;
  if (device >= devices)
    return "allocate: no device " + std::to_string(device) + " (there are " +
           std::to_string(devices) + ")";
  if (bytes < 0)
    return "allocate: negative size " + std::to_string(bytes);
  // 64-byte aligned: whole cache lines, and wide vector loads.
  HostBlock block = allocateHostBlock(bytes, 64);
  if (!block.aligned)
    return "device " + std::to_string(device) +
           ": out of memory: cannot "
           "allocate " +
           std::to_string(bytes) + " bytes of host memory";
  *pointer = block.aligned;
  impl->allocations.push_back(std::move(block));
  return {};
}

void CpuBackend::enqueue(StreamId stream, std::function<void()> work) {
  impl->queues.at(stream / 2).push_back({Task::Run, std::move(work), 0});
}

EventId CpuBackend::recordEvent(StreamId stream) {
  EventId event = impl->eventDevice.size();
  impl->eventDevice.push_back(stream / 2);
  impl->queues.at(stream / 2).push_back({Task::Record, nullptr, event});
  return event;
}

void CpuBackend::waitEvent(StreamId stream, EventId event) {
  if (event >= impl->eventDevice.size()) {
    if (impl->firstError.empty())
      impl->firstError = "device " + std::to_string(stream / 2) +
                         " waits for event " + std::to_string(event) +
                         ", which was never recorded";
    return;
  }
  if (impl->eventDevice[event] == stream / 2)
    return; // recorded earlier on the same queue: already ordered
  impl->queues.at(stream / 2).push_back({Task::Wait, nullptr, event});
}

// Each kernel below splits its elements or rows over the device's threads
// (split, splitRows); every element or row is computed as on one thread.
void CpuBackend::relu(StreamId s, const float *x, float *y, int64_t n) {
  split(s, n,
        [=](int64_t b, int64_t e) { cpu::reluForward(x + b, y + b, e - b); });
}
void CpuBackend::generated(StreamId s, const GeneratedCall &call) {
  if (call.outputElements() <= 0)
    return;
  IntraOpPool *pool = poolOf(s);
  enqueue(s, [call, pool] {
    // The copies of overlapping inputs come first, whole: a thread's range
    // of the output may be another's range of the input.
    std::vector<std::vector<float>> copies;
    std::vector<const float *> inputs = separateOverlaps(call, copies);
    // Rows of dimension 0 as splitRows splits a row-wise op's; a kernel
    // that reduces dimension 0 by its output's columns; each output element
    // is computed as by the whole call.
    const int dim = call.splitDimension();
    if (dim < 0) {
      runGeneratedRange(call, inputs.data(), 0, call.space[0]);
      return;
    }
    int64_t grain = std::max<int64_t>(
        1, kElementGrain /
               std::max<int64_t>(call.workPerIndex(unsigned(dim)), 1));
    // Columns in whole vector tiles (the widest variant's is 32).
    if (dim > 0)
      grain = (grain + kColumnGrain - 1) / kColumnGrain * kColumnGrain;
    pool->parallelFor(call.space[dim], grain, [&](int64_t b, int64_t e) {
      runGeneratedRange(call, inputs.data(), b, e);
    });
  });
}
void CpuBackend::im2col(StreamId s, const float *x, float *patches,
                        const WindowGeometry &g) {
  if (g.patchElements() > 0)
    enqueue(s, [=] { cpu::im2col(x, patches, g); });
}
void CpuBackend::col2im(StreamId s, const float *patches, float *dx,
                        const WindowGeometry &g) {
  enqueue(s, [=] { cpu::col2im(patches, dx, g); });
}
void CpuBackend::reluGrad(StreamId s, const float *x, const float *dy,
                          float *dx, int64_t n) {
  split(s, n, [=](int64_t b, int64_t e) {
    cpu::reluBackward(x + b, dy + b, dx + b, e - b);
  });
}
void CpuBackend::gelu(StreamId s, const float *x, float *y, int64_t n) {
  split(s, n,
        [=](int64_t b, int64_t e) { cpu::geluForward(x + b, y + b, e - b); });
}
void CpuBackend::geluGrad(StreamId s, const float *x, const float *dy,
                          float *dx, int64_t n) {
  split(s, n, [=](int64_t b, int64_t e) {
    cpu::geluBackward(x + b, dy + b, dx + b, e - b);
  });
}
void CpuBackend::geluErf(StreamId s, const float *x, float *y, int64_t n) {
  split(s, n, [=](int64_t b, int64_t e) {
    cpu::geluErfForward(x + b, y + b, e - b);
  });
}
void CpuBackend::geluErfGrad(StreamId s, const float *x, const float *dy,
                             float *dx, int64_t n) {
  split(s, n, [=](int64_t b, int64_t e) {
    cpu::geluErfBackward(x + b, dy + b, dx + b, e - b);
  });
}
void CpuBackend::tanh(StreamId s, const float *x, float *y, int64_t n) {
  split(s, n,
        [=](int64_t b, int64_t e) { cpu::tanhForward(x + b, y + b, e - b); });
}
void CpuBackend::tanhGrad(StreamId s, const float *y, const float *dy,
                          float *dx, int64_t n) {
  split(s, n, [=](int64_t b, int64_t e) {
    cpu::tanhBackward(y + b, dy + b, dx + b, e - b);
  });
}
void CpuBackend::add(StreamId s, const float *a, const float *b, float *y,
                     int64_t n) {
  split(s, n, [=](int64_t i, int64_t e) {
    cpu::addForward(a + i, b + i, y + i, e - i);
  });
}
void CpuBackend::softmax(StreamId s, const float *x, float *y, int64_t rows,
                         int64_t cols, int64_t causalSeq) {
  if (causalSeq > 0) // attention's mask: only the device kernel has it
    return KernelsByFunctor::softmax(s, x, y, rows, cols, causalSeq);
  splitRows(s, rows, cols, [=](int64_t b, int64_t e) {
    cpu::softmaxForward(x + b * cols, y + b * cols, e - b, cols);
  });
}
void CpuBackend::softmaxGrad(StreamId s, const float *y, const float *dy,
                             float *dx, int64_t rows, int64_t cols) {
  splitRows(s, rows, cols, [=](int64_t b, int64_t e) {
    int64_t at = b * cols;
    cpu::softmaxBackward(y + at, dy + at, dx + at, e - b, cols);
  });
}
void CpuBackend::layerNorm(StreamId s, const float *x, const float *gamma,
                           const float *beta, float *y, float *mean,
                           float *rstd, int64_t rows, int64_t cols,
                           float epsilon) {
  splitRows(s, rows, cols, [=](int64_t b, int64_t e) {
    int64_t at = b * cols;
    cpu::layerNormForward(x + at, gamma, beta, y + at, mean + b, rstd + b,
                          e - b, cols, epsilon);
  });
}
// The fused pairs run the unfused kernels row by row, while a row is in the
// cache: the same arithmetic per element, so the same bits.
void CpuBackend::biasActivation(StreamId s, const float *bias, float *h,
                                float *y, int64_t rows, int64_t cols,
                                Activation act) {
  splitRows(s, rows, cols, [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float *hr = h + r * cols;
      float *yr = y + r * cols;
      if (bias)
        for (int64_t c = 0; c < cols; ++c)
          hr[c] += bias[c];
      switch (act) {
      case Activation::Relu:
        cpu::reluForward(hr, yr, cols);
        break;
      case Activation::Gelu:
        cpu::geluForward(hr, yr, cols);
        break;
      case Activation::Tanh:
        cpu::tanhForward(hr, yr, cols);
        break;
      case Activation::GeluErf:
        cpu::geluErfForward(hr, yr, cols);
        break;
      }
    }
  });
}
void CpuBackend::addLayerNorm(StreamId s, const float *a, const float *b,
                              float *sum, const float *gamma, const float *beta,
                              float *y, float *mean, float *rstd, int64_t rows,
                              int64_t cols, float epsilon) {
  splitRows(s, rows, cols, [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t at = r * cols;
      cpu::addForward(a + at, b + at, sum + at, cols);
      cpu::layerNormForward(sum + at, gamma, beta, y + at, mean + r, rstd + r,
                            1, cols, epsilon);
    }
  });
}
void CpuBackend::dropout(StreamId s, const float *x, float *y, uint8_t *mask,
                         int64_t rows, int64_t cols, float rate, uint64_t seed,
                         uint64_t step, int64_t rowOffset) {
  splitRows(s, rows, cols, [=](int64_t b, int64_t e) {
    int64_t at = b * cols;
    cpu::dropoutForward(x + at, y + at, mask + at, e - b, cols, rate, seed,
                        step, rowOffset + b);
  });
}
void CpuBackend::dropoutGrad(StreamId s, const uint8_t *mask, const float *dy,
                             float *dx, int64_t n, float rate) {
  split(s, n, [=](int64_t b, int64_t e) {
    cpu::dropoutBackward(mask + b, dy + b, dx + b, e - b, rate);
  });
}
void CpuBackend::softmaxCrossEntropy(StreamId s, const float *logits,
                                     const int32_t *labels, float *probs,
                                     float *loss, int64_t rows,
                                     int64_t classes) {
  enqueue(s, [=] {
    int64_t badLabel = -1; // labels were checked before the step
    *loss = cpu::softmaxCrossEntropyForward(logits, labels, probs, rows,
                                            classes, &badLabel);
  });
}
void CpuBackend::softmaxCrossEntropyGrad(StreamId s, const float *probs,
                                         const int32_t *labels, float scale,
                                         float *dlogits, int64_t rows,
                                         int64_t classes) {
  enqueue(s, [=] {
    cpu::softmaxCrossEntropyBackward(probs, labels, scale, dlogits, rows,
                                     classes);
  });
}
void CpuBackend::mse(StreamId s, const float *prediction, const float *target,
                     float *loss, int64_t n) {
  enqueue(s, [=] { *loss = cpu::mseForward(prediction, target, n); });
}
void CpuBackend::mseGrad(StreamId s, const float *prediction,
                         const float *target, float scale, float *dprediction,
                         int64_t n) {
  enqueue(s,
          [=] { cpu::mseBackward(prediction, target, scale, dprediction, n); });
}
// Row-major loops with a contiguous inner loop, which the compiler
// vectorizes (the device bodies go column by column, as GPU threads do).
void CpuBackend::accumulate(StreamId s, const float *x, float *y, int64_t n) {
  split(s, n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] += x[i];
  });
}
void CpuBackend::addRowVector(StreamId s, const float *bias, float *y,
                              int64_t rows, int64_t cols) {
  splitRows(s, rows, cols, [=](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      for (int64_t c = 0; c < cols; ++c)
        y[r * cols + c] += bias[c];
  });
}
void CpuBackend::columnSums(StreamId s, const float *x, float *sums,
                            int64_t rows, int64_t cols) {
  // By columns: each sum adds its rows in order, on one thread.
  IntraOpPool *pool = poolOf(s);
  int64_t grain = std::max<int64_t>(kColumnGrain,
                                    kElementGrain / std::max<int64_t>(rows, 1));
  enqueue(s, [=] {
    pool->parallelFor(cols, grain, [=](int64_t b, int64_t e) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = b; c < e; ++c)
          sums[c] += x[r * cols + c];
    });
  });
}
// Row by row over a block of columns (the device's column kernel walks each
// column down its rows, a cache line per row): each thread sums its columns'
// rows in order into a local partial, then adds it to the gradients, as
// columnSums does.
void CpuBackend::layerNormGradParams(StreamId s, const float *dy,
                                     const float *x, const float *mean,
                                     const float *rstd, float *dgamma,
                                     float *dbeta, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0 || (!dgamma && !dbeta))
    return;
  IntraOpPool *pool = poolOf(s);
  int64_t grain = std::max<int64_t>(kColumnGrain,
                                    kElementGrain / std::max<int64_t>(rows, 1));
  enqueue(s, [=] {
    pool->parallelFor(cols, grain, [=](int64_t begin, int64_t end) {
      constexpr int64_t kBlock = 256; // partial sums on the stack
      for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t e = std::min(b + kBlock, end);
        float gammaSum[kBlock] = {}, betaSum[kBlock] = {};
        for (int64_t r = 0; r < rows; ++r) {
          const float *g = dy + r * cols, *xr = x + r * cols;
          const float m = mean[r], rs = rstd[r];
          for (int64_t c = b; c < e; ++c) {
            gammaSum[c - b] += g[c] * ((xr[c] - m) * rs);
            betaSum[c - b] += g[c];
          }
        }
        for (int64_t c = b; c < e; ++c) {
          if (dgamma)
            dgamma[c] += gammaSum[c - b];
          if (dbeta)
            dbeta[c] += betaSum[c - b];
        }
      }
    });
  });
}
void CpuBackend::layerNormGradInput(StreamId s, const float *dy, const float *x,
                                    const float *gamma, const float *mean,
                                    const float *rstd, float *dx, int64_t rows,
                                    int64_t cols) {
  if (rows > 0 && cols > 0)
    splitRows(s, rows, cols, [=](int64_t b, int64_t e) {
      int64_t at = b * cols;
      cpu::layerNormBackward(dy + at, x + at, gamma, mean + b, rstd + b,
                             dx + at, nullptr, nullptr, e - b, cols);
    });
}
// Row copies (the element-per-item functor divided by the width for every
// element); the ids were checked on the host before anything was issued.
void CpuBackend::embedding(StreamId s, const int32_t *ids, const float *table,
                           float *y, int64_t n, int64_t width) {
  splitRows(s, n, width, [=](int64_t b, int64_t e) {
    cpu::embeddingForward(ids + b, table, y + b * width, e - b,
                          std::numeric_limits<int64_t>::max(), width);
  });
}
// Row by row, as the device's column-per-item kernel adds: each table entry
// gets its contributions in the same order, so the same bits.
void CpuBackend::embeddingGrad(StreamId s, const int32_t *ids, const float *dy,
                               float *dtable, int64_t n, int64_t width) {
  if (n > 0 && width > 0)
    enqueue(s, [=] { cpu::embeddingBackward(ids, dy, dtable, n, width); });
}
void CpuBackend::optimizerStep(StreamId s, const OptimizerConfig &config,
                               float *params, const float *grads,
                               float *const *slots, int64_t n,
                               const StepScalars *step) {
  if (n <= 0)
    return;
  if (!impl->packed.empty())
    impl->packed[s / 2].stopExpecting();
  std::array<float *, 2> slotCopy = {
      slots && optimizerSlots(config.kind) > 0 ? slots[0] : nullptr,
      slots && optimizerSlots(config.kind) > 1 ? slots[1] : nullptr};
  split(s, n, [=](int64_t b, int64_t e) {
    float *slotsAt[2] = {slotCopy[0] ? slotCopy[0] + b : nullptr,
                         slotCopy[1] ? slotCopy[1] + b : nullptr};
    applyOptimizer(config, *step, params + b, grads + b, slotsAt, e - b);
  });
}

namespace {
/// The device's threads as CpuKernels' ParallelFor (none for one thread).
cpu::ParallelFor parallelOn(IntraOpPool *pool) {
  if (pool->threads() == 1)
    return {};
  return [pool](int64_t n, int64_t grain,
                const std::function<void(int64_t, int64_t)> &body) {
    pool->parallelFor(n, grain, body);
  };
}
} // namespace

void CpuBackend::attention(StreamId s, const AttentionCall &c) {
  IntraOpPool *pool = poolOf(s);
  enqueue(s, [c, pool] {
    cpu::attentionForward(c.x, c.wqkv, c.wo, c.qkvBias, c.outBias, c.y, c.qkv,
                          c.lse, c.context, c.batch, c.seq, c.width, c.heads,
                          c.causal, parallelOn(pool));
  });
}
void CpuBackend::attentionGrad(StreamId s, const AttentionGradCall &c) {
  IntraOpPool *pool = poolOf(s);
  enqueue(s, [c, pool] {
    cpu::attentionBackward(c.dy, c.x, c.wqkv, c.wo, c.qkv, c.lse, c.context,
                           c.dx, c.dwqkv, c.dwo, c.dqkvBias, c.doutBias,
                           c.scratch, c.batch, c.seq, c.width, c.heads,
                           c.causal, parallelOn(pool));
  });
}
int64_t CpuBackend::attentionScratch(int64_t, int64_t, int64_t,
                                     int64_t) const {
  return 0; // its tiles are on the stack (CpuAttention.cpp)
}
int64_t CpuBackend::attentionGradScratch(int64_t batch, int64_t seq,
                                         int64_t width, int64_t) const {
  return 4 * batch * seq * width; // CpuKernels.h's attentionBackward
}

std::string CpuBackend::synchronize(std::chrono::milliseconds timeout) {
  Impl &s = *impl;
  const size_t numEvents = s.eventDevice.size();
  s.eventDone = std::make_unique<std::atomic<bool>[]>(numEvents);
  for (size_t e = 0; e < numEvents; ++e)
    s.eventDone[e].store(false, std::memory_order_relaxed);
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    s.timeout = timeout;
    s.deadline = std::chrono::steady_clock::now() + timeout;
    s.aborted = !s.firstError.empty();
    s.running = devices;
    ++s.generation;
    s.wake.notify_all();
    s.done.wait(lock, [&] { return s.running == 0; });
  }
  for (auto &queue : s.queues)
    queue.clear();
  for (PackedWeightCache &cache : s.packed)
    cache.invalidate();
  s.eventDevice.clear();
  return s.firstError;
}
