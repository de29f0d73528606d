//===- DeviceArena.h - One planned device-memory arena per stage -*- C++ -*-===//
//
// The compiler's memory plan (gpipe-plan-memory, MemoryPlan in Bundle.h)
// gives every pipeline device a static arena size. DeviceArena makes exactly
// one cudaMalloc per pipeline device of that size, hands out sub-buffers at
// planned offsets (bounds-checked), and owns one non-blocking stream per
// pipeline device. Errors are returned as CudaStatus sentences; nothing
// aborts.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_CUDA_DEVICEARENA_H
#define GPIPE_CUDA_DEVICEARENA_H

#include "gpipe/cuda/CudaDevices.h"
#include "gpipe/runtime/bundle/Bundle.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace gpipe::cuda {

/// Checks that [offset, offset + bytes) lies inside an arena of `arenaBytes`
/// bytes (overflow-safe). The error names the device, offset, bytes and the
/// arena size. Pure; exposed for tests.
CudaStatus checkArenaPlacement(int device, int64_t offset, int64_t bytes,
                               int64_t arenaBytes);

class DeviceArena {
public:
  DeviceArena() = default;
  ~DeviceArena();
  DeviceArena(const DeviceArena &) = delete;
  DeviceArena &operator=(const DeviceArena &) = delete;
  DeviceArena(DeviceArena &&other) noexcept;
  DeviceArena &operator=(DeviceArena &&other) noexcept;

  /// Allocates arena d (arenaBytes[d] bytes; 0 allocates nothing) on GPU
  /// gpuOfDevice[d] and creates its stream. On failure everything allocated
  /// so far is released and the arena is left empty.
  CudaStatus init(const std::vector<int64_t> &arenaBytes,
                  const std::vector<int> &gpuOfDevice);

  /// init() with the arena sizes of the compiler's memory plan.
  CudaStatus initFromPlan(const runtime::MemoryPlan &plan,
                          const std::vector<int> &gpuOfDevice);

  /// The device pointer at `offset` of pipeline device `device`'s arena, for
  /// a buffer of `bytes` bytes; error when it does not fit.
  CudaStatus place(int device, int64_t offset, int64_t bytes,
                   void **out) const;

  /// Waits for every stream.
  CudaStatus synchronize() const;

  /// Frees all arenas and destroys the streams (idempotent).
  void release();

  int numDevices() const { return static_cast<int>(slots.size()); }
  int64_t arenaBytes(int device) const { return slots.at(device).bytes; }
  void *base(int device) const { return slots.at(device).base; }
  int gpu(int device) const { return slots.at(device).gpu; }
  cudaStream_t stream(int device) const { return slots.at(device).stream; }

private:
  struct Slot {
    int gpu = -1;
    int64_t bytes = 0;
    void *base = nullptr;
    cudaStream_t stream = nullptr;
  };
  std::vector<Slot> slots;
};

} // namespace gpipe::cuda

#endif // GPIPE_CUDA_DEVICEARENA_H
