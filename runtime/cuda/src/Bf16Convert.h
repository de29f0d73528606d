//===- Bf16Convert.h - float -> bf16 conversion (private) -------*- C++ -*-===//

#ifndef GPIPE_CUDA_BF16CONVERT_H
#define GPIPE_CUDA_BF16CONVERT_H

#include <cuda_runtime_api.h>

#include <cstddef>

namespace gpipe::cuda::detail {

/// Enqueues dst[i] = bf16(src[i]) (round to nearest even) for i < n on
/// `stream`; dst holds n __nv_bfloat16. Returns the launch error.
cudaError_t launchFloatToBf16(const float *src, void *dst, size_t n,
                              cudaStream_t stream);

} // namespace gpipe::cuda::detail

#endif // GPIPE_CUDA_BF16CONVERT_H
