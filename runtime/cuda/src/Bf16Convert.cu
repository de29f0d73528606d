//===- Bf16Convert.cu - float -> bf16 conversion kernel -------------------===//

#include "Bf16Convert.h"

#include <cuda_bf16.h>

namespace gpipe::cuda::detail {

namespace {
__global__ void floatToBf16Kernel(const float *__restrict__ src,
                                  __nv_bfloat16 *__restrict__ dst, size_t n) {
  size_t stride = static_cast<size_t>(blockDim.x) * gridDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride)
    dst[i] = __float2bfloat16_rn(src[i]);
}
} // namespace

cudaError_t launchFloatToBf16(const float *src, void *dst, size_t n,
                              cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  constexpr unsigned threads = 256;
  size_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535)
    blocks = 65535; // grid-stride loop covers the rest
  floatToBf16Kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
      src, static_cast<__nv_bfloat16 *>(dst), n);
  return cudaGetLastError();
}

} // namespace gpipe::cuda::detail
