//===- AttentionBiasTest.cpp - Attention with its projection biases -------===//
//
// gpipe.attention's optional qkv_bias [3D] (added to x wqkv) and out_bias
// [D] (added to the output projection), at every layer that runs them:
//   - ReferenceGradient.BiasedAttention*: the double-precision reference
//     (ReferenceOps.h) has a backward whose five gradients (dx, dwqkv, dwo,
//     dbqkv, dbo) match central finite differences of its forward, and a
//     forward that matches a case worked out by hand;
//   - KernelForward/KernelBackward.BiasedAttention*: the CPU kernels
//     (CpuKernels.h, CpuBackend's attention) against the reference, the
//     parameter gradients accumulated onto random values;
//   - ComposedAttention.Biased: KernelApi's default attention (GEMMs,
//     addRowVector, columnSums: what the CUDA backend runs) on the host
//     backend against the reference;
//   - BiasedAttentionGradients: a two-attention model trained one step by
//     the pipeline executor (CPU backend) and the device executor (host
//     backend, the composed attention) at K = 1, 2, 3 and M = 1, 2: the
//     loss and every gradient against the whole-batch reference;
//   - BiasedAttentionBundle: the loader's checks of the bias operands.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"
#include "gpipe/runtime/verify/BundleValidation.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/runtime/backends/host/HostBackend.h"

#include "ExecutorSupport.h"
#include "FiniteDifferences.h"
#include "RandomData.h"
#include "ReferenceOps.h"
#include "TestBundles.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

namespace ref = gpipe::reference;
namespace cpu = gpipe::runtime::cpu;
using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;
using gpipe::testing::allClose;
using gpipe::testing::dot;
using gpipe::testing::matchesFiniteDifferences;
using gpipe::testing::randomFloats;
using gpipe::testing::randomVec;
using ref::Vec;
using Floats = std::vector<float>;

namespace {

Vec toDouble(const Floats &v) { return Vec(v.begin(), v.end()); }

/// What an accumulating kernel added to `before` to give `after`.
Floats added(const Floats &after, const Floats &before) {
  Floats sum(after.size());
  for (size_t i = 0; i < after.size(); ++i)
    sum[i] = after[i] - before[i];
  return sum;
}

struct Shape {
  int64_t batch, seq, width, heads;
  int64_t tokens() const { return batch * seq; }
};
const Shape kShapes[] = {{2, 4, 8, 2}, {1, 5, 12, 3}, {3, 1, 4, 1}};

//===-- the reference -----------------------------------------------------===//

// All five gradients of sum(r * attention(x)), causal and not.
TEST(ReferenceGradient, BiasedAttention) {
  std::mt19937_64 rng(161);
  const int64_t batch = 2, seq = 3, width = 4, heads = 2;
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    Vec x = randomVec(rng, batch * seq * width),
        wqkv = randomVec(rng, width * 3 * width),
        wo = randomVec(rng, width * width), bqkv = randomVec(rng, 3 * width),
        bo = randomVec(rng, width), r = randomVec(rng, batch * seq * width);
    auto f = [&] {
      return dot(r, ref::attentionForward(x, wqkv, wo, batch, seq, width, heads,
                                          causal, bqkv, bo)
                        .y);
    };
    ref::AttentionGrads g = ref::attentionBackward(
        r, x, wqkv, wo, batch, seq, width, heads, causal, bqkv, bo);
    EXPECT_TRUE(matchesFiniteDifferences(x, f, g.dx));
    EXPECT_TRUE(matchesFiniteDifferences(wqkv, f, g.dwqkv));
    EXPECT_TRUE(matchesFiniteDifferences(wo, f, g.dwo));
    EXPECT_TRUE(matchesFiniteDifferences(bqkv, f, g.dbqkv));
    EXPECT_TRUE(matchesFiniteDifferences(bo, f, g.dbo));
  }
}

// With zero projection weights every position's value is v = the bias's v
// part, the attention weights sum to 1, so every output row is
// v wo + bo: here [1, 2] [[1, 0], [1, 1]] + [10, 20] = [13, 22].
TEST(ReferenceGradient, BiasedAttentionByHand) {
  const Vec wqkv(2 * 6, 0.0), wo = {1, 0, 1, 1};
  const Vec bqkv = {0.5, -1, 3, 4, 1, 2}, bo = {10, 20};
  ref::AttentionResult r = ref::attentionForward({1, 2, 3, 4, 5, 6}, wqkv, wo,
                                                 1, 3, 2, 1, true, bqkv, bo);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(r.y[2 * i], 13.0, 1e-12);
    EXPECT_NEAR(r.y[2 * i + 1], 22.0, 1e-12);
    for (int64_t c = 0; c < 6; ++c)
      EXPECT_EQ(r.qkv[6 * i + c], bqkv[c]);
  }
}

//===-- the CPU kernels ---------------------------------------------------===//

/// Random operands of one attention call.
struct Operands {
  Floats x, wqkv, wo, bqkv, bo, dy;
  Operands(std::mt19937_64 &rng, const Shape &s)
      : x(randomFloats(rng, s.tokens() * s.width)),
        wqkv(randomFloats(rng, s.width * 3 * s.width)),
        wo(randomFloats(rng, s.width * s.width)),
        bqkv(randomFloats(rng, 3 * s.width)), bo(randomFloats(rng, s.width)),
        dy(randomFloats(rng, s.tokens() * s.width)) {}
  ref::AttentionResult forward(const Shape &s, bool causal) const {
    return ref::attentionForward(toDouble(x), toDouble(wqkv), toDouble(wo),
                                 s.batch, s.seq, s.width, s.heads, causal,
                                 toDouble(bqkv), toDouble(bo));
  }
  ref::AttentionGrads backward(const Shape &s, bool causal) const {
    return ref::attentionBackward(
        toDouble(dy), toDouble(x), toDouble(wqkv), toDouble(wo), s.batch, s.seq,
        s.width, s.heads, causal, toDouble(bqkv), toDouble(bo));
  }
};

/// The saved buffers and gradients of one call, the parameter gradients
/// starting at random values (they accumulate).
struct Buffers {
  Floats y, qkv, lse, context, dx, dwqkv, dwo, dbqkv, dbo;
  Floats dwqkv0, dwo0, dbqkv0, dbo0, scratch;
  Buffers(std::mt19937_64 &rng, const Shape &s)
      : y(s.tokens() * s.width), qkv(s.tokens() * 3 * s.width),
        lse(s.batch * s.heads * s.seq), context(y.size()),
        dx(y.size(), 1e30f), dwqkv0(randomFloats(rng, 3 * s.width * s.width)),
        dwo0(randomFloats(rng, s.width * s.width)),
        dbqkv0(randomFloats(rng, 3 * s.width)),
        dbo0(randomFloats(rng, s.width)),
        scratch(4 * s.tokens() * s.width + 2 * s.heads * s.seq * s.seq, 1e30f) {
    dwqkv = dwqkv0, dwo = dwo0, dbqkv = dbqkv0, dbo = dbo0;
  }
  void expectMatches(const ref::AttentionResult &r,
                     const ref::AttentionGrads &g) const {
    EXPECT_TRUE(allClose(y, r.y, 1e-4, 1e-5));
    EXPECT_TRUE(allClose(qkv, r.qkv, 1e-4, 1e-5));
    EXPECT_TRUE(allClose(lse, r.lse, 1e-4, 1e-5));
    EXPECT_TRUE(allClose(context, r.context, 1e-4, 1e-5));
    EXPECT_TRUE(allClose(dx, g.dx, 1e-4, 1e-4));
    EXPECT_TRUE(allClose(added(dwqkv, dwqkv0), g.dwqkv, 1e-4, 1e-4));
    EXPECT_TRUE(allClose(added(dwo, dwo0), g.dwo, 1e-4, 1e-4));
    EXPECT_TRUE(allClose(added(dbqkv, dbqkv0), g.dbqkv, 1e-4, 1e-4));
    EXPECT_TRUE(allClose(added(dbo, dbo0), g.dbo, 1e-4, 1e-4));
  }
};

// cpu::attentionForward / attentionBackward with biases, causal and not.
TEST(KernelBackward, BiasedAttention) {
  std::mt19937_64 rng(261);
  for (const Shape &s : kShapes)
    for (bool causal : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << s.batch << "x" << s.seq << "x" << s.width << "/"
                   << s.heads << (causal ? " causal" : ""));
      Operands in(rng, s);
      Buffers out(rng, s);
      cpu::attentionForward(
          in.x.data(), in.wqkv.data(), in.wo.data(), in.bqkv.data(),
          in.bo.data(), out.y.data(), out.qkv.data(), out.lse.data(),
          out.context.data(), s.batch, s.seq, s.width, s.heads, causal);
      cpu::attentionBackward(
          in.dy.data(), in.x.data(), in.wqkv.data(), in.wo.data(),
          out.qkv.data(), out.lse.data(), out.context.data(), out.dx.data(),
          out.dwqkv.data(), out.dwo.data(), out.dbqkv.data(), out.dbo.data(),
          out.scratch.data(), s.batch, s.seq, s.width, s.heads, causal);
      out.expectMatches(in.forward(s, causal), in.backward(s, causal));
    }
}

// The bias gradients alone (no dx, dwqkv, dwo wanted) are still computed.
TEST(KernelBackward, BiasedAttentionBiasGradientsAlone) {
  std::mt19937_64 rng(262);
  const Shape s = kShapes[0];
  Operands in(rng, s);
  Buffers out(rng, s);
  cpu::attentionForward(in.x.data(), in.wqkv.data(), in.wo.data(),
                        in.bqkv.data(), in.bo.data(), out.y.data(),
                        out.qkv.data(), out.lse.data(), out.context.data(),
                        s.batch, s.seq, s.width, s.heads, true);
  cpu::attentionBackward(in.dy.data(), in.x.data(), in.wqkv.data(),
                         in.wo.data(), out.qkv.data(), out.lse.data(),
                         out.context.data(), nullptr, nullptr, nullptr,
                         out.dbqkv.data(), out.dbo.data(), out.scratch.data(),
                         s.batch, s.seq, s.width, s.heads, true);
  ref::AttentionGrads g = in.backward(s, true);
  EXPECT_TRUE(allClose(added(out.dbqkv, out.dbqkv0), g.dbqkv, 1e-4, 1e-4));
  EXPECT_TRUE(allClose(added(out.dbo, out.dbo0), g.dbo, 1e-4, 1e-4));
}

/// Runs the attention and its gradient through `backend`'s KernelApi calls.
void runCalls(device::DeviceBackend &backend, const Operands &in, Buffers &out,
              const Shape &s, bool causal) {
  device::AttentionCall f;
  f.x = in.x.data(), f.wqkv = in.wqkv.data(), f.wo = in.wo.data();
  f.qkvBias = in.bqkv.data(), f.outBias = in.bo.data();
  f.y = out.y.data(), f.qkv = out.qkv.data(), f.lse = out.lse.data();
  f.context = out.context.data();
  f.batch = s.batch, f.seq = s.seq, f.width = s.width, f.heads = s.heads;
  f.causal = causal;
  Floats scores(
      size_t(backend.attentionScratch(s.batch, s.seq, s.width, s.heads)),
      1e30f);
  f.scratch = scores.data();
  device::StreamId stream = backend.computeStream(0);
  backend.attention(stream, f);
  device::AttentionGradCall g;
  g.dy = in.dy.data(), g.x = in.x.data(), g.wqkv = in.wqkv.data();
  g.wo = in.wo.data(), g.qkv = f.qkv, g.lse = f.lse;
  g.context = f.context, g.dx = out.dx.data(), g.dwqkv = out.dwqkv.data();
  g.dwo = out.dwo.data(), g.dqkvBias = out.dbqkv.data();
  g.doutBias = out.dbo.data();
  ASSERT_LE(backend.attentionGradScratch(s.batch, s.seq, s.width, s.heads),
            int64_t(out.scratch.size()));
  g.scratch = out.scratch.data();
  g.batch = s.batch, g.seq = s.seq, g.width = s.width, g.heads = s.heads;
  g.causal = causal;
  backend.attentionGrad(stream, g);
  ASSERT_EQ(backend.synchronize(std::chrono::seconds(60)), "");
}

// KernelApi's composed attention (the CUDA backend's) with biases, on the
// host backend; and CpuBackend's override of it, on two threads.
TEST(ComposedAttention, Biased) {
  std::mt19937_64 rng(263);
  for (const Shape &s : kShapes)
    for (bool causal : {false, true}) {
      Operands in(rng, s);
      Buffers composed(rng, s), threaded = composed;
      device::HostBackend host(1);
      runCalls(host, in, composed, s, causal);
      composed.expectMatches(in.forward(s, causal), in.backward(s, causal));
      device::CpuBackend cpuBackend(1, {2, false});
      runCalls(cpuBackend, in, threaded, s, causal);
      threaded.expectMatches(in.forward(s, causal), in.backward(s, causal));
    }
}

//===-- the executors -----------------------------------------------------===//

constexpr int64_t kBatch = 6, kSeq = 3, kWidth = 4, kHeads = 2;

/// x -> biased attention -> biased causal attention -> MSE against t, a
/// layer each.
ModelGraph biasedGraph() {
  ModelGraph g(kBatch);
  int x = g.input("x", {kBatch, kSeq, kWidth});
  int t = g.input("t", {kBatch, kSeq, kWidth});
  int h = x;
  for (const char *name : {"a", "b"}) {
    std::string n = name;
    int wqkv =
        g.param(n + ".qkv", {kWidth, 3 * kWidth}, InitKind::GlorotUniform);
    int wo = g.param(n + ".out", {kWidth, kWidth}, InitKind::GlorotUniform);
    int bqkv = g.param(n + ".bqkv", {3 * kWidth}, InitKind::Uniform, 0.5);
    int bo = g.param(n + ".bo", {kWidth}, InitKind::Uniform, 0.5);
    h = g.attention(h, wqkv, wo, kHeads, n == "b", bqkv, bo);
    g.nextLayer();
  }
  g.mse(h, t);
  return g;
}

Batch biasedBatch(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> shape = {kBatch, kSeq, kWidth};
  return {{"x", HostTensor::floats(shape,
                                   randomFloats(rng, kBatch * kSeq * kWidth))},
          {"t", HostTensor::floats(shape,
                                   randomFloats(rng, kBatch * kSeq * kWidth))}};
}

struct Expected {
  double loss;
  Params grads;
};

Expected biasedReference(const Params &p, const Batch &batch) {
  const Vec x = toVec(batch.at("x").f32), t = toVec(batch.at("t").f32);
  auto forward = [&](const std::string &n, const Vec &in, bool causal) {
    return ref::attentionForward(in, p.at(n + ".qkv"), p.at(n + ".out"), kBatch,
                                 kSeq, kWidth, kHeads, causal,
                                 p.at(n + ".bqkv"), p.at(n + ".bo"))
        .y;
  };
  auto backward = [&](const std::string &n, const Vec &dy, const Vec &in,
                      bool causal) {
    return ref::attentionBackward(dy, in, p.at(n + ".qkv"), p.at(n + ".out"),
                                  kBatch, kSeq, kWidth, kHeads, causal,
                                  p.at(n + ".bqkv"), p.at(n + ".bo"));
  };
  Vec a = forward("a", x, false), b = forward("b", a, true);
  Expected out{ref::mseForward(b, t), {}};
  ref::AttentionGrads gb = backward("b", ref::mseBackward(b, t, 1.0), a, true);
  ref::AttentionGrads ga = backward("a", gb.dx, x, false);
  for (auto [n, g] : {std::pair{"a", &ga}, std::pair{"b", &gb}}) {
    std::string name = n;
    out.grads[name + ".qkv"] = g->dwqkv;
    out.grads[name + ".out"] = g->dwo;
    out.grads[name + ".bqkv"] = g->dbqkv;
    out.grads[name + ".bo"] = g->dbo;
  }
  return out;
}

using BiasedParam = std::tuple<unsigned, unsigned, RematPolicy>;
class BiasedAttentionGradients : public ::testing::TestWithParam<BiasedParam> {
};

// One step at K stages and M micro-batches gives the whole-batch loss and
// gradients, on the pipeline executor (CPU kernels) and on the device
// executor over the host backend (the composed attention).
TEST_P(BiasedAttentionGradients, MatchWholeBatchReference) {
  auto [k, m, remat] = GetParam();
  const std::vector<int> splits[] = {{0}, {0, 1}, {0, 1, 2}};
  Bundle bundle = buildBundle(biasedGraph(), splits[k - 1], m, remat);
  const Batch batch = biasedBatch(7);
  const Expected expected = biasedReference(initialParams(bundle, 42), batch);

  ExecutorConfig config;
  config.seed = 42;
  auto executor = makeExecutor(bundle, config);
  ASSERT_TRUE(executor);
  StepResult step = executor->trainStep(batch);
  ASSERT_TRUE(step.ok()) << step.error;
  EXPECT_NEAR(step.loss, expected.loss, 1e-5 * std::fabs(expected.loss));
  expectGradientsMatch(*executor, expected.grads, 1e-5, 4e-5);

  device::DeviceExecutorConfig deviceConfig;
  deviceConfig.seed = 42;
  std::string error;
  auto onHost = device::DeviceExecutor::create(
      bundle, std::make_unique<device::HostBackend>(k, 3), deviceConfig, error);
  ASSERT_TRUE(onHost) << error;
  StepResult hostStep = onHost->trainStep(batch);
  ASSERT_TRUE(hostStep.ok()) << hostStep.error;
  EXPECT_NEAR(hostStep.loss, expected.loss, 1e-5 * std::fabs(expected.loss));
  for (const auto &[name, grad] : expected.grads) {
    Floats actual;
    ASSERT_EQ(onHost->gradient(name, actual), "");
    EXPECT_TRUE(allClose(actual, grad, 1e-5, 4e-5)) << "gradient " << name;
  }
}

std::string biasedName(const ::testing::TestParamInfo<BiasedParam> &info) {
  auto [k, m, remat] = info.param;
  return "K" + std::to_string(k) + "_M" + std::to_string(m) + "_" +
         rematName(remat);
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, BiasedAttentionGradients,
    ::testing::Combine(::testing::Values(1u, 2u, 3u), ::testing::Values(1u, 2u),
                       ::testing::Values(RematPolicy::None, RematPolicy::Full)),
    biasedName);

//===-- bundle checks -----------------------------------------------------===//

/// The loader's message for the biased model's bundle after `mutate`.
std::string errorAfter(void (*mutate)(StageProgram &)) {
  Bundle bundle = buildBundle(biasedGraph(), {0}, 1, RematPolicy::Full);
  EXPECT_EQ(validateBundle(bundle), "");
  mutate(bundle.stages[0]);
  return validateBundle(bundle);
}

Op &firstOf(std::vector<Op> &ops, OpKind kind) {
  for (Op &op : ops)
    if (op.kind == kind)
      return op;
  ADD_FAILURE() << "no " << opKindName(kind);
  return ops.front();
}

// One bias alone, a bias of the wrong shape, and a gradient without its
// bias gradients are refused, each with what was expected.
TEST(BiasedAttentionBundle, BadBiasesAreRefused) {
  EXPECT_NE(errorAfter([](StageProgram &s) {
              firstOf(s.forward, OpKind::Attention).operands.pop_back();
            })
                .find("(attention): expects both biases (bqkv, bo) or neither, "
                      "got 1 bias operand"),
            std::string::npos);
  EXPECT_NE(errorAfter([](StageProgram &s) {
              std::vector<int> &o =
                  firstOf(s.forward, OpKind::Attention).operands;
              std::swap(o[3], o[4]);
            }).find("expects bqkv of shape [12], got [4]"),
            std::string::npos);
  EXPECT_NE(errorAfter([](StageProgram &s) {
              firstOf(s.backward, OpKind::AttentionGrad).results.pop_back();
            }).find("(attention_grad): expects 5 results, got 4"),
            std::string::npos);
}

} // namespace
