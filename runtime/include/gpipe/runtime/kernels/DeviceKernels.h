//===- DeviceKernels.h - Scalar bodies of the device kernels ----*- C++ -*-===//
//
// One functor per KernelApi kernel: it holds its pointers and sizes by value
// and computes one work item in `operator()(i)`. The same code compiles with
// g++ (the host backend, whose tests compare it with the CPU kernels) and
// with nvcc (`__host__ __device__`, launched by the CUDA backend as a
// grid-stride loop), so the host tests check the arithmetic the GPU runs.
//
// A work item is an element for element-wise kernels and a column for
// embeddingGrad (a loop over rows in the CPU's order, deterministic, no
// atomics). The column reductions (columnSums, layerNormGradParams) are
// column kernels, many lanes a column (ColumnKernels.h). Row reductions
// (softmax, layer norm, the losses' means) are row kernels: kRowLanes lanes
// share a row -- a warp on the GPU -- and combine their partial sums in a
// fixed butterfly order (see "rows" below), on the GPU and on the host alike.
//
// The formulas are those of CpuKernels.cpp and Optimizers.cpp: libm calls
// (expf, tanhf, sqrtf) instead of the CPU's vectorized approximations, so
// results agree to a few ulp, not bit for bit -- except dropout's mask,
// which is the same hash (DropoutHash.h) and therefore identical, and
// embeddingGrad, which adds in the CPU's order.
//
// Functors must stay trivially copyable (no virtuals, no owning members):
// they are CUDA kernel arguments. KernelsByFunctor checks it.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_DEVICEKERNELS_H
#define GPIPE_RUNTIME_DEVICE_DEVICEKERNELS_H

#include "gpipe/runtime/kernels/DropoutHash.h" // also defines GPIPE_HD

#include <cmath>
#include <cstdint>

namespace gpipe::runtime::device::kernels {

//===-- constants and row helpers -----------------------------------------===//

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
/// Largest exp argument whose exp is finite (CpuKernels' fastExp saturates
/// there): GELU's e / (1 + e) never becomes inf / inf.
constexpr float kExpMax = 88.3762626647949f;
/// Smallest normal float: below it a probability has lost relative precision.
constexpr float kMinNormal = 1.17549435e-38f;

/// max of x[0, n), -inf for n = 0 (as CpuKernels' maxOf; n >= 1 here). It
/// skips a NaN, which is harmless: the NaN's exp(x - max) is NaN, so its
/// row's softmax and log-partition are NaN all the same (as in PyTorch).
GPIPE_HD inline float rowMax(const float *x, int64_t n) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j)
    m = x[j] > m ? x[j] : m;
  return m;
}

/// log(sum(exp(x - max))) + max of x[0, n), sequentially (the losses' rare
/// fallback for a probability that underflowed).
GPIPE_HD inline float logPartition(const float *x, int64_t n) {
  float m = rowMax(x, n);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j)
    sum += ::expf(x[j] - m);
  return ::logf(static_cast<float>(sum)) + m;
}

//===-- element-wise: item = element --------------------------------------===//

/// relu(NaN) = NaN, as PyTorch (no fmaxf: fmaxf(NaN, 0) = 0); -0 gives +0.
GPIPE_HD inline float reluOf(float v) { return v <= 0.0f ? 0.0f : v; }

/// 0.5 x (1 + tanh u) with 1 + tanh u = 2 / (1 + exp(-2u)): no cancellation
/// where tanh u rounds to -1 (the formulation of CpuKernels and the fused
/// kernels of KernelEmitter).
GPIPE_HD inline float geluOf(float v) {
  float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
  return 0.5f * v * (2.0f / (1.0f + ::expf(::fminf(-2.0f * u, kExpMax))));
}

/// The exact GELU x Phi(x), with Phi(x) = erfc(-x / sqrt 2) / 2 rather than
/// (1 + erf(x / sqrt 2)) / 2, which cancels in the left tail (x < -3 keeps
/// no digit of Phi in float). erfcf is libm's and CUDA's.
GPIPE_HD inline float normalCdfOf(float v) {
  return 0.5f * ::erfcf(-v * kInvSqrt2);
}
GPIPE_HD inline float geluErfOf(float v) { return v * normalCdfOf(v); }
/// d/dx [x Phi(x)] = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
GPIPE_HD inline float geluErfSlopeOf(float v) {
  return normalCdfOf(v) + v * kInvSqrt2Pi * ::expf(-0.5f * v * v);
}

struct Relu {
  const float *x;
  float *y;
  GPIPE_HD void operator()(int64_t i) const { y[i] = reluOf(x[i]); }
};

/// PyTorch's threshold_backward: the gradient passes where x is NaN.
struct ReluGrad {
  const float *x, *dy;
  float *dx;
  GPIPE_HD void operator()(int64_t i) const {
    dx[i] = x[i] <= 0.0f ? 0.0f : dy[i];
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

struct GeluErf {
  const float *x;
  float *y;
  GPIPE_HD void operator()(int64_t i) const { y[i] = geluErfOf(x[i]); }
};

struct GeluErfGrad {
  const float *x, *dy;
  float *dx;
  GPIPE_HD void operator()(int64_t i) const {
    dx[i] = dy[i] * geluErfSlopeOf(x[i]);
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
/// act 0 relu, 1 gelu, 2 tanh, 3 gelu_erf (KernelApi's Activation).
struct BiasActivation {
  const float *bias;
  float *h, *y;
  int64_t cols;
  int act;
  GPIPE_HD void operator()(int64_t i) const {
    float v = bias ? h[i] + bias[i % cols] : h[i];
    h[i] = v;
    y[i] = act == 0   ? reluOf(v)
           : act == 1 ? geluOf(v)
           : act == 2 ? ::tanhf(v)
                      : geluErfOf(v);
  }
};

//===-- rows: kRowLanes lanes per row ------------------------------------===//
//
// A row kernel F runs with kRowLanes lanes per row; lane l handles columns
// l, l + kRowLanes, ... For each of its F::kPasses passes, every lane computes
// F::partial over its columns (given the results of the earlier passes), the
// lanes' partials are combined (F::combineOf: Sum or Max) and every lane gets
// the result; then each lane writes its columns (F::finish). partial may write
// the lane's own columns, which only that lane reads again.
//
// The combination is a butterfly: for offset = 16, 8, 4, 2, 1, lane l takes
// combine(v[l], v[l ^ offset]). Addition being commutative, every lane ends
// with the same value, and the order of the additions is fixed: the CUDA
// backend does it with __shfl_xor_sync, the host backends with runRowOnHost,
// so both add in the same order (deterministic on the GPU too).

constexpr int kRowLanes = 32;

enum class Combine { Sum, Max };

template <class T> GPIPE_HD inline T combineValues(Combine how, T a, T b) {
  return how == Combine::Sum ? a + b : (b > a ? b : a);
}

/// Two-step layer norm of one row, shared by LayerNorm and AddLayerNorm:
/// pass 0 sums the row (its mean), pass 1 the squared deviations from that
/// mean (a row with a large offset keeps its digits), as the CPU does.
struct LayerNormRow {
  GPIPE_HD static float partial(int pass, const float *xr, int lane,
                                int64_t cols, const float *done) {
    float acc = 0.0f;
    if (pass == 0) {
      for (int64_t j = lane; j < cols; j += kRowLanes)
        acc += xr[j];
      return acc;
    }
    const float mu = meanOf(done, cols);
    for (int64_t j = lane; j < cols; j += kRowLanes) {
      float d = xr[j] - mu;
      acc += d * d;
    }
    return acc;
  }
  GPIPE_HD static float meanOf(const float *done, int64_t cols) {
    return done[0] / static_cast<float>(cols);
  }
  GPIPE_HD static void finish(const float *xr, const float *gamma,
                              const float *beta, float *yr, float *mean,
                              float *rstd, int lane, int64_t cols,
                              float epsilon, const float *done) {
    const float mu = meanOf(done, cols);
    const float var = done[1] * (1.0f / static_cast<float>(cols));
    const float rs = 1.0f / ::sqrtf(var + epsilon);
    if (lane == 0) {
      *mean = mu;
      *rstd = rs;
    }
    for (int64_t j = lane; j < cols; j += kRowLanes)
      yr[j] = (xr[j] - mu) * rs * gamma[j] + beta[j];
  }
};

/// Row `row` of the row kernel f on the host: the lanes one after another,
/// with the partials and the butterfly of the GPU's warp.
template <class F> inline void runRowOnHost(const F &f, int64_t row) {
  using Value = typename F::Value;
  Value done[F::kPasses];
  Value lanes[kRowLanes], next[kRowLanes];
  for (int pass = 0; pass < F::kPasses; ++pass) {
    for (int l = 0; l < kRowLanes; ++l)
      lanes[l] = f.partial(pass, row, l, done);
    const Combine how = F::combineOf(pass);
    for (int offset = kRowLanes / 2; offset > 0; offset /= 2) {
      for (int l = 0; l < kRowLanes; ++l)
        next[l] = combineValues(how, lanes[l], lanes[l ^ offset]);
      for (int l = 0; l < kRowLanes; ++l)
        lanes[l] = next[l];
    }
    done[pass] = lanes[0];
  }
  for (int l = 0; l < kRowLanes; ++l)
    f.finish(row, l, done);
}

/// The columns row r sees: all `cols`, or with causalSeq > 0 (attention's
/// mask) [0, r % causalSeq].
GPIPE_HD inline int64_t visibleColumns(int64_t r, int64_t cols,
                                       int64_t causalSeq) {
  if (causalSeq <= 0)
    return cols;
  int64_t seen = r % causalSeq + 1;
  return seen < cols ? seen : cols;
}

/// Softmax of each row, max-shifted, over the columns it sees
/// (visibleColumns); the rest get probability 0. x and y may be the same
/// buffer. A NaN the row sees makes the whole row NaN (see rowMax). With
/// `lse`, lse[r] = max + log(sum of exp(x - max)), the row's log-sum-exp.
struct Softmax {
  const float *x;
  float *y;
  int64_t cols, causalSeq;
  float *lse = nullptr;

  using Value = float;
  static constexpr int kPasses = 2; // the max, then the sum of exponentials
  GPIPE_HD static Combine combineOf(int pass) {
    return pass == 0 ? Combine::Max : Combine::Sum;
  }
  GPIPE_HD int64_t visible(int64_t r) const {
    return visibleColumns(r, cols, causalSeq);
  }
  GPIPE_HD float partial(int pass, int64_t r, int lane,
                         const float *done) const {
    const float *xr = x + r * cols;
    const int64_t n = visible(r);
    if (pass == 0) {
      float m = -INFINITY;
      for (int64_t j = lane; j < n; j += kRowLanes)
        m = xr[j] > m ? xr[j] : m;
      return m;
    }
    float sum = 0.0f;
    for (int64_t j = lane; j < n; j += kRowLanes)
      sum += ::expf(xr[j] - done[0]);
    return sum;
  }
  GPIPE_HD void finish(int64_t r, int lane, const float *done) const {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    const int64_t n = visible(r);
    const float inv = 1.0f / done[1];
    for (int64_t j = lane; j < cols; j += kRowLanes)
      yr[j] = j < n ? ::expf(xr[j] - done[0]) * inv : 0.0f;
    if (lse && lane == 0)
      lse[r] = done[0] + ::logf(done[1]);
  }
};

/// y = exp(x - lse[row]) where the row sees the column (visibleColumns),
/// else 0: Softmax's probabilities again from its saved log-sum-exp. y may
/// be x.
struct SoftmaxFromLse {
  const float *x, *lse;
  float *y;
  int64_t cols, causalSeq;
  GPIPE_HD void operator()(int64_t i) const {
    const int64_t r = i / cols, j = i % cols;
    y[i] = j < visibleColumns(r, cols, causalSeq) ? ::expf(x[i] - lse[r])
                                                  : 0.0f;
  }
};

/// dx = y (dy - sum(dy y)); the sum is complete before dx is written, so dx
/// may alias dy.
struct SoftmaxGrad {
  const float *y, *dy;
  float *dx;
  int64_t cols;

  using Value = float;
  static constexpr int kPasses = 1;
  GPIPE_HD static Combine combineOf(int) { return Combine::Sum; }
  GPIPE_HD float partial(int, int64_t r, int lane, const float *) const {
    float sum = 0.0f;
    for (int64_t j = lane; j < cols; j += kRowLanes)
      sum += dy[r * cols + j] * y[r * cols + j];
    return sum;
  }
  GPIPE_HD void finish(int64_t r, int lane, const float *done) const {
    for (int64_t j = lane; j < cols; j += kRowLanes)
      dx[r * cols + j] = y[r * cols + j] * (dy[r * cols + j] - done[0]);
  }
};

struct LayerNorm {
  const float *x, *gamma, *beta;
  float *y, *mean, *rstd;
  int64_t cols;
  float epsilon;

  using Value = float;
  static constexpr int kPasses = 2;
  GPIPE_HD static Combine combineOf(int) { return Combine::Sum; }
  GPIPE_HD float partial(int pass, int64_t r, int lane,
                         const float *done) const {
    return LayerNormRow::partial(pass, x + r * cols, lane, cols, done);
  }
  GPIPE_HD void finish(int64_t r, int lane, const float *done) const {
    LayerNormRow::finish(x + r * cols, gamma, beta, y + r * cols, mean + r,
                         rstd + r, lane, cols, epsilon, done);
  }
};

/// A residual add and the layer norm of its sum: pass 0 writes the lane's
/// columns of `sum` as it adds them up.
struct AddLayerNorm {
  const float *a, *b, *gamma, *beta;
  float *sum, *y, *mean, *rstd;
  int64_t cols;
  float epsilon;

  using Value = float;
  static constexpr int kPasses = 2;
  GPIPE_HD static Combine combineOf(int) { return Combine::Sum; }
  GPIPE_HD float partial(int pass, int64_t r, int lane,
                         const float *done) const {
    float *sr = sum + r * cols;
    if (pass == 0)
      for (int64_t j = lane; j < cols; j += kRowLanes)
        sr[j] = a[r * cols + j] + b[r * cols + j];
    return LayerNormRow::partial(pass, sr, lane, cols, done);
  }
  GPIPE_HD void finish(int64_t r, int lane, const float *done) const {
    LayerNormRow::finish(sum + r * cols, gamma, beta, y + r * cols, mean + r,
                         rstd + r, lane, cols, epsilon, done);
  }
};

/// With g = dy gamma and xhat = (x - mean) rstd:
/// dx = rstd (g - mean(g) - xhat mean(g xhat)); pass 0 sums g, pass 1
/// g (x - mean).
struct LayerNormGradInput {
  const float *dy, *x, *gamma, *mean, *rstd;
  float *dx;
  int64_t cols;

  using Value = float;
  static constexpr int kPasses = 2;
  GPIPE_HD static Combine combineOf(int) { return Combine::Sum; }
  GPIPE_HD float partial(int pass, int64_t r, int lane, const float *) const {
    const float mu = mean[r];
    float acc = 0.0f;
    for (int64_t j = lane; j < cols; j += kRowLanes) {
      float g = dy[r * cols + j] * gamma[j];
      acc += pass == 0 ? g : g * (x[r * cols + j] - mu);
    }
    return acc;
  }
  GPIPE_HD void finish(int64_t r, int lane, const float *done) const {
    const float mu = mean[r], rs = rstd[r];
    const float invCols = 1.0f / static_cast<float>(cols);
    const float meanG = done[0] * invCols;
    const float meanGHat = done[1] * rs * invCols;
    for (int64_t j = lane; j < cols; j += kRowLanes) {
      float xHat = (x[r * cols + j] - mu) * rs;
      dx[r * cols + j] =
          rs * (dy[r * cols + j] * gamma[j] - meanG - xHat * meanGHat);
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

/// Item = column of the table: adds dy's rows in order, as the CPU does, so
/// repeated ids add up deterministically (no atomics) and in the CPU's order.
struct EmbeddingGrad {
  const int32_t *ids;
  const float *dy;
  float *dtable;
  int64_t n, width;
  GPIPE_HD void operator()(int64_t c) const {
    for (int64_t i = 0; i < n; ++i)
      dtable[static_cast<int64_t>(ids[i]) * width + c] += dy[i * width + c];
  }
};

//===-- dropout: item = element -------------------------------------------===//

/// The mask of cpu::dropoutForward bit for bit: element (r, c) keeps iff
/// dropoutUniform(dropoutRowKey(seed, step, rowOffset + r), c) >= rate.
/// rate <= 0 keeps everything (y = x), rate >= 1 drops everything (never
/// x * inf); keepScale = 1 / (1 - rate) comes from the host. A dropped
/// element is x - x: 0 for a finite x, NaN for NaN or inf (PyTorch's x * 0).
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
      y[i] = x[i] - x[i];
      return;
    }
    int64_t r = i / cols;
    uint64_t key =
        dropoutRowKey(seed, step, static_cast<uint64_t>(rowOffset + r));
    bool keep =
        dropoutUniform(key, static_cast<uint64_t>(i - r * cols)) >= rate;
    mask[i] = keep;
    y[i] = keep ? x[i] * keepScale : x[i] - x[i];
  }
};

struct DropoutGrad {
  const uint8_t *mask;
  const float *dy;
  float *dx;
  float keepScale;
  bool dropAll;
  GPIPE_HD void operator()(int64_t i) const {
    dx[i] = !dropAll && mask[i] ? dy[i] * keepScale : dy[i] - dy[i];
  }
};

//===-- losses ------------------------------------------------------------===//

/// A row kernel over one "row", the whole batch (after Softmax over the rows
/// has written probs): loss[0] = mean over rows of -log probs[label], each
/// lane summing its rows in double. The CPU's logPartition - logit[label] is
/// the same value in exact arithmetic; the saved probability is used unless
/// it has lost its precision (below the smallest normal, possibly 0), where
/// the row's log-partition is recomputed from the logits. So the mean costs
/// O(rows), not O(rows * classes).
struct CrossEntropyMean {
  const float *logits, *probs;
  const int32_t *labels;
  float *loss;
  int64_t rows, classes;

  using Value = double;
  static constexpr int kPasses = 1;
  GPIPE_HD static Combine combineOf(int) { return Combine::Sum; }
  GPIPE_HD double partial(int, int64_t, int lane, const double *) const {
    double total = 0.0;
    for (int64_t r = lane; r < rows; r += kRowLanes) {
      int64_t label = labels[r];
      float p = probs[r * classes + label];
      if (p >= kMinNormal) {
        total -= ::log(static_cast<double>(p));
      } else {
        const float *lr = logits + r * classes;
        total += static_cast<double>(logPartition(lr, classes)) - lr[label];
      }
    }
    return total;
  }
  GPIPE_HD void finish(int64_t, int lane, const double *done) const {
    if (lane == 0)
      loss[0] = rows > 0
                    ? static_cast<float>(done[0] / static_cast<double>(rows))
                    : 0.0f;
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

/// A row kernel over one "row", all n values: loss[0] = mean of
/// (prediction - target)^2, each lane summing in double.
struct MseMean {
  const float *prediction, *target;
  float *loss;
  int64_t n;

  using Value = double;
  static constexpr int kPasses = 1;
  GPIPE_HD static Combine combineOf(int) { return Combine::Sum; }
  GPIPE_HD double partial(int, int64_t, int lane, const double *) const {
    double total = 0.0;
    for (int64_t i = lane; i < n; i += kRowLanes) {
      double d = static_cast<double>(prediction[i]) - target[i];
      total += d * d;
    }
    return total;
  }
  GPIPE_HD void finish(int64_t, int lane, const double *done) const {
    if (lane == 0)
      loss[0] =
          n > 0 ? static_cast<float>(done[0] / static_cast<double>(n)) : 0.0f;
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

} // namespace gpipe::runtime::device::kernels

#endif // GPIPE_RUNTIME_DEVICE_DEVICEKERNELS_H
