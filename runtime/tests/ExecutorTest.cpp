//===- ExecutorTest.cpp - Tests of the pipeline executor ------------------===//
//
// The heart of GPipe: one pipelined step (K stages, M micro-batches, any
// remat policy) computes the gradients of the whole mini-batch. Every
// gradient is compared with an independent single-device reference written
// here as a plain sequential forward/backward over ReferenceOps (double
// precision, no code shared with the runtime). Then: loss curves, bitwise
// determinism, memory accounting and the timeline. Failures, the bundle
// and batch checks: ExecutorFailureTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/kernels/CpuKernels.h"

#include "AllClose.h"
#include "ExecutorSupport.h"
#include "ReferenceOps.h"
#include "TestBundles.h"
#include "TestModels.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;
namespace ref = gpipe::reference;
using ref::Vec;

namespace {

constexpr double kRtol = 1e-5;
constexpr double kAtol = 4e-5;
constexpr int64_t kBatch = 10;

//===----------------------------------------------------------------------===//
// The independent reference: whole batch, one device, double precision
//===----------------------------------------------------------------------===//

struct Reference {
  double loss = 0.0;
  std::map<std::string, Vec> grads;
  Vec logits; ///< the MLP's
};

Params currentParams(const PipelineExecutor &executor) {
  Params params;
  for (const ParamSpec &spec : executor.bundle().params)
    params[spec.name] = toVec(*executor.parameter(spec.name));
  return params;
}

Reference mlpReference(const Params &p, const Batch &batch) {
  const int64_t n = batch.at("x").shape[0];
  Vec x = toVec(batch.at("x").f32);
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  Vec h1 = ref::denseForward(x, p.at("l1.w"), p.at("l1.b"), n, 12, 16);
  Vec a1 = ref::reluForward(h1);
  Vec h2 = ref::denseForward(a1, p.at("l2.w"), p.at("l2.b"), n, 16, 16);
  Vec a2 = ref::tanhForward(h2);
  Vec h3 = ref::denseForward(a2, p.at("l3.w"), p.at("l3.b"), n, 16, 8);
  Vec a3 = ref::geluForward(h3);
  Vec logits = ref::denseForward(a3, p.at("l4.w"), p.at("l4.b"), n, 8, 5);
  Reference r;
  r.logits = logits;
  r.loss = ref::softmaxCrossEntropyForward(logits, labels, n, 5);
  Vec dlogits = ref::softmaxCrossEntropyBackward(logits, labels, 1.0, n, 5);
  auto g4 = ref::denseBackward(dlogits, a3, p.at("l4.w"), n, 8, 5);
  auto g3 = ref::denseBackward(ref::geluBackward(h3, g4.dx), a2, p.at("l3.w"),
                               n, 16, 8);
  auto g2 = ref::denseBackward(ref::tanhBackward(h2, g3.dx), a1, p.at("l2.w"),
                               n, 16, 16);
  auto g1 = ref::denseBackward(ref::reluBackward(h1, g2.dx), x, p.at("l1.w"), n,
                               12, 16);
  r.grads = {{"l1.w", g1.dw}, {"l1.b", g1.db}, {"l2.w", g2.dw},
             {"l2.b", g2.db}, {"l3.w", g3.dw}, {"l3.b", g3.db},
             {"l4.w", g4.dw}, {"l4.b", g4.db}};
  return r;
}

/// The whole-batch dropout mask of step `step`, as the dropout contract
/// defines it: a function of (seed, step, global row, column).
std::vector<uint8_t> dropoutMask(int64_t rows, int64_t cols, float rate,
                                 uint64_t seed, uint64_t step) {
  std::vector<float> ones(rows * cols, 1.0f), y(rows * cols);
  std::vector<uint8_t> mask(rows * cols);
  cpu::dropoutForward(ones.data(), y.data(), mask.data(), rows, cols, rate,
                      seed, step, 0);
  return mask;
}

Vec addVec(const Vec &a, const Vec &b) { return ref::addForward(a, b); }

/// `step` selects the dropout mask; 0 means no dropout (evaluation).
Reference residualReference(const Params &p, const Batch &batch,
                            uint64_t step) {
  const int64_t n = batch.at("ids").shape[0], rows = n * kSeq;
  const std::vector<int32_t> &ids = batch.at("ids").i32;
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  std::vector<uint8_t> mask =
      step ? dropoutMask(rows, kWidth, kDropRate, kDropSeed, step)
           : std::vector<uint8_t>(rows * kWidth, 1);
  double rate = step ? kDropRate : 0.0;
  const double eps = 1e-5;

  Vec emb = ref::embeddingForward(ids, p.at("table"), kVocab, kWidth);
  Vec ln1 = ref::layerNormForward(emb, p.at("ln1.gamma"), p.at("ln1.beta"),
                                  rows, kWidth, eps)
                .y;
  Vec att = ref::attentionForward(ln1, p.at("attn.wqkv"), p.at("attn.wo"), n,
                                  kSeq, kWidth, kHeads, true)
                .y;
  Vec drop = ref::dropoutForward(att, mask, rate);
  Vec r1 = addVec(emb, drop);
  Vec ln2 = ref::layerNormForward(r1, p.at("ln2.gamma"), p.at("ln2.beta"), rows,
                                  kWidth, eps)
                .y;
  Vec h =
      ref::denseForward(ln2, p.at("ffn.w1"), p.at("ffn.b1"), rows, kWidth, 16);
  Vec g = ref::geluForward(h);
  Vec f =
      ref::denseForward(g, p.at("ffn.w2"), p.at("ffn.b2"), rows, 16, kWidth);
  Vec r2 = addVec(r1, f);
  Vec logits =
      ref::denseForward(r2, p.at("out.w"), p.at("out.b"), rows, kWidth, kVocab);
  Reference r;
  r.loss = ref::softmaxCrossEntropyForward(logits, labels, rows, kVocab);

  Vec dlogits =
      ref::softmaxCrossEntropyBackward(logits, labels, 1.0, rows, kVocab);
  auto gOut =
      ref::denseBackward(dlogits, r2, p.at("out.w"), rows, kWidth, kVocab);
  const Vec &dr2 = gOut.dx; // flows to r1 and to f
  auto gF2 = ref::denseBackward(dr2, g, p.at("ffn.w2"), rows, 16, kWidth);
  auto gF1 = ref::denseBackward(ref::geluBackward(h, gF2.dx), ln2,
                                p.at("ffn.w1"), rows, kWidth, 16);
  auto gLn2 =
      ref::layerNormBackward(gF1.dx, r1, p.at("ln2.gamma"), rows, kWidth, eps);
  Vec dr1 = addVec(dr2, gLn2.dx); // flows to emb and to drop
  Vec datt = ref::dropoutBackward(mask, dr1, rate);
  auto gAtt =
      ref::attentionBackward(datt, ln1, p.at("attn.wqkv"), p.at("attn.wo"), n,
                             kSeq, kWidth, kHeads, true);
  auto gLn1 = ref::layerNormBackward(gAtt.dx, emb, p.at("ln1.gamma"), rows,
                                     kWidth, eps);
  Vec demb = addVec(dr1, gLn1.dx);
  r.grads = {{"table", ref::embeddingBackward(ids, demb, kVocab, kWidth)},
             {"ln1.gamma", gLn1.dgamma},
             {"ln1.beta", gLn1.dbeta},
             {"attn.wqkv", gAtt.dwqkv},
             {"attn.wo", gAtt.dwo},
             {"ln2.gamma", gLn2.dgamma},
             {"ln2.beta", gLn2.dbeta},
             {"ffn.w1", gF1.dw},
             {"ffn.b1", gF1.db},
             {"ffn.w2", gF2.dw},
             {"ffn.b2", gF2.db},
             {"out.w", gOut.dw},
             {"out.b", gOut.db}};
  return r;
}

Reference mseReference(const Params &p, const Batch &batch) {
  const int64_t n = batch.at("x").shape[0];
  Vec x = toVec(batch.at("x").f32), target = toVec(batch.at("target").f32);
  Vec z = ref::denseForward(x, p.at("w"), p.at("b"), n, 6, 7);
  Vec y = ref::softmaxForward(z, n, 7);
  Reference r;
  r.loss = ref::mseForward(y, target);
  Vec dz = ref::softmaxBackward(z, ref::mseBackward(y, target, 1.0), n, 7);
  auto gw = ref::denseBackward(dz, x, p.at("w"), n, 6, 7);
  r.grads = {{"w", gw.dw}, {"b", gw.db}};
  return r;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

using gpipe::testing::allClose;

using gpipe::schedule::ScheduleKind;
using SweepParam = PipelineParam;
constexpr auto sweepName = pipelineParamName;

/// One step of `bundle` compared with `reference` (computed at the initial
/// parameters): the loss and every parameter gradient.
void checkOneStep(Bundle bundle, const Batch &batch,
                  Reference (*reference)(const Params &, const Batch &)) {
  ExecutorConfig config;
  config.seed = 42;
  Params initial = initialParams(bundle, config.seed);
  auto executor = makeExecutor(std::move(bundle), config);
  ASSERT_TRUE(executor);
  StepResult step = executor->trainStep(batch);
  ASSERT_TRUE(step.ok()) << step.error;
  Reference expected = reference(initial, batch);
  EXPECT_NEAR(step.loss, expected.loss, 1e-5 * std::fabs(expected.loss));
  ASSERT_EQ(expected.grads.size(), executor->bundle().params.size());
  expectGradientsMatch(*executor, expected.grads, kRtol, kAtol);
}

Reference residualStep1(const Params &p, const Batch &batch) {
  return residualReference(p, batch, 1);
}

//===----------------------------------------------------------------------===//
// Gradient equivalence sweeps
//===----------------------------------------------------------------------===//

class MlpGradients : public ::testing::TestWithParam<SweepParam> {};

// K stages x M micro-batches x remat x schedule compute the whole-batch
// gradients of the MLP (batch 10: M = 3 and 8 split unevenly; M < K and M
// not divisible by K included).
TEST_P(MlpGradients, MatchWholeBatchReference) {
  auto [k, m, remat, kind] = GetParam();
  Bundle bundle = buildBundle(mlpGraph(kBatch), mlpSplit(k), m, remat, kind);
  checkOneStep(std::move(bundle), mlpBatch(kBatch, 1), mlpReference);
}

class ResidualGradients : public ::testing::TestWithParam<SweepParam> {};

// Same for embedding + layer norm + causal attention + dropout + residuals,
// the skip value carried through intermediate stages.
TEST_P(ResidualGradients, MatchWholeBatchReference) {
  auto [k, m, remat, kind] = GetParam();
  Bundle bundle =
      buildBundle(residualGraph(kBatch), residualSplit(k), m, remat, kind);
  checkOneStep(std::move(bundle), residualBatch(kBatch, 2), residualStep1);
}

const auto kSchedules = ::testing::Values(
    ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZeroBubbleH1);
const auto kSweep = ::testing::Combine(
    ::testing::Values(1u, 2u, 3u, 4u), ::testing::Values(1u, 2u, 3u, 8u),
    ::testing::Values(RematPolicy::None, RematPolicy::Full,
                      RematPolicy::ExceptLast),
    kSchedules);

INSTANTIATE_TEST_SUITE_P(Sweep, MlpGradients, kSweep, sweepName);
INSTANTIATE_TEST_SUITE_P(Sweep, ResidualGradients, kSweep, sweepName);

/// An interleaved split: stage starts and stages per device.
struct InterleavedSplit {
  bool residual;
  std::vector<int> firstLayers;
  unsigned virtualStages;
};
using InterleavedParam = std::tuple<unsigned, unsigned, RematPolicy>;

const InterleavedSplit kInterleavedSplits[] = {
    {false, {0, 1, 2, 3}, 2},       // MLP: K = 2, V = 2
    {true, {0, 2, 3, 5}, 2},        // Transformer block: K = 2, V = 2
    {true, {0, 1, 2, 3, 4, 5}, 2},  // K = 3, V = 2
    {true, {0, 1, 2, 3, 4, 5}, 3}}; // K = 2, V = 3

class InterleavedGradients : public ::testing::TestWithParam<InterleavedParam> {
};

// Interleaved 1F1B, devices running 2 or 3 stages each (the Transformer's
// skip value crossing stages of one device), computes the whole-batch
// gradients for every remat policy and M (M < K and M not divisible by K
// included).
TEST_P(InterleavedGradients, MatchWholeBatchReference) {
  auto [split, m, remat] = GetParam();
  const InterleavedSplit &s = kInterleavedSplits[split];
  Bundle bundle = buildBundle(
      s.residual ? residualGraph(kBatch) : mlpGraph(kBatch), s.firstLayers, m,
      remat, ScheduleKind::Interleaved, s.virtualStages);
  ASSERT_EQ(bundle.numDevices(), s.firstLayers.size() / s.virtualStages);
  if (s.residual)
    checkOneStep(std::move(bundle), residualBatch(kBatch, 2), residualStep1);
  else
    checkOneStep(std::move(bundle), mlpBatch(kBatch, 1), mlpReference);
}

std::string
interleavedName(const ::testing::TestParamInfo<InterleavedParam> &info) {
  const InterleavedSplit &s = kInterleavedSplits[std::get<0>(info.param)];
  return std::string(s.residual ? "residual" : "mlp") + "_K" +
         std::to_string(s.firstLayers.size() / s.virtualStages) + "_V" +
         std::to_string(s.virtualStages) + "_M" +
         std::to_string(std::get<1>(info.param)) + "_" +
         rematName(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, InterleavedGradients,
    ::testing::Combine(::testing::Values(0u, 1u, 2u, 3u),
                       ::testing::Values(1u, 2u, 3u, 8u),
                       ::testing::Values(RematPolicy::None, RematPolicy::Full,
                                         RematPolicy::ExceptLast)),
    interleavedName);

class MseGradients : public ::testing::TestWithParam<SweepParam> {};

// Softmax and MSE (the loss-gradient scale of a non-classification loss).
TEST_P(MseGradients, MatchWholeBatchReference) {
  auto [k, m, remat, kind] = GetParam();
  std::vector<int> split =
      k == 1 ? std::vector<int>{0} : std::vector<int>{0, 1};
  Bundle bundle = buildBundle(mseGraph(kBatch), split, m, remat, kind);
  checkOneStep(std::move(bundle), mseBatch(kBatch, 3), mseReference);
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, MseGradients,
    ::testing::Combine(::testing::Values(1u, 2u), ::testing::Values(1u, 3u),
                       ::testing::Values(RematPolicy::None, RematPolicy::Full,
                                         RematPolicy::ExceptLast),
                       kSchedules),
    sweepName);

//===----------------------------------------------------------------------===//
// Training over several steps
//===----------------------------------------------------------------------===//

// The executor's initial parameters are exactly the initializers' values.
TEST(Executor, InitialParametersComeFromSeedAndName) {
  Bundle bundle =
      buildBundle(mlpGraph(kBatch), mlpSplit(3), 2, RematPolicy::Full);
  ExecutorConfig config;
  config.seed = 9;
  Params expected = initialParams(bundle, config.seed);
  auto executor = makeExecutor(bundle, config);
  ASSERT_TRUE(executor);
  for (const auto &[name, values] : expected)
    EXPECT_EQ(toVec(*executor->parameter(name)), values) << name;
  EXPECT_EQ(executor->parameter("nope"), nullptr);
  EXPECT_EQ(executor->gradient("nope"), nullptr);
}

// Gradients are zeroed at each step (not summed across steps) and one SGD
// step is p - lr g.
TEST(Executor, SecondStepGradientsAndSgdUpdate) {
  Bundle bundle = buildBundle(residualGraph(kBatch), residualSplit(4), 3,
                              RematPolicy::ExceptLast);
  ExecutorConfig config;
  config.optimizer.kind = OptimizerKind::Sgd;
  config.optimizer.learningRate = 0.5f;
  auto executor = makeExecutor(bundle, config);
  ASSERT_TRUE(executor);
  Batch batch = residualBatch(kBatch, 5);
  ASSERT_TRUE(executor->trainStep(batch).ok());
  Params afterOne = currentParams(*executor);
  StepResult second = executor->trainStep(batch);
  ASSERT_TRUE(second.ok()) << second.error;
  EXPECT_EQ(executor->stepsDone(), 2);
  Reference expected = residualReference(afterOne, batch, 2);
  EXPECT_NEAR(second.loss, expected.loss, 1e-5 * expected.loss);
  for (const auto &[name, grad] : expected.grads) {
    const std::vector<float> &g = *executor->gradient(name);
    EXPECT_TRUE(allClose(g, grad, kRtol, kAtol)) << name;
    const std::vector<float> &p = *executor->parameter(name);
    for (size_t i = 0; i < p.size(); ++i)
      ASSERT_EQ(p[i], float(afterOne.at(name)[i]) - 0.5f * g[i]) << name;
  }
}

// A weight used by two layers gets one gradient, the sum of its uses (an
// accumulate_grad of their sum, not fused into either product); across steps
// it is overwritten by the first micro-batch's, not summed onto the last's.
TEST(Executor, ATiedWeightsGradientIsTheSumOfItsUsesAtEveryStep) {
  ModelGraph graph(kBatch);
  int x = graph.input("x", {kBatch, 6});
  int target = graph.input("target", {kBatch, 6});
  int w = graph.param("w", {6, 6}, InitKind::GlorotUniform);
  int h = graph.dense(x, w);
  graph.nextLayer();
  graph.mse(graph.dense(h, w), target);
  ExecutorConfig config;
  config.optimizer.kind = OptimizerKind::Sgd;
  config.optimizer.learningRate = 0.5f;
  auto executor =
      makeExecutor(buildBundle(graph, {0}, 2, RematPolicy::None), config);
  ASSERT_TRUE(executor);
  Batch batch = mseBatch(kBatch, 7);
  std::vector<float> goal(batch.at("x").f32.rbegin(), batch.at("x").f32.rend());
  batch["target"] = HostTensor::floats({kBatch, 6}, goal);
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    Params p = currentParams(*executor);
    StepResult result = executor->trainStep(batch);
    ASSERT_TRUE(result.ok()) << result.error;
    const Vec zero(6, 0.0), in = toVec(batch.at("x").f32);
    Vec z1 = ref::denseForward(in, p.at("w"), zero, kBatch, 6, 6);
    Vec z2 = ref::denseForward(z1, p.at("w"), zero, kBatch, 6, 6);
    Vec dz2 = ref::mseBackward(z2, toVec(goal), 1.0);
    auto second = ref::denseBackward(dz2, z1, p.at("w"), kBatch, 6, 6);
    auto first = ref::denseBackward(second.dx, in, p.at("w"), kBatch, 6, 6);
    Vec expected(36);
    for (size_t i = 0; i < expected.size(); ++i)
      expected[i] = first.dw[i] + second.dw[i];
    EXPECT_NEAR(result.loss, ref::mseForward(z2, toVec(goal)), 1e-5);
    EXPECT_TRUE(allClose(*executor->gradient("w"), expected, kRtol, kAtol));
  }
}

/// Losses of `steps` training steps over four rotating batches.
std::vector<double> lossCurve(Bundle bundle, OptimizerConfig optimizer,
                              Batch (*makeBatch)(int64_t, uint64_t),
                              int steps) {
  ExecutorConfig config;
  config.optimizer = optimizer;
  config.seed = 3;
  auto executor = makeExecutor(std::move(bundle), config);
  std::vector<double> losses;
  if (!executor)
    return losses;
  std::vector<Batch> batches;
  for (uint64_t b = 0; b < 4; ++b)
    batches.push_back(makeBatch(kBatch, 100 + b));
  for (int s = 0; s < steps; ++s) {
    StepResult step = executor->trainStep(batches[s % 4]);
    EXPECT_TRUE(step.ok()) << step.error;
    losses.push_back(step.loss);
  }
  return losses;
}

void expectSameCurve(const std::vector<double> &a,
                     const std::vector<double> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s)
    EXPECT_LE(std::fabs(a[s] - b[s]), 1e-4 * std::fabs(b[s]))
        << "step " << s << ": " << a[s] << " vs " << b[s];
  EXPECT_LT(a.back(), 0.8 * a.front()) << "the model should learn";
}

// 50 SGD steps of the MLP: K=4, M=3 (uneven), full remat follows the
// single-device curve.
TEST(Executor, MlpLossCurveMatchesSingleDevice) {
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  sgd.learningRate = 0.5f;
  auto single = lossCurve(
      buildBundle(mlpGraph(kBatch), mlpSplit(1), 1, RematPolicy::None), sgd,
      mlpBatch, 50);
  auto piped = lossCurve(
      buildBundle(mlpGraph(kBatch), mlpSplit(4), 3, RematPolicy::Full), sgd,
      mlpBatch, 50);
  expectSameCurve(piped, single);
}

// 50 Adam steps of the residual model: K=4, M=8, except-last remat.
TEST(Executor, ResidualLossCurveMatchesSingleDevice) {
  OptimizerConfig adam;
  adam.kind = OptimizerKind::Adam;
  adam.learningRate = 0.01f;
  auto single = lossCurve(buildBundle(residualGraph(kBatch), residualSplit(1),
                                      1, RematPolicy::None),
                          adam, residualBatch, 50);
  auto piped = lossCurve(buildBundle(residualGraph(kBatch), residualSplit(4), 8,
                                     RematPolicy::ExceptLast),
                         adam, residualBatch, 50);
  expectSameCurve(piped, single);
}

// Same bundle, seed and data: bit-identical parameters.
TEST(Executor, RunsAreBitwiseDeterministic) {
  auto run = [] {
    OptimizerConfig adam;
    adam.kind = OptimizerKind::Adam;
    adam.learningRate = 0.01f;
    ExecutorConfig config;
    config.optimizer = adam;
    auto executor =
        makeExecutor(buildBundle(residualGraph(kBatch), residualSplit(3), 3,
                                 RematPolicy::Full),
                     config);
    for (uint64_t s = 0; s < 5; ++s)
      EXPECT_TRUE(executor->trainStep(residualBatch(kBatch, s)).ok());
    return currentParams(*executor);
  };
  Params a = run(), b = run();
  ASSERT_EQ(a.size(), b.size());
  for (const auto &[name, values] : a) {
    const Vec &other = b.at(name);
    ASSERT_EQ(values.size(), other.size());
    EXPECT_EQ(std::memcmp(values.data(), other.data(),
                          values.size() * sizeof(double)),
              0)
        << name;
  }
}

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

// Forward only on any number of rows, in chunks of the first micro-batch's
// 4 rows (one chunk, a part of one, several with a remainder): the loss and
// every row's logits of the reference.
TEST(Executor, EvaluateMatchesReference) {
  Bundle bundle =
      buildBundle(mlpGraph(kBatch), mlpSplit(3), 3, RematPolicy::Full);
  ASSERT_EQ(bundle.microbatchRows.front(), 4);
  Params p = initialParams(bundle, 0);
  auto executor = makeExecutor(bundle);
  ASSERT_TRUE(executor);
  for (int64_t rows :
       {kBatch, int64_t(7), int64_t(1), int64_t(4), int64_t(37)}) {
    SCOPED_TRACE(std::to_string(rows) + " rows");
    Batch batch = mlpBatch(rows, 11);
    EvalResult result = executor->evaluate(batch, rows);
    ASSERT_TRUE(result.ok()) << result.error;
    Reference expected = mlpReference(p, batch);
    EXPECT_NEAR(result.loss, expected.loss, 1e-5 * expected.loss);
    EXPECT_EQ(result.prediction.shape, (std::vector<int64_t>{rows, 5}));
    EXPECT_TRUE(gpipe::testing::allClose(result.prediction.f32, expected.logits,
                                         1e-5, 1e-6));
    EXPECT_EQ(result.target.i32, batch.at("labels").i32);
  }
  EXPECT_NE(executor->evaluate(mlpBatch(4, 1), 5)
                .error.find("expected shape [5, 12], got [4, 12]"),
            std::string::npos);
}

// Dropout is the identity in evaluation.
TEST(Executor, EvaluateDisablesDropout) {
  Bundle bundle = buildBundle(residualGraph(kBatch), residualSplit(4), 2,
                              RematPolicy::Full);
  Params p = initialParams(bundle, 0);
  auto executor = makeExecutor(bundle);
  ASSERT_TRUE(executor);
  Batch batch = residualBatch(6, 12);
  EvalResult result = executor->evaluate(batch, 6);
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_NEAR(result.loss, residualReference(p, batch, 0).loss, 1e-5);
  EXPECT_EQ(result.prediction.shape, (std::vector<int64_t>{6, kSeq, kVocab}));
}

//===----------------------------------------------------------------------===//
// Memory and timeline
//===----------------------------------------------------------------------===//

constexpr int64_t kBigBatch = 512, kBigHidden = 64;

/// Per-device peak bytes of one step of an MLP with big activations.
std::vector<int64_t> peakOf(RematPolicy remat,
                            std::vector<int64_t> *resident = nullptr,
                            ScheduleKind kind = ScheduleKind::GPipe) {
  auto executor = makeExecutor(buildBundle(mlpGraph(kBigBatch, kBigHidden),
                                           mlpSplit(2), 8, remat, kind));
  if (!executor)
    return {};
  StepResult step = executor->trainStep(mlpBatch(kBigBatch, 4));
  EXPECT_TRUE(step.ok()) << step.error;
  if (resident)
    *resident = executor->residentMemoryBytes();
  return executor->peakMemoryBytes();
}

// Full remat keeps only the stage inputs of in-flight micro-batches, so its
// peak is below keeping everything; except-last sits in between.
TEST(Executor, RematerializationLowersPeakMemory) {
  std::vector<int64_t> resident;
  std::vector<int64_t> none = peakOf(RematPolicy::None, &resident);
  std::vector<int64_t> full = peakOf(RematPolicy::Full);
  std::vector<int64_t> exceptLast = peakOf(RematPolicy::ExceptLast);
  ASSERT_EQ(none.size(), 2u);
  for (unsigned d = 0; d < 2; ++d) {
    SCOPED_TRACE("device " + std::to_string(d));
    EXPECT_GT(resident[d], 0);
    EXPECT_GT(full[d], resident[d]);
    EXPECT_LT(full[d], none[d]);
    EXPECT_LE(full[d], exceptLast[d]);
    EXPECT_LE(exceptLast[d], none[d]);
  }
  // Device 0 under none holds the three hidden activations its backward
  // reads (h1, a1, h2) of all 8 micro-batches, i.e. of the whole batch (a2
  // leaves with its send); full remat holds the stashed inputs and one
  // micro-batch's activations.
  int64_t activations = kBigBatch * kBigHidden * 3 * sizeof(float);
  EXPECT_GE(none[0] - resident[0], activations);
  EXPECT_LT(full[0] - resident[0], activations / 2);
}

// Without remat, GPipe's device 0 holds the activations of all 8
// micro-batches at the turn from fill to drain; 1F1B's holds those of at
// most K = 2 (device 1, the last, of one), a quarter of them.
TEST(Executor, OneFOneBHoldsAtMostKMicrobatches) {
  std::vector<int64_t> resident;
  std::vector<int64_t> gpipe = peakOf(RematPolicy::None, &resident);
  std::vector<int64_t> oneFOneB =
      peakOf(RematPolicy::None, nullptr, ScheduleKind::OneFOneB);
  ASSERT_EQ(oneFOneB.size(), 2u);
  int64_t activations = kBigBatch * kBigHidden * 3 * sizeof(float);
  EXPECT_GE(gpipe[0] - resident[0], activations);
  EXPECT_LT(oneFOneB[0] - resident[0], activations / 2);
  EXPECT_LT(oneFOneB[1], gpipe[1]);
}

// One event per instruction and per recompute (GPipe's order, full remat:
// every micro-batch's but the last), forward/backward/recompute/optimizer
// counted as compute, and a bubble between 0 and 1.
TEST(Executor, TimelineRecordsEveryInstruction) {
  Bundle bundle = buildBundle(residualGraph(kBatch), residualSplit(3), 4,
                              RematPolicy::Full);
  auto executor = makeExecutor(bundle);
  ASSERT_TRUE(executor);
  ASSERT_TRUE(executor->trainStep(residualBatch(kBatch, 1)).ok());
  const Timeline &timeline = executor->timeline();
  ASSERT_EQ(timeline.numDevices(), 3u);
  for (unsigned d = 0; d < 3; ++d) {
    const auto &lane = timeline.lane(d);
    ASSERT_EQ(lane.size(), bundle.programs[d].size() + (4 - 1));
    int compute = 0;
    for (size_t i = 0; i < lane.size(); ++i) {
      compute += lane[i].compute;
      EXPECT_GE(lane[i].durationUs, 0.0);
      if (i) {
        EXPECT_GE(lane[i].startUs, lane[i - 1].startUs);
      }
    }
    EXPECT_EQ(compute, 2 * 4 + (4 - 1) + 1);
    EXPECT_EQ(lane.back().name, "optimizer step");
  }
  double bubble = timeline.bubbleFraction();
  EXPECT_GT(bubble, 0.0);
  EXPECT_LT(bubble, 1.0);
}

} // namespace
