//===- CharLmTrainingTest.cpp - The character language model, end to end -===//
//
// The model gpipe-run trains on the fortunes corpus,
// python-free-examples/charlm/charlm.mlir, compiled in process and run by
// the pipeline executor on real windows of the corpus:
//
// - its residuals cross every stage boundary: each layer hands the residual
//   stream and its branch to the next layer, which adds them, so for every
//   K each stage sends two values and the next stage's first add sums the
//   two it received;
// - one step's loss and every parameter gradient, for K = 1..4, M up to 5
//   (uneven micro-batches) and every remat policy, match an independent
//   whole-batch reference written here with the plain double-precision loops
//   of runtime/tests/ReferenceOps.h, at the executor's initial parameters;
// - the K = 4 pipeline's loss curve over several Adam steps follows the
//   single-device one, and two K = 4 runs are bitwise identical.
//
// The gradient and curve tests use the model text with its batch of 32
// windows replaced by 5 (the loops of the reference are slow; nothing else
// of the model changes); the structure and determinism tests use the file
// as it is.
//
//===----------------------------------------------------------------------===//

#include "AllClose.h"
#include "CompiledSupport.h"
#include "ReferenceOps.h"

#include "gpipe/runtime/data/TextCorpus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace rt = gpipe::runtime;
namespace ref = gpipe::reference;
using gpipe::testing::allClose;
using gpipe::testing::compile;
using gpipe::testing::Compiled;
using gpipe::testing::currentParams;
using gpipe::testing::makeExecutor;
using gpipe::testing::Params;
using gpipe::testing::Reference;
using gpipe::testing::toVec;
using ref::Vec;

namespace {

// The dimensions of charlm.mlir.
constexpr int64_t kBatch = 32, kSeq = 64, kWidth = 128, kHeads = 4,
                  kFfn = 512, kVocab = 96, kBlocks = 4;
constexpr double kEpsilon = 1e-5; // layer_norm's default
constexpr double kRtol = 1e-5;
constexpr double kAtol = 4e-5;
/// The batch of the gradient and curve tests.
constexpr int64_t kSmallBatch = 5;

const char *kFortunes = "/usr/share/games/fortunes";

std::string modelText() {
  std::filesystem::path path = std::filesystem::path(__FILE__)
                                   .parent_path()
                                   .parent_path()
                                   .parent_path() /
                               "python-free-examples" / "charlm" /
                               "charlm.mlir";
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << "cannot read " << path;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

/// The model with batch `batch`: the batch is the only dimension of 32 and
/// every activation type starts with it.
std::string modelWithBatch(int64_t batch) {
  std::string text = modelText();
  auto replaceAll = [&](const std::string &from, const std::string &to) {
    int count = 0;
    for (size_t at = text.find(from); at != std::string::npos;
         at = text.find(from, at + to.size()), ++count)
      text.replace(at, from.size(), to);
    return count;
  };
  EXPECT_EQ(replaceAll("batch 32 {", "batch " + std::to_string(batch) + " {"),
            1);
  EXPECT_GT(replaceAll("tensor<32x", "tensor<" + std::to_string(batch) + "x"),
            0);
  return text;
}

const rt::TextCorpus &fortunes() {
  static const rt::StatusOr<rt::TextCorpus> load =
      rt::loadTextCorpus(kFortunes);
  EXPECT_TRUE(load.ok()) << load.status().message();
  return (*load);
}

/// `count` batches of `rows` training windows drawn with `seed`.
std::vector<rt::Batch> corpusBatches(int64_t rows, int count, uint64_t seed) {
  std::string error;
  auto sampler = rt::TextSampler::create(fortunes().train, kSeq, seed, error);
  EXPECT_TRUE(sampler) << error;
  std::vector<rt::Batch> batches;
  for (int b = 0; sampler && b < count; ++b) {
    rt::TextWindows w = sampler->next(rows);
    batches.push_back(
        {{"ids", rt::HostTensor::ints({rows, kSeq}, w.ids)},
         {"positions", rt::HostTensor::ints({rows, kSeq}, w.positions)},
         {"targets", rt::HostTensor::ints({rows, kSeq}, w.targets)}});
  }
  return batches;
}

//===----------------------------------------------------------------------===//
// The independent reference: whole batch, one device, double precision
//===----------------------------------------------------------------------===//

Reference charLmReference(const Params &p, const rt::Batch &batch) {
  const int64_t n = batch.at("ids").shape[0], rows = n * kSeq;
  const std::vector<int32_t> &ids = batch.at("ids").i32;
  const std::vector<int32_t> &positions = batch.at("positions").i32;
  const std::vector<int32_t> &targets = batch.at("targets").i32;
  auto param = [&](const std::string &name) -> const Vec & {
    return p.at(name);
  };

  // x_0 = embeddings; per block r = x + attention(ln1(x)),
  // x_next = r + fc2(gelu(fc1(ln2(r)))); logits = head(ln(x_last)).
  struct BlockTape {
    Vec x, n1, r, n2, u, v;
  };
  std::vector<BlockTape> tape(kBlocks);
  Vec x = ref::addForward(
      ref::embeddingForward(ids, param("embed.tokens"), kVocab, kWidth),
      ref::embeddingForward(positions, param("embed.positions"), kSeq,
                            kWidth));
  for (int64_t i = 0; i < kBlocks; ++i) {
    std::string pre = "block" + std::to_string(i);
    BlockTape &t = tape[i];
    t.x = x;
    t.n1 = ref::layerNormForward(x, param(pre + ".attn.ln.gamma"),
                                 param(pre + ".attn.ln.beta"), rows, kWidth,
                                 kEpsilon)
               .y;
    Vec a = ref::attentionForward(t.n1, param(pre + ".attn.qkv"),
                                  param(pre + ".attn.out"), n, kSeq, kWidth,
                                  kHeads, /*causal=*/true)
                .y;
    t.r = ref::addForward(x, a);
    t.n2 = ref::layerNormForward(t.r, param(pre + ".mlp.ln.gamma"),
                                 param(pre + ".mlp.ln.beta"), rows, kWidth,
                                 kEpsilon)
               .y;
    t.u = ref::denseForward(t.n2, param(pre + ".mlp.fc1.w"),
                            param(pre + ".mlp.fc1.b"), rows, kWidth, kFfn);
    t.v = ref::geluForward(t.u);
    Vec m = ref::denseForward(t.v, param(pre + ".mlp.fc2.w"),
                              param(pre + ".mlp.fc2.b"), rows, kFfn, kWidth);
    x = ref::addForward(t.r, m);
  }
  Vec nh = ref::layerNormForward(x, param("head.ln.gamma"),
                                 param("head.ln.beta"), rows, kWidth, kEpsilon)
               .y;
  Vec logits = ref::denseForward(nh, param("head.w"), param("head.b"), rows,
                                 kWidth, kVocab);
  Reference r;
  r.loss = ref::softmaxCrossEntropyForward(logits, targets, rows, kVocab);

  Vec dlogits =
      ref::softmaxCrossEntropyBackward(logits, targets, 1.0, rows, kVocab);
  auto gHead = ref::denseBackward(dlogits, nh, param("head.w"), rows, kWidth,
                                  kVocab);
  auto gHeadLn = ref::layerNormBackward(gHead.dx, x, param("head.ln.gamma"),
                                        rows, kWidth, kEpsilon);
  r.grads["head.w"] = gHead.dw;
  r.grads["head.b"] = gHead.db;
  r.grads["head.ln.gamma"] = gHeadLn.dgamma;
  r.grads["head.ln.beta"] = gHeadLn.dbeta;
  Vec dx = gHeadLn.dx;
  for (int64_t i = kBlocks - 1; i >= 0; --i) {
    std::string pre = "block" + std::to_string(i);
    const BlockTape &t = tape[i];
    // x_next = r + m: dm = dr = dx.
    auto gF2 = ref::denseBackward(dx, t.v, param(pre + ".mlp.fc2.w"), rows,
                                  kFfn, kWidth);
    auto gF1 = ref::denseBackward(ref::geluBackward(t.u, gF2.dx), t.n2,
                                  param(pre + ".mlp.fc1.w"), rows, kWidth,
                                  kFfn);
    auto gLn2 = ref::layerNormBackward(gF1.dx, t.r,
                                       param(pre + ".mlp.ln.gamma"), rows,
                                       kWidth, kEpsilon);
    Vec dr = ref::addForward(dx, gLn2.dx);
    // r = x + a: da = dr.
    auto gAtt = ref::attentionBackward(dr, t.n1, param(pre + ".attn.qkv"),
                                       param(pre + ".attn.out"), n, kSeq,
                                       kWidth, kHeads, /*causal=*/true);
    auto gLn1 = ref::layerNormBackward(gAtt.dx, t.x,
                                       param(pre + ".attn.ln.gamma"), rows,
                                       kWidth, kEpsilon);
    dx = ref::addForward(dr, gLn1.dx);
    r.grads[pre + ".attn.ln.gamma"] = gLn1.dgamma;
    r.grads[pre + ".attn.ln.beta"] = gLn1.dbeta;
    r.grads[pre + ".attn.qkv"] = gAtt.dwqkv;
    r.grads[pre + ".attn.out"] = gAtt.dwo;
    r.grads[pre + ".mlp.ln.gamma"] = gLn2.dgamma;
    r.grads[pre + ".mlp.ln.beta"] = gLn2.dbeta;
    r.grads[pre + ".mlp.fc1.w"] = gF1.dw;
    r.grads[pre + ".mlp.fc1.b"] = gF1.db;
    r.grads[pre + ".mlp.fc2.w"] = gF2.dw;
    r.grads[pre + ".mlp.fc2.b"] = gF2.db;
  }
  r.grads["embed.tokens"] = ref::embeddingBackward(ids, dx, kVocab, kWidth);
  r.grads["embed.positions"] =
      ref::embeddingBackward(positions, dx, kSeq, kWidth);
  return r;
}

//===----------------------------------------------------------------------===//
// Training several steps
//===----------------------------------------------------------------------===//

struct Curve {
  std::vector<double> losses;
  Params params;
};

Curve trainCurve(const std::string &model, unsigned k, unsigned m,
                 gpipe::RematPolicy remat,
                 const std::vector<rt::Batch> &batches) {
  Curve curve;
  Compiled compiled = compile(model, k, m, remat);
  EXPECT_TRUE(compiled.error.empty()) << compiled.error;
  if (!compiled.error.empty())
    return curve;
  rt::ExecutorConfig config;
  config.optimizer.kind = rt::OptimizerKind::Adam;
  config.optimizer.learningRate = 2e-3f;
  config.seed = 1;
  auto executor = makeExecutor(std::move(compiled.bundle), config);
  if (!executor)
    return curve;
  for (const rt::Batch &batch : batches) {
    rt::StepResult step = executor->trainStep(batch);
    EXPECT_TRUE(step.ok()) << step.error;
    curve.losses.push_back(step.loss);
  }
  curve.params = currentParams(*executor);
  return curve;
}

} // namespace

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

// The file compiles for K = 1..4 with the shapes gpipe-run binds; for K >= 2
// every stage but the last sends exactly two values (the residual stream
// and the branch of its last layer) and the next stage adds the two it
// receives: each cut splits a residual connection.
TEST(CharLm, ResidualsCrossEveryStageBoundary) {
  std::string model = modelText();
  for (unsigned k : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE("K=" + std::to_string(k));
    Compiled compiled = compile(model, k, 4, gpipe::RematPolicy::Full);
    ASSERT_TRUE(compiled.error.empty()) << compiled.error;
    const rt::Bundle &bundle = compiled.bundle;
    ASSERT_EQ(bundle.stages.size(), k);
    EXPECT_EQ(bundle.batch, kBatch);
    ASSERT_EQ(bundle.inputs.size(), 3u);
    for (const rt::ModelInputSpec &input : bundle.inputs) {
      EXPECT_EQ(input.type, rt::ElementType::I32) << input.name;
      EXPECT_EQ(input.shape, (std::vector<int64_t>{kBatch, kSeq}))
          << input.name;
    }
    EXPECT_EQ(bundle.params.size(), size_t(2 + 10 * kBlocks + 4));
    for (unsigned s = 0; s + 1 < k; ++s) {
      const rt::StageProgram &sender = bundle.stages[s];
      const rt::StageProgram &receiver = bundle.stages[s + 1];
      EXPECT_EQ(sender.outputs.size(), 2u) << "stage " << s;
      std::vector<int> received;
      for (const rt::StageInput &input : receiver.inputs)
        if (input.fromChannel)
          received.push_back(input.value);
      ASSERT_EQ(received.size(), 2u) << "stage " << s + 1;
      const rt::Op *firstAdd = nullptr;
      for (const rt::Op &op : receiver.forward)
        if (op.kind == rt::OpKind::Add) {
          firstAdd = &op;
          break;
        }
      ASSERT_TRUE(firstAdd) << "stage " << s + 1;
      std::vector<int> operands = firstAdd->operands;
      std::sort(operands.begin(), operands.end());
      std::sort(received.begin(), received.end());
      EXPECT_EQ(operands, received) << "stage " << s + 1;
    }
  }
}

//===----------------------------------------------------------------------===//
// Gradient equivalence
//===----------------------------------------------------------------------===//

// One step on real fortunes windows: the loss and all 46 parameter
// gradients of every (K, M, remat) below match the reference, computed once
// at the initial parameters (a function of the seed and the names only).
TEST(CharLm, GradientsMatchWholeBatchReference) {
  std::string model = modelWithBatch(kSmallBatch);
  rt::Batch batch = corpusBatches(kSmallBatch, 1, 11).front();
  std::optional<Reference> expected;
  struct Case {
    unsigned k, m;
    gpipe::RematPolicy remat;
  };
  for (Case c : {Case{1, 1, gpipe::RematPolicy::None},
                 Case{2, 3, gpipe::RematPolicy::ExceptLast},
                 Case{3, 2, gpipe::RematPolicy::Full},
                 Case{4, 4, gpipe::RematPolicy::Full},
                 Case{4, 5, gpipe::RematPolicy::None}}) {
    SCOPED_TRACE("K=" + std::to_string(c.k) + " M=" + std::to_string(c.m) +
                 " remat " + gpipe::stringifyRematPolicy(c.remat).str());
    Compiled compiled = compile(model, c.k, c.m, c.remat);
    ASSERT_TRUE(compiled.error.empty()) << compiled.error;
    ASSERT_EQ(compiled.bundle.stages.size(), c.k);
    ASSERT_EQ(compiled.bundle.microbatchRows.size(), c.m);
    rt::ExecutorConfig config;
    config.seed = 42;
    auto executor = makeExecutor(std::move(compiled.bundle), config);
    ASSERT_TRUE(executor);
    Params initial = currentParams(*executor);
    if (!expected)
      expected = charLmReference(initial, batch);
    rt::StepResult step = executor->trainStep(batch);
    ASSERT_TRUE(step.ok()) << step.error;
    EXPECT_NEAR(step.loss, expected->loss, kRtol * expected->loss);
    ASSERT_EQ(expected->grads.size(), executor->bundle().params.size());
    for (const auto &[name, grad] : expected->grads) {
      const std::vector<float> *actual = executor->gradient(name);
      ASSERT_TRUE(actual) << "no parameter " << name << " in the bundle";
      EXPECT_TRUE(allClose(*actual, grad, kRtol, kAtol)) << "gradient " << name;
    }
  }
  // At initialisation the model predicts nearly uniformly: ln 96 = 4.564.
  EXPECT_NEAR(expected->loss, std::log(double(kVocab)), 0.1);
}

// Eight Adam steps on real windows: the K = 4, M = 5 pipeline (micro-batches
// of one window) follows the single-device curve, and the model learns.
TEST(CharLm, LossCurveK4M5MatchesK1M1) {
  std::string model = modelWithBatch(kSmallBatch);
  std::vector<rt::Batch> batches = corpusBatches(kSmallBatch, 8, 12);
  Curve single = trainCurve(model, 1, 1, gpipe::RematPolicy::None, batches);
  Curve piped = trainCurve(model, 4, 5, gpipe::RematPolicy::Full, batches);
  ASSERT_EQ(piped.losses.size(), single.losses.size());
  ASSERT_FALSE(single.losses.empty());
  for (size_t s = 0; s < single.losses.size(); ++s)
    EXPECT_LE(std::fabs(piped.losses[s] - single.losses[s]),
              1e-4 * single.losses[s])
        << "step " << s << ": " << piped.losses[s] << " vs "
        << single.losses[s];
  EXPECT_LT(single.losses.back(), 0.8 * single.losses.front());
}

//===----------------------------------------------------------------------===//
// Determinism
//===----------------------------------------------------------------------===//

// The training configuration of gpipe-run (the file as it is, K = 4, M = 4,
// full remat), run twice for three steps: bitwise identical losses and
// parameters.
TEST(CharLm, K4TrainingIsBitwiseDeterministic) {
  std::string model = modelText();
  std::vector<rt::Batch> batches = corpusBatches(kBatch, 3, 13);
  Curve a = trainCurve(model, 4, 4, gpipe::RematPolicy::Full, batches);
  Curve b = trainCurve(model, 4, 4, gpipe::RematPolicy::Full, batches);
  EXPECT_EQ(a.losses, b.losses);
  ASSERT_EQ(a.params.size(), b.params.size());
  ASSERT_FALSE(a.params.empty());
  for (const auto &[name, values] : a.params) {
    const Vec &other = b.params.at(name);
    ASSERT_EQ(values.size(), other.size());
    EXPECT_EQ(std::memcmp(values.data(), other.data(),
                          values.size() * sizeof(double)),
              0)
        << name;
  }
}
