//===- CudaRegistration.cpp - The CUDA backend as an Engine device --------===//

#include "gpipe/cuda/CudaBackend.h"
#include "gpipe/cuda/gpipe_cuda.h"
#include "gpipe/runtime/exec/Engine.h"

void gpipe::cuda::registerCudaBackend() {
  runtime::registerBackend(runtime::DeviceKind::Cuda,
                           [](unsigned numDevices, std::string &error) {
                             CudaBackendOptions options;
                             options.numDevices = numDevices;
                             return createCudaBackend(options, error);
                           });
}

void gpipe_register_cuda_backend(void) { gpipe::cuda::registerCudaBackend(); }
