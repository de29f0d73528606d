//===- HostBackend.cpp - The device backend, emulated on the host ---------===//

#include "gpipe/runtime/backends/host/HostBackend.h"

#include "gpipe/runtime/backends/HostWork.h"
#include "gpipe/runtime/kernels/CpuKernels.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

using namespace gpipe::runtime::device;

HostBackend::HostBackend(unsigned numDevices, uint64_t scheduleSeed)
    : devices(numDevices), streams(2 * numDevices), random(scheduleSeed) {
  // OpenBLAS's pool waits for its threads with sched_yield: beside other busy
  // processes a GEMM then took seconds, and a 3-step run of embed_train over
  // a minute. The emulation checks ordering, not speed.
  cpu::useSingleThreadedBlas();
}

HostBackend::~HostBackend() = default;

std::string HostBackend::describe() const {
  return "host emulation of " + std::to_string(devices) +
         " devices (randomly interleaved streams)";
}

/// `x` with its low `dropped` mantissa bits rounded away, to nearest, ties
/// to even (infinities and NaNs kept).
static float roundMantissa(float x, unsigned dropped) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u)
    return x;
  const uint32_t half = (1u << (dropped - 1)) - 1 + ((bits >> dropped) & 1u);
  bits = (bits + half) & ~((1u << dropped) - 1);
  std::memcpy(&x, &bits, 4);
  return x;
}

/// The elements from `base` that a batch of `count` matrices of `rows` x
/// `cols` with leading dimension `ld` and batch stride `stride` covers.
static int64_t spanOf(int64_t count, int64_t stride, int64_t rows,
                      int64_t cols, int64_t ld) {
  if (count <= 0 || rows <= 0 || cols <= 0)
    return 0;
  return (count - 1) * stride + (rows - 1) * ld + cols;
}

std::string HostBackend::usePrecision(Precision p) {
  precision = p;
  return {};
}

void HostBackend::gemm(StreamId stream, const GemmBatch &call) {
  if (precision == Precision::F32) {
    HostStreamBackend::gemm(stream, call);
    return;
  }
  const unsigned dropped = precision == Precision::BF16 ? 16 : 13;
  enqueue(stream, [call, dropped] {
    // Rounded when the GEMM runs: the operands' values of that moment.
    auto rounded = [&](const float *from, int64_t count) {
      std::vector<float> copy(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i)
        copy[size_t(i)] = roundMantissa(from[i], dropped);
      return copy;
    };
    std::vector<float> a = rounded(
        call.a, spanOf(call.count, call.strideA, call.transA ? call.k : call.m,
                       call.transA ? call.m : call.k, call.lda));
    std::vector<float> b = rounded(
        call.b, spanOf(call.count, call.strideB, call.transB ? call.n : call.k,
                       call.transB ? call.k : call.n, call.ldb));
    GemmBatch copy = call;
    copy.a = a.data();
    copy.b = b.data();
    runGemmOnHost(copy);
  });
}

std::string HostBackend::streamName(StreamId stream) const {
  return "device " + std::to_string(stream / 2) + "'s " +
         (stream % 2 ? "copy" : "compute") + " stream";
}

std::string HostBackend::allocate(unsigned device, int64_t bytes,
                                  void **pointer) {
  *pointer = nullptr;
  if (device >= devices)
    return "allocate: no device " + std::to_string(device) + " (there are " +
           std::to_string(devices) + ")";
  if (bytes < 0)
    return "allocate: negative size " + std::to_string(bytes);
  // 256-byte aligned, as cudaMalloc's blocks are.
  HostBlock block = allocateHostBlock(bytes, 256);
  if (!block.aligned)
    return "device " + std::to_string(device) +
           ": out of memory: cannot "
           "allocate " +
           std::to_string(bytes) + " bytes";
  char *aligned = block.aligned;
  // Fresh memory is garbage on a GPU: make reads of unwritten memory visible.
  std::memset(aligned, 0xff, size_t(bytes));
  allocations.push_back(std::move(block));
  *pointer = aligned;
  return {};
}

std::string HostBackend::allocateStaging(int64_t bytes, void **pointer) {
  *pointer = nullptr;
  if (bytes < 0)
    return "allocateStaging: negative size " + std::to_string(bytes);
  HostBlock block = allocateHostBlock(bytes, 256);
  if (!block.aligned)
    return "out of memory: cannot allocate " + std::to_string(bytes) +
           " bytes of staging memory";
  stagingBlocks.emplace_back(block.aligned, bytes);
  *pointer = block.aligned;
  allocations.push_back(std::move(block));
  return {};
}

void HostBackend::copyToDevice(StreamId s, void *dst, const void *hostSrc,
                               int64_t bytes) {
  const char *src = static_cast<const char *>(hostSrc);
  bool fromStaging = false;
  for (const auto &[begin, size] : stagingBlocks)
    fromStaging |= src >= begin && src + bytes <= begin + size;
  ++(fromStaging ? pendingStaged : pendingUnstaged);
  HostStreamBackend::copyToDevice(s, dst, hostSrc, bytes);
}

void HostBackend::enqueue(StreamId stream, std::function<void()> work) {
  streams.at(stream).push_back({Task::Run, std::move(work), 0});
}

EventId HostBackend::recordEvent(StreamId stream) {
  EventId event = eventDone.size();
  eventDone.push_back(0);
  eventStream.push_back(stream);
  streams.at(stream).push_back({Task::Record, nullptr, event});
  return event;
}

void HostBackend::waitEvent(StreamId stream, EventId event) {
  if (event >= eventDone.size()) {
    if (firstError.empty())
      firstError = streamName(stream) + " waits for event " +
                   std::to_string(event) + ", which was never recorded";
    return;
  }
  streams.at(stream).push_back({Task::Wait, nullptr, event});
}

std::string HostBackend::synchronize(std::chrono::milliseconds) {
  switches = 0;
  ran = 0;
  unstaged = std::exchange(pendingUnstaged, 0);
  staged = std::exchange(pendingStaged, 0);
  StreamId previous = StreamId(-1);
  std::vector<StreamId> ready;
  for (;;) {
    ready.clear();
    bool pending = false;
    for (StreamId s = 0; s < streams.size(); ++s) {
      if (streams[s].empty())
        continue;
      pending = true;
      const Task &task = streams[s].front();
      if (task.kind != Task::Wait || eventDone[task.event])
        ready.push_back(s);
    }
    if (!pending)
      break;
    if (ready.empty()) {
      // Only waits are left, each on an event that can no longer complete.
      std::string who;
      for (StreamId s = 0; s < streams.size(); ++s)
        if (!streams[s].empty())
          who += (who.empty() ? "" : "; ") + streamName(s) +
                 " waits for an event of " +
                 streamName(eventStream[streams[s].front().event]);
      if (firstError.empty())
        firstError = "the streams wait for each other: " + who;
      for (auto &queue : streams)
        queue.clear();
      break;
    }
    StreamId s = ready[random() % ready.size()];
    Task task = std::move(streams[s].front());
    streams[s].pop_front();
    if (task.kind == Task::Run)
      task.work();
    else if (task.kind == Task::Record)
      eventDone[task.event] = 1;
    switches += previous != StreamId(-1) && previous != s;
    previous = s;
    ++ran;
  }
  eventDone.clear();
  eventStream.clear();
  return firstError;
}
