//===- DeviceArena.cpp - One planned device-memory arena per stage --------===//

#include "gpipe/cuda/DeviceArena.h"

#include <limits>
#include <utility>

namespace gpipe::cuda {

namespace {
CudaStatus cudaFailure(const std::string &what, cudaError_t err) {
  (void)cudaGetLastError(); // clear non-sticky errors so later calls work
  return CudaStatus::failure(what + " failed: " + cudaErrorText(err));
}
} // namespace

CudaStatus checkArenaPlacement(int device, int64_t offset, int64_t bytes,
                               int64_t arenaBytes) {
  if (offset < 0 || bytes < 0 || offset > arenaBytes ||
      bytes > arenaBytes - offset)
    return CudaStatus::failure(
        "buffer on pipeline device " + std::to_string(device) +
        " at offset " + std::to_string(offset) + " of " +
        std::to_string(bytes) + " bytes does not fit in its arena of " +
        std::to_string(arenaBytes) + " bytes");
  return CudaStatus::success();
}

DeviceArena::~DeviceArena() { release(); }

DeviceArena::DeviceArena(DeviceArena &&other) noexcept
    : slots(std::move(other.slots)) {
  other.slots.clear();
}

DeviceArena &DeviceArena::operator=(DeviceArena &&other) noexcept {
  if (this != &other) {
    release();
    slots = std::move(other.slots);
    other.slots.clear();
  }
  return *this;
}

void DeviceArena::release() {
  for (Slot &s : slots) {
    if (s.gpu >= 0)
      (void)cudaSetDevice(s.gpu);
    if (s.stream)
      (void)cudaStreamDestroy(s.stream);
    if (s.base)
      (void)cudaFree(s.base);
  }
  slots.clear();
  (void)cudaGetLastError();
}

CudaStatus DeviceArena::init(const std::vector<int64_t> &arenaBytes,
                             const std::vector<int> &gpuOfDevice) {
  release();
  if (arenaBytes.size() != gpuOfDevice.size())
    return CudaStatus::failure(
        "device arena: " + std::to_string(arenaBytes.size()) +
        " arena sizes but " + std::to_string(gpuOfDevice.size()) +
        " GPU assignments");
  int gpuCount = 0;
  cudaError_t err = cudaGetDeviceCount(&gpuCount);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return CudaStatus::failure(describeNoDevice(err));
  }
  for (size_t d = 0; d < arenaBytes.size(); ++d) {
    int g = gpuOfDevice[d];
    std::string who = "pipeline device " + std::to_string(d);
    if (g < 0 || g >= gpuCount) {
      release();
      return CudaStatus::failure(who + " is mapped to GPU " +
                                 std::to_string(g) + " but only " +
                                 std::to_string(gpuCount) +
                                 " GPUs are visible");
    }
    if (arenaBytes[d] < 0) {
      release();
      return CudaStatus::failure(who + " has a negative arena size (" +
                                 std::to_string(arenaBytes[d]) + " bytes)");
    }
    slots.push_back(Slot{g, arenaBytes[d], nullptr, nullptr});
    Slot &s = slots.back();
    if ((err = cudaSetDevice(g)) != cudaSuccess) {
      CudaStatus st = cudaFailure(who + ": cudaSetDevice(" +
                                      std::to_string(g) + ")",
                                  err);
      release();
      return st;
    }
    if (s.bytes > 0) {
      err = cudaMalloc(&s.base, static_cast<size_t>(s.bytes));
      if (err != cudaSuccess) {
        s.base = nullptr;
        CudaStatus st = cudaFailure(
            who + ": cudaMalloc of its " + std::to_string(s.bytes) +
                "-byte arena on GPU " + std::to_string(g),
            err);
        release();
        return st;
      }
    }
    err = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
      s.stream = nullptr;
      CudaStatus st = cudaFailure(
          who + ": cudaStreamCreateWithFlags on GPU " + std::to_string(g),
          err);
      release();
      return st;
    }
  }
  return CudaStatus::success();
}

CudaStatus DeviceArena::initFromPlan(const runtime::MemoryPlan &plan,
                                     const std::vector<int> &gpuOfDevice) {
  if (plan.devices.empty())
    return CudaStatus::failure(
        "device arena: the bundle has no memory plan (run gpipe-plan-memory)");
  std::vector<int64_t> bytes;
  bytes.reserve(plan.devices.size());
  for (const runtime::PlannedDeviceMemory &d : plan.devices)
    bytes.push_back(d.arenaBytes);
  return init(bytes, gpuOfDevice);
}

CudaStatus DeviceArena::place(int device, int64_t offset, int64_t bytes,
                              void **out) const {
  *out = nullptr;
  if (device < 0 || device >= numDevices())
    return CudaStatus::failure("no arena for pipeline device " +
                               std::to_string(device) + " (the arena has " +
                               std::to_string(numDevices()) + " devices)");
  const Slot &s = slots[device];
  CudaStatus st = checkArenaPlacement(device, offset, bytes, s.bytes);
  if (!st.ok)
    return st;
  *out = s.base ? static_cast<char *>(s.base) + offset : nullptr;
  return CudaStatus::success();
}

CudaStatus DeviceArena::synchronize() const {
  for (size_t d = 0; d < slots.size(); ++d) {
    cudaError_t err = cudaStreamSynchronize(slots[d].stream);
    if (err != cudaSuccess)
      return cudaFailure("cudaStreamSynchronize for pipeline device " +
                             std::to_string(d),
                         err);
  }
  return CudaStatus::success();
}

} // namespace gpipe::cuda
