//===- ImageModelTest.cpp - Pipelined gradients of a network over images --===//
//
// The ops over images (conv2d with strides, padding, groups and a pointwise
// kernel; max and average pooling; global average pooling; flatten) in a
// pipeline of K stages and M micro-batches, under every remat policy and
// schedule, give the whole-batch gradients of an independent reference: a
// plain forward and backward in double precision over ReferenceConvOps and
// ReferenceOps, which share no code with the runtime.
//
//===----------------------------------------------------------------------===//

#include "AllClose.h"
#include "ExecutorSupport.h"
#include "ReferenceConvOps.h"
#include "TestBundles.h"
#include "TestModels.h"

#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/runtime/bundle/BundleChecksum.h"
#include "gpipe/runtime/verify/BundleValidation.h"
#include "gpipe/runtime/bundle/BundleReader.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

ref::Conv2dShape convShape(int64_t batch, int64_t height, int64_t width,
                           int64_t channels, int64_t kernel, int64_t filters,
                           int64_t strideRows, int64_t strideCols, int64_t pad,
                           int64_t groups) {
  ref::Conv2dShape s;
  s.batch = batch, s.height = height, s.width = width, s.channels = channels;
  s.kernelHeight = s.kernelWidth = kernel, s.filters = filters;
  s.strideRows = strideRows, s.strideCols = strideCols;
  s.padRows = s.padCols = pad, s.groups = groups;
  return s;
}

ref::Pool2dShape poolShape(int64_t batch, int64_t height, int64_t width,
                           int64_t channels, int64_t window, int64_t stride,
                           int64_t pad) {
  ref::Pool2dShape s;
  s.batch = batch, s.height = height, s.width = width, s.channels = channels;
  s.windowHeight = s.windowWidth = window;
  s.strideRows = s.strideCols = stride, s.padRows = s.padCols = pad;
  return s;
}

struct Reference {
  double loss = 0.0;
  Params grads;
};

/// convGraph (TestModels.h) over the whole batch, one device.
Reference convReference(const Params &p, const Batch &batch) {
  const int64_t n = batch.at("x").shape[0];
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  const Vec x = toVec(batch.at("x").f32);
  const ref::Conv2dShape s0 = convShape(n, 6, 5, 2, 3, 4, 1, 1, 1, 1);
  const ref::Pool2dShape p1 = poolShape(n, 6, 5, 4, 3, 2, 1);
  const ref::Conv2dShape s1 = convShape(n, 3, 3, 4, 2, 6, 2, 1, 1, 2);
  const ref::Pool2dShape p2 = poolShape(n, 2, 4, 6, 3, 2, 1);
  const ref::Conv2dShape s2 = convShape(n, 1, 2, 6, 1, 6, 1, 1, 0, 1);
  // Forward.
  Vec c0 = ref::conv2dForward(x, p.at("conv0.w"), p.at("conv0.b"), s0);
  Vec r0 = ref::reluForward(c0);
  Vec m1 = ref::maxPool2dForward(r0, p1);
  Vec c1 = ref::conv2dForward(m1, p.at("conv1.w"), {}, s1);
  Vec a2 = ref::avgPool2dForward(c1, p2);
  Vec c2 = ref::conv2dForward(a2, p.at("conv2.w"), p.at("conv2.b"), s2);
  Vec t2 = ref::tanhForward(c2); // [n, 1, 2, 6], flattened: [n, 12]
  Vec pooled = ref::globalAvgPoolForward(t2, n, 2, 6);
  Vec mixed = ref::addForward(
      pooled, ref::denseForward(t2, p.at("fc.w"), Vec(6, 0.0), n, 12, 6));
  Vec logits =
      ref::denseForward(mixed, p.at("head.w"), p.at("head.b"), n, 6, 5);
  Reference r;
  r.loss = ref::softmaxCrossEntropyForward(logits, labels, n, 5);
  // Backward.
  Vec dlogits = ref::softmaxCrossEntropyBackward(logits, labels, 1.0, n, 5);
  ref::DenseGrads head =
      ref::denseBackward(dlogits, mixed, p.at("head.w"), n, 6, 5);
  ref::DenseGrads fc = ref::denseBackward(head.dx, t2, p.at("fc.w"), n, 12, 6);
  Vec dt2 =
      ref::addForward(fc.dx, ref::globalAvgPoolBackward(head.dx, n, 2, 6));
  ref::Conv2dGrads g2 =
      ref::conv2dBackward(ref::tanhBackward(c2, dt2), a2, p.at("conv2.w"), s2);
  ref::Conv2dGrads g1 = ref::conv2dBackward(ref::avgPool2dBackward(g2.dx, p2),
                                            m1, p.at("conv1.w"), s1);
  Vec dr0 = ref::maxPool2dBackward(g1.dx, r0, p1);
  ref::Conv2dGrads g0 =
      ref::conv2dBackward(ref::reluBackward(c0, dr0), x, p.at("conv0.w"), s0);
  r.grads = {{"conv0.w", g0.dw},  {"conv0.b", g0.db}, {"conv1.w", g1.dw},
             {"conv2.w", g2.dw},  {"conv2.b", g2.db}, {"fc.w", fc.dw},
             {"head.w", head.dw}, {"head.b", head.db}};
  return r;
}

using Param = PipelineParam;

class ImageModelGradients : public ::testing::TestWithParam<Param> {};

TEST_P(ImageModelGradients, MatchWholeBatchReference) {
  auto [k, m, remat, kind] = GetParam();
  Bundle bundle = buildBundle(convGraph(kBatch), convSplit(k), m, remat, kind);
  ExecutorConfig config;
  config.seed = 42;
  Params initial = initialParams(bundle, config.seed);
  auto executor = makeExecutor(std::move(bundle), config);
  ASSERT_TRUE(executor);
  Batch batch = convBatch(kBatch, 5);
  StepResult step = executor->trainStep(batch);
  ASSERT_TRUE(step.ok()) << step.error;
  Reference expected = convReference(initial, batch);
  EXPECT_NEAR(step.loss, expected.loss, 1e-5 * std::fabs(expected.loss));
  ASSERT_EQ(expected.grads.size(), executor->bundle().params.size());
  expectGradientsMatch(*executor, expected.grads, kRtol, kAtol);
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, ImageModelGradients,
    ::testing::Combine(::testing::Values(1u, 2u, 4u), ::testing::Values(1u, 3u),
                       ::testing::Values(RematPolicy::None, RematPolicy::Full,
                                         RematPolicy::ExceptLast),
                       ::testing::Values(ScheduleKind::GPipe,
                                         ScheduleKind::OneFOneB,
                                         ScheduleKind::ZeroBubbleH1)),
    pipelineParamName);

} // namespace

//===----------------------------------------------------------------------===//
// The bundle's window attributes
//===----------------------------------------------------------------------===//

namespace {

using Json = nlohmann::ordered_json;

/// The index of the first `name` op of stage 0's forward.
size_t firstOp(const Json &bundle, const std::string &name) {
  const Json &ops = bundle["stages"][0]["forward"];
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i]["op"] == name)
      return i;
  ADD_FAILURE() << "no " << name << " in stage 0";
  return 0;
}

/// The error of parsing (then validating) the conv model's bundle after
/// `mutate`.
std::string errorAfter(void (*mutate)(Json &)) {
  Json json = Json::parse(writeBundle(
      buildBundle(convGraph(kBatch), convSplit(2), 2, RematPolicy::Full)));
  json.erase("checksum");
  mutate(json);
  StatusOr<Bundle> bundle =
      parseBundle(sealBundleText(json.dump()), "conv.json");
  if (!bundle.ok())
    return bundle.status().message();
  return validateBundle(*bundle);
}

} // namespace

TEST(ImageBundle, BadWindowAttributesNameWhereAndWhat) {
  EXPECT_EQ(
      errorAfter([](Json &j) {
        j["stages"][0]["forward"][firstOp(j, "conv2d")]["stride"] = {0, 1};
      }),
      "'conv.json': stages[0].forward[3]: expected 'stride' as 2 values "
      ">= 1 [rows, columns], found [0,1]");
  EXPECT_EQ(errorAfter([](Json &j) {
              j["stages"][0]["forward"][firstOp(j, "max_pool2d")]["window"] = 3;
            }),
            "'conv.json': stages[0].forward[5]: expected an array 'window', "
            "found a number");
  EXPECT_EQ(errorAfter([](Json &j) {
              j["stages"][0]["forward"][firstOp(j, "conv2d")]["groups"] = 0;
            }),
            "'conv.json': stages[0].forward[3]: expected groups >= 1, found 0");
  // Attributes that parse but do not fit the shapes: the checks name them.
  EXPECT_EQ(
      errorAfter([](Json &j) {
        j["stages"][0]["forward"][firstOp(j, "conv2d")]["padding"] = {0, 0};
      }),
      "stage 0: forward op 3 (conv2d): expects the result of shape [10, "
      "4, 3, 4], got [10, 6, 5, 4]");
  EXPECT_EQ(
      errorAfter([](Json &j) {
        j["stages"][0]["forward"][firstOp(j, "max_pool2d")]["padding"] = {3, 1};
      }),
      "stage 0: forward op 5 (max_pool2d): expects padding smaller than "
      "the window, got padding 3 for a window of 3");
}
