//===- CpuKernelsAccuracyTest.cpp - f32 kernels against the reference -----===//
//
// KernelForward.* / KernelBackward.*: the f32 CPU kernels match the
// double-precision reference (ReferenceOps.h) within a tolerance stated per op,
// including the accumulate (+=) semantics of parameter gradients, the
// overwrite semantics of input gradients and null input-gradient pointers.
// KernelElementWise.*, KernelEmbedding.*, KernelLoss.* likewise, the last with
// the loss scale of micro-batches.
//
// All randomness comes from std::mt19937_64 with fixed seeds.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"
#include "ReferenceOps.h"

#include "CpuKernelsSupport.h"
#include "RandomData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace ref = gpipe::reference;
namespace cpu = gpipe::runtime::cpu;
using ref::Vec;
using Floats = std::vector<float>;
using Mask = std::vector<uint8_t>;
using Ids = std::vector<int32_t>;
using namespace gpipe::testing::cpukernels;

namespace {

// Values at the edges of the usual input range: 0, tiny, large, saturating.
const Floats kSpecialValues = {0.0f,   1e-4f, -1e-4f, 3.0f,   -3.0f,  10.0f,
                               -10.0f, 30.0f, -30.0f, 100.0f, -100.0f};

using gpipe::testing::randomFloats;
using gpipe::testing::randomIds;

// after - before, in double: what a kernel added to an accumulated gradient.
Vec added(const Floats &after, const Floats &before) {
  Vec d(after.size());
  for (size_t i = 0; i < after.size(); ++i)
    d[i] = static_cast<double>(after[i]) - static_cast<double>(before[i]);
  return d;
}

} // namespace

//===----------------------------------------------------------------------===//
// 2. Kernels (f32) against the reference (f64 on the same inputs).
//===----------------------------------------------------------------------===//

namespace {

// Kernels see OpenBLAS limited to one thread, as on a pipeline device.
class SingleThreadedBlas : public ::testing::Environment {
public:
  void SetUp() override { cpu::useSingleThreadedBlas(); }
};
const auto *const kBlasEnvironment =
    ::testing::AddGlobalTestEnvironment(new SingleThreadedBlas);

std::string shapeName(std::initializer_list<int64_t> dims) {
  std::ostringstream os;
  const char *sep = "";
  for (int64_t d : dims) {
    os << sep << d;
    sep = "x";
  }
  return os.str();
}

struct DenseShape {
  int64_t rows, in, out;
};
const DenseShape kDenseShapes[] = {
    {3, 5, 4}, {64, 96, 48}, {1, 7, 1}, {5, 1, 3}};

struct AttentionShape {
  int64_t batch, seq, width, heads;
};
// Includes long sequences (130, 300) so that kernels working on blocks of
// the score matrix are checked across block boundaries.
// Past CpuAttention.cpp's tiles: 130 and 300 queries span tiles of 128
// queries and of 128 keys, 600 two strips of 512 queries in the backward.
const AttentionShape kAttentionShapes[] = {
    {2, 4, 8, 2},   {1, 5, 12, 3},    {3, 16, 32, 4},
    {1, 1, 4, 1},   {2, 130, 8, 2},   {1, 300, 16, 2},
    {1, 600, 8, 2}};

} // namespace

//===-- dense ------------------------------------------------------------===//

// dense forward = x w + b within rtol 1e-5, atol 1e-5 (inner dims up to 96).
TEST(KernelForward, Dense) {
  std::mt19937_64 rng(201);
  for (DenseShape s : kDenseShapes) {
    SCOPED_TRACE(shapeName({s.rows, s.in, s.out}));
    Floats x = randomFloats(rng, s.rows * s.in),
           w = randomFloats(rng, s.in * s.out), b = randomFloats(rng, s.out);
    Floats y(s.rows * s.out, kGarbage);
    cpu::denseForward(x.data(), w.data(), b.data(), y.data(), s.rows, s.in,
                      s.out);
    EXPECT_TRUE(allClose(y,
                         ref::denseForward(toDouble(x), toDouble(w),
                                           toDouble(b), s.rows, s.in, s.out),
                         1e-5, 1e-5));
  }
}

// dense backward: dx overwritten, dw and db accumulated onto random values,
// all within rtol 1e-5, atol 1e-5.
TEST(KernelBackward, Dense) {
  std::mt19937_64 rng(202);
  for (DenseShape s : kDenseShapes) {
    SCOPED_TRACE(shapeName({s.rows, s.in, s.out}));
    Floats x = randomFloats(rng, s.rows * s.in),
           w = randomFloats(rng, s.in * s.out),
           dy = randomFloats(rng, s.rows * s.out);
    Floats dx(s.rows * s.in, kGarbage);
    Floats dw0 = randomFloats(rng, s.in * s.out), dw = dw0;
    Floats db0 = randomFloats(rng, s.out), db = db0;
    cpu::denseBackward(dy.data(), x.data(), w.data(), dx.data(), dw.data(),
                       db.data(), s.rows, s.in, s.out);
    ref::DenseGrads g = ref::denseBackward(toDouble(dy), toDouble(x),
                                           toDouble(w), s.rows, s.in, s.out);
    EXPECT_TRUE(allClose(dx, g.dx, 1e-5, 1e-5));
    EXPECT_TRUE(allClose(added(dw, dw0), g.dw, 1e-5, 1e-5));
    EXPECT_TRUE(allClose(added(db, db0), g.db, 1e-5, 1e-5));
  }
}

// dense backward with null dx and/or db skips them and still accumulates the
// others correctly.
TEST(KernelBackward, DenseNullInputGradients) {
  std::mt19937_64 rng(203);
  const int64_t rows = 6, in = 5, out = 4;
  Floats x = randomFloats(rng, rows * in), w = randomFloats(rng, in * out),
         dy = randomFloats(rng, rows * out);
  ref::DenseGrads g =
      ref::denseBackward(toDouble(dy), toDouble(x), toDouble(w), rows, in, out);
  for (int variant = 0; variant < 3; ++variant) {
    bool withDx = variant == 1, withDb = variant == 2;
    SCOPED_TRACE(variant);
    Floats dx(rows * in, kGarbage), dw(in * out, 0.0f), db(out, 0.0f);
    cpu::denseBackward(dy.data(), x.data(), w.data(),
                       withDx ? dx.data() : nullptr, dw.data(),
                       withDb ? db.data() : nullptr, rows, in, out);
    EXPECT_TRUE(allClose(dw, g.dw, 1e-5, 1e-5));
    EXPECT_TRUE(
        allClose(dx, withDx ? g.dx : Vec(rows * in, kGarbage), 1e-5, 1e-5));
    EXPECT_TRUE(allClose(db, withDb ? g.db : Vec(out, 0.0), 1e-5, 1e-5));
  }
}

// dw and db accumulated over micro-batches rows [0,3) and [3,8) equal the
// reference gradients of the whole batch of 8 rows.
TEST(KernelBackward, DenseAccumulatesOverMicroBatches) {
  std::mt19937_64 rng(204);
  const int64_t rows = 8, in = 6, out = 5, split = 3;
  Floats x = randomFloats(rng, rows * in), w = randomFloats(rng, in * out),
         dy = randomFloats(rng, rows * out);
  Floats dx(rows * in), dw(in * out, 0.0f), db(out, 0.0f);
  cpu::denseBackward(dy.data(), x.data(), w.data(), dx.data(), dw.data(),
                     db.data(), split, in, out);
  cpu::denseBackward(dy.data() + split * out, x.data() + split * in, w.data(),
                     dx.data() + split * in, dw.data(), db.data(), rows - split,
                     in, out);
  ref::DenseGrads g =
      ref::denseBackward(toDouble(dy), toDouble(x), toDouble(w), rows, in, out);
  EXPECT_TRUE(allClose(dw, g.dw, 1e-5, 1e-5));
  EXPECT_TRUE(allClose(db, g.db, 1e-5, 1e-5));
  EXPECT_TRUE(allClose(dx, g.dx, 1e-5, 1e-5));
}

//===-- element-wise -----------------------------------------------------===//

const int64_t kElementCounts[] = {15, 1001};

// relu forward and backward are exact (selection, no arithmetic); dx is
// overwritten.
TEST(KernelElementWise, Relu) {
  std::mt19937_64 rng(211);
  for (int64_t n : kElementCounts) {
    SCOPED_TRACE(n);
    Floats x = randomFloats(rng, n), dy = randomFloats(rng, n);
    Floats y(n, kGarbage), dx(n, kGarbage);
    cpu::reluForward(x.data(), y.data(), n);
    cpu::reluBackward(x.data(), dy.data(), dx.data(), n);
    EXPECT_TRUE(allClose(y, ref::reluForward(toDouble(x)), 0, 0));
    EXPECT_TRUE(
        allClose(dx, ref::reluBackward(toDouble(x), toDouble(dy)), 0, 0));
  }
}

// gelu (tanh approximation) forward and backward on [-5, 5] and at 0, +-1e-4,
// +-3, +-10, +-30, +-100, within rtol 1e-5, atol 1e-6; dx is overwritten.
TEST(KernelElementWise, Gelu) {
  std::mt19937_64 rng(212);
  for (int64_t n : kElementCounts) {
    SCOPED_TRACE(n);
    Floats x = randomFloats(rng, n, -5.0f, 5.0f), dy = randomFloats(rng, n);
    std::copy(kSpecialValues.begin(), kSpecialValues.end(), x.begin());
    Floats y(n, kGarbage), dx(n, kGarbage);
    cpu::geluForward(x.data(), y.data(), n);
    cpu::geluBackward(x.data(), dy.data(), dx.data(), n);
    EXPECT_TRUE(allClose(y, ref::geluForward(toDouble(x)), 1e-5, 1e-6));
    EXPECT_TRUE(
        allClose(dx, ref::geluBackward(toDouble(x), toDouble(dy)), 1e-5, 1e-6));
  }
}

// tanh forward, and backward from the kernel's own y, on [-4, 4] and at the
// special values above, within rtol 1e-5, atol 1e-6; dx is overwritten.
TEST(KernelElementWise, Tanh) {
  std::mt19937_64 rng(213);
  for (int64_t n : kElementCounts) {
    SCOPED_TRACE(n);
    Floats x = randomFloats(rng, n, -4.0f, 4.0f), dy = randomFloats(rng, n);
    std::copy(kSpecialValues.begin(), kSpecialValues.end(), x.begin());
    Floats y(n, kGarbage), dx(n, kGarbage);
    cpu::tanhForward(x.data(), y.data(), n);
    cpu::tanhBackward(y.data(), dy.data(), dx.data(), n);
    EXPECT_TRUE(allClose(y, ref::tanhForward(toDouble(x)), 1e-5, 1e-6));
    EXPECT_TRUE(
        allClose(dx, ref::tanhBackward(toDouble(x), toDouble(dy)), 1e-5, 1e-6));
  }
}

// add forward is the correctly rounded sum (rtol 1e-7).
TEST(KernelElementWise, Add) {
  std::mt19937_64 rng(214);
  for (int64_t n : kElementCounts) {
    SCOPED_TRACE(n);
    Floats a = randomFloats(rng, n), b = randomFloats(rng, n);
    Floats y(n, kGarbage);
    cpu::addForward(a.data(), b.data(), y.data(), n);
    EXPECT_TRUE(
        allClose(y, ref::addForward(toDouble(a), toDouble(b)), 1e-7, 0));
  }
}

//===-- softmax ----------------------------------------------------------===//

// softmax forward within rtol 1e-5, atol 1e-7, including logits shifted by
// +-1000 (no overflow: the max is subtracted).
TEST(KernelForward, Softmax) {
  std::mt19937_64 rng(221);
  struct Case {
    int64_t rows, cols;
    float shift;
  };
  for (Case c : {Case{3, 5, 0}, Case{64, 97, 0}, Case{4, 1, 0},
                 Case{3, 5, 1000}, Case{3, 5, -1000}}) {
    SCOPED_TRACE(shapeName({c.rows, c.cols, (int64_t)c.shift}));
    Floats x = randomFloats(rng, c.rows * c.cols, -3.0f, 3.0f);
    for (float &v : x)
      v += c.shift;
    Floats y(c.rows * c.cols, kGarbage);
    cpu::softmaxForward(x.data(), y.data(), c.rows, c.cols);
    EXPECT_TRUE(allClose(y, ref::softmaxForward(toDouble(x), c.rows, c.cols),
                         1e-5, 1e-7));
  }
}

// softmax backward from the kernel's own y within rtol 1e-5, atol 1e-6; dx is
// overwritten.
TEST(KernelBackward, Softmax) {
  std::mt19937_64 rng(222);
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{3, 5}, {64, 97}, {4, 1}}) {
    SCOPED_TRACE(shapeName({rows, cols}));
    Floats x = randomFloats(rng, rows * cols, -3.0f, 3.0f),
           dy = randomFloats(rng, rows * cols);
    Floats y(rows * cols), dx(rows * cols, kGarbage);
    cpu::softmaxForward(x.data(), y.data(), rows, cols);
    cpu::softmaxBackward(y.data(), dy.data(), dx.data(), rows, cols);
    EXPECT_TRUE(allClose(
        dx, ref::softmaxBackward(toDouble(x), toDouble(dy), rows, cols), 1e-5,
        1e-6));
  }
}

//===-- layer norm -------------------------------------------------------===//

namespace {
struct LayerNormCase {
  int64_t rows, cols;
  float offset; // added to every x: a mean far from 0
};
const LayerNormCase kLayerNormCases[] = {
    {3, 5, 0}, {64, 96, 0}, {2, 2, 0}, {8, 33, 10}};
} // namespace

// layer norm forward: y, saved mean and rstd within rtol 1e-5, atol 1e-5
// (eps 1e-5; one case with a mean of 10).
TEST(KernelForward, LayerNorm) {
  std::mt19937_64 rng(231);
  const float eps = 1e-5f;
  for (LayerNormCase c : kLayerNormCases) {
    SCOPED_TRACE(shapeName({c.rows, c.cols, (int64_t)c.offset}));
    Floats x = randomFloats(rng, c.rows * c.cols);
    for (float &v : x)
      v += c.offset;
    Floats gamma = randomFloats(rng, c.cols, 0.5f, 1.5f),
           beta = randomFloats(rng, c.cols);
    Floats y(c.rows * c.cols, kGarbage), mean(c.rows, kGarbage),
        rstd(c.rows, kGarbage);
    cpu::layerNormForward(x.data(), gamma.data(), beta.data(), y.data(),
                          mean.data(), rstd.data(), c.rows, c.cols, eps);
    ref::LayerNormResult r =
        ref::layerNormForward(toDouble(x), toDouble(gamma), toDouble(beta),
                              c.rows, c.cols, static_cast<double>(eps));
    EXPECT_TRUE(allClose(y, r.y, 1e-5, 1e-5));
    EXPECT_TRUE(allClose(mean, r.mean, 1e-5, 1e-5));
    EXPECT_TRUE(allClose(rstd, r.rstd, 1e-5, 1e-5));
  }
}

// layer norm backward from the kernel's saved mean/rstd: dx overwritten,
// dgamma/dbeta accumulated onto random values, within rtol 1e-4, atol 1e-5.
TEST(KernelBackward, LayerNorm) {
  std::mt19937_64 rng(232);
  const float eps = 1e-5f;
  for (LayerNormCase c : kLayerNormCases) {
    SCOPED_TRACE(shapeName({c.rows, c.cols, (int64_t)c.offset}));
    Floats x = randomFloats(rng, c.rows * c.cols);
    for (float &v : x)
      v += c.offset;
    Floats gamma = randomFloats(rng, c.cols, 0.5f, 1.5f),
           beta = randomFloats(rng, c.cols),
           dy = randomFloats(rng, c.rows * c.cols);
    Floats y(c.rows * c.cols), mean(c.rows), rstd(c.rows);
    cpu::layerNormForward(x.data(), gamma.data(), beta.data(), y.data(),
                          mean.data(), rstd.data(), c.rows, c.cols, eps);
    Floats dx(c.rows * c.cols, kGarbage);
    Floats dgamma0 = randomFloats(rng, c.cols), dgamma = dgamma0;
    Floats dbeta0 = randomFloats(rng, c.cols), dbeta = dbeta0;
    cpu::layerNormBackward(dy.data(), x.data(), gamma.data(), mean.data(),
                           rstd.data(), dx.data(), dgamma.data(), dbeta.data(),
                           c.rows, c.cols);
    ref::LayerNormGrads g =
        ref::layerNormBackward(toDouble(dy), toDouble(x), toDouble(gamma),
                               c.rows, c.cols, static_cast<double>(eps));
    EXPECT_TRUE(allClose(dx, g.dx, 1e-4, 1e-5));
    EXPECT_TRUE(allClose(added(dgamma, dgamma0), g.dgamma, 1e-4, 1e-5));
    EXPECT_TRUE(allClose(added(dbeta, dbeta0), g.dbeta, 1e-4, 1e-5));
  }
}

// layer norm backward with a null dx still accumulates dgamma and dbeta.
TEST(KernelBackward, LayerNormNullDx) {
  std::mt19937_64 rng(233);
  const int64_t rows = 4, cols = 6;
  const float eps = 1e-5f;
  Floats x = randomFloats(rng, rows * cols),
         gamma = randomFloats(rng, cols, 0.5f, 1.5f),
         beta = randomFloats(rng, cols), dy = randomFloats(rng, rows * cols);
  Floats y(rows * cols), mean(rows), rstd(rows);
  cpu::layerNormForward(x.data(), gamma.data(), beta.data(), y.data(),
                        mean.data(), rstd.data(), rows, cols, eps);
  Floats dgamma(cols, 0.0f), dbeta(cols, 0.0f);
  cpu::layerNormBackward(dy.data(), x.data(), gamma.data(), mean.data(),
                         rstd.data(), nullptr, dgamma.data(), dbeta.data(),
                         rows, cols);
  ref::LayerNormGrads g = ref::layerNormBackward(
      toDouble(dy), toDouble(x), toDouble(gamma), rows, cols, eps);
  EXPECT_TRUE(allClose(dgamma, g.dgamma, 1e-4, 1e-5));
  EXPECT_TRUE(allClose(dbeta, g.dbeta, 1e-4, 1e-5));
}

//===-- embedding --------------------------------------------------------===//

// embedding forward copies table rows exactly and reports -1 for valid ids;
// backward accumulates dy rows per (repeated) id onto random values within
// rtol 1e-6, atol 1e-6.
TEST(KernelEmbedding, ForwardAndBackward) {
  std::mt19937_64 rng(241);
  struct Case {
    Ids ids;
    int64_t vocab, width;
  };
  std::vector<Case> cases = {{{2, 0, 2, 3, 2, 0, 6}, 7, 5},
                             {randomIds(rng, 200, 50), 50, 64}};
  for (const Case &c : cases) {
    SCOPED_TRACE(shapeName({(int64_t)c.ids.size(), c.vocab, c.width}));
    int64_t n = c.ids.size();
    Floats table = randomFloats(rng, c.vocab * c.width),
           dy = randomFloats(rng, n * c.width);
    Floats y(n * c.width, kGarbage);
    EXPECT_EQ(cpu::embeddingForward(c.ids.data(), table.data(), y.data(), n,
                                    c.vocab, c.width),
              -1);
    EXPECT_TRUE(allClose(
        y, ref::embeddingForward(c.ids, toDouble(table), c.vocab, c.width), 0,
        0));
    Floats dtable0 = randomFloats(rng, c.vocab * c.width), dtable = dtable0;
    cpu::embeddingBackward(c.ids.data(), dy.data(), dtable.data(), n, c.width);
    EXPECT_TRUE(
        allClose(added(dtable, dtable0),
                 ref::embeddingBackward(c.ids, toDouble(dy), c.vocab, c.width),
                 1e-6, 1e-6));
  }
}

//===-- attention --------------------------------------------------------===//

// attention forward, causal and not: y and the saved qkv, lse (each query's
// log-sum-exp of its scores) and context within rtol 1e-4, atol 1e-5.
TEST(KernelForward, Attention) {
  std::mt19937_64 rng(251);
  for (AttentionShape s : kAttentionShapes)
    for (bool causal : {false, true}) {
      SCOPED_TRACE(shapeName({s.batch, s.seq, s.width, s.heads, causal}));
      int64_t tokens = s.batch * s.seq;
      Floats x = randomFloats(rng, tokens * s.width),
             wqkv = randomFloats(rng, s.width * 3 * s.width),
             wo = randomFloats(rng, s.width * s.width);
      Floats y(tokens * s.width, kGarbage), qkv(tokens * 3 * s.width, kGarbage),
          lse(s.batch * s.heads * s.seq, kGarbage),
          context(tokens * s.width, kGarbage);
      cpu::attentionForward(x.data(), wqkv.data(), wo.data(), nullptr, nullptr,
                            y.data(), qkv.data(), lse.data(), context.data(),
                            s.batch, s.seq, s.width, s.heads, causal);
      ref::AttentionResult r =
          ref::attentionForward(toDouble(x), toDouble(wqkv), toDouble(wo),
                                s.batch, s.seq, s.width, s.heads, causal);
      EXPECT_TRUE(allClose(y, r.y, 1e-4, 1e-5));
      EXPECT_TRUE(allClose(qkv, r.qkv, 1e-4, 1e-5));
      EXPECT_TRUE(allClose(lse, r.lse, 1e-4, 1e-5));
      EXPECT_TRUE(allClose(context, r.context, 1e-4, 1e-5));
    }
}

// attention backward from the kernel's saved buffers, causal and not: dx
// overwritten, dwqkv and dwo accumulated onto random values, scratch filled
// with garbage beforehand; within rtol 1e-4, atol 1e-4.
TEST(KernelBackward, Attention) {
  std::mt19937_64 rng(252);
  for (AttentionShape s : kAttentionShapes)
    for (bool causal : {false, true}) {
      SCOPED_TRACE(shapeName({s.batch, s.seq, s.width, s.heads, causal}));
      int64_t tokens = s.batch * s.seq;
      Floats x = randomFloats(rng, tokens * s.width),
             wqkv = randomFloats(rng, s.width * 3 * s.width),
             wo = randomFloats(rng, s.width * s.width),
             dy = randomFloats(rng, tokens * s.width);
      Floats y(tokens * s.width), qkv(tokens * 3 * s.width),
          lse(s.batch * s.heads * s.seq), context(tokens * s.width);
      cpu::attentionForward(x.data(), wqkv.data(), wo.data(), nullptr, nullptr,
                            y.data(), qkv.data(), lse.data(), context.data(),
                            s.batch, s.seq, s.width, s.heads, causal);
      Floats dx(tokens * s.width, kGarbage);
      Floats dwqkv0 = randomFloats(rng, wqkv.size()), dwqkv = dwqkv0;
      Floats dwo0 = randomFloats(rng, wo.size()), dwo = dwo0;
      Floats scratch(4 * tokens * s.width, kGarbage);
      cpu::attentionBackward(
          dy.data(), x.data(), wqkv.data(), wo.data(), qkv.data(), lse.data(),
          context.data(), dx.data(), dwqkv.data(), dwo.data(), nullptr, nullptr,
          scratch.data(), s.batch, s.seq, s.width, s.heads, causal);
      ref::AttentionGrads g = ref::attentionBackward(
          toDouble(dy), toDouble(x), toDouble(wqkv), toDouble(wo), s.batch,
          s.seq, s.width, s.heads, causal);
      EXPECT_TRUE(allClose(dx, g.dx, 1e-4, 1e-4));
      EXPECT_TRUE(allClose(added(dwqkv, dwqkv0), g.dwqkv, 1e-4, 1e-4));
      EXPECT_TRUE(allClose(added(dwo, dwo0), g.dwo, 1e-4, 1e-4));
    }
}

// attention backward with a null dx still accumulates dwqkv and dwo.
TEST(KernelBackward, AttentionNullDx) {
  std::mt19937_64 rng(253);
  const AttentionShape s{2, 4, 8, 2};
  const bool causal = true;
  int64_t tokens = s.batch * s.seq;
  Floats x = randomFloats(rng, tokens * s.width),
         wqkv = randomFloats(rng, s.width * 3 * s.width),
         wo = randomFloats(rng, s.width * s.width),
         dy = randomFloats(rng, tokens * s.width);
  Floats y(tokens * s.width), qkv(tokens * 3 * s.width),
      lse(s.batch * s.heads * s.seq), context(tokens * s.width);
  cpu::attentionForward(x.data(), wqkv.data(), wo.data(), nullptr, nullptr,
                        y.data(), qkv.data(), lse.data(), context.data(),
                        s.batch, s.seq, s.width, s.heads, causal);
  Floats dwqkv(wqkv.size(), 0.0f), dwo(wo.size(), 0.0f);
  Floats scratch(4 * tokens * s.width, kGarbage);
  cpu::attentionBackward(
      dy.data(), x.data(), wqkv.data(), wo.data(), qkv.data(), lse.data(),
      context.data(), nullptr, dwqkv.data(), dwo.data(), nullptr, nullptr,
      scratch.data(), s.batch, s.seq, s.width, s.heads, causal);
  ref::AttentionGrads g = ref::attentionBackward(
      toDouble(dy), toDouble(x), toDouble(wqkv), toDouble(wo), s.batch, s.seq,
      s.width, s.heads, causal);
  EXPECT_TRUE(allClose(dwqkv, g.dwqkv, 1e-4, 1e-4));
  EXPECT_TRUE(allClose(dwo, g.dwo, 1e-4, 1e-4));
}

//===-- losses -----------------------------------------------------------===//

// softmax cross-entropy forward: loss within rtol 1e-5 and saved probs within
// rtol 1e-5, atol 1e-8 (also with logits shifted by 1000); badLabel -1.
TEST(KernelForward, SoftmaxCrossEntropy) {
  std::mt19937_64 rng(261);
  struct Case {
    int64_t rows, classes;
    float shift;
  };
  for (Case c : {Case{3, 5, 0}, Case{64, 1000, 0}, Case{4, 7, 1000}}) {
    SCOPED_TRACE(shapeName({c.rows, c.classes, (int64_t)c.shift}));
    Floats logits = randomFloats(rng, c.rows * c.classes, -3.0f, 3.0f);
    for (float &v : logits)
      v += c.shift;
    Ids labels = randomIds(rng, c.rows, c.classes);
    Floats probs(c.rows * c.classes, kGarbage);
    int64_t badLabel = 12345;
    float loss = cpu::softmaxCrossEntropyForward(logits.data(), labels.data(),
                                                 probs.data(), c.rows,
                                                 c.classes, &badLabel);
    EXPECT_EQ(badLabel, -1);
    double expected = ref::softmaxCrossEntropyForward(toDouble(logits), labels,
                                                      c.rows, c.classes);
    EXPECT_NEAR(loss, expected, 1e-5 * std::abs(expected));
    EXPECT_TRUE(allClose(
        probs, ref::softmaxForward(toDouble(logits), c.rows, c.classes), 1e-5,
        1e-8));
  }
}

// softmax cross-entropy backward from the kernel's probs with scale 3/8:
// dlogits overwritten, within rtol 1e-5, atol 1e-8.
TEST(KernelBackward, SoftmaxCrossEntropy) {
  std::mt19937_64 rng(262);
  const float scale = 3.0f / 8.0f;
  for (auto [rows, classes] : {std::pair<int64_t, int64_t>{3, 5}, {64, 1000}}) {
    SCOPED_TRACE(shapeName({rows, classes}));
    Floats logits = randomFloats(rng, rows * classes, -3.0f, 3.0f);
    Ids labels = randomIds(rng, rows, classes);
    Floats probs(rows * classes), dlogits(rows * classes, kGarbage);
    int64_t badLabel;
    cpu::softmaxCrossEntropyForward(logits.data(), labels.data(), probs.data(),
                                    rows, classes, &badLabel);
    cpu::softmaxCrossEntropyBackward(probs.data(), labels.data(), scale,
                                     dlogits.data(), rows, classes);
    EXPECT_TRUE(allClose(dlogits,
                         ref::softmaxCrossEntropyBackward(
                             toDouble(logits), labels, scale, rows, classes),
                         1e-5, 1e-8));
  }
}

// Micro-batch m of N rows with scale rows_m / N: each row's dlogits sums to 0
// and matches the reference; the micro-batch gradients of rows [0,3) and
// [3,8) equal the full-batch (scale 1) gradient of 8 rows.
TEST(KernelLoss, CrossEntropyScaleOverMicroBatches) {
  std::mt19937_64 rng(263);
  const int64_t rows = 8, classes = 6, split = 3;
  Floats logits = randomFloats(rng, rows * classes, -3.0f, 3.0f);
  Ids labels = randomIds(rng, rows, classes);
  Floats dlogits(rows * classes, kGarbage);
  for (auto [begin, end] :
       {std::pair<int64_t, int64_t>{0, split}, {split, rows}}) {
    int64_t m = end - begin;
    float scale = static_cast<float>(m) / rows;
    Floats probs(m * classes);
    int64_t badLabel;
    cpu::softmaxCrossEntropyForward(logits.data() + begin * classes,
                                    labels.data() + begin, probs.data(), m,
                                    classes, &badLabel);
    cpu::softmaxCrossEntropyBackward(probs.data(), labels.data() + begin, scale,
                                     dlogits.data() + begin * classes, m,
                                     classes);
    Floats part(logits.begin() + begin * classes,
                logits.begin() + end * classes);
    Ids partLabels(labels.begin() + begin, labels.begin() + end);
    EXPECT_TRUE(allClose(dlogits.data() + begin * classes,
                         ref::softmaxCrossEntropyBackward(
                             toDouble(part), partLabels, scale, m, classes),
                         1e-5, 1e-8));
  }
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += dlogits[r * classes + c];
    EXPECT_NEAR(sum, 0.0, 1e-7) << "row " << r;
  }
  EXPECT_TRUE(allClose(dlogits,
                       ref::softmaxCrossEntropyBackward(
                           toDouble(logits), labels, 1.0, rows, classes),
                       1e-5, 1e-8));
}

// MSE forward within rtol 1e-5; backward with scale 3/8 overwrites
// dprediction, within rtol 1e-6, atol 1e-8.
TEST(KernelLoss, Mse) {
  std::mt19937_64 rng(264);
  const float scale = 3.0f / 8.0f;
  for (int64_t n : kElementCounts) {
    SCOPED_TRACE(n);
    Floats prediction = randomFloats(rng, n), target = randomFloats(rng, n);
    float loss = cpu::mseForward(prediction.data(), target.data(), n);
    double expected = ref::mseForward(toDouble(prediction), toDouble(target));
    EXPECT_NEAR(loss, expected, 1e-5 * expected);
    Floats d(n, kGarbage);
    cpu::mseBackward(prediction.data(), target.data(), scale, d.data(), n);
    EXPECT_TRUE(allClose(
        d, ref::mseBackward(toDouble(prediction), toDouble(target), scale),
        1e-6, 1e-8));
  }
}
