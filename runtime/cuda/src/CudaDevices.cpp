//===- CudaDevices.cpp - GPU discovery and pipeline-device mapping --------===//

#include "gpipe/cuda/CudaDevices.h"

#include <cuda_runtime_api.h>

namespace gpipe::cuda {

std::string cudaErrorText(int error) {
  auto e = static_cast<cudaError_t>(error);
  std::string text = cudaGetErrorName(e);
  text += " (" + std::to_string(error) + "): ";
  text += cudaGetErrorString(e);
  return text;
}

std::string describeNoDevice(int error) {
  std::string msg = "no CUDA device available: ";
  if (error != 0)
    msg += "cudaGetDeviceCount failed with error " + cudaErrorText(error);
  else
    msg += "cudaGetDeviceCount reported 0 devices";
  msg += " - the CUDA backend needs an NVIDIA GPU and driver";
  return msg;
}

CudaStatus queryGpus(std::vector<GpuInfo> &gpus) {
  gpus.clear();
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError(); // clear the (non-sticky) error
    return CudaStatus::failure(describeNoDevice(err));
  }
  if (count <= 0)
    return CudaStatus::failure(describeNoDevice(0));
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      gpus.clear();
      return CudaStatus::failure("cudaGetDeviceProperties(" +
                                 std::to_string(i) + ") failed: " +
                                 cudaErrorText(err));
    }
    GpuInfo info;
    info.ordinal = i;
    info.name = prop.name;
    info.totalBytes = prop.totalGlobalMem;
    info.computeMajor = prop.major;
    info.computeMinor = prop.minor;
    info.multiProcessors = prop.multiProcessorCount;
    gpus.push_back(std::move(info));
  }
  return CudaStatus::success();
}

bool gpuAvailable(std::string *why) {
  std::vector<GpuInfo> gpus;
  CudaStatus st = queryGpus(gpus);
  if (!st.ok && why)
    *why = st.message;
  return st.ok;
}

CudaStatus mapPipelineDevices(int numPipelineDevices, int numGpus,
                              bool allowSharing,
                              std::vector<int> &gpuOfDevice) {
  gpuOfDevice.clear();
  if (numPipelineDevices <= 0)
    return CudaStatus::failure("cannot map " +
                               std::to_string(numPipelineDevices) +
                               " pipeline devices: need at least one");
  if (numGpus <= 0)
    return CudaStatus::failure(
        "cannot map " + std::to_string(numPipelineDevices) +
        " pipeline devices onto GPUs: no GPU is visible (G=" +
        std::to_string(numGpus) + ")");
  if (numPipelineDevices > numGpus && !allowSharing)
    return CudaStatus::failure(
        "the pipeline has K=" + std::to_string(numPipelineDevices) +
        " devices but only G=" + std::to_string(numGpus) +
        " GPUs are visible; allow GPU sharing to place several pipeline "
        "devices on one GPU, or use at most " +
        std::to_string(numGpus) + " stages");
  gpuOfDevice.resize(numPipelineDevices);
  for (int d = 0; d < numPipelineDevices; ++d)
    gpuOfDevice[d] = d % numGpus;
  return CudaStatus::success();
}

} // namespace gpipe::cuda
