//===- DeviceKernels.h - Scalar bodies of the device kernels ----*- C++ -*-===//
//
// One functor per KernelApi kernel: it holds its pointers and sizes by value
// and computes one work item in `operator()(i)`. The same code compiles with
// g++ (the host backend, whose tests compare it with the CPU kernels) and
// with nvcc (`__host__ __device__`, launched by the CUDA backend as a
// grid-stride loop), so the host tests check the arithmetic the GPU runs.
//
// A work item is an element for element-wise kernels, a row for row
// reductions (softmax, layer norm) and a column for column reductions
// (columnSums, layerNormGradParams: a loop over rows, deterministic, no
// atomics). The losses' means are single-item functors (n = 1) that run after
// the per-row work on the same stream; embeddingGrad is the only kernel with
// atomics (repeated ids), on the device only.
//
// The formulas are those of CpuKernels.cpp and Optimizers.cpp: libm calls
// (expf, tanhf, sqrtf) instead of the CPU's vectorized approximations, so
// results agree to a few ulp, not bit for bit -- except dropout's mask,
// which is the same hash (DropoutHash.h) and therefore identical. A row's
// sums (softmax, layer norm) run sequentially in one work item, so they
// accumulate in double, where the CPU splits them over float lanes; column
// sums add row by row in float, in the CPU's order.
//
// Functors must stay trivially copyable (no virtuals, no owning members):
// they are CUDA kernel arguments. KernelsByFunctor checks it.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_DEVICEKERNELS_H
#define GPIPE_RUNTIME_DEVICE_DEVICEKERNELS_H

#include "gpipe/runtime/device/DropoutHash.h" // also defines GPIPE_HD

#include <cmath>
#include <cstdint>

/// dst += v from concurrent work items: atomicAdd on the device; the host
/// backend runs work items one at a time.
#ifndef GPIPE_ATOMIC_ADD
#ifdef __CUDA_ARCH__
#define GPIPE_ATOMIC_ADD(ptr, v) atomicAdd((ptr), (v))
#else
#define GPIPE_ATOMIC_ADD(ptr, v) (*(ptr) += (v))
#endif
#endif

namespace gpipe::runtime::device::kernels {

//===-- constants and row helpers -----------------------------------------===//

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
/// Largest exp argument whose exp is finite (CpuKernels' fastExp saturates
/// there): GELU's e / (1 + e) never becomes inf / inf.
constexpr float kExpMax = 88.3762626647949f;
/// Smallest normal float: below it a probability has lost relative precision.
constexpr float kMinNormal = 1.17549435e-38f;

/// max of x[0, n), -inf for n = 0 (as CpuKernels' maxOf; n >= 1 here).
GPIPE_HD inline float rowMax(const float *x, int64_t n) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j)
    m = x[j] > m ? x[j] : m;
  return m;
}

/// y[0, n) = softmax(x[0, n)), max-shifted; x and y may be the same buffer.
/// Returns the log-partition log(sum(exp(x - max))) + max.
GPIPE_HD inline float softmaxRow(const float *x, float *y, int64_t n) {
  float m = rowMax(x, n);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    float e = ::expf(x[j] - m);
    sum += e;
    y[j] = e;
  }
  float s = static_cast<float>(sum);
  float inv = 1.0f / s;
  for (int64_t j = 0; j < n; ++j)
    y[j] *= inv;
  return ::logf(s) + m;
}

/// The log-partition of softmaxRow without writing anything.
GPIPE_HD inline float logPartition(const float *x, int64_t n) {
  float m = rowMax(x, n);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j)
    sum += ::expf(x[j] - m);
  return ::logf(static_cast<float>(sum)) + m;
}

//===-- element-wise: item = element --------------------------------------===//

GPIPE_HD inline float reluOf(float v) { return v > 0.0f ? v : 0.0f; }

/// 0.5 x (1 + tanh u) with 1 + tanh u = 2 / (1 + exp(-2u)): no cancellation
/// where tanh u rounds to -1 (the formulation of CpuKernels and the fused
/// kernels of KernelEmitter).
GPIPE_HD inline float geluOf(float v) {
  float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
  return 0.5f * v * (2.0f / (1.0f + ::expf(::fminf(-2.0f * u, kExpMax))));
}

struct Relu {
  const float *x;
  float *y;
  GPIPE_HD void operator()(int64_t i) const { y[i] = reluOf(x[i]); }
};

struct ReluGrad {
  const float *x, *dy;
  float *dx;
  GPIPE_HD void operator()(int64_t i) const {
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
  }
};

struct Gelu {
  const float *x;
  float *y;
  GPIPE_HD void operator()(int64_t i) const { y[i] = geluOf(x[i]); }
};

/// dy (0.5 (1 + tanh u) + 0.5 x sech^2(u) u'), sech^2 u = 4 e / (1 + e)^2.
struct GeluGrad {
  const float *x, *dy;
  float *dx;
  GPIPE_HD void operator()(int64_t i) const {
    float v = x[i];
    float v2 = v * v;
    float u = kSqrt2OverPi * v * (1.0f + kGeluCubic * v2);
    float e = ::expf(::fminf(-2.0f * u, kExpMax));
    float inv = 1.0f / (1.0f + e);
    float sech2 = 4.0f * (e * inv) * inv;
    float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v2);
    dx[i] = dy[i] * (0.5f * (2.0f * inv) + 0.5f * v * sech2 * du);
  }
};

struct Tanh {
  const float *x;
  float *y;
  GPIPE_HD void operator()(int64_t i) const { y[i] = ::tanhf(x[i]); }
};

/// From the forward's output: dx = dy (1 - y^2).
struct TanhGrad {
  const float *y, *dy;
  float *dx;
  GPIPE_HD void operator()(int64_t i) const {
    dx[i] = dy[i] * (1.0f - y[i] * y[i]);
  }
};

struct Add {
  const float *a, *b;
  float *y;
  GPIPE_HD void operator()(int64_t i) const { y[i] = a[i] + b[i]; }
};

struct Accumulate {
  const float *x;
  float *y;
  GPIPE_HD void operator()(int64_t i) const { y[i] += x[i]; }
};

struct AddRowVector {
  const float *bias;
  float *y;
  int64_t cols;
  GPIPE_HD void operator()(int64_t i) const { y[i] += bias[i % cols]; }
};

/// A dense op's epilogue: h += bias (bias may be null), y = act(h), with
/// act 0 relu, 1 gelu, 2 tanh (KernelApi's Activation).
struct BiasActivation {
  const float *bias;
  float *h, *y;
  int64_t cols;
  int act;
  GPIPE_HD void operator()(int64_t i) const {
    float v = bias ? h[i] + bias[i % cols] : h[i];
    h[i] = v;
    y[i] = act == 0 ? reluOf(v) : act == 1 ? geluOf(v) : ::tanhf(v);
  }
};

/// Item = column. Adds row by row onto sums[c], the order of the CPU's bias
/// gradient (denseBackward), so the host result is bit-identical.
struct ColumnSums {
  const float *x;
  float *sums;
  int64_t rows, cols;
  GPIPE_HD void operator()(int64_t c) const {
    float acc = sums[c];
    for (int64_t r = 0; r < rows; ++r)
      acc += x[r * cols + c];
    sums[c] = acc;
  }
};

//===-- rows: item = row --------------------------------------------------===//

/// With causalSeq > 0, row r only sees columns [0, r % causalSeq] and the
/// rest get probability 0.
struct Softmax {
  const float *x;
  float *y;
  int64_t cols, causalSeq;
  GPIPE_HD void operator()(int64_t r) const {
    int64_t n = cols;
    if (causalSeq > 0) {
      int64_t seen = r % causalSeq + 1;
      n = seen < cols ? seen : cols;
    }
    softmaxRow(x + r * cols, y + r * cols, n);
    for (int64_t j = n; j < cols; ++j)
      y[r * cols + j] = 0.0f;
  }
};

/// dx = y (dy - sum(dy y)); the sum is complete before dx is written, so dx
/// may alias dy.
struct SoftmaxGrad {
  const float *y, *dy;
  float *dx;
  int64_t cols;
  GPIPE_HD void operator()(int64_t r) const {
    const float *yr = y + r * cols;
    const float *dyr = dy + r * cols;
    float *dxr = dx + r * cols;
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      sum += dyr[j] * yr[j];
    float s = static_cast<float>(sum);
    for (int64_t j = 0; j < cols; ++j)
      dxr[j] = yr[j] * (dyr[j] - s);
  }
};

/// Two passes as on the CPU: the mean (a row with a large offset keeps its
/// digits), then the biased variance of the centered row.
struct LayerNorm {
  const float *x, *gamma, *beta;
  float *y, *mean, *rstd;
  int64_t cols;
  float epsilon;
  GPIPE_HD void operator()(int64_t r) const {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    normalizeRow(xr, gamma, beta, yr, mean + r, rstd + r, cols, epsilon);
  }

  GPIPE_HD static void normalizeRow(const float *xr, const float *gamma,
                                    const float *beta, float *yr, float *mean,
                                    float *rstd, int64_t cols, float epsilon) {
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      sum += xr[j];
    float mu = static_cast<float>(sum / static_cast<double>(cols));
    double sq = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      float d = xr[j] - mu;
      sq += d * d;
    }
    float var = static_cast<float>(sq) * (1.0f / static_cast<float>(cols));
    float rs = 1.0f / ::sqrtf(var + epsilon);
    *mean = mu;
    *rstd = rs;
    for (int64_t j = 0; j < cols; ++j)
      yr[j] = (xr[j] - mu) * rs * gamma[j] + beta[j];
  }
};

/// A residual add and the layer norm of its sum, row by row.
struct AddLayerNorm {
  const float *a, *b, *gamma, *beta;
  float *sum, *y, *mean, *rstd;
  int64_t cols;
  float epsilon;
  GPIPE_HD void operator()(int64_t r) const {
    float *sr = sum + r * cols;
    for (int64_t j = 0; j < cols; ++j)
      sr[j] = a[r * cols + j] + b[r * cols + j];
    LayerNorm::normalizeRow(sr, gamma, beta, y + r * cols, mean + r, rstd + r,
                            cols, epsilon);
  }
};

/// With g = dy gamma and xhat = (x - mean) rstd:
/// dx = rstd (g - mean(g) - xhat mean(g xhat)).
struct LayerNormGradInput {
  const float *dy, *x, *gamma, *mean, *rstd;
  float *dx;
  int64_t cols;
  GPIPE_HD void operator()(int64_t r) const {
    const float *xr = x + r * cols;
    const float *dyr = dy + r * cols;
    float *dxr = dx + r * cols;
    float mu = mean[r], rs = rstd[r];
    float invCols = 1.0f / static_cast<float>(cols);
    double sumG = 0.0, sumGHat = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      float g = dyr[j] * gamma[j];
      sumG += g;
      sumGHat += g * (xr[j] - mu);
    }
    float meanG = static_cast<float>(sumG) * invCols;
    float meanGHat = static_cast<float>(sumGHat) * rs * invCols;
    for (int64_t j = 0; j < cols; ++j) {
      float xHat = (xr[j] - mu) * rs;
      dxr[j] = rs * (dyr[j] * gamma[j] - meanG - xHat * meanGHat);
    }
  }
};

/// Item = column; adds row by row (the CPU's order). Either output may be
/// null.
struct LayerNormGradParams {
  const float *dy, *x, *mean, *rstd;
  float *dgamma, *dbeta;
  int64_t rows, cols;
  GPIPE_HD void operator()(int64_t c) const {
    if (dgamma) {
      float acc = dgamma[c];
      for (int64_t r = 0; r < rows; ++r)
        acc += dy[r * cols + c] * (x[r * cols + c] - mean[r]) * rstd[r];
      dgamma[c] = acc;
    }
    if (dbeta) {
      float acc = dbeta[c];
      for (int64_t r = 0; r < rows; ++r)
        acc += dy[r * cols + c];
      dbeta[c] = acc;
    }
  }
};

//===-- embedding: item = element of y / dy -------------------------------===//

struct Embedding {
  const int32_t *ids;
  const float *table;
  float *y;
  int64_t width;
  GPIPE_HD void operator()(int64_t i) const {
    int64_t row = i / width;
    y[i] = table[static_cast<int64_t>(ids[row]) * width + (i - row * width)];
  }
};

/// Repeated ids add into the same table row: atomics on the device (their
/// order, hence the rounding, is not deterministic there).
struct EmbeddingGrad {
  const int32_t *ids;
  const float *dy;
  float *dtable;
  int64_t width;
  GPIPE_HD void operator()(int64_t i) const {
    int64_t row = i / width;
    float *dst =
        dtable + static_cast<int64_t>(ids[row]) * width + (i - row * width);
    GPIPE_ATOMIC_ADD(dst, dy[i]);
  }
};

//===-- dropout: item = element -------------------------------------------===//

/// The mask of cpu::dropoutForward bit for bit: element (r, c) keeps iff
/// dropoutUniform(dropoutRowKey(seed, step, rowOffset + r), c) >= rate.
/// rate <= 0 keeps everything (y = x), rate >= 1 drops everything (y = 0,
/// never 0 * inf); keepScale = 1 / (1 - rate) comes from the host.
struct Dropout {
  const float *x;
  float *y;
  uint8_t *mask;
  int64_t cols, rowOffset;
  uint64_t seed, step;
  float rate, keepScale;
  GPIPE_HD void operator()(int64_t i) const {
    if (rate <= 0.0f) {
      mask[i] = 1;
      y[i] = x[i];
      return;
    }
    if (rate >= 1.0f) {
      mask[i] = 0;
      y[i] = 0.0f;
      return;
    }
    int64_t r = i / cols;
    uint64_t key =
        dropoutRowKey(seed, step, static_cast<uint64_t>(rowOffset + r));
    bool keep =
        dropoutUniform(key, static_cast<uint64_t>(i - r * cols)) >= rate;
    mask[i] = keep;
    y[i] = keep ? x[i] * keepScale : 0.0f;
  }
};

struct DropoutGrad {
  const uint8_t *mask;
  const float *dy;
  float *dx;
  float keepScale;
  bool dropAll;
  GPIPE_HD void operator()(int64_t i) const {
    dx[i] = !dropAll && mask[i] ? dy[i] * keepScale : 0.0f;
  }
};

//===-- losses ------------------------------------------------------------===//

/// Item 0 only (after Softmax over the rows has written probs): loss[0] =
/// mean over rows of -log probs[label], in double. The CPU's
/// logPartition - logit[label] is the same value in exact arithmetic; the
/// saved probability is used unless it has lost its precision (below the
/// smallest normal, possibly 0), where the row's log-partition is recomputed
/// from the logits. So the mean costs O(rows), not O(rows * classes), on one
/// thread.
struct CrossEntropyMean {
  const float *logits, *probs;
  const int32_t *labels;
  float *loss;
  int64_t rows, classes;
  GPIPE_HD void operator()(int64_t) const {
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t label = labels[r];
      float p = probs[r * classes + label];
      if (p >= kMinNormal) {
        total -= ::log(static_cast<double>(p));
      } else {
        const float *lr = logits + r * classes;
        total += static_cast<double>(logPartition(lr, classes)) - lr[label];
      }
    }
    loss[0] =
        rows > 0 ? static_cast<float>(total / static_cast<double>(rows)) : 0.0f;
  }
};

/// Item = element: factor (probs - onehot(label)), factor = scale / rows.
struct CrossEntropyGrad {
  const float *probs;
  const int32_t *labels;
  float *dlogits;
  int64_t classes;
  float factor;
  GPIPE_HD void operator()(int64_t i) const {
    int64_t r = i / classes;
    float p = probs[i];
    dlogits[i] =
        i - r * classes == labels[r] ? factor * (p - 1.0f) : factor * p;
  }
};

/// Item 0 only: loss[0] = mean of (prediction - target)^2, summed in double.
struct MseMean {
  const float *prediction, *target;
  float *loss;
  int64_t n;
  GPIPE_HD void operator()(int64_t) const {
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      double d = static_cast<double>(prediction[i]) - target[i];
      total += d * d;
    }
    loss[0] = n > 0 ? static_cast<float>(total / static_cast<double>(n)) : 0.0f;
  }
};

/// Item = element: factor (prediction - target), factor = 2 scale / n.
struct MseGrad {
  const float *prediction, *target;
  float *dprediction;
  float factor;
  GPIPE_HD void operator()(int64_t i) const {
    dprediction[i] = factor * (prediction[i] - target[i]);
  }
};

//===-- optimizers (Optimizers.h): item = element -------------------------===//

struct SgdStep {
  float *params;
  const float *grads;
  float lr;
  GPIPE_HD void operator()(int64_t i) const { params[i] -= lr * grads[i]; }
};

struct MomentumStep {
  float *params;
  const float *grads;
  float *velocity;
  float lr, momentum;
  GPIPE_HD void operator()(int64_t i) const {
    float v = momentum * velocity[i] + grads[i];
    velocity[i] = v;
    params[i] -= lr * v;
  }
};

struct RmsPropStep {
  float *params;
  const float *grads;
  float *meanSquare, *mom;
  float lr, decay, momentum, epsilon;
  GPIPE_HD void operator()(int64_t i) const {
    float g = grads[i];
    float ms = decay * meanSquare[i] + (1.0f - decay) * g * g;
    float m = momentum * mom[i] + lr * g / ::sqrtf(ms + epsilon);
    meanSquare[i] = ms;
    mom[i] = m;
    params[i] -= m;
  }
};

/// correction1 = 1 - beta1^t and correction2 = 1 - beta2^t, computed on the
/// host in double (as applyOptimizer) and rounded to float.
struct AdamStep {
  float *params;
  const float *grads;
  float *m, *v;
  float lr, beta1, beta2, epsilon, correction1, correction2;
  GPIPE_HD void operator()(int64_t i) const {
    float g = grads[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] -=
        lr * (mi / correction1) / (::sqrtf(vi / correction2) + epsilon);
  }
};

} // namespace gpipe::runtime::device::kernels

#endif // GPIPE_RUNTIME_DEVICE_DEVICEKERNELS_H
