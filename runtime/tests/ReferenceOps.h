//===- ReferenceOps.h - Plain-loop double-precision reference of the ops --===//
//
// The ground truth the CPU kernels are tested against: every op of the gpipe
// dialect, forward and analytic backward, written directly from the math with
// plain loops in double precision. No BLAS, no code shared with the runtime.
// The backward functions are themselves checked against central finite
// differences of the forward functions (CpuKernelsTest.cpp).
//
// Layouts match runtime/include/gpipe/runtime/kernels/CpuKernels.h (row-major; `rows`
// is the product of all dimensions but the last). Unlike the kernels, the
// reference backward functions RETURN fresh gradients (no accumulation) and
// recompute what they need from the forward inputs instead of taking saved
// buffers.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_REFERENCEOPS_H
#define GPIPE_RUNTIME_TESTS_REFERENCEOPS_H

#include <cstdint>
#include <vector>

namespace gpipe::reference {

using Vec = std::vector<double>;

//===-- dense: y[rows, out] = x[rows, in] * w[in, out] + b[out] ----------===//
Vec denseForward(const Vec &x, const Vec &w, const Vec &b, int64_t rows,
                 int64_t in, int64_t out);
struct DenseGrads {
  Vec dx; // [rows, in]
  Vec dw; // [in, out]
  Vec db; // [out]
};
DenseGrads denseBackward(const Vec &dy, const Vec &x, const Vec &w,
                         int64_t rows, int64_t in, int64_t out);

//===-- element-wise (dx from the forward input x) ------------------------===//
Vec reluForward(const Vec &x);
Vec reluBackward(const Vec &x, const Vec &dy);
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Vec geluForward(const Vec &x);
Vec geluBackward(const Vec &x, const Vec &dy);
/// 0.5 x (1 + erf(x / sqrt 2)): the exact GELU (std::erf).
Vec geluErfForward(const Vec &x);
Vec geluErfBackward(const Vec &x, const Vec &dy);
Vec tanhForward(const Vec &x);
Vec tanhBackward(const Vec &x, const Vec &dy);
Vec addForward(const Vec &a, const Vec &b);
struct AddGrads {
  Vec da;
  Vec db;
};
AddGrads addBackward(const Vec &dy);

//===-- softmax over the last dimension -----------------------------------===//
Vec softmaxForward(const Vec &x, int64_t rows, int64_t cols);
/// Through the explicit Jacobian dy_i/dx_j = y_i (delta_ij - y_j).
Vec softmaxBackward(const Vec &x, const Vec &dy, int64_t rows, int64_t cols);

//===-- layer norm over the last dimension (biased variance) --------------===//
struct LayerNormResult {
  Vec y;    // [rows, cols]
  Vec mean; // [rows]
  Vec rstd; // [rows], 1 / sqrt(var + epsilon)
};
LayerNormResult layerNormForward(const Vec &x, const Vec &gamma,
                                 const Vec &beta, int64_t rows, int64_t cols,
                                 double epsilon);
struct LayerNormGrads {
  Vec dx;     // [rows, cols]
  Vec dgamma; // [cols]
  Vec dbeta;  // [cols]
};
/// Chain rule through the mean and the variance, step by step.
LayerNormGrads layerNormBackward(const Vec &dy, const Vec &x, const Vec &gamma,
                                 int64_t rows, int64_t cols, double epsilon);

//===-- embedding: y[n, width] = table[ids[n], :] -------------------------===//
/// All ids must be in [0, vocab).
Vec embeddingForward(const std::vector<int32_t> &ids, const Vec &table,
                     int64_t vocab, int64_t width);
/// dtable[vocab, width]: rows of dy summed per id.
Vec embeddingBackward(const std::vector<int32_t> &ids, const Vec &dy,
                      int64_t vocab, int64_t width);

//===-- multi-head self-attention -----------------------------------------===//
/// x[b, s, d]; wqkv[d, 3d] (columns q | k | v, each split in `heads` heads of
/// d / heads); wo[d, d]; optional qkvBias[3d] (added to x wqkv) and
/// outBias[d] (added to the output projection), empty for none. Scores
/// q k^T / sqrt(d / heads); with `causal`, position i attends to positions
/// j <= i only.
struct AttentionResult {
  Vec y;       // [b, s, d]
  Vec qkv;     // [b, s, 3d]
  Vec probs;   // [b, heads, s, s], 0 where masked
  Vec lse;     // [b, heads, s], log of the sum of exp(score) over the keys
  Vec context; // [b, s, d], heads concatenated, before the projection
};
AttentionResult attentionForward(const Vec &x, const Vec &wqkv, const Vec &wo,
                                 int64_t batch, int64_t seq, int64_t width,
                                 int64_t heads, bool causal,
                                 const Vec &qkvBias = {},
                                 const Vec &outBias = {});
struct AttentionGrads {
  Vec dx;    // [b, s, d]
  Vec dwqkv; // [d, 3d]
  Vec dwo;   // [d, d]
  Vec dbqkv; // [3d], the column sums of dqkv
  Vec dbo;   // [d], the column sums of dy
};
AttentionGrads attentionBackward(const Vec &dy, const Vec &x, const Vec &wqkv,
                                 const Vec &wo, int64_t batch, int64_t seq,
                                 int64_t width, int64_t heads, bool causal,
                                 const Vec &qkvBias = {},
                                 const Vec &outBias = {});

//===-- dropout (inverted), given the mask (1 keeps, 0 drops) -------------===//
Vec dropoutForward(const Vec &x, const std::vector<uint8_t> &mask, double rate);
Vec dropoutBackward(const std::vector<uint8_t> &mask, const Vec &dy,
                    double rate);

//===-- losses (means over positions) -------------------------------------===//
/// Mean over rows of -log softmax(logits)[label]. Labels must be valid.
double softmaxCrossEntropyForward(const Vec &logits,
                                  const std::vector<int32_t> &labels,
                                  int64_t rows, int64_t classes);
/// scale * d(loss)/d(logits).
Vec softmaxCrossEntropyBackward(const Vec &logits,
                                const std::vector<int32_t> &labels,
                                double scale, int64_t rows, int64_t classes);
/// Mean of (prediction - target)^2.
double mseForward(const Vec &prediction, const Vec &target);
/// scale * d(loss)/d(prediction).
Vec mseBackward(const Vec &prediction, const Vec &target, double scale);

} // namespace gpipe::reference

#endif // GPIPE_RUNTIME_TESTS_REFERENCEOPS_H
