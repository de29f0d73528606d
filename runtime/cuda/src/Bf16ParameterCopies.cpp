//===- Bf16ParameterCopies.cpp - Parameters in bf16, once a step ----------===//

#include "Bf16ParameterCopies.h"

#include "Bf16Convert.h"

using namespace gpipe::cuda::detail;

Bf16ParameterCopies::~Bf16ParameterCopies() {
  auto release = [](const Copy &copy) {
    if (!copy.data)
      return;
    (void)cudaSetDevice(copy.gpu);
    (void)cudaFree(copy.data);
  };
  for (const auto &[param, copy] : copies)
    release(copy);
  for (const Copy &copy : retired)
    release(copy);
}

cudaError_t Bf16ParameterCopies::copyOf(const float *param, size_t elements,
                                        unsigned device, int gpu,
                                        cudaStream_t stream, const void **out,
                                        const char **what) {
  *out = nullptr;
  Copy &copy = copies[param];
  if (copy.elements < elements) {
    if (copy.data)
      retired.push_back(copy);
    copy = Copy();
    if (cudaError_t err = cudaMalloc(&copy.data, elements * 2);
        err != cudaSuccess) {
      copy.data = nullptr;
      *what = "cudaMalloc of a parameter's bf16 copy";
      return err;
    }
    copy.elements = elements;
    copy.device = device;
    copy.gpu = gpu;
  }
  if (!copy.current) {
    if (cudaError_t err =
            launchFloatToBf16(param, copy.data, copy.elements, stream);
        err != cudaSuccess) {
      *what = "the bf16 conversion of a parameter";
      return err;
    }
    copy.current = true;
  }
  *out = copy.data;
  return cudaSuccess;
}

void Bf16ParameterCopies::stepEnded() {
  for (auto &[param, copy] : copies)
    copy.current = false;
}

int64_t Bf16ParameterCopies::bytesOn(unsigned device) const {
  int64_t bytes = 0;
  for (const auto &[param, copy] : copies)
    if (copy.data && copy.device == device)
      bytes += int64_t(copy.elements) * 2;
  return bytes;
}
