//===- ComposedAttention.cpp - Attention from GEMMs and softmax -----------===//
//
// KernelApi's default attention: per example, the heads' products as one
// strided GEMM batch each, and the row softmax with attention's causal mask.
// The forward saves each query's log-sum-exp, not the probabilities; the
// backward recomputes the scores and takes the probabilities from them
// (softmaxFromLse), so an example's [heads, seq, seq] lives only in the
// scratch. The biases are addRowVector after the two projections, and their
// gradients columnSums of dy and of dqkv (in the scratch). Backends with a
// fused attention kernel override it. Pointers may be null in the executor's
// placement check at creation (nothing runs then), so offsets are taken only
// from non-null pointers.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/KernelApi.h"

#include <cmath>

using namespace gpipe::runtime::device;

namespace {
const float *at(const float *p, int64_t offset) { return p ? p + offset : p; }
float *at(float *p, int64_t offset) { return p ? p + offset : p; }
} // namespace

void KernelApi::attention(StreamId s, const AttentionCall &c) {
  const int64_t batch = c.batch, seq = c.seq, d = c.width;
  const int64_t heads = c.heads, dh = d / heads;
  GemmBatch g; // qkv = x wqkv
  g.m = batch * seq, g.n = 3 * d, g.k = d;
  g.a = c.x, g.lda = d, g.b = c.wqkv, g.ldb = 3 * d, g.c = c.qkv, g.ldc = 3 * d;
  gemm(s, g);
  if (c.qkvBias) // qkv += qkv_bias
    addRowVector(s, c.qkvBias, c.qkv, batch * seq, 3 * d);
  for (int64_t e = 0; e < batch; ++e) {
    const float *q = at(c.qkv, e * seq * 3 * d);
    float *p = c.scratch; // this example's scores, then probabilities
    GemmBatch scores; // per head: q k^T / sqrt(dh)
    scores.transB = true;
    scores.m = seq, scores.n = seq, scores.k = dh;
    scores.alpha = float(1.0 / std::sqrt(double(dh)));
    scores.a = q, scores.lda = 3 * d, scores.strideA = dh;
    scores.b = at(q, d), scores.ldb = 3 * d, scores.strideB = dh;
    scores.c = p, scores.ldc = seq, scores.strideC = seq * seq;
    scores.count = heads;
    gemm(s, scores);
    softmaxWithLse(s, p, p, at(c.lse, e * heads * seq), heads * seq, seq,
                   c.causal ? seq : 0);
    GemmBatch mix; // context_h = probs_h v_h
    mix.m = seq, mix.n = dh, mix.k = seq;
    mix.a = p, mix.lda = seq, mix.strideA = seq * seq;
    mix.b = at(q, 2 * d), mix.ldb = 3 * d, mix.strideB = dh;
    mix.c = at(c.context, e * seq * d), mix.ldc = d, mix.strideC = dh;
    mix.count = heads;
    gemm(s, mix);
  }
  GemmBatch o; // y = context wo
  o.m = batch * seq, o.n = d, o.k = d;
  o.a = c.context, o.lda = d, o.b = c.wo, o.ldb = d, o.c = c.y, o.ldc = d;
  gemm(s, o);
  if (c.outBias) // y += out_bias
    addRowVector(s, c.outBias, c.y, batch * seq, d);
}

int64_t KernelApi::attentionScratch(int64_t, int64_t seq, int64_t,
                                    int64_t heads) const {
  return heads * seq * seq; // one example's scores [heads, s, s]
}

int64_t KernelApi::attentionGradScratch(int64_t batch, int64_t seq,
                                        int64_t width, int64_t heads) const {
  // dqkv [b s, 3d], dcontext [b s, d], one example's dscores and probs
  // [heads, s, s] each.
  return 4 * batch * seq * width + 2 * heads * seq * seq;
}

void KernelApi::attentionGrad(StreamId s, const AttentionGradCall &c) {
  const int64_t batch = c.batch, seq = c.seq, d = c.width;
  const int64_t heads = c.heads, dh = d / heads;
  const float alpha = float(1.0 / std::sqrt(double(dh)));
  float *dqkv = c.scratch;
  float *dctx = at(c.scratch, 3 * batch * seq * d);
  float *dscores = at(c.scratch, 4 * batch * seq * d);
  float *probs = at(dscores, heads * seq * seq);
  GemmBatch g; // dcontext = dy wo^T
  g.transB = true;
  g.m = batch * seq, g.n = d, g.k = d;
  g.a = c.dy, g.lda = d, g.b = c.wo, g.ldb = d, g.c = dctx, g.ldc = d;
  gemm(s, g);
  GemmBatch gwo; // dwo += context^T dy
  gwo.transA = true;
  gwo.m = d, gwo.n = d, gwo.k = batch * seq, gwo.beta = 1.0f;
  gwo.a = c.context, gwo.lda = d, gwo.b = c.dy, gwo.ldb = d;
  gwo.c = c.dwo, gwo.ldc = d;
  gemm(s, gwo);
  if (c.doutBias) // dbo += column sums of dy
    columnSums(s, c.dy, c.doutBias, batch * seq, d);
  for (int64_t e = 0; e < batch; ++e) {
    const float *q = at(c.qkv, e * seq * 3 * d);
    const float *dc = at(static_cast<const float *>(dctx), e * seq * d);
    float *dq = at(dqkv, e * seq * 3 * d);
    GemmBatch scores; // the forward's scores again, then its probabilities
    scores.transB = true;
    scores.m = seq, scores.n = seq, scores.k = dh, scores.alpha = alpha;
    scores.a = q, scores.lda = 3 * d, scores.strideA = dh;
    scores.b = at(q, d), scores.ldb = 3 * d, scores.strideB = dh;
    scores.c = probs, scores.ldc = seq, scores.strideC = seq * seq;
    scores.count = heads;
    gemm(s, scores);
    softmaxFromLse(s, probs, at(c.lse, e * heads * seq), probs, heads * seq,
                   seq, c.causal ? seq : 0);
    const float *p = probs;
    GemmBatch dp; // dprobs_h = dcontext_h v_h^T
    dp.transB = true;
    dp.m = seq, dp.n = seq, dp.k = dh, dp.count = heads;
    dp.a = dc, dp.lda = d, dp.strideA = dh;
    dp.b = at(q, 2 * d), dp.ldb = 3 * d, dp.strideB = dh;
    dp.c = dscores, dp.ldc = seq, dp.strideC = seq * seq;
    gemm(s, dp);
    GemmBatch dv; // dv_h = probs_h^T dcontext_h
    dv.transA = true;
    dv.m = seq, dv.n = dh, dv.k = seq, dv.count = heads;
    dv.a = p, dv.lda = seq, dv.strideA = seq * seq;
    dv.b = dc, dv.ldb = d, dv.strideB = dh;
    dv.c = at(dq, 2 * d), dv.ldc = 3 * d, dv.strideC = dh;
    gemm(s, dv);
    softmaxGrad(s, p, dscores, dscores, heads * seq, seq);
    GemmBatch gq; // dq_h = alpha dscores_h k_h
    gq.m = seq, gq.n = dh, gq.k = seq, gq.count = heads, gq.alpha = alpha;
    gq.a = dscores, gq.lda = seq, gq.strideA = seq * seq;
    gq.b = at(q, d), gq.ldb = 3 * d, gq.strideB = dh;
    gq.c = dq, gq.ldc = 3 * d, gq.strideC = dh;
    gemm(s, gq);
    GemmBatch gk; // dk_h = alpha dscores_h^T q_h
    gk.transA = true;
    gk.m = seq, gk.n = dh, gk.k = seq, gk.count = heads, gk.alpha = alpha;
    gk.a = dscores, gk.lda = seq, gk.strideA = seq * seq;
    gk.b = q, gk.ldb = 3 * d, gk.strideB = dh;
    gk.c = at(dq, d), gk.ldc = 3 * d, gk.strideC = dh;
    gemm(s, gk);
  }
  GemmBatch gw; // dwqkv += x^T dqkv
  gw.transA = true;
  gw.m = d, gw.n = 3 * d, gw.k = batch * seq, gw.beta = 1.0f;
  gw.a = c.x, gw.lda = d, gw.b = dqkv, gw.ldb = 3 * d;
  gw.c = c.dwqkv, gw.ldc = 3 * d;
  gemm(s, gw);
  if (c.dqkvBias) // dbqkv += column sums of dqkv
    columnSums(s, dqkv, c.dqkvBias, batch * seq, 3 * d);
  if (c.dx) {
    GemmBatch gx; // dx = dqkv wqkv^T
    gx.transB = true;
    gx.m = batch * seq, gx.n = d, gx.k = 3 * d;
    gx.a = dqkv, gx.lda = 3 * d, gx.b = c.wqkv, gx.ldb = 3 * d;
    gx.c = c.dx, gx.ldc = d;
    gemm(s, gx);
  }
}
