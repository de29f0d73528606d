//===- BatchNormKernels.h - Scalar bodies of batch normalisation -*- C++
//-*-===//
//
// Batch norm over [rows, channels] (an image's pixels are rows: channels
// last), in DeviceKernels.h's style. Its statistics are column reductions
// (ColumnKernels.h's lanes and fixed tree, so the GPU and the host agree bit
// for bit): the mean first, then the variance about it (two passes: no
// cancellation), then an element-wise normalisation. Training adds each
// micro-batch's sum and sum of squares (M2 + rows mean^2) into
// accumulators; the optimizer step turns them into the mini-batch's
// statistics and updates the running ones once (BatchNormRunningUpdate).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_BATCHNORMKERNELS_H
#define GPIPE_RUNTIME_DEVICE_BATCHNORMKERNELS_H

#include "gpipe/runtime/kernels/DropoutHash.h" // GPIPE_HD

#include <cmath>
#include <cstdint>

namespace gpipe::runtime::device::kernels {

//===-- column kernels: item = channel ------------------------------------===//

/// mean[c] = the mean of x's column c.
struct BatchNormMean {
  static constexpr int kSums = 1;
  const float *x;
  float *mean;
  int64_t rows, cols;
  GPIPE_HD void addRow(int64_t r, int64_t c, float *acc) const {
    acc[0] += x[r * cols + c];
  }
  GPIPE_HD void finish(int64_t c, const float *total) const {
    mean[c] = total[0] / static_cast<float>(rows);
  }
};

/// rstd[c] = 1 / sqrt(biased variance + epsilon), from the mean; with
/// accumulators, sum[c] += rows mean and squares[c] += M2 + rows mean^2.
struct BatchNormVariance {
  static constexpr int kSums = 1;
  const float *x, *mean;
  float *rstd, *sum, *squares; ///< sum, squares: null when not training
  int64_t rows, cols;
  float epsilon;
  GPIPE_HD void addRow(int64_t r, int64_t c, float *acc) const {
    const float d = x[r * cols + c] - mean[c];
    acc[0] += d * d;
  }
  GPIPE_HD void finish(int64_t c, const float *total) const {
    const float n = static_cast<float>(rows);
    rstd[c] = 1.0f / sqrtf(total[0] / n + epsilon);
    if (sum) {
      sum[c] += n * mean[c];
      squares[c] += total[0] + n * mean[c] * mean[c];
    }
  }
};

/// sums[c] = the sum of dy xHat, sums[cols + c] = the sum of dy over column
/// c; dgamma[c] and dbeta[c] accumulate them (either may be null).
struct BatchNormGradSums {
  static constexpr int kSums = 2;
  const float *dy, *x, *mean, *rstd;
  float *sums, *dgamma, *dbeta;
  int64_t rows, cols;
  GPIPE_HD void addRow(int64_t r, int64_t c, float *acc) const {
    const float g = dy[r * cols + c];
    acc[0] += g * (x[r * cols + c] - mean[c]) * rstd[c];
    acc[1] += g;
  }
  GPIPE_HD void finish(int64_t c, const float *total) const {
    sums[c] = total[0];
    sums[cols + c] = total[1];
    if (dgamma)
      dgamma[c] += total[0];
    if (dbeta)
      dbeta[c] += total[1];
  }
};

//===-- element-wise: item = element, or channel -------------------------===//

/// y = gamma (x - mean) rstd + beta.
struct BatchNormApply {
  const float *x, *gamma, *beta, *mean, *rstd;
  float *y;
  int64_t cols;
  GPIPE_HD void operator()(int64_t i) const {
    const int64_t c = i % cols;
    y[i] = gamma[c] * ((x[i] - mean[c]) * rstd[c]) + beta[c];
  }
};

/// Evaluation's statistics, item = channel: the running ones.
struct BatchNormRunningStats {
  const float *runningMean, *runningVar;
  float *mean, *rstd;
  float epsilon;
  GPIPE_HD void operator()(int64_t c) const {
    mean[c] = runningMean[c];
    rstd[c] = 1.0f / sqrtf(runningVar[c] + epsilon);
  }
};

/// dx through the micro-batch's statistics (they depend on every row):
/// dx = gamma rstd (dy - (sum(dy) + xHat sum(dy xHat)) / rows).
struct BatchNormGradInput {
  const float *dy, *x, *gamma, *mean, *rstd, *sums;
  float *dx;
  int64_t rows, cols;
  GPIPE_HD void operator()(int64_t i) const {
    const int64_t c = i % cols;
    const float xHat = (x[i] - mean[c]) * rstd[c];
    dx[i] =
        gamma[c] * rstd[c] *
        (dy[i] - (sums[cols + c] + xHat * sums[c]) / static_cast<float>(rows));
  }
};

/// Once per mini-batch, item = channel: its mean and unbiased variance from
/// the accumulated sums over `count` rows, folded into the running ones.
struct BatchNormRunningUpdate {
  float *runningMean, *runningVar;
  const float *sum, *squares;
  float count, momentum;
  GPIPE_HD void operator()(int64_t c) const {
    const float mean = sum[c] / count;
    float variance = squares[c] / count - mean * mean;
    // Rounding can make it slightly negative; a NaN stays NaN.
    variance = variance <= 0.0f ? 0.0f : variance;
    const float unbiased =
        count > 1.0f ? variance * count / (count - 1.0f) : variance;
    runningMean[c] = (1.0f - momentum) * runningMean[c] + momentum * mean;
    runningVar[c] = (1.0f - momentum) * runningVar[c] + momentum * unbiased;
  }
};

} // namespace gpipe::runtime::device::kernels

#endif // GPIPE_RUNTIME_DEVICE_BATCHNORMKERNELS_H
