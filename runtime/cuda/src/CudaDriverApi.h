//===- CudaDriverApi.h - The CUDA driver entry points, found at run time --===//
//
// Private to runtime/cuda/src: what the CUDA backend calls to load and launch
// the bundle's generated kernels (PTX).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_CUDA_SRC_CUDADRIVERAPI_H
#define GPIPE_CUDA_SRC_CUDADRIVERAPI_H

#include <cuda.h>

#include <string>

namespace gpipe::cuda {

/// The CUDA driver API calls that load and launch the bundle's PTX, found at
/// run time through the runtime API (cudaGetDriverEntryPointByVersion)
/// rather than linked: a program that links libcuda does not even start on
/// a machine without the driver, where this backend must fail cleanly.
struct DriverApi {
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  decltype(&::cuCtxGetCurrent) ctxGetCurrent = nullptr;
  decltype(&::cuModuleLoadDataEx) moduleLoadDataEx = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
#if CUDA_VERSION >= 12040
  decltype(&::cuFuncGetParamInfo) funcGetParamInfo = nullptr; ///< optional
#endif

  /// Finds every entry point; "" or which one is missing and why.
  std::string load();
};

} // namespace gpipe::cuda

#endif // GPIPE_CUDA_SRC_CUDADRIVERAPI_H
