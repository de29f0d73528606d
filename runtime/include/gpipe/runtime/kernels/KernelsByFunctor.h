//===- KernelsByFunctor.h - KernelApi on top of a forEach -------*- C++ -*-===//
//
// Implements every KernelApi kernel but gemm by building its functor
// (DeviceKernels.h) and handing it to the backend's
//
//   template <class F> void forEach(StreamId s, int64_t n, const F &f);
//
// which runs f(i) for every i in [0, n), in stream order on `s` (the host
// backend: a loop; CUDA: a grid-stride kernel taking f by value), and row
// kernels (DeviceKernels.h's "rows") to its
//
//   template <class F> void forEachRow(StreamId s, int64_t rows, const F &f);
//
// which runs every row with kernels::kRowLanes lanes (the host: runRowOnHost;
// CUDA: a warp per row), and column kernels (ColumnKernels.h) to its
//
//   template <class F> void forEachColumn(StreamId s, int64_t cols, const F
//   &f);
//
// which runs every column with kernels::kColumnLanes lanes (the host:
// runColumnOnHost; CUDA: a block of kColumnTile columns). Kernels of two phases
// (the losses: rows, then their mean) make two calls on the same stream, which
// orders them. Empty calls never reach the backend, except that a loss's mean
// is still written (0, as the CPU kernels return) for empty inputs.
//
// Derived is the backend (CRTP: forEach is a template, so it cannot be
// virtual); Base is KernelApi or a class derived from it, whose constructors
// are inherited.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_KERNELSBYFUNCTOR_H
#define GPIPE_RUNTIME_DEVICE_KERNELSBYFUNCTOR_H

#include "gpipe/runtime/kernels/BatchNormKernels.h"
#include "gpipe/runtime/kernels/ColumnKernels.h"
#include "gpipe/runtime/kernels/DeviceKernels.h"
#include "gpipe/runtime/kernels/ImageKernels.h"
#include "gpipe/runtime/kernels/KernelApi.h"
#include "gpipe/runtime/kernels/OptimizerKernels.h"

#include <cassert>
#include <cmath>
#include <type_traits>

namespace gpipe::runtime::device {

template <class Derived, class Base> class KernelsByFunctor : public Base {
  static_assert(std::is_base_of_v<KernelApi, Base>,
                "KernelsByFunctor implements KernelApi");

public:
  using Base::Base;

  //===-- element-wise ----------------------------------------------------===//
  void relu(StreamId s, const float *x, float *y, int64_t n) override {
    launch(s, n, kernels::Relu{x, y});
  }
  void reluGrad(StreamId s, const float *x, const float *dy, float *dx,
                int64_t n) override {
    launch(s, n, kernels::ReluGrad{x, dy, dx});
  }
  void gelu(StreamId s, const float *x, float *y, int64_t n) override {
    launch(s, n, kernels::Gelu{x, y});
  }
  void geluGrad(StreamId s, const float *x, const float *dy, float *dx,
                int64_t n) override {
    launch(s, n, kernels::GeluGrad{x, dy, dx});
  }
  void geluErf(StreamId s, const float *x, float *y, int64_t n) override {
    launch(s, n, kernels::GeluErf{x, y});
  }
  void geluErfGrad(StreamId s, const float *x, const float *dy, float *dx,
                   int64_t n) override {
    launch(s, n, kernels::GeluErfGrad{x, dy, dx});
  }
  void tanh(StreamId s, const float *x, float *y, int64_t n) override {
    launch(s, n, kernels::Tanh{x, y});
  }
  void tanhGrad(StreamId s, const float *y, const float *dy, float *dx,
                int64_t n) override {
    launch(s, n, kernels::TanhGrad{y, dy, dx});
  }
  void add(StreamId s, const float *a, const float *b, float *y,
           int64_t n) override {
    launch(s, n, kernels::Add{a, b, y});
  }
  void accumulate(StreamId s, const float *x, float *y, int64_t n) override {
    launch(s, n, kernels::Accumulate{x, y});
  }
  void addRowVector(StreamId s, const float *bias, float *y, int64_t rows,
                    int64_t cols) override {
    launch(s, rows * cols, kernels::AddRowVector{bias, y, cols});
  }
  void columnSums(StreamId s, const float *x, float *sums, int64_t rows,
                  int64_t cols) override {
    // No rows: nothing to add (sums keep their values).
    if (rows > 0)
      launchColumns(s, cols, kernels::ColumnSums{x, sums, rows, cols});
  }

  //===-- rows ------------------------------------------------------------===//
  void softmax(StreamId s, const float *x, float *y, int64_t rows, int64_t cols,
               int64_t causalSeq) override {
    if (cols > 0)
      launchRows(s, rows, kernels::Softmax{x, y, cols, causalSeq});
  }
  void softmaxWithLse(StreamId s, const float *x, float *y, float *lse,
                      int64_t rows, int64_t cols,
                      int64_t causalSeq) override {
    if (cols > 0)
      launchRows(s, rows, kernels::Softmax{x, y, cols, causalSeq, lse});
  }
  void softmaxFromLse(StreamId s, const float *x, const float *lse, float *y,
                      int64_t rows, int64_t cols,
                      int64_t causalSeq) override {
    launch(s, rows * cols, kernels::SoftmaxFromLse{x, lse, y, cols, causalSeq});
  }
  void softmaxGrad(StreamId s, const float *y, const float *dy, float *dx,
                   int64_t rows, int64_t cols) override {
    if (cols > 0)
      launchRows(s, rows, kernels::SoftmaxGrad{y, dy, dx, cols});
  }
  void layerNorm(StreamId s, const float *x, const float *gamma,
                 const float *beta, float *y, float *mean, float *rstd,
                 int64_t rows, int64_t cols, float epsilon) override {
    if (cols > 0)
      launchRows(
          s, rows,
          kernels::LayerNorm{x, gamma, beta, y, mean, rstd, cols, epsilon});
  }
  void biasActivation(StreamId s, const float *bias, float *h, float *y,
                      int64_t rows, int64_t cols, Activation act) override {
    launch(s, rows * cols,
           kernels::BiasActivation{bias, h, y, cols, static_cast<int>(act)});
  }
  void addLayerNorm(StreamId s, const float *a, const float *b, float *sum,
                    const float *gamma, const float *beta, float *y,
                    float *mean, float *rstd, int64_t rows, int64_t cols,
                    float epsilon) override {
    if (cols > 0)
      launchRows(s, rows,
                 kernels::AddLayerNorm{a, b, gamma, beta, sum, y, mean, rstd,
                                       cols, epsilon});
  }
  void layerNormGradInput(StreamId s, const float *dy, const float *x,
                          const float *gamma, const float *mean,
                          const float *rstd, float *dx, int64_t rows,
                          int64_t cols) override {
    if (cols > 0)
      launchRows(
          s, rows,
          kernels::LayerNormGradInput{dy, x, gamma, mean, rstd, dx, cols});
  }
  void layerNormGradParams(StreamId s, const float *dy, const float *x,
                           const float *mean, const float *rstd, float *dgamma,
                           float *dbeta, int64_t rows, int64_t cols) override {
    if (rows > 0 && (dgamma || dbeta))
      launchColumns(s, cols,
                    kernels::LayerNormGradParams{dy, x, mean, rstd, dgamma,
                                                 dbeta, rows, cols});
  }

  //===-- embedding -------------------------------------------------------===//
  void embedding(StreamId s, const int32_t *ids, const float *table, float *y,
                 int64_t n, int64_t width) override {
    launch(s, n * width, kernels::Embedding{ids, table, y, width});
  }
  void embeddingGrad(StreamId s, const int32_t *ids, const float *dy,
                     float *dtable, int64_t n, int64_t width) override {
    if (n > 0)
      launch(s, width, kernels::EmbeddingGrad{ids, dy, dtable, n, width});
  }

  //===-- dropout ---------------------------------------------------------===//
  void dropout(StreamId s, const float *x, float *y, uint8_t *mask,
               int64_t rows, int64_t cols, float rate, uint64_t seed,
               uint64_t step, int64_t rowOffset) override {
    // keepScale is only read for 0 < rate < 1; computed here, once, as the
    // CPU kernel does.
    float keepScale = rate > 0.0f && rate < 1.0f ? 1.0f / (1.0f - rate) : 1.0f;
    launch(s, rows * cols,
           kernels::Dropout{x, y, mask, cols, rowOffset, seed, step, rate,
                            keepScale});
  }
  void dropoutGrad(StreamId s, const uint8_t *mask, const float *dy, float *dx,
                   int64_t n, float rate) override {
    float keepScale =
        rate <= 0.0f || rate >= 1.0f ? 1.0f : 1.0f / (1.0f - rate);
    launch(s, n, kernels::DropoutGrad{mask, dy, dx, keepScale, rate >= 1.0f});
  }

  //===-- losses ----------------------------------------------------------===//
  void softmaxCrossEntropy(StreamId s, const float *logits,
                           const int32_t *labels, float *probs, float *loss,
                           int64_t rows, int64_t classes) override {
    if (classes > 0)
      launchRows(s, rows, kernels::Softmax{logits, probs, classes, 0});
    else
      rows = 0; // nothing to read; the mean below writes 0
    launchRows(
        s, 1,
        kernels::CrossEntropyMean{logits, probs, labels, loss, rows, classes});
  }
  void softmaxCrossEntropyGrad(StreamId s, const float *probs,
                               const int32_t *labels, float scale,
                               float *dlogits, int64_t rows,
                               int64_t classes) override {
    if (rows == 0)
      return;
    float factor = scale / static_cast<float>(rows);
    launch(s, rows * classes,
           kernels::CrossEntropyGrad{probs, labels, dlogits, classes, factor});
  }
  void mse(StreamId s, const float *prediction, const float *target,
           float *loss, int64_t n) override {
    launchRows(s, 1, kernels::MseMean{prediction, target, loss, n});
  }
  void mseGrad(StreamId s, const float *prediction, const float *target,
               float scale, float *dprediction, int64_t n) override {
    if (n == 0)
      return;
    float factor = 2.0f * scale / static_cast<float>(n);
    launch(s, n, kernels::MseGrad{prediction, target, dprediction, factor});
  }

  //===-- batch norm ------------------------------------------------------===//
  void batchNorm(StreamId s, const float *x, const float *gamma,
                 const float *beta, float *y, float *mean, float *rstd,
                 float *sum, float *squares, int64_t rows, int64_t cols,
                 float epsilon) override {
    if (rows <= 0)
      return;
    launchColumns(s, cols, kernels::BatchNormMean{x, mean, rows, cols});
    launchColumns(s, cols,
                  kernels::BatchNormVariance{x, mean, rstd, sum, squares, rows,
                                             cols, epsilon});
    launch(s, rows * cols,
           kernels::BatchNormApply{x, gamma, beta, mean, rstd, y, cols});
  }
  void batchNormInference(StreamId s, const float *x, const float *gamma,
                          const float *beta, const float *runningMean,
                          const float *runningVar, float *y, float *mean,
                          float *rstd, int64_t rows, int64_t cols,
                          float epsilon) override {
    launch(s, cols,
           kernels::BatchNormRunningStats{runningMean, runningVar, mean, rstd,
                                          epsilon});
    launch(s, rows * cols,
           kernels::BatchNormApply{x, gamma, beta, mean, rstd, y, cols});
  }
  void batchNormGrad(StreamId s, const float *dy, const float *x,
                     const float *gamma, const float *mean, const float *rstd,
                     float *sums, float *dx, float *dgamma, float *dbeta,
                     int64_t rows, int64_t cols) override {
    if (rows <= 0)
      return;
    launchColumns(s, cols,
                  kernels::BatchNormGradSums{dy, x, mean, rstd, sums, dgamma,
                                             dbeta, rows, cols});
    if (dx)
      launch(s, rows * cols,
             kernels::BatchNormGradInput{dy, x, gamma, mean, rstd, sums, dx,
                                         rows, cols});
  }
  void batchNormRunningUpdate(StreamId s, float *runningMean, float *runningVar,
                              const float *sum, const float *squares,
                              int64_t cols, int64_t count,
                              float momentum) override {
    if (count > 0)
      launch(s, cols,
             kernels::BatchNormRunningUpdate{runningMean, runningVar, sum,
                                             squares, static_cast<float>(count),
                                             momentum});
  }

  //===-- images ----------------------------------------------------------===//
  void im2col(StreamId s, const float *x, float *patches,
              const WindowGeometry &g) override {
    if (g.patchElements() > 0)
      launch(s, g.patchElements() / (g.channels / g.groups),
             kernels::Im2col{x, patches, g});
  }
  void col2im(StreamId s, const float *patches, float *dx,
              const WindowGeometry &g) override {
    launch(s, g.batch * g.height * g.width * g.channels,
           kernels::Col2im{patches, dx, g});
  }
  void maxPool2d(StreamId s, const float *x, float *y,
                 const WindowGeometry &g) override {
    launch(s, g.pixels() * g.channels, kernels::MaxPool2d{x, y, g});
  }
  void maxPool2dGrad(StreamId s, const float *x, const float *dy, float *dx,
                     const WindowGeometry &g) override {
    launch(s, g.batch * g.height * g.width * g.channels,
           kernels::MaxPool2dGrad{x, dy, dx, g});
  }
  void avgPool2d(StreamId s, const float *x, float *y,
                 const WindowGeometry &g) override {
    launch(s, g.pixels() * g.channels, kernels::AvgPool2d{x, y, g});
  }
  void avgPool2dGrad(StreamId s, const float *dy, float *dx,
                     const WindowGeometry &g) override {
    launch(s, g.batch * g.height * g.width * g.channels,
           kernels::AvgPool2dGrad{dy, dx, g});
  }
  void globalAvgPool(StreamId s, const float *x, float *y, int64_t batch,
                     int64_t pixels, int64_t channels) override {
    if (pixels > 0)
      launch(s, batch * channels,
             kernels::GlobalAvgPool{x, y, pixels, channels});
  }
  void globalAvgPoolGrad(StreamId s, const float *dy, float *dx, int64_t batch,
                         int64_t pixels, int64_t channels) override {
    launch(s, batch * pixels * channels,
           kernels::GlobalAvgPoolGrad{dy, dx, pixels, channels});
  }

  //===-- optimizer -------------------------------------------------------===//
  /// `slots` (an array of device pointers) is read now, on the host; only
  /// the buffers it points to must outlive the call.
  void optimizerStep(StreamId s, const OptimizerConfig &config, float *params,
                     const float *grads, float *const *slots, int64_t n,
                     const StepScalars *step) override {
    if (n <= 0)
      return; // slots may be null then
    const float l2 = config.weightDecay;
    switch (config.kind) {
    case OptimizerKind::Sgd:
      launch(s, n, kernels::SgdStep{params, grads, step, l2});
      return;
    case OptimizerKind::Momentum:
      launch(s, n,
             kernels::MomentumStep{params, grads, slots[0], step,
                                   config.momentum, l2});
      return;
    case OptimizerKind::RmsProp:
      launch(s, n,
             kernels::RmsPropStep{params, grads, slots[0], slots[1], step,
                                  config.decay, config.momentum,
                                  config.epsilon});
      return;
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW: {
      const float decoupled =
          config.kind == OptimizerKind::AdamW ? config.weightDecay : 0.0f;
      launch(s, n,
             kernels::AdamStep{params, grads, slots[0], slots[1], step,
                               config.beta1, config.beta2, config.epsilon,
                               decoupled});
      return;
    }
    }
    assert(false && "unknown optimizer kind");
  }

  void sumOfSquares(StreamId s, const float *x, int64_t n, double *partials,
                    int64_t parts) override {
    if (n <= 0 || parts <= 0)
      return;
    launch(s, parts,
           kernels::SquaresPartial{x, n, (n + parts - 1) / parts, partials});
  }

protected:
  /// Hands f over n items to the backend; n <= 0 launches nothing.
  template <class F> void launch(StreamId s, int64_t n, const F &f) {
    static_assert(std::is_trivially_copyable_v<F>,
                  "kernel functors are passed to CUDA kernels by value");
    if (n > 0)
      static_cast<Derived &>(*this).forEach(s, n, f);
  }
  /// Hands the row kernel f over `rows` rows to the backend; rows <= 0
  /// launches nothing.
  template <class F> void launchRows(StreamId s, int64_t rows, const F &f) {
    static_assert(std::is_trivially_copyable_v<F>,
                  "kernel functors are passed to CUDA kernels by value");
    if (rows > 0)
      static_cast<Derived &>(*this).forEachRow(s, rows, f);
  }
  /// Hands the column kernel f over `cols` columns to the backend; cols <= 0
  /// launches nothing.
  template <class F> void launchColumns(StreamId s, int64_t cols, const F &f) {
    static_assert(std::is_trivially_copyable_v<F>,
                  "kernel functors are passed to CUDA kernels by value");
    if (cols > 0)
      static_cast<Derived &>(*this).forEachColumn(s, cols, f);
  }
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_KERNELSBYFUNCTOR_H
