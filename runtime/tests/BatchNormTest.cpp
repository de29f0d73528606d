//===- BatchNormTest.cpp - Batch norm with GPipe's semantics --------------===//
//
// A pipelined step of a network with batch norms (over an image and over
// features) against an independent double-precision reference that runs the
// same micro-batches one after another on one device: each micro-batch is
// normalised with its own statistics (so the gradients are those of the
// micro-batches, not of the whole batch), and the running statistics are
// updated once per mini-batch from all its rows. Every K, M, remat policy
// and schedule must agree with it: a recompute must not count a micro-batch
// twice. Evaluation normalises with the running statistics.
//
//===----------------------------------------------------------------------===//

#include "AllClose.h"
#include "gpipe/runtime/verify/BundleValidation.h"
#include "ExecutorSupport.h"
#include "ReferenceConvOps.h"
#include "TestBundles.h"
#include "TestModels.h"

#include "gpipe/Analysis/ScheduleKinds.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;
namespace ref = gpipe::reference;
using gpipe::schedule::ScheduleKind;
using ref::Vec;

namespace {

constexpr int64_t kBatch = 10;
constexpr double kRtol = 1e-5, kAtol = 4e-5;
constexpr double kEpsilon = 1e-5, kMomentum = 0.1;

Vec slice(const Vec &v, int64_t firstRow, int64_t rows, int64_t width) {
  return Vec(v.begin() + firstRow * width,
             v.begin() + (firstRow + rows) * width);
}

void addScaled(Vec &into, const Vec &v) {
  if (into.empty())
    into.assign(v.size(), 0.0);
  for (size_t i = 0; i < v.size(); ++i)
    into[i] += v[i];
}

/// The running statistics after one update from `x` [rows, channels], the
/// whole mini-batch's inputs of a batch norm: its mean and unbiased
/// variance folded in with the momentum.
void updateRunning(Vec &mean, Vec &variance, const Vec &x, int64_t channels) {
  const int64_t rows = int64_t(x.size()) / channels;
  for (int64_t c = 0; c < channels; ++c) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < rows; ++i)
      m += x[i * channels + c] / double(rows);
    for (int64_t i = 0; i < rows; ++i)
      v += (x[i * channels + c] - m) * (x[i * channels + c] - m);
    v /= double(rows - 1);
    mean[c] = (1 - kMomentum) * mean[c] + kMomentum * m;
    variance[c] = (1 - kMomentum) * variance[c] + kMomentum * v;
  }
}

struct Reference {
  double loss = 0.0;
  Params grads;   ///< the trainable parameters'
  Params running; ///< bnK.mean and bnK.var after the step
};

/// batchNormGraph's step: each micro-batch (rows `split`) forward and
/// backward with its own statistics, its loss and gradients weighted by its
/// share of the batch; then the running statistics from all the rows.
Reference stepReference(const Params &p, const Batch &batch,
                        const std::vector<int64_t> &split) {
  const int64_t n = batch.at("x").shape[0];
  const Vec x = toVec(batch.at("x").f32);
  const std::vector<int32_t> &allLabels = batch.at("labels").i32;
  ref::Conv2dShape conv;
  conv.height = 4, conv.width = 3, conv.channels = 2;
  conv.kernelHeight = conv.kernelWidth = 3, conv.filters = 4;
  conv.padRows = conv.padCols = 1;
  Reference r;
  Vec norm0Inputs, norm1Inputs; // the whole mini-batch's, micro-batch by one
  int64_t first = 0;
  for (int64_t rows : split) {
    conv.batch = rows;
    const Vec xm = slice(x, first, rows, 24);
    const std::vector<int32_t> labels(allLabels.begin() + first,
                                      allLabels.begin() + first + rows);
    const double share = double(rows) / double(n);
    // Forward.
    Vec c0 = ref::conv2dForward(xm, p.at("conv.w"), {}, conv);
    ref::BatchNormResult n0 = ref::batchNormForward(
        c0, p.at("bn0.gamma"), p.at("bn0.beta"), rows * 12, 4, kEpsilon);
    Vec r0 = ref::reluForward(n0.y); // [rows, 48] flattened
    Vec d1 = ref::denseForward(r0, p.at("fc.w"), Vec(6, 0.0), rows, 48, 6);
    ref::BatchNormResult n1 = ref::batchNormForward(
        d1, p.at("bn1.gamma"), p.at("bn1.beta"), rows, 6, kEpsilon);
    Vec t1 = ref::tanhForward(n1.y);
    Vec logits =
        ref::denseForward(t1, p.at("head.w"), p.at("head.b"), rows, 6, 5);
    r.loss += share * ref::softmaxCrossEntropyForward(logits, labels, rows, 5);
    norm0Inputs.insert(norm0Inputs.end(), c0.begin(), c0.end());
    norm1Inputs.insert(norm1Inputs.end(), d1.begin(), d1.end());
    // Backward.
    Vec dlogits =
        ref::softmaxCrossEntropyBackward(logits, labels, share, rows, 5);
    ref::DenseGrads head =
        ref::denseBackward(dlogits, t1, p.at("head.w"), rows, 6, 5);
    ref::BatchNormGrads g1 =
        ref::batchNormBackward(ref::tanhBackward(n1.y, head.dx), d1,
                               p.at("bn1.gamma"), rows, 6, kEpsilon);
    ref::DenseGrads fc =
        ref::denseBackward(g1.dx, r0, p.at("fc.w"), rows, 48, 6);
    ref::BatchNormGrads g0 =
        ref::batchNormBackward(ref::reluBackward(n0.y, fc.dx), c0,
                               p.at("bn0.gamma"), rows * 12, 4, kEpsilon);
    ref::Conv2dGrads gc = ref::conv2dBackward(g0.dx, xm, p.at("conv.w"), conv);
    for (auto [name, grad] :
         {std::pair<const char *, const Vec *>{"conv.w", &gc.dw},
          {"bn0.gamma", &g0.dgamma},
          {"bn0.beta", &g0.dbeta},
          {"fc.w", &fc.dw},
          {"bn1.gamma", &g1.dgamma},
          {"bn1.beta", &g1.dbeta},
          {"head.w", &head.dw},
          {"head.b", &head.db}})
      addScaled(r.grads[name], *grad);
    first += rows;
  }
  r.running = {{"bn0.mean", p.at("bn0.mean")},
               {"bn0.var", p.at("bn0.var")},
               {"bn1.mean", p.at("bn1.mean")},
               {"bn1.var", p.at("bn1.var")}};
  updateRunning(r.running["bn0.mean"], r.running["bn0.var"], norm0Inputs, 4);
  updateRunning(r.running["bn1.mean"], r.running["bn1.var"], norm1Inputs, 6);
  return r;
}

using Param = PipelineParam;

class BatchNormPipeline : public ::testing::TestWithParam<Param> {};

TEST_P(BatchNormPipeline, MicroBatchGradientsAndOneRunningUpdatePerStep) {
  auto [k, m, remat, kind] = GetParam();
  Bundle bundle = buildBundle(
      batchNormGraph(kBatch),
      k == 1 ? std::vector<int>{0} : std::vector<int>{0, 1}, m, remat, kind);
  const std::vector<int64_t> split = bundle.microbatchRows;
  ExecutorConfig config;
  config.seed = 42;
  Params params = initialParams(bundle, config.seed);
  auto executor = makeExecutor(std::move(bundle), config);
  ASSERT_TRUE(executor);
  // Two steps: the second starts from updated parameters and running
  // statistics (the momentum applies once per step, not per micro-batch).
  for (uint64_t step = 1; step <= 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    Batch batch = batchNormBatch(kBatch, step);
    StepResult result = executor->trainStep(batch);
    ASSERT_TRUE(result.ok()) << result.error;
    Reference expected = stepReference(params, batch, split);
    EXPECT_NEAR(result.loss, expected.loss, 1e-5 * std::fabs(expected.loss));
    expectGradientsMatch(*executor, expected.grads, kRtol, kAtol);
    for (const auto &[name, value] : expected.running) {
      const std::vector<float> *actual = executor->parameter(name);
      ASSERT_TRUE(actual) << name;
      EXPECT_TRUE(gpipe::testing::allClose(*actual, value, kRtol, kAtol))
          << "running statistic " << name;
    }
    params = [&] { // the executor's, for the next step's reference
      Params now;
      for (const ParamSpec &spec : executor->bundle().params)
        now[spec.name] = toVec(*executor->parameter(spec.name));
      return now;
    }();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, BatchNormPipeline,
    ::testing::Combine(::testing::Values(1u, 2u), ::testing::Values(1u, 3u, 4u),
                       ::testing::Values(RematPolicy::None, RematPolicy::Full,
                                         RematPolicy::ExceptLast),
                       ::testing::Values(ScheduleKind::GPipe,
                                         ScheduleKind::OneFOneB,
                                         ScheduleKind::ZeroBubbleH1)),
    pipelineParamName);

// Evaluation normalises with the running statistics, not the batch's own:
// after a step, a forward over 7 rows gives the reference's logits.
TEST(BatchNormEvaluation, UsesTheRunningStatistics) {
  Bundle bundle =
      buildBundle(batchNormGraph(kBatch), {0, 1}, 2, RematPolicy::Full);
  auto executor = makeExecutor(std::move(bundle));
  ASSERT_TRUE(executor);
  ASSERT_TRUE(executor->trainStep(batchNormBatch(kBatch, 1)).ok());
  Params p;
  for (const ParamSpec &spec : executor->bundle().params)
    p[spec.name] = toVec(*executor->parameter(spec.name));
  const int64_t rows = 7;
  Batch batch = batchNormBatch(rows, 9);
  EvalResult result = executor->evaluate(batch, rows);
  ASSERT_TRUE(result.ok()) << result.error;
  // The reference: y = gamma (x - running mean) / sqrt(running var + eps) +
  // beta per channel.
  auto normalise = [&](Vec x, const std::string &name, int64_t channels) {
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t c = i % channels;
      x[i] = p.at(name + ".gamma")[c] * (x[i] - p.at(name + ".mean")[c]) /
                 std::sqrt(p.at(name + ".var")[c] + kEpsilon) +
             p.at(name + ".beta")[c];
    }
    return x;
  };
  ref::Conv2dShape conv;
  conv.batch = rows, conv.height = 4, conv.width = 3, conv.channels = 2;
  conv.kernelHeight = conv.kernelWidth = 3, conv.filters = 4;
  conv.padRows = conv.padCols = 1;
  Vec h = ref::reluForward(normalise(
      ref::conv2dForward(toVec(batch.at("x").f32), p.at("conv.w"), {}, conv),
      "bn0", 4));
  h = ref::tanhForward(normalise(
      ref::denseForward(h, p.at("fc.w"), Vec(6, 0.0), rows, 48, 6), "bn1", 6));
  Vec logits = ref::denseForward(h, p.at("head.w"), p.at("head.b"), rows, 6, 5);
  EXPECT_TRUE(
      gpipe::testing::allClose(result.prediction.f32, logits, kRtol, kAtol));
}

} // namespace

namespace {

/// validateBundle's message for batchNormGraph's bundle after `mutate`.
std::string errorAfter(void (*mutate)(Bundle &)) {
  Bundle bundle =
      buildBundle(batchNormGraph(kBatch), {0, 1}, 2, RematPolicy::Full);
  mutate(bundle);
  return validateBundle(bundle);
}

/// The first batch norm of stage 0's forward.
Op &firstBatchNorm(Bundle &bundle) {
  for (Op &op : bundle.stages[0].forward)
    if (op.kind == OpKind::BatchNorm)
      return op;
  ADD_FAILURE() << "no batch_norm in stage 0";
  return bundle.stages[0].forward.front();
}

size_t indexOf(const Bundle &bundle, const Op &op) {
  return size_t(&op - bundle.stages[0].forward.data());
}

} // namespace

// The load-time checks of a bundle's batch norms name what they expected.
TEST(BatchNormValidation, BadBundlesNameWhatIsWrong) {
  Bundle probe =
      buildBundle(batchNormGraph(kBatch), {0, 1}, 2, RematPolicy::Full);
  const std::string at = "stage 0: forward op " +
                         std::to_string(indexOf(probe, firstBatchNorm(probe))) +
                         " (batch_norm): ";
  EXPECT_EQ(errorAfter([](Bundle &b) { firstBatchNorm(b).momentum = 1.5f; }),
            at + "expects a momentum in [0, 1], got 1.500000");
  EXPECT_EQ(errorAfter([](Bundle &b) { firstBatchNorm(b).epsilon = 0.0f; }),
            at + "expects a positive epsilon, got 0.000000");
  // A gradient accumulated into a running statistic would corrupt the sums
  // its buffer holds.
  EXPECT_EQ(errorAfter([](Bundle &b) {
              for (const Op &op : b.stages[0].backward)
                if (op.kind == OpKind::BatchNormGrad) {
                  Op accumulate;
                  accumulate.kind = OpKind::AccumulateGrad;
                  accumulate.name = "bn0.mean";
                  accumulate.operands = {op.results[1]};
                  b.stages[0].backward.push_back(accumulate);
                  return;
                }
            }),
            "stage 0: the backward accumulates a gradient into parameter "
            "'bn0.mean', which holds a batch norm's running statistics (their "
            "gradient buffer holds its sums)");
}
