//===- ColumnKernels.h - Column reductions, many lanes a column -*- C++ -*-===//
//
// The bias and layer-norm parameter gradients sum a [rows, cols] matrix over
// its rows. One thread per column, looping over every row, left a GPU with
// a few thousand threads in flight, each waiting on one load after another:
// on an H200 the layer norm's parameter gradient took 35% of a Transformer
// step's kernel time (scripts/gpu-check.sh's profile, docs/Cuda.md).
//
// So a column kernel F runs kColumnLanes lanes per column: lane l adds rows
// l, l + kColumnLanes, ... in order into F::kSums partial sums (F::addRow),
// then the lanes are combined by a fixed tree -- for offset = kColumnLanes/2,
// ..., 1, lane l < offset takes partial[l] + partial[l + offset] -- and
// F::finish adds lane 0's totals onto the outputs. The CUDA backend runs a
// block of kColumnTile columns by kColumnLanes lanes (a warp reads whole
// 32-byte sectors of kColumnTile floats) and combines in shared memory; the
// host backends replay the same lanes and tree with runColumnOnHost. The
// order of additions is therefore fixed: the GPU is deterministic and
// agrees with the host emulation bit for bit, but not with the CPU
// kernels, which add row by row (the tests compare those within rounding).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_COLUMNKERNELS_H
#define GPIPE_RUNTIME_DEVICE_COLUMNKERNELS_H

#include "gpipe/runtime/kernels/DropoutHash.h" // defines GPIPE_HD

#include <cstdint>

namespace gpipe::runtime::device::kernels {

constexpr int kColumnLanes = 128;
constexpr int kColumnTile = 8;

/// Runs column c of the column kernel f on the host, in the GPU's order.
template <class F> inline void runColumnOnHost(const F &f, int64_t c) {
  float partial[kColumnLanes][F::kSums] = {};
  for (int l = 0; l < kColumnLanes; ++l)
    for (int64_t r = l; r < f.rows; r += kColumnLanes)
      f.addRow(r, c, partial[l]);
  for (int offset = kColumnLanes / 2; offset > 0; offset /= 2)
    for (int l = 0; l < offset; ++l)
      for (int k = 0; k < F::kSums; ++k)
        partial[l][k] += partial[l + offset][k];
  f.finish(c, partial[0]);
}

/// sums[c] += the sum of x's column c (the bias gradient).
struct ColumnSums {
  static constexpr int kSums = 1;
  const float *x;
  float *sums;
  int64_t rows, cols;
  GPIPE_HD void addRow(int64_t r, int64_t c, float *acc) const {
    acc[0] += x[r * cols + c];
  }
  GPIPE_HD void finish(int64_t c, const float *total) const {
    sums[c] += total[0];
  }
};

/// dgamma[c] += sum over rows of dy * xHat, dbeta[c] += sum of dy; either
/// output may be null.
struct LayerNormGradParams {
  static constexpr int kSums = 2;
  const float *dy, *x, *mean, *rstd;
  float *dgamma, *dbeta;
  int64_t rows, cols;
  GPIPE_HD void addRow(int64_t r, int64_t c, float *acc) const {
    const float g = dy[r * cols + c];
    if (dgamma)
      acc[0] += g * (x[r * cols + c] - mean[r]) * rstd[r];
    acc[1] += g;
  }
  GPIPE_HD void finish(int64_t c, const float *total) const {
    if (dgamma)
      dgamma[c] += total[0];
    if (dbeta)
      dbeta[c] += total[1];
  }
};

} // namespace gpipe::runtime::device::kernels

#endif // GPIPE_RUNTIME_DEVICE_COLUMNKERNELS_H
