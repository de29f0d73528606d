//===- CudaDriverApi.cpp - The CUDA driver entry points, found at run time ===//

#include "CudaDriverApi.h"

#include "gpipe/cuda/CudaDevices.h"

#include <cuda_runtime.h>

#include <type_traits>

using namespace gpipe::cuda;

std::string DriverApi::load() {
  std::string error;
  auto find = [&](const char *symbol, auto &pointer, bool required) {
    void *found = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSuccess;
    cudaError_t err = cudaGetDriverEntryPointByVersion(
        symbol, &found, CUDA_VERSION, cudaEnableDefault, &status);
    if (err != cudaSuccess || status != cudaDriverEntryPointSuccess ||
        !found) {
      (void)cudaGetLastError();
      if (required && error.empty())
        error = std::string("the CUDA driver has no ") + symbol + " (" +
                (err != cudaSuccess ? cudaErrorText(int(err))
                 : status == cudaDriverEntryPointVersionNotSufficent
                     ? std::string("the driver is older than CUDA ") +
                           std::to_string(CUDA_VERSION / 1000) + "." +
                           std::to_string(CUDA_VERSION % 1000 / 10)
                     : std::string("symbol not found")) +
                ")";
      return;
    }
    pointer = reinterpret_cast<std::remove_reference_t<decltype(pointer)>>(
        found);
  };
  find("cuGetErrorName", getErrorName, true);
  find("cuGetErrorString", getErrorString, true);
  find("cuCtxGetCurrent", ctxGetCurrent, true);
  find("cuModuleLoadDataEx", moduleLoadDataEx, true);
  find("cuModuleGetFunction", moduleGetFunction, true);
  find("cuModuleUnload", moduleUnload, true);
  find("cuLaunchKernel", launchKernel, true);
#if CUDA_VERSION >= 12040
  find("cuFuncGetParamInfo", funcGetParamInfo, false);
#endif
  return error;
}
