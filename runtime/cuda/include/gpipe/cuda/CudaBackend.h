//===- CudaBackend.h - The device executor's backend on NVIDIA GPUs -*- C++ -*-===//
//
// DeviceBackend (gpipe/runtime/backends/DeviceBackend.h) on CUDA: pipeline
// device d runs on GPU d % G (mapPipelineDevices), with its own non-blocking
// compute and copy streams; events are CUDA events; transfers are peer copies
// (cudaMemcpyPeerAsync; a device-to-device copy when two pipeline devices
// share a GPU); GEMMs go through cuBLAS in the chosen precision; every other
// kernel is a grid-stride launch of the DeviceKernels.h functors, the code
// the host tests run on the CPU. The bundle's generated kernels run from its
// PTX (code.cuda): loadGeneratedKernels loads it on every GPU with the driver
// API, and each `kernel` op is a cuLaunchKernel on the compute stream
// (include/gpipe/Target/PtxKernels.h's ABI; docs/Cuda.md).
//
// Every CUDA error is kept (the first one) and returned by `synchronize`;
// `createCudaBackend` fails with the "no CUDA device available: ..." sentence
// on a machine without a GPU or driver.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_CUDA_CUDABACKEND_H
#define GPIPE_CUDA_CUDABACKEND_H

#include "gpipe/cuda/CublasGemm.h"
#include "gpipe/runtime/backends/DeviceBackend.h"

#include <memory>
#include <string>

namespace gpipe::cuda {

struct CudaBackendOptions {
  unsigned numDevices = 1; ///< pipeline devices (stages)
  /// Let several pipeline devices share a GPU when there are fewer GPUs.
  bool allowSharing = true;
  GemmPrecision precision = GemmPrecision::F32;
  /// Use only the first `maxGpus` GPUs (0: all), e.g. 1 to put all K
  /// pipeline devices on one GPU.
  int maxGpus = 0;
};

/// Null and `error` when there is no GPU, K > G without sharing, or a CUDA
/// call fails.
std::unique_ptr<runtime::device::DeviceBackend>
createCudaBackend(const CudaBackendOptions &options, std::string &error);

/// Registers createCudaBackend (default options: every GPU, shared, f32) as
/// the runtime's `cuda` device (Engine.h), for gpipe-run and the C API.
void registerCudaBackend();

} // namespace gpipe::cuda

#endif // GPIPE_CUDA_CUDABACKEND_H
