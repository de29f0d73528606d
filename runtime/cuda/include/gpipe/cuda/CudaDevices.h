//===- CudaDevices.h - GPU discovery and pipeline-device mapping -*- C++ -*-===//
//
// The first slice of the CUDA backend: which GPUs are visible, and which GPU
// each pipeline device (stage) runs on. No exceptions: every call that can
// fail returns a CudaStatus whose message is a full sentence.
//
// Without a GPU (or driver) `queryGpus` returns ok=false with a message that
// starts "no CUDA device available: ..." and never aborts.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_CUDA_CUDADEVICES_H
#define GPIPE_CUDA_CUDADEVICES_H

#include <cstddef>
#include <string>
#include <vector>

namespace gpipe::cuda {

/// The result of a CUDA-backend call: ok, or a human-readable error.
struct CudaStatus {
  bool ok = true;
  std::string message; ///< empty when ok

  static CudaStatus success() { return {}; }
  static CudaStatus failure(std::string message) {
    return {false, std::move(message)};
  }
  explicit operator bool() const { return ok; }
};

/// One visible GPU.
struct GpuInfo {
  int ordinal = -1;            ///< the CUDA device ordinal
  std::string name;            ///< e.g. "NVIDIA H100 80GB HBM3"
  std::size_t totalBytes = 0;  ///< global memory
  int computeMajor = 0;        ///< compute capability, e.g. 9.0 for H100
  int computeMinor = 0;
  int multiProcessors = 0;
};

/// "cudaErrorInsufficientDriver (35): CUDA driver version is insufficient
/// for CUDA runtime version" for a cudaError_t given as an int.
std::string cudaErrorText(int error);

/// The sentence `queryGpus` returns when cudaGetDeviceCount fails (error
/// != 0) or reports zero devices (error == 0). Pure; exposed for tests.
std::string describeNoDevice(int error);

/// Lists the visible GPUs. ok=false (and `gpus` empty) when there is none.
CudaStatus queryGpus(std::vector<GpuInfo> &gpus);

/// True when at least one GPU is usable; `why` (optional) receives the
/// "no CUDA device available: ..." sentence otherwise.
bool gpuAvailable(std::string *why = nullptr);

/// Maps K pipeline devices onto G GPUs: pipeline device d -> GPU d % G.
/// K > G is an error unless `allowSharing`, in which case several pipeline
/// devices share a GPU (round robin). Pure host logic: no CUDA calls.
CudaStatus mapPipelineDevices(int numPipelineDevices, int numGpus,
                              bool allowSharing, std::vector<int> &gpuOfDevice);

} // namespace gpipe::cuda

#endif // GPIPE_CUDA_CUDADEVICES_H
