//===- KernelApi.h - The kernels a device backend runs on its streams ----===//
//
// Every non-GEMM computation of the device executor, as stream-ordered calls
// on device pointers. Two backends implement it with the SAME scalar bodies
// (DeviceKernels.h, `__host__ __device__` under nvcc): the CUDA backend
// launches them as grid-stride kernels, the host backend runs them as loops,
// so the host tests check the code the GPU runs against the CPU kernels.
//
// Conventions are those of CpuKernels.h: row-major f32, `rows` = product of
// all dimensions but the last, `cols` = the last. Calls are asynchronous:
// they are queued on `stream` and run in stream order; pointers must stay
// valid until the stream has passed them. Backward calls that say
// "accumulates" add into their output (parameter gradients); the others
// overwrite it.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_KERNELAPI_H
#define GPIPE_RUNTIME_DEVICE_KERNELAPI_H

#include "gpipe/runtime/bundle/MatmulGeometry.h"
#include "gpipe/runtime/bundle/OpTable.h"
#include "gpipe/runtime/kernels/GeneratedCall.h"
#include "gpipe/runtime/kernels/Optimizers.h"

#include <cstdint>
#include <vector>

namespace gpipe::runtime::device {

/// A backend's stream, by index (see DeviceBackend).
using StreamId = unsigned;

/// Row-major C[i] = alpha * op(A[i]) * op(B[i]) + beta * C[i] for i in
/// [0, count), where X[i] = x + i * strideX; op(A) is m x k, op(B) k x n.
/// lda/ldb/ldc are row strides in elements of the stored matrices.
struct GemmBatch {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  const float *a = nullptr;
  int64_t lda = 0, strideA = 0;
  const float *b = nullptr;
  int64_t ldb = 0, strideB = 0;
  float *c = nullptr;
  int64_t ldc = 0, strideC = 0;
  int64_t count = 1;
  /// b is a parameter: it does not change before the backend's next
  /// synchronize, so a backend may reuse a packed copy of it across calls
  /// (PackedGemm.h). Set only where b is the parameter's own storage, and
  /// only where the packing pays (the executor: more than one micro-batch).
  bool bIsParameter = false;
};

/// Multi-head self-attention of x[batch, seq, width] (CpuKernels.h's
/// attentionForward): saves qkv (with its bias), lse [batch, heads, seq] (the
/// log-sum-exp of each query's scores) and context for the gradient.
/// qkvBias [3 width] and outBias [width] are added to the two projections;
/// null: no bias. `scratch` holds attentionScratch(...) floats.
struct AttentionCall {
  const float *x = nullptr, *wqkv = nullptr, *wo = nullptr;
  const float *qkvBias = nullptr, *outBias = nullptr;
  float *y = nullptr, *qkv = nullptr, *lse = nullptr, *context = nullptr;
  float *scratch = nullptr;
  int64_t batch = 0, seq = 0, width = 0, heads = 1;
  bool causal = false;
};

/// Its gradient: dx (overwritten; may be null), dwqkv and dwo (accumulate),
/// from dy and the forward's saved qkv, lse and context (the probabilities
/// are recomputed from the scores and lse); dqkvBias and doutBias
/// (accumulate the column sums of dqkv and dy; null: no bias); `scratch`
/// holds attentionGradScratch(...) floats.
struct AttentionGradCall {
  const float *dy = nullptr, *x = nullptr, *wqkv = nullptr, *wo = nullptr;
  const float *qkv = nullptr, *lse = nullptr, *context = nullptr;
  float *dx = nullptr, *dwqkv = nullptr, *dwo = nullptr, *scratch = nullptr;
  float *dqkvBias = nullptr, *doutBias = nullptr;
  int64_t batch = 0, seq = 0, width = 0, heads = 1;
  bool causal = false;
};

/// y = numpy.matmul(op(a), op(b)) (MatmulGeometry.h) at the operands'
/// shapes of this call (a micro-batch's): each matrix of y is one GEMM of
/// the same m, n and k however the batch is split over micro-batches or
/// threads, so that it gets the same bits in each.
struct MatmulCall {
  const float *a = nullptr, *b = nullptr;
  float *y = nullptr;
  std::vector<int64_t> aShape, bShape;
  bool transposeA = false, transposeB = false;
};

/// The GEMMs of `call`, whose geometry is `g`, for y's `count` matrices from
/// `first` on: one product, or (count > 1) a strided batch of them, where
/// first is a multiple of g.innerRun().count and count at most that.
GemmBatch matmulGemms(const MatmulCall &call, const MatmulGeometry &g,
                      int64_t first, int64_t count);

/// The activation a dense op's fused epilogue applies.
enum class Activation { Relu, Gelu, Tanh, GeluErf };

class KernelApi {
public:
  virtual ~KernelApi() = default;

  virtual void gemm(StreamId stream, const GemmBatch &call) = 0;

  //===-- element-wise ----------------------------------------------------===//
  virtual void relu(StreamId s, const float *x, float *y, int64_t n) = 0;
  virtual void reluGrad(StreamId s, const float *x, const float *dy, float *dx,
                        int64_t n) = 0;
  virtual void gelu(StreamId s, const float *x, float *y, int64_t n) = 0;
  virtual void geluGrad(StreamId s, const float *x, const float *dy, float *dx,
                        int64_t n) = 0;
  /// The exact GELU, 0.5 x (1 + erf(x / sqrt 2)), and its gradient.
  virtual void geluErf(StreamId s, const float *x, float *y, int64_t n) = 0;
  virtual void geluErfGrad(StreamId s, const float *x, const float *dy,
                           float *dx, int64_t n) = 0;
  virtual void tanh(StreamId s, const float *x, float *y, int64_t n) = 0;
  /// Uses the forward's output y.
  virtual void tanhGrad(StreamId s, const float *y, const float *dy, float *dx,
                        int64_t n) = 0;
  /// y = a + b (y may alias a or b).
  virtual void add(StreamId s, const float *a, const float *b, float *y,
                   int64_t n) = 0;
  /// y += x (accumulates).
  virtual void accumulate(StreamId s, const float *x, float *y, int64_t n) = 0;
  /// y[r, c] += bias[c].
  virtual void addRowVector(StreamId s, const float *bias, float *y,
                            int64_t rows, int64_t cols) = 0;
  /// sums[c] += sum over r of x[r, c] (accumulates; bias gradients).
  virtual void columnSums(StreamId s, const float *x, float *sums, int64_t rows,
                          int64_t cols) = 0;

  //===-- rows ------------------------------------------------------------===//
  /// Softmax of each row. With causalSeq > 0, row r is query r % causalSeq
  /// and column j > r % causalSeq gets probability 0 (attention's mask).
  virtual void softmax(StreamId s, const float *x, float *y, int64_t rows,
                       int64_t cols, int64_t causalSeq) = 0;
  /// softmax, and lse[r] = log(sum of exp(x[r, j]) over the columns row r
  /// sees), max-shifted: attention saves it instead of the probabilities.
  virtual void softmaxWithLse(StreamId s, const float *x, float *y,
                              float *lse, int64_t rows, int64_t cols,
                              int64_t causalSeq) = 0;
  /// y[r, j] = exp(x[r, j] - lse[r]) where row r sees column j (as softmax's
  /// causalSeq), else 0: softmaxWithLse's probabilities again, from the
  /// scores and the saved lse. y may alias x.
  virtual void softmaxFromLse(StreamId s, const float *x, const float *lse,
                              float *y, int64_t rows, int64_t cols,
                              int64_t causalSeq) = 0;
  /// dx = y (dy - sum(dy y)) per row; dx may alias dy.
  virtual void softmaxGrad(StreamId s, const float *y, const float *dy,
                           float *dx, int64_t rows, int64_t cols) = 0;
  /// Saves mean[rows] and rstd[rows] = 1 / sqrt(biased var + epsilon).
  virtual void layerNorm(StreamId s, const float *x, const float *gamma,
                         const float *beta, float *y, float *mean, float *rstd,
                         int64_t rows, int64_t cols, float epsilon) = 0;
  /// dx (overwritten).
  virtual void layerNormGradInput(StreamId s, const float *dy, const float *x,
                                  const float *gamma, const float *mean,
                                  const float *rstd, float *dx, int64_t rows,
                                  int64_t cols) = 0;
  /// dgamma, dbeta (accumulate; either may be null).
  virtual void layerNormGradParams(StreamId s, const float *dy, const float *x,
                                   const float *mean, const float *rstd,
                                   float *dgamma, float *dbeta, int64_t rows,
                                   int64_t cols) = 0;

  //===-- fused pairs (OpTable.h's FusionKind): bit-identical to the two
  //---===//
  //===-- kernels they replace, in one pass ------------------------------===//
  /// h[r, c] += bias[c] (bias may be null), then y = act(h): a dense op's
  /// bias and the activation that reads its result.
  virtual void biasActivation(StreamId s, const float *bias, float *h, float *y,
                              int64_t rows, int64_t cols, Activation act) = 0;
  /// sum = a + b, then layerNorm(sum): a residual add and the layer norm
  /// that reads it.
  virtual void addLayerNorm(StreamId s, const float *a, const float *b,
                            float *sum, const float *gamma, const float *beta,
                            float *y, float *mean, float *rstd, int64_t rows,
                            int64_t cols, float epsilon) = 0;

  //===-- embedding (ids already checked to lie in [0, vocab)) ------------===//
  virtual void embedding(StreamId s, const int32_t *ids, const float *table,
                         float *y, int64_t n, int64_t width) = 0;
  /// dtable[ids[i], :] += dy[i, :] (accumulates).
  virtual void embeddingGrad(StreamId s, const int32_t *ids, const float *dy,
                             float *dtable, int64_t n, int64_t width) = 0;

  //===-- dropout: the mask of CpuKernels.h, bit for bit ------------------===//
  virtual void dropout(StreamId s, const float *x, float *y, uint8_t *mask,
                       int64_t rows, int64_t cols, float rate, uint64_t seed,
                       uint64_t step, int64_t rowOffset) = 0;
  virtual void dropoutGrad(StreamId s, const uint8_t *mask, const float *dy,
                           float *dx, int64_t n, float rate) = 0;

  //===-- losses (labels already checked to lie in [0, classes)) ----------===//
  /// loss[0] = mean over rows of -log softmax(logits)[label]; saves probs.
  virtual void softmaxCrossEntropy(StreamId s, const float *logits,
                                   const int32_t *labels, float *probs,
                                   float *loss, int64_t rows,
                                   int64_t classes) = 0;
  /// dlogits = scale * (probs - onehot(label)) / rows.
  virtual void softmaxCrossEntropyGrad(StreamId s, const float *probs,
                                       const int32_t *labels, float scale,
                                       float *dlogits, int64_t rows,
                                       int64_t classes) = 0;
  /// loss[0] = mean of (prediction - target)^2.
  virtual void mse(StreamId s, const float *prediction, const float *target,
                   float *loss, int64_t n) = 0;
  /// dprediction = scale * 2 (prediction - target) / n.
  virtual void mseGrad(StreamId s, const float *prediction,
                       const float *target, float scale, float *dprediction,
                       int64_t n) = 0;

  //===-- batch norm over [rows, channels] (BatchNormKernels.h) ----------===//
  /// With the micro-batch's statistics: saves mean[cols] and rstd[cols];
  /// sum and squares (null: not training) accumulate its sum and sum of
  /// squares per channel.
  virtual void batchNorm(StreamId s, const float *x, const float *gamma,
                         const float *beta, float *y, float *mean, float *rstd,
                         float *sum, float *squares, int64_t rows, int64_t cols,
                         float epsilon) = 0;
  /// With the running statistics (evaluation); saves them as mean and rstd.
  virtual void batchNormInference(StreamId s, const float *x,
                                  const float *gamma, const float *beta,
                                  const float *runningMean,
                                  const float *runningVar, float *y,
                                  float *mean, float *rstd, int64_t rows,
                                  int64_t cols, float epsilon) = 0;
  /// dx (overwritten; may be null), dgamma and dbeta (accumulate; either
  /// may be null); `sums` holds 2 cols floats of workspace.
  virtual void batchNormGrad(StreamId s, const float *dy, const float *x,
                             const float *gamma, const float *mean,
                             const float *rstd, float *sums, float *dx,
                             float *dgamma, float *dbeta, int64_t rows,
                             int64_t cols) = 0;
  /// The running statistics from the mini-batch's accumulated sums over
  /// `count` rows.
  virtual void batchNormRunningUpdate(StreamId s, float *runningMean,
                                      float *runningVar, const float *sum,
                                      const float *squares, int64_t cols,
                                      int64_t count, float momentum) = 0;

  //===-- images [batch, height, width, channels] (ImageKernels.h) --------===//
  /// The patch matrix of a conv2d (g.patchElements() floats).
  virtual void im2col(StreamId s, const float *x, float *patches,
                      const WindowGeometry &g) = 0;
  /// dx (overwritten) from the gradient of the patch matrix.
  virtual void col2im(StreamId s, const float *patches, float *dx,
                      const WindowGeometry &g) = 0;
  virtual void maxPool2d(StreamId s, const float *x, float *y,
                         const WindowGeometry &g) = 0;
  /// dx (overwritten): dy to each window's first maximum in x.
  virtual void maxPool2dGrad(StreamId s, const float *x, const float *dy,
                             float *dx, const WindowGeometry &g) = 0;
  virtual void avgPool2d(StreamId s, const float *x, float *y,
                         const WindowGeometry &g) = 0;
  virtual void avgPool2dGrad(StreamId s, const float *dy, float *dx,
                             const WindowGeometry &g) = 0;
  /// y[n, c] = the mean of x[n, :, c] over `pixels` pixels.
  virtual void globalAvgPool(StreamId s, const float *x, float *y,
                             int64_t batch, int64_t pixels,
                             int64_t channels) = 0;
  virtual void globalAvgPoolGrad(StreamId s, const float *dy, float *dx,
                                 int64_t batch, int64_t pixels,
                                 int64_t channels) = 0;

  //===-- attention: by default composed of gemm and softmax above; a backend
  //     with a fused kernel overrides all four ------------------------===//
  virtual void attention(StreamId s, const AttentionCall &call);
  virtual void attentionGrad(StreamId s, const AttentionGradCall &call);
  /// Floats of scratch attention needs (the composed one: an example's
  /// scores, heads x seq x seq; a fused kernel: none).
  virtual int64_t attentionScratch(int64_t batch, int64_t seq, int64_t width,
                                   int64_t heads) const;
  /// Floats of scratch attentionGrad needs.
  virtual int64_t attentionGradScratch(int64_t batch, int64_t seq,
                                       int64_t width, int64_t heads) const;

  //===-- matmul: by default one strided GEMM batch per run of uniform
  //     strides (MatmulGeometry::innerRun), each in turn; a backend may
  //     spread the matrices otherwise, one GEMM each -------------------===//
  virtual void matmul(StreamId s, const MatmulCall &call);

  //===-- optimizer: applyOptimizer (Optimizers.h) on the device ----------===//
  /// slots: a host array of optimizerSlots(config.kind) device pointers (n
  /// floats each), read during the call. `step` (device memory) is read when
  /// the update runs: its learning rate and gradient scale replace config's.
  virtual void optimizerStep(StreamId s, const OptimizerConfig &config,
                             float *params, const float *grads,
                             float *const *slots, int64_t n,
                             const StepScalars *step) = 0;

  //===-- generated code: the bundle's own kernels (GeneratedCall.h) ------===//
  /// Runs `call` (its entry is native code of the host CPU): a backend whose
  /// kernels run elsewhere records an error instead (DeviceBackend's
  /// runsHostCode says which, before any is issued).
  virtual void generated(StreamId s, const GeneratedCall &call) = 0;

  //===-- gradient statistics: clipping and the non-finite guard ----------===//
  /// partials[r] (r < parts, device memory) = the sum in double of x[i]^2
  /// over part r of ceil(n / parts) consecutive elements (the last part may
  /// be shorter or empty): kernels::SquaresPartial, the same on every
  /// backend. Nothing for n <= 0.
  virtual void sumOfSquares(StreamId s, const float *x, int64_t n,
                            double *partials, int64_t parts) = 0;
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_KERNELAPI_H
