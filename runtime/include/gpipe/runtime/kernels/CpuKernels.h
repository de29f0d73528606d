//===- CpuKernels.h - Forward and backward CPU kernels of the gpipe ops ---===//
//
// One forward and one backward kernel per op of the gpipe dialect, on
// contiguous row-major f32 buffers. GEMMs go through CBLAS (OpenBLAS, one
// thread: a pipeline device is one thread); the rest are plain loops.
//
// Conventions, shared by every kernel:
//   - `rows` is the product of all dimensions but the last; `cols` the last.
//   - Backward kernels OVERWRITE input gradients (dx) and ACCUMULATE (+=)
//     parameter gradients (dw, db, dgamma, ...), so that gradients add up over
//     micro-batches. A null input-gradient pointer skips that output.
//   - Losses are means over their positions; their backward takes `scale`, the
//     gradient of the training objective with respect to the loss value (for
//     micro-batch m of a batch of N rows: rows_m / N).
//   - Kernels never allocate; saved buffers for the backward are passed in.
//   - Thread safety: kernels touch only their arguments and may run
//     concurrently on different buffers.
//   - NaN propagates as in PyTorch: no kernel turns a NaN input into a
//     finite output (relu, dropout's dropped elements, a softmax or loss row
//     holding a NaN: all NaN), so a diverged run cannot report a normal loss.
//
// This library has no MLIR dependency.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_CPUKERNELS_H
#define GPIPE_RUNTIME_CPUKERNELS_H

#include "gpipe/runtime/bundle/OpTable.h"

#include <cstdint>
#include <functional>

namespace gpipe::runtime::cpu {

/// Limits OpenBLAS to one thread for the calling process (call once, before
/// any device thread starts).
void useSingleThreadedBlas();

//===-- dense: y[rows, out] = x[rows, in] * w[in, out] + b[out] -------------===//
void denseForward(const float *x, const float *w, const float *b, float *y,
                  int64_t rows, int64_t in, int64_t out);
/// dx = dy * w^T (if dx), dw += x^T * dy, db += column sums of dy (if db).
void denseBackward(const float *dy, const float *x, const float *w, float *dx,
                   float *dw, float *db, int64_t rows, int64_t in,
                   int64_t out);

//===-- element-wise -------------------------------------------------------===//
/// relu(NaN) = NaN; the backward passes dy where x is NaN (PyTorch's
/// threshold_backward: x <= 0 ? 0 : dy).
void reluForward(const float *x, float *y, int64_t n);
void reluBackward(const float *x, const float *dy, float *dx, int64_t n);
/// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void geluForward(const float *x, float *y, int64_t n);
void geluBackward(const float *x, const float *dy, float *dx, int64_t n);
/// GELU, exact: x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)); its derivative is
/// Phi(x) + x phi(x) (CpuElementwiseKernels.cpp).
void geluErfForward(const float *x, float *y, int64_t n);
void geluErfBackward(const float *x, const float *dy, float *dx, int64_t n);
void tanhForward(const float *x, float *y, int64_t n);
/// Uses the forward's output y: dx = dy (1 - y^2).
void tanhBackward(const float *y, const float *dy, float *dx, int64_t n);
void addForward(const float *a, const float *b, float *y, int64_t n);

//===-- softmax over the last dimension ------------------------------------===//
void softmaxForward(const float *x, float *y, int64_t rows, int64_t cols);
/// Uses the forward's output y: dx = y (dy - sum(dy y)).
void softmaxBackward(const float *y, const float *dy, float *dx, int64_t rows,
                     int64_t cols);

//===-- layer norm over the last dimension ---------------------------------===//
/// Saves mean[rows] and rstd[rows] = 1 / sqrt(var + epsilon) (biased var).
void layerNormForward(const float *x, const float *gamma, const float *beta,
                      float *y, float *mean, float *rstd, int64_t rows,
                      int64_t cols, float epsilon);
void layerNormBackward(const float *dy, const float *x, const float *gamma,
                       const float *mean, const float *rstd, float *dx,
                       float *dgamma, float *dbeta, int64_t rows,
                       int64_t cols);

//===-- embedding: y[n, width] = table[ids[n], :] --------------------------===//
/// Returns the index of the first id outside [0, vocab), or -1 if all are in
/// range (nothing is written then past that id).
int64_t embeddingForward(const int32_t *ids, const float *table, float *y,
                         int64_t n, int64_t vocab, int64_t width);
void embeddingBackward(const int32_t *ids, const float *dy, float *dtable,
                       int64_t n, int64_t width);

//===-- multi-head self-attention
//------------------------------------------===//
/// Runs body(begin, end) over [0, n), possibly on several threads, each index
/// exactly once, in chunks of at least `grain` (CpuBackend's intra-op
/// threads); empty: on the caller.
using ParallelFor = std::function<void(
    int64_t n, int64_t grain,
    const std::function<void(int64_t begin, int64_t end)> &body)>;

/// x[b, s, d]; wqkv[d, 3d] (columns: q, k, v, each split in `heads` heads of
/// d / heads); wo[d, d]; qkvBias[3d] and outBias[d] added to the two
/// projections (null: none). Scores are q k^T / sqrt(d / heads); with
/// `causal`, position i attends to positions <= i. Saves qkv[b, s, 3d] (with
/// its bias), lse[b, heads, s] (the log-sum-exp of each query's scores) and
/// context[b, s, d] (the concatenated heads before the output projection).
/// Fused as FlashAttention-2 (CpuAttention.cpp): no [s, s] buffer.
void attentionForward(const float *x, const float *wqkv, const float *wo,
                      const float *qkvBias, const float *outBias, float *y,
                      float *qkv, float *lse, float *context, int64_t batch,
                      int64_t seq, int64_t width, int64_t heads, bool causal,
                      const ParallelFor &parallel = {});
/// Needs `scratch` of 3 * batch * seq * width + batch * seq * width floats.
/// dqkvBias and doutBias (null: none) accumulate the column sums of dqkv and
/// dy. The probabilities are recomputed from the scores and lse, a tile at a
/// time. With `parallel`, both split their products by rows (kBlasRowGrain)
/// and the heads of each sequence over the threads; every element is still
/// computed by one thread in the same order, so the bits do not change.
void attentionBackward(const float *dy, const float *x, const float *wqkv,
                       const float *wo, const float *qkv, const float *lse,
                       const float *context, float *dx, float *dwqkv,
                       float *dwo, float *dqkvBias, float *doutBias,
                       float *scratch, int64_t batch, int64_t seq,
                       int64_t width, int64_t heads, bool causal,
                       const ParallelFor &parallel = {});

//===-- dropout (inverted) -------------------------------------------------===//
/// The keep/drop decision of element (row, col) is a pure function of
/// (seed, step, rowOffset + row, col): recomputation and a different
/// micro-batch split reproduce exactly the mask of the whole batch.
/// mask[i] = 1 keeps, 0 drops; y = x * mask / (1 - rate), a dropped element
/// x - x (0, or NaN for a NaN or inf x, as PyTorch's x * 0).
void dropoutForward(const float *x, float *y, uint8_t *mask, int64_t rows,
                    int64_t cols, float rate, uint64_t seed, uint64_t step,
                    int64_t rowOffset);
void dropoutBackward(const uint8_t *mask, const float *dy, float *dx,
                     int64_t n, float rate);

//===-- losses -------------------------------------------------------------===//
/// Mean over `rows` positions of -log softmax(logits)[label]. Saves the
/// softmax in probs[rows, classes]. Returns the index of the first label
/// outside [0, classes) through *badLabel (-1 if none).
float softmaxCrossEntropyForward(const float *logits, const int32_t *labels,
                                 float *probs, int64_t rows, int64_t classes,
                                 int64_t *badLabel);
/// dlogits = scale * (probs - onehot(label)) / rows.
void softmaxCrossEntropyBackward(const float *probs, const int32_t *labels,
                                 float scale, float *dlogits, int64_t rows,
                                 int64_t classes);
/// Mean over n elements of (prediction - target)^2.
float mseForward(const float *prediction, const float *target, int64_t n);
/// dprediction = scale * 2 (prediction - target) / n.
void mseBackward(const float *prediction, const float *target, float scale,
                 float *dprediction, int64_t n);

//===-- images (CpuImageKernels.cpp): the patch matrix of ImageKernels.h,
//     copied a channel run at a time ------------------------------------===//

/// patches [pixels, groups, KH, KW, C / groups] of x [N, H, W, C].
void im2col(const float *x, float *patches, const WindowGeometry &g);
/// dx = the sum of the patch entries that read each element (overwrites).
void col2im(const float *patches, float *dx, const WindowGeometry &g);

} // namespace gpipe::runtime::cpu

#endif // GPIPE_RUNTIME_CPUKERNELS_H
