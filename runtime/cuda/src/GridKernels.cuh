//===- GridKernels.cuh - The CUDA backend's grid-striding launchers -*- CUDA -*-===//
//
// Private to runtime/cuda/src: the __global__ templates that run the shared
// device kernels (DeviceKernels.h, ColumnKernels.h) over a grid.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_CUDA_SRC_GRIDKERNELS_CUH
#define GPIPE_CUDA_SRC_GRIDKERNELS_CUH

#include "gpipe/runtime/kernels/KernelsByFunctor.h"

#include <cstdint>

namespace gpipe::cuda {

/// f(i) for every i in [0, n), each thread striding over the grid.
template <class F> __global__ void forEachKernel(F f, int64_t n) {
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    f(i);
}

/// Row kernels (DeviceKernels.h's "rows"): a warp per row, striding over the
/// grid's warps; the lanes combine their partials with the butterfly of
/// kernels::runRowOnHost. Every lane of a warp takes the same rows, so the
/// full-mask shuffles see all 32 lanes.
template <class F> __global__ void forEachRowKernel(F f, int64_t rows) {
  using gpipe::runtime::device::kernels::combineValues;
  using gpipe::runtime::device::kernels::kRowLanes;
  static_assert(kRowLanes == 32, "a row is a warp");
  const int lane = int(threadIdx.x) % kRowLanes;
  const int64_t warpsPerBlock = blockDim.x / kRowLanes;
  const int64_t stride = warpsPerBlock * gridDim.x;
  for (int64_t row = int64_t(blockIdx.x) * warpsPerBlock +
                     int64_t(threadIdx.x) / kRowLanes;
       row < rows; row += stride) {
    typename F::Value done[F::kPasses];
    for (int pass = 0; pass < F::kPasses; ++pass) {
      typename F::Value v = f.partial(pass, row, lane, done);
      for (int offset = kRowLanes / 2; offset > 0; offset /= 2)
        v = combineValues(F::combineOf(pass), v,
                          __shfl_xor_sync(0xffffffffu, v, offset));
      done[pass] = v;
    }
    f.finish(row, lane, done);
  }
}

/// Column kernels (ColumnKernels.h): a block holds kColumnTile columns by
/// kColumnLanes lanes and strides over the grid's column tiles; the lanes'
/// partials meet in shared memory in kernels::runColumnOnHost's tree order.
template <class F> __global__ void forEachColumnKernel(F f, int64_t cols) {
  using gpipe::runtime::device::kernels::kColumnLanes;
  using gpipe::runtime::device::kernels::kColumnTile;
  __shared__ float partial[kColumnLanes][kColumnTile][F::kSums];
  const int x = int(threadIdx.x), lane = int(threadIdx.y);
  for (int64_t first = int64_t(blockIdx.x) * kColumnTile; first < cols;
       first += int64_t(gridDim.x) * kColumnTile) {
    const int64_t c = first + x;
    float acc[F::kSums] = {};
    if (c < cols)
      for (int64_t r = lane; r < f.rows; r += kColumnLanes)
        f.addRow(r, c, acc);
    for (int k = 0; k < F::kSums; ++k)
      partial[lane][x][k] = acc[k];
    __syncthreads();
    for (int offset = kColumnLanes / 2; offset > 0; offset /= 2) {
      if (lane < offset)
        for (int k = 0; k < F::kSums; ++k)
          partial[lane][x][k] += partial[lane + offset][x][k];
      __syncthreads();
    }
    if (lane == 0 && c < cols)
      f.finish(c, partial[0][x]);
    __syncthreads(); // the next tile reuses `partial`
  }
}

} // namespace gpipe::cuda

#endif // GPIPE_CUDA_SRC_GRIDKERNELS_CUH
