//===- CompiledTrainingTest.cpp - Compiler + runtime, end to end ----------===//
//
// The whole chain of gpipe-run, in process: a model written as gpipe dialect
// text is compiled (gpipe::buildCompilePipeline: partition, form-stages,
// differentiate, rematerialize, channels, schedule), written as a bundle
// (gpipe::translateModuleToBundle), read back (runtime::parseBundle) and
// trained one step by the pipeline executor. The loss and every parameter
// gradient are compared with an independent whole-batch reference written
// here with plain double-precision loops (runtime/tests/ReferenceOps.h), at
// the executor's initial parameters. So what is proven is that the
// COMPILER's gradient ops, value numbering, recompute pairing, channels and
// skip routing compute the gradients of the whole mini-batch, for K stages,
// M micro-batches (uneven splits included) and every remat policy.
//
// Models: an MLP (relu, tanh, gelu, estimated costs), a pre-norm
// Transformer (embeddings, causal attention, dropout, residuals whose skip
// value is carried through an intermediate stage under forced splits), and
// edge cases of the graph handling: multi-result layers, a parameter read
// twice, add(x, x), a dead use of a stage input (zero gradient), an f32
// model input read by a later stage, non-causal attention, a layer norm
// epsilon, a weight computed from a parameter whose first dimension equals
// the batch, softmax + MSE.
//
// Dropout: the reference takes the mask from cpu::dropoutForward over the
// whole batch (the mask rule is a specification: a function of seed, step,
// global row and column; see CpuKernels.h), and applies it with its own
// loops.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/BundleReader.h"
#include "gpipe/runtime/CpuKernels.h"
#include "gpipe/runtime/Executor.h"

#include "AllClose.h"
#include "CompiledSupport.h"
#include "ReferenceOps.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace rt = gpipe::runtime;
namespace ref = gpipe::reference;
using ref::Vec;

namespace {

constexpr double kRtol = 1e-5;
constexpr double kAtol = 4e-5;

using gpipe::testing::compile;
using gpipe::testing::Compiled;
using gpipe::testing::currentParams;
using gpipe::testing::makeExecutor;
using gpipe::testing::Params;
using gpipe::testing::Reference;
using gpipe::testing::rematName;
using gpipe::testing::toVec;

//===----------------------------------------------------------------------===//
// The models, as gpipe dialect text
//===----------------------------------------------------------------------===//

std::string tensor(std::vector<int64_t> shape, const char *element = "f32") {
  std::string out = "tensor<";
  for (int64_t d : shape)
    out += std::to_string(d) + "x";
  return out + element + ">";
}

/// ` attributes {cost = ...}` forcing the partitioner's hand, or nothing.
std::string costAttr(const std::vector<uint64_t> &costs, size_t layer) {
  if (costs.empty())
    return "";
  return " attributes {cost = #gpipe.cost<flops = " +
         std::to_string(costs[layer]) +
         ", param_bytes = 0, activation_bytes = 0>}";
}

/// Layer costs under which the variance-minimising partition into
/// firstLayers.size() cells is exactly `firstLayers` (every cell sums to 100;
/// moving any cut makes two cells unequal).
std::vector<uint64_t> costsForSplit(const std::vector<int> &firstLayers,
                                    unsigned numLayers) {
  std::vector<uint64_t> costs(numLayers, 1);
  for (size_t c = 0; c < firstLayers.size(); ++c) {
    unsigned end = c + 1 < firstLayers.size() ? firstLayers[c + 1] : numLayers;
    costs[firstLayers[c]] = 100 - (end - firstLayers[c] - 1);
  }
  return costs;
}

// --- MLP: 12 -> dense 16 relu -> dense 16 tanh -> dense 8 gelu -> dense 5,
// softmax cross-entropy over int labels; one layer per dense and a loss layer.
// Costs are the compiler's own estimates.

constexpr int64_t kMlpBatch = 10;
constexpr int64_t kMlpIn = 12, kMlpH1 = 16, kMlpH2 = 16, kMlpH3 = 8,
                  kMlpClasses = 5;

std::string mlpDenseLayer(const std::string &result, const std::string &name,
                          const std::string &input, int64_t batch,
                          int64_t from, int64_t to, const char *activation) {
  std::string x = tensor({batch, from}), y = tensor({batch, to});
  std::string s;
  s += "  " + result + " = gpipe.layer \"" + name + "\" -> " + y + " {\n";
  s += "    %w = gpipe.param \"" + name + ".w\" glorot_uniform : " +
       tensor({from, to}) + "\n";
  s += "    %b = gpipe.param \"" + name + ".b\" uniform scale 0.1 : " +
       tensor({to}) + "\n";
  s += "    %0 = gpipe.dense " + input + ", %w, %b : (" + x + ", " +
       tensor({from, to}) + ", " + tensor({to}) + ") -> " + y + "\n";
  if (activation) {
    s += "    %1 = gpipe." + std::string(activation) + " %0 : " + y + "\n";
    s += "    gpipe.yield %1 : " + y + "\n";
  } else {
    s += "    gpipe.yield %0 : " + y + "\n";
  }
  s += "  }\n";
  return s;
}

std::string mlpModel(int64_t batch = kMlpBatch) {
  std::string s = "gpipe.model @tiny_mlp batch " + std::to_string(batch) +
                  " {\n";
  s += "  %x = gpipe.input \"x\" : " + tensor({batch, kMlpIn}) + "\n";
  s += "  %labels = gpipe.input \"labels\" : " + tensor({batch}, "i32") + "\n";
  s += mlpDenseLayer("%h1", "fc1", "%x", batch, kMlpIn, kMlpH1, "relu");
  s += mlpDenseLayer("%h2", "fc2", "%h1", batch, kMlpH1, kMlpH2, "tanh");
  s += mlpDenseLayer("%h3", "fc3", "%h2", batch, kMlpH2, kMlpH3, "gelu");
  s += mlpDenseLayer("%logits", "fc4", "%h3", batch, kMlpH3, kMlpClasses,
                     nullptr);
  s += "  %loss = gpipe.layer \"loss\" -> tensor<f32> {\n";
  s += "    %0 = gpipe.softmax_cross_entropy %logits, %labels : (" +
       tensor({batch, kMlpClasses}) + ", " + tensor({batch}, "i32") +
       ") -> tensor<f32>\n";
  s += "    gpipe.yield %0 : tensor<f32>\n  }\n";
  s += "  gpipe.return %loss : tensor<f32>\n}\n";
  return s;
}

// --- Transformer: token + position embeddings, two pre-norm blocks, each an
// attention layer (LN, causal attention, dropout) and an MLP layer that
// first adds the attention branch to the block input (the residual whose
// skip value comes from two layers back), then LN, dense, GELU, dense,
// dropout and the second residual; a head layer (LN, dense without bias) and
// a softmax cross-entropy over [b, s, vocab]. Seven layers.

constexpr int64_t kSeq = 4, kWidth = 8, kHeads = 2, kVocab = 11, kFfn = 16;
constexpr unsigned kTransformerLayers = 7;
constexpr uint64_t kDropSeeds[4] = {11, 12, 13, 14};

struct TransformerOptions {
  int64_t batch = 5;
  double dropRate = 0.1;
  /// First layer of each stage; empty: the compiler's estimated costs.
  std::vector<int> split;
};

std::string transformerModel(const TransformerOptions &o) {
  const int64_t b = o.batch;
  std::vector<uint64_t> costs;
  if (!o.split.empty())
    costs = costsForSplit(o.split, kTransformerLayers);
  std::string act = tensor({b, kSeq, kWidth}), ids = tensor({b, kSeq}, "i32");
  std::string vec = tensor({kWidth});
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%.6e", o.dropRate);
  std::string s = "gpipe.model @tiny_transformer batch " + std::to_string(b) +
                  " {\n";
  s += "  %ids = gpipe.input \"ids\" : " + ids + "\n";
  s += "  %positions = gpipe.input \"positions\" : " + ids + "\n";
  s += "  %targets = gpipe.input \"targets\" : " + ids + "\n";
  s += "  %h0 = gpipe.layer \"embed\" -> " + act + costAttr(costs, 0) + " {\n";
  s += "    %tok = gpipe.param \"embed.tokens\" normal scale 0.5 : " +
       tensor({kVocab, kWidth}) + "\n";
  s += "    %pos = gpipe.param \"embed.positions\" normal scale 0.5 : " +
       tensor({kSeq, kWidth}) + "\n";
  s += "    %0 = gpipe.embedding %ids, %tok : (" + ids + ", " +
       tensor({kVocab, kWidth}) + ") -> " + act + "\n";
  s += "    %1 = gpipe.embedding %positions, %pos : (" + ids + ", " +
       tensor({kSeq, kWidth}) + ") -> " + act + "\n";
  s += "    %2 = gpipe.add %0, %1 : " + act + "\n";
  s += "    gpipe.yield %2 : " + act + "\n  }\n";
  std::string h = "%h0";
  for (int block = 0; block < 2; ++block) {
    std::string p = "block" + std::to_string(block);
    std::string a = "%a" + std::to_string(block);
    std::string next = "%h" + std::to_string(block + 1);
    s += "  " + a + " = gpipe.layer \"" + p + ".attn\" -> " + act +
         costAttr(costs, 1 + 2 * block) + " {\n";
    s += "    %g = gpipe.param \"" + p + ".attn.ln.gamma\" ones : " + vec + "\n";
    s += "    %b = gpipe.param \"" + p + ".attn.ln.beta\" zeros : " + vec + "\n";
    s += "    %wqkv = gpipe.param \"" + p + ".attn.qkv\" glorot_uniform : " +
         tensor({kWidth, 3 * kWidth}) + "\n";
    s += "    %wo = gpipe.param \"" + p + ".attn.out\" glorot_uniform : " +
         tensor({kWidth, kWidth}) + "\n";
    s += "    %0 = gpipe.layer_norm " + h + ", %g, %b : (" + act + ", " + vec +
         ", " + vec + ") -> " + act + "\n";
    s += "    %1 = gpipe.attention %0, %wqkv, %wo heads " +
         std::to_string(kHeads) + " causal : (" + act + ", " +
         tensor({kWidth, 3 * kWidth}) + ", " + tensor({kWidth, kWidth}) +
         ") -> " + act + "\n";
    s += "    %2 = gpipe.dropout %1 rate " + std::string(rate) + " seed " +
         std::to_string(kDropSeeds[2 * block]) + " : " + act + "\n";
    s += "    gpipe.yield %2 : " + act + "\n  }\n";
    std::string hid = tensor({b, kSeq, kFfn});
    s += "  " + next + " = gpipe.layer \"" + p + ".mlp\" -> " + act +
         costAttr(costs, 2 + 2 * block) + " {\n";
    s += "    %g = gpipe.param \"" + p + ".mlp.ln.gamma\" ones : " + vec + "\n";
    s += "    %b = gpipe.param \"" + p + ".mlp.ln.beta\" zeros : " + vec + "\n";
    s += "    %w1 = gpipe.param \"" + p + ".mlp.fc1.w\" glorot_uniform : " +
         tensor({kWidth, kFfn}) + "\n";
    s += "    %b1 = gpipe.param \"" + p + ".mlp.fc1.b\" uniform scale 0.1 : " +
         tensor({kFfn}) + "\n";
    s += "    %w2 = gpipe.param \"" + p + ".mlp.fc2.w\" glorot_uniform : " +
         tensor({kFfn, kWidth}) + "\n";
    s += "    %b2 = gpipe.param \"" + p + ".mlp.fc2.b\" uniform scale 0.1 : " +
         vec + "\n";
    s += "    %r = gpipe.add " + h + ", " + a + " : " + act + "\n";
    s += "    %0 = gpipe.layer_norm %r, %g, %b : (" + act + ", " + vec + ", " +
         vec + ") -> " + act + "\n";
    s += "    %1 = gpipe.dense %0, %w1, %b1 : (" + act + ", " +
         tensor({kWidth, kFfn}) + ", " + tensor({kFfn}) + ") -> " + hid + "\n";
    s += "    %2 = gpipe.gelu %1 : " + hid + "\n";
    s += "    %3 = gpipe.dense %2, %w2, %b2 : (" + hid + ", " +
         tensor({kFfn, kWidth}) + ", " + vec + ") -> " + act + "\n";
    s += "    %4 = gpipe.dropout %3 rate " + std::string(rate) + " seed " +
         std::to_string(kDropSeeds[2 * block + 1]) + " : " + act + "\n";
    s += "    %5 = gpipe.add %r, %4 : " + act + "\n";
    s += "    gpipe.yield %5 : " + act + "\n  }\n";
    h = next;
  }
  std::string logits = tensor({b, kSeq, kVocab});
  s += "  %logits = gpipe.layer \"head\" -> " + logits + costAttr(costs, 5) +
       " {\n";
  s += "    %g = gpipe.param \"head.ln.gamma\" ones : " + vec + "\n";
  s += "    %b = gpipe.param \"head.ln.beta\" zeros : " + vec + "\n";
  s += "    %w = gpipe.param \"head.w\" glorot_uniform : " +
       tensor({kWidth, kVocab}) + "\n";
  s += "    %0 = gpipe.layer_norm " + h + ", %g, %b : (" + act + ", " + vec +
       ", " + vec + ") -> " + act + "\n";
  s += "    %1 = gpipe.dense %0, %w : (" + act + ", " +
       tensor({kWidth, kVocab}) + ") -> " + logits + "\n";
  s += "    gpipe.yield %1 : " + logits + "\n  }\n";
  s += "  %loss = gpipe.layer \"loss\" -> tensor<f32>" + costAttr(costs, 6) +
       " {\n";
  s += "    %0 = gpipe.softmax_cross_entropy %logits, %targets : (" + logits +
       ", " + ids + ") -> tensor<f32>\n";
  s += "    gpipe.yield %0 : tensor<f32>\n  }\n";
  s += "  gpipe.return %loss : tensor<f32>\n}\n";
  return s;
}

/// The forced splits: K = 3 and 4 put block0.attn alone in stage 1, so the
/// embedding output (the first residual's skip value) is carried through
/// stage 1 to stage 2; K = 4 also sends two channels (h1 and a1) from stage
/// 2 to stage 3, and K = 2 sends h1, used twice in stage 1.
std::vector<int> transformerSplit(unsigned k) {
  static const std::vector<int> splits[] = {
      {0}, {0, 3}, {0, 1, 2}, {0, 1, 2, 4}};
  return splits[k - 1];
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

struct Lcg {
  uint64_t state;
  explicit Lcg(uint64_t seed) : state(seed * 2862933555777941757ull + 7) {}
  uint32_t next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 33);
  }
  float uniform() { return float(next() % 2000001) / 1000000.0f - 1.0f; }
  int32_t below(int32_t n) { return int32_t(next() % uint32_t(n)); }
};

rt::Batch mlpBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> x(rows * kMlpIn);
  for (float &v : x)
    v = 1.5f * rng.uniform();
  std::vector<int32_t> labels(rows);
  for (int32_t &v : labels)
    v = rng.below(kMlpClasses);
  return {{"x", rt::HostTensor::floats({rows, kMlpIn}, x)},
          {"labels", rt::HostTensor::ints({rows}, labels)}};
}

rt::Batch transformerBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<int32_t> ids(rows * kSeq), positions(rows * kSeq),
      targets(rows * kSeq);
  for (int32_t &v : ids)
    v = rng.below(kVocab);
  for (int64_t i = 0; i < rows * kSeq; ++i)
    positions[i] = int32_t(i % kSeq);
  // Next-token targets, the last position a random one.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < kSeq; ++t)
      targets[r * kSeq + t] =
          t + 1 < kSeq ? ids[r * kSeq + t + 1] : rng.below(kVocab);
  return {{"ids", rt::HostTensor::ints({rows, kSeq}, ids)},
          {"positions", rt::HostTensor::ints({rows, kSeq}, positions)},
          {"targets", rt::HostTensor::ints({rows, kSeq}, targets)}};
}

//===----------------------------------------------------------------------===//
// The independent reference: whole batch, one device, double precision
//===----------------------------------------------------------------------===//

Reference mlpReference(const Params &p, const rt::Batch &batch) {
  const int64_t n = batch.at("x").shape[0];
  Vec x = toVec(batch.at("x").f32);
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  Vec z1 = ref::denseForward(x, p.at("fc1.w"), p.at("fc1.b"), n, kMlpIn,
                             kMlpH1);
  Vec a1 = ref::reluForward(z1);
  Vec z2 = ref::denseForward(a1, p.at("fc2.w"), p.at("fc2.b"), n, kMlpH1,
                             kMlpH2);
  Vec a2 = ref::tanhForward(z2);
  Vec z3 = ref::denseForward(a2, p.at("fc3.w"), p.at("fc3.b"), n, kMlpH2,
                             kMlpH3);
  Vec a3 = ref::geluForward(z3);
  Vec logits = ref::denseForward(a3, p.at("fc4.w"), p.at("fc4.b"), n, kMlpH3,
                                 kMlpClasses);
  Reference r;
  r.loss = ref::softmaxCrossEntropyForward(logits, labels, n, kMlpClasses);
  Vec dlogits =
      ref::softmaxCrossEntropyBackward(logits, labels, 1.0, n, kMlpClasses);
  auto g4 = ref::denseBackward(dlogits, a3, p.at("fc4.w"), n, kMlpH3,
                               kMlpClasses);
  auto g3 = ref::denseBackward(ref::geluBackward(z3, g4.dx), a2, p.at("fc3.w"),
                               n, kMlpH2, kMlpH3);
  auto g2 = ref::denseBackward(ref::tanhBackward(z2, g3.dx), a1, p.at("fc2.w"),
                               n, kMlpH1, kMlpH2);
  auto g1 = ref::denseBackward(ref::reluBackward(z1, g2.dx), x, p.at("fc1.w"),
                               n, kMlpIn, kMlpH1);
  r.grads = {{"fc1.w", g1.dw}, {"fc1.b", g1.db}, {"fc2.w", g2.dw},
             {"fc2.b", g2.db}, {"fc3.w", g3.dw}, {"fc3.b", g3.db},
             {"fc4.w", g4.dw}, {"fc4.b", g4.db}};
  return r;
}

/// The whole-batch mask of a dropout op at training step `step`, by the
/// kernel's mask rule (a function of seed, step, global row and column).
std::vector<uint8_t> dropoutMask(int64_t rows, int64_t cols, double rate,
                                 uint64_t seed, uint64_t step) {
  std::vector<float> ones(rows * cols, 1.0f), y(rows * cols);
  std::vector<uint8_t> mask(rows * cols);
  rt::cpu::dropoutForward(ones.data(), y.data(), mask.data(), rows, cols,
                          float(rate), seed, step, 0);
  return mask;
}

/// `step` is the training step the dropout masks are drawn for.
Reference transformerReference(const Params &p, const rt::Batch &batch,
                               double rate, uint64_t step) {
  const int64_t n = batch.at("ids").shape[0], rows = n * kSeq;
  const std::vector<int32_t> &ids = batch.at("ids").i32;
  const std::vector<int32_t> &positions = batch.at("positions").i32;
  const std::vector<int32_t> &targets = batch.at("targets").i32;
  const double eps = 1e-5;
  std::vector<std::vector<uint8_t>> masks;
  for (uint64_t seed : kDropSeeds)
    masks.push_back(dropoutMask(rows, kWidth, rate, seed, step));

  Vec h0 = ref::addForward(
      ref::embeddingForward(ids, p.at("embed.tokens"), kVocab, kWidth),
      ref::embeddingForward(positions, p.at("embed.positions"), kSeq, kWidth));

  struct BlockTape {
    Vec h, n1, r, n2, u, v;
  };
  BlockTape tape[2];
  Vec h = h0;
  for (int block = 0; block < 2; ++block) {
    std::string pre = "block" + std::to_string(block);
    BlockTape &t = tape[block];
    t.h = h;
    t.n1 = ref::layerNormForward(h, p.at(pre + ".attn.ln.gamma"),
                                 p.at(pre + ".attn.ln.beta"), rows, kWidth, eps)
               .y;
    Vec att = ref::attentionForward(t.n1, p.at(pre + ".attn.qkv"),
                                    p.at(pre + ".attn.out"), n, kSeq, kWidth,
                                    kHeads, /*causal=*/true)
                  .y;
    t.r = ref::addForward(h, ref::dropoutForward(att, masks[2 * block], rate));
    t.n2 = ref::layerNormForward(t.r, p.at(pre + ".mlp.ln.gamma"),
                                 p.at(pre + ".mlp.ln.beta"), rows, kWidth, eps)
               .y;
    t.u = ref::denseForward(t.n2, p.at(pre + ".mlp.fc1.w"),
                            p.at(pre + ".mlp.fc1.b"), rows, kWidth, kFfn);
    t.v = ref::geluForward(t.u);
    Vec f = ref::denseForward(t.v, p.at(pre + ".mlp.fc2.w"),
                              p.at(pre + ".mlp.fc2.b"), rows, kFfn, kWidth);
    h = ref::addForward(t.r,
                        ref::dropoutForward(f, masks[2 * block + 1], rate));
  }
  Vec nh = ref::layerNormForward(h, p.at("head.ln.gamma"),
                                 p.at("head.ln.beta"), rows, kWidth, eps)
               .y;
  Vec logits = ref::denseForward(nh, p.at("head.w"), Vec(kVocab, 0.0), rows,
                                 kWidth, kVocab);
  Reference r;
  r.loss = ref::softmaxCrossEntropyForward(logits, targets, rows, kVocab);

  Vec dlogits =
      ref::softmaxCrossEntropyBackward(logits, targets, 1.0, rows, kVocab);
  auto gHead = ref::denseBackward(dlogits, nh, p.at("head.w"), rows, kWidth,
                                  kVocab);
  auto gHeadLn = ref::layerNormBackward(gHead.dx, h, p.at("head.ln.gamma"),
                                        rows, kWidth, eps);
  r.grads["head.w"] = gHead.dw;
  r.grads["head.ln.gamma"] = gHeadLn.dgamma;
  r.grads["head.ln.beta"] = gHeadLn.dbeta;
  Vec dh = gHeadLn.dx;
  for (int block = 1; block >= 0; --block) {
    std::string pre = "block" + std::to_string(block);
    const BlockTape &t = tape[block];
    // h_out = r + dropout(dense2(gelu(dense1(ln2(r)))))
    Vec df = ref::dropoutBackward(masks[2 * block + 1], dh, rate);
    auto gF2 = ref::denseBackward(df, t.v, p.at(pre + ".mlp.fc2.w"), rows,
                                  kFfn, kWidth);
    auto gF1 = ref::denseBackward(ref::geluBackward(t.u, gF2.dx), t.n2,
                                  p.at(pre + ".mlp.fc1.w"), rows, kWidth, kFfn);
    auto gLn2 = ref::layerNormBackward(gF1.dx, t.r, p.at(pre + ".mlp.ln.gamma"),
                                       rows, kWidth, eps);
    Vec dr = ref::addForward(dh, gLn2.dx);
    // r = h + dropout(attention(ln1(h)))
    Vec datt = ref::dropoutBackward(masks[2 * block], dr, rate);
    auto gAtt = ref::attentionBackward(datt, t.n1, p.at(pre + ".attn.qkv"),
                                       p.at(pre + ".attn.out"), n, kSeq, kWidth,
                                       kHeads, /*causal=*/true);
    auto gLn1 = ref::layerNormBackward(gAtt.dx, t.h,
                                       p.at(pre + ".attn.ln.gamma"), rows,
                                       kWidth, eps);
    dh = ref::addForward(dr, gLn1.dx);
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
  r.grads["embed.tokens"] = ref::embeddingBackward(ids, dh, kVocab, kWidth);
  r.grads["embed.positions"] =
      ref::embeddingBackward(positions, dh, kSeq, kWidth);
  return r;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

using gpipe::testing::allClose;

/// One compiled step checked against `reference` at the executor's initial
/// parameters: the loss and every parameter's gradient.
template <typename ReferenceFn>
void checkOneStep(const std::string &model, unsigned k, unsigned m,
                  gpipe::RematPolicy remat, const rt::Batch &batch,
                  ReferenceFn reference) {
  Compiled compiled = compile(model, k, m, remat);
  ASSERT_TRUE(compiled.error.empty()) << compiled.error;
  ASSERT_EQ(compiled.bundle.stages.size(), k);
  ASSERT_EQ(compiled.bundle.microbatchRows.size(), m);
  rt::ExecutorConfig config;
  config.seed = 42;
  auto executor = makeExecutor(std::move(compiled.bundle), config);
  ASSERT_TRUE(executor);
  Params initial = currentParams(*executor);
  rt::StepResult step = executor->trainStep(batch);
  ASSERT_TRUE(step.ok()) << step.error;
  Reference expected = reference(initial, batch);
  EXPECT_NEAR(step.loss, expected.loss, kRtol * std::fabs(expected.loss));
  ASSERT_EQ(expected.grads.size(), executor->bundle().params.size());
  for (const auto &[name, grad] : expected.grads) {
    const std::vector<float> *actual = executor->gradient(name);
    ASSERT_TRUE(actual) << "no parameter " << name << " in the bundle";
    EXPECT_TRUE(allClose(*actual, grad, kRtol, kAtol)) << "gradient " << name;
  }
}

using SweepParam = std::tuple<unsigned, unsigned, gpipe::RematPolicy>;

std::string sweepName(const ::testing::TestParamInfo<SweepParam> &info) {
  auto [k, m, remat] = info.param;
  return "K" + std::to_string(k) + "_M" + std::to_string(m) + "_" +
         rematName(remat);
}

const auto kRematPolicies = ::testing::Values(
    gpipe::RematPolicy::None, gpipe::RematPolicy::Full,
    gpipe::RematPolicy::ExceptLast, gpipe::RematPolicy::Selective);

//===----------------------------------------------------------------------===//
// Gradient equivalence sweeps
//===----------------------------------------------------------------------===//

class CompiledMlpGradients : public ::testing::TestWithParam<SweepParam> {};

// The compiled MLP (the partitioner's own split from estimated costs), batch
// 10: M = 3 and 8 split unevenly.
TEST_P(CompiledMlpGradients, MatchWholeBatchReference) {
  auto [k, m, remat] = GetParam();
  checkOneStep(mlpModel(), k, m, remat, mlpBatch(kMlpBatch, 1), mlpReference);
}

INSTANTIATE_TEST_SUITE_P(Sweep, CompiledMlpGradients,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 4u),
                                            ::testing::Values(1u, 2u, 3u, 8u),
                                            kRematPolicies),
                         sweepName);

class CompiledTransformerGradients
    : public ::testing::TestWithParam<SweepParam> {};

// The compiled Transformer, batch 5 (M = 2 and 3 split unevenly, M = 5 is
// one sequence per micro-batch), dropout 0.1 at step 1, forced splits that
// carry a residual's skip value through an intermediate stage.
TEST_P(CompiledTransformerGradients, MatchWholeBatchReference) {
  auto [k, m, remat] = GetParam();
  TransformerOptions options;
  options.split = transformerSplit(k);
  checkOneStep(transformerModel(options), k, m, remat,
               transformerBatch(options.batch, 2),
               [&](const Params &p, const rt::Batch &batch) {
                 return transformerReference(p, batch, options.dropRate, 1);
               });
}

INSTANTIATE_TEST_SUITE_P(Sweep, CompiledTransformerGradients,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 4u),
                                            ::testing::Values(1u, 2u, 3u, 5u),
                                            kRematPolicies),
                         sweepName);

class CompiledTransformerEstimatedSplit
    : public ::testing::TestWithParam<SweepParam> {};

// The same model split where the compiler's cost estimates put the cuts.
TEST_P(CompiledTransformerEstimatedSplit, MatchWholeBatchReference) {
  auto [k, m, remat] = GetParam();
  TransformerOptions options;
  checkOneStep(transformerModel(options), k, m, remat,
               transformerBatch(options.batch, 3),
               [&](const Params &p, const rt::Batch &batch) {
                 return transformerReference(p, batch, options.dropRate, 1);
               });
}

INSTANTIATE_TEST_SUITE_P(Sweep, CompiledTransformerEstimatedSplit,
                         ::testing::Combine(::testing::Values(2u, 3u, 4u),
                                            ::testing::Values(3u),
                                            ::testing::Values(
                                                gpipe::RematPolicy::Full)),
                         sweepName);

//===----------------------------------------------------------------------===//
// The compiled bundles have the structure the sweeps rely on
//===----------------------------------------------------------------------===//

// Under the K = 3 and K = 4 splits, stage 1 passes the embedding output
// through unchanged (one of its outputs is one of its channel inputs), so
// the sweeps do cover a skip value carried across a stage.
TEST(CompiledStructure, TransformerCarriesSkipThroughStage) {
  for (unsigned k : {3u, 4u}) {
    TransformerOptions options;
    options.split = transformerSplit(k);
    Compiled compiled =
        compile(transformerModel(options), k, 2, gpipe::RematPolicy::Full);
    ASSERT_TRUE(compiled.error.empty()) << compiled.error;
    // The forced split is the one the partitioner chose.
    std::map<std::string, unsigned> stageOf;
    for (const rt::ParamSpec &param : compiled.bundle.params)
      stageOf[param.name] = param.stage;
    EXPECT_EQ(stageOf["embed.tokens"], 0u);
    EXPECT_EQ(stageOf["block0.attn.qkv"], 1u);
    EXPECT_EQ(stageOf["block0.mlp.fc1.w"], 2u);
    EXPECT_EQ(stageOf["head.w"], k - 1);
    const rt::StageProgram &stage1 = compiled.bundle.stages[1];
    std::set<int> channelInputs;
    for (const rt::StageInput &input : stage1.inputs)
      if (input.fromChannel)
        channelInputs.insert(input.value);
    bool carried = false;
    for (int output : stage1.outputs)
      carried |= channelInputs.count(output) > 0;
    EXPECT_TRUE(carried) << "K=" << k << ": stage 1 carries no skip value";
    EXPECT_GE(stage1.outputs.size(), 2u) << "K=" << k;
  }
}

// The compiled MLP partitions into K non-empty stages with the labels read
// by the last stage only, and M micro-batches whose rows sum to the batch.
TEST(CompiledStructure, MlpStagesAndMicrobatches) {
  for (unsigned k : {1u, 2u, 3u, 4u}) {
    Compiled compiled = compile(mlpModel(), k, 3, gpipe::RematPolicy::Full);
    ASSERT_TRUE(compiled.error.empty()) << compiled.error;
    const rt::Bundle &bundle = compiled.bundle;
    ASSERT_EQ(bundle.stages.size(), k);
    EXPECT_EQ(bundle.microbatchRows, (std::vector<int64_t>{4, 3, 3}));
    EXPECT_EQ(bundle.params.size(), 8u);
    for (unsigned s = 0; s < k; ++s) {
      bool readsLabels = false;
      for (const rt::StageInput &input : bundle.stages[s].inputs)
        readsLabels |= !input.fromChannel && input.inputName == "labels";
      EXPECT_EQ(readsLabels, s == k - 1) << "stage " << s;
    }
  }
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

// A heavier dropout (rate 0.5) still matches the reference built on the
// kernel's whole-batch mask, for several splits: the compiled mask does not
// depend on K, M or recomputation.
TEST(CompiledDropout, HeavyDropoutMatchesReferenceAcrossSplits) {
  TransformerOptions options;
  options.dropRate = 0.5;
  rt::Batch batch = transformerBatch(options.batch, 4);
  auto reference = [&](const Params &p, const rt::Batch &b) {
    return transformerReference(p, b, options.dropRate, 1);
  };
  for (auto [k, m, remat] :
       {SweepParam{1, 1, gpipe::RematPolicy::None},
        SweepParam{2, 3, gpipe::RematPolicy::Full},
        SweepParam{4, 5, gpipe::RematPolicy::ExceptLast},
        SweepParam{3, 2, gpipe::RematPolicy::Full}}) {
    SCOPED_TRACE("K=" + std::to_string(k) + " M=" + std::to_string(m) + " " +
                 rematName(remat));
    options.split = transformerSplit(k);
    checkOneStep(transformerModel(options), k, m, remat, batch, reference);
  }
}

// With rate 0 dropout is the identity: the reference without masks.
TEST(CompiledDropout, RateZeroIsIdentity) {
  TransformerOptions options;
  options.dropRate = 0.0;
  options.split = transformerSplit(4);
  checkOneStep(transformerModel(options), 4, 3, gpipe::RematPolicy::Full,
               transformerBatch(options.batch, 5),
               [](const Params &p, const rt::Batch &b) {
                 return transformerReference(p, b, 0.0, 1);
               });
}

// The masks of step 2 differ from step 1's: after one Adam step, the second
// step's gradients match the reference at the updated parameters with the
// step-2 masks (and the step-1 masks would not do).
TEST(CompiledDropout, SecondStepUsesStepTwoMasks) {
  TransformerOptions options;
  options.split = transformerSplit(3);
  Compiled compiled =
      compile(transformerModel(options), 3, 3, gpipe::RematPolicy::ExceptLast);
  ASSERT_TRUE(compiled.error.empty()) << compiled.error;
  rt::ExecutorConfig config;
  config.optimizer.kind = rt::OptimizerKind::Adam;
  config.optimizer.learningRate = 0.01f;
  auto executor = makeExecutor(std::move(compiled.bundle), config);
  ASSERT_TRUE(executor);
  rt::Batch batch = transformerBatch(options.batch, 6);
  ASSERT_TRUE(executor->trainStep(batch).ok());
  Params afterOne = currentParams(*executor);
  rt::StepResult second = executor->trainStep(batch);
  ASSERT_TRUE(second.ok()) << second.error;
  Reference expected =
      transformerReference(afterOne, batch, options.dropRate, 2);
  EXPECT_NEAR(second.loss, expected.loss, kRtol * expected.loss);
  for (const auto &[name, grad] : expected.grads)
    EXPECT_TRUE(allClose(*executor->gradient(name), grad, kRtol, kAtol))
        << name;
  Reference wrongMasks =
      transformerReference(afterOne, batch, options.dropRate, 1);
  EXPECT_GT(std::fabs(second.loss - wrongMasks.loss),
            1e-3 * std::fabs(wrongMasks.loss));
}

//===----------------------------------------------------------------------===//
// Edge cases of the compiler's graph handling
//===----------------------------------------------------------------------===//

/// Replaces each `@COSTi@` of `text` by the cost attribute forcing `split`.
std::string withSplit(std::string text, const std::vector<int> &split,
                      unsigned numLayers) {
  std::vector<uint64_t> costs = costsForSplit(split, numLayers);
  for (unsigned i = 0; i < numLayers; ++i) {
    std::string key = "@COST" + std::to_string(i) + "@";
    size_t at = text.find(key);
    if (at != std::string::npos)
      text.replace(at, key.size(), costAttr(costs, i));
  }
  return text;
}

/// First layers of K stages for a model of `numLayers` layers: one layer
/// per stage, the rest in the last.
std::vector<int> leadingSplit(unsigned k) {
  std::vector<int> split;
  for (unsigned c = 0; c < k; ++c)
    split.push_back(c);
  return split;
}

// A layer with three results; a parameter read by two denses; an add of a
// value with itself; a stage input used only by a dead op (its gradient is
// zeros); an f32 model input read by a later stage; a skip value from layer
// 0 to layer 2, carried through stage 1 when K >= 3. Batch 6, five layers.
constexpr int64_t kMiscBatch = 6;
const char *kMiscModel = R"(
gpipe.model @misc batch 6 {
  %x = gpipe.input "x" : tensor<6x8xf32>
  %labels = gpipe.input "labels" : tensor<6xi32>
  %a, %c, %z = gpipe.layer "l0" -> tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>@COST0@ {
    %w = gpipe.param "l0.w" glorot_uniform : tensor<8x8xf32>
    %b = gpipe.param "l0.b" uniform scale 0.1 : tensor<8xf32>
    %0 = gpipe.dense %x, %w, %b : (tensor<6x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
    %1 = gpipe.tanh %0 : tensor<6x8xf32>
    %2 = gpipe.dense %1, %w : (tensor<6x8xf32>, tensor<8x8xf32>) -> tensor<6x8xf32>
    %3 = gpipe.relu %0 : tensor<6x8xf32>
    gpipe.yield %1, %2, %3 : tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>
  }
  %d = gpipe.layer "l1" -> tensor<6x8xf32>@COST1@ {
    %0 = gpipe.add %c, %c : tensor<6x8xf32>
    %1 = gpipe.gelu %0 : tensor<6x8xf32>
    %dead = gpipe.relu %z : tensor<6x8xf32>
    gpipe.yield %1 : tensor<6x8xf32>
  }
  %e = gpipe.layer "l2" -> tensor<6x8xf32>@COST2@ {
    %w = gpipe.param "l2.w" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.dense %d, %w : (tensor<6x8xf32>, tensor<8x8xf32>) -> tensor<6x8xf32>
    %1 = gpipe.add %0, %x : tensor<6x8xf32>
    %2 = gpipe.add %1, %a : tensor<6x8xf32>
    gpipe.yield %2 : tensor<6x8xf32>
  }
  %logits = gpipe.layer "l3" -> tensor<6x5xf32>@COST3@ {
    %w = gpipe.param "l3.w" glorot_uniform : tensor<8x5xf32>
    %b = gpipe.param "l3.b" uniform scale 0.1 : tensor<5xf32>
    %0 = gpipe.dense %e, %w, %b : (tensor<6x8xf32>, tensor<8x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
    gpipe.yield %0 : tensor<6x5xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32>@COST4@ {
    %0 = gpipe.softmax_cross_entropy %logits, %labels : (tensor<6x5xf32>, tensor<6xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
)";

rt::Batch miscBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> x(rows * 8);
  for (float &v : x)
    v = rng.uniform();
  std::vector<int32_t> labels(rows);
  for (int32_t &v : labels)
    v = rng.below(5);
  return {{"x", rt::HostTensor::floats({rows, 8}, x)},
          {"labels", rt::HostTensor::ints({rows}, labels)}};
}

Reference miscReference(const Params &p, const rt::Batch &batch) {
  const int64_t n = batch.at("x").shape[0];
  Vec x = toVec(batch.at("x").f32);
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  Vec zero8(8, 0.0);
  Vec y0 = ref::denseForward(x, p.at("l0.w"), p.at("l0.b"), n, 8, 8);
  Vec a = ref::tanhForward(y0);
  Vec c = ref::denseForward(a, p.at("l0.w"), zero8, n, 8, 8);
  Vec s = ref::addForward(c, c);
  Vec d = ref::geluForward(s);
  Vec y2 = ref::denseForward(d, p.at("l2.w"), zero8, n, 8, 8);
  Vec e = ref::addForward(ref::addForward(y2, x), a);
  Vec logits = ref::denseForward(e, p.at("l3.w"), p.at("l3.b"), n, 8, 5);
  Reference r;
  r.loss = ref::softmaxCrossEntropyForward(logits, labels, n, 5);
  Vec dlogits = ref::softmaxCrossEntropyBackward(logits, labels, 1.0, n, 5);
  auto g3 = ref::denseBackward(dlogits, e, p.at("l3.w"), n, 8, 5);
  const Vec &de = g3.dx; // to y2, to x (no gradient), to a
  auto g2 = ref::denseBackward(de, d, p.at("l2.w"), n, 8, 8);
  Vec ds = ref::geluBackward(s, g2.dx);
  Vec dc = ref::addForward(ds, ds);
  auto gc = ref::denseBackward(dc, a, p.at("l0.w"), n, 8, 8);
  Vec da = ref::addForward(de, gc.dx);
  auto g0 = ref::denseBackward(ref::tanhBackward(y0, da), x, p.at("l0.w"), n,
                               8, 8);
  r.grads = {{"l0.w", ref::addForward(g0.dw, gc.dw)},
             {"l0.b", g0.db},
             {"l2.w", g2.dw},
             {"l3.w", g3.dw},
             {"l3.b", g3.db}};
  return r;
}

class CompiledMiscGradients : public ::testing::TestWithParam<SweepParam> {};

TEST_P(CompiledMiscGradients, MatchWholeBatchReference) {
  auto [k, m, remat] = GetParam();
  checkOneStep(withSplit(kMiscModel, leadingSplit(k), 5), k, m, remat,
               miscBatch(kMiscBatch, 7), miscReference);
}

INSTANTIATE_TEST_SUITE_P(Sweep, CompiledMiscGradients,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 4u),
                                            ::testing::Values(1u, 4u),
                                            kRematPolicies),
                         sweepName);

// Non-causal attention with 4 heads, a layer norm with epsilon 1e-3, and an
// embedding of an i32 model input (positions) read by a later stage.
// Batch 3, sequence 5, width 8, vocabulary 7; five layers.
const char *kAttnModel = R"(
gpipe.model @attn batch 3 {
  %ids = gpipe.input "ids" : tensor<3x5xi32>
  %positions = gpipe.input "positions" : tensor<3x5xi32>
  %labels = gpipe.input "labels" : tensor<3x5xi32>
  %e = gpipe.layer "embed" -> tensor<3x5x8xf32>@COST0@ {
    %t = gpipe.param "embed.tokens" normal scale 0.5 : tensor<7x8xf32>
    %0 = gpipe.embedding %ids, %t : (tensor<3x5xi32>, tensor<7x8xf32>) -> tensor<3x5x8xf32>
    gpipe.yield %0 : tensor<3x5x8xf32>
  }
  %r = gpipe.layer "attn" -> tensor<3x5x8xf32>@COST1@ {
    %g = gpipe.param "attn.ln.gamma" uniform scale 1.0 : tensor<8xf32>
    %b = gpipe.param "attn.ln.beta" uniform scale 0.1 : tensor<8xf32>
    %wqkv = gpipe.param "attn.qkv" glorot_uniform : tensor<8x24xf32>
    %wo = gpipe.param "attn.out" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.layer_norm %e, %g, %b {epsilon = 1.000000e-03 : f64} : (tensor<3x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<3x5x8xf32>
    %1 = gpipe.attention %0, %wqkv, %wo heads 4 : (tensor<3x5x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>) -> tensor<3x5x8xf32>
    %2 = gpipe.add %e, %1 : tensor<3x5x8xf32>
    gpipe.yield %2 : tensor<3x5x8xf32>
  }
  %q = gpipe.layer "pos" -> tensor<3x5x8xf32>@COST2@ {
    %p = gpipe.param "pos.table" normal scale 0.5 : tensor<5x8xf32>
    %0 = gpipe.embedding %positions, %p : (tensor<3x5xi32>, tensor<5x8xf32>) -> tensor<3x5x8xf32>
    %1 = gpipe.add %r, %0 : tensor<3x5x8xf32>
    gpipe.yield %1 : tensor<3x5x8xf32>
  }
  %logits = gpipe.layer "head" -> tensor<3x5x7xf32>@COST3@ {
    %w = gpipe.param "head.w" glorot_uniform : tensor<8x7xf32>
    %b = gpipe.param "head.b" uniform scale 0.1 : tensor<7xf32>
    %0 = gpipe.dense %q, %w, %b : (tensor<3x5x8xf32>, tensor<8x7xf32>, tensor<7xf32>) -> tensor<3x5x7xf32>
    gpipe.yield %0 : tensor<3x5x7xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32>@COST4@ {
    %0 = gpipe.softmax_cross_entropy %logits, %labels : (tensor<3x5x7xf32>, tensor<3x5xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
)";

rt::Batch attnBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<int32_t> ids(rows * 5), positions(rows * 5), labels(rows * 5);
  for (int32_t &v : ids)
    v = rng.below(7);
  for (int64_t i = 0; i < rows * 5; ++i)
    positions[i] = int32_t(i % 5);
  for (int32_t &v : labels)
    v = rng.below(7);
  return {{"ids", rt::HostTensor::ints({rows, 5}, ids)},
          {"positions", rt::HostTensor::ints({rows, 5}, positions)},
          {"labels", rt::HostTensor::ints({rows, 5}, labels)}};
}

Reference attnReference(const Params &p, const rt::Batch &batch) {
  const int64_t n = batch.at("ids").shape[0], rows = n * 5;
  const std::vector<int32_t> &ids = batch.at("ids").i32;
  const std::vector<int32_t> &positions = batch.at("positions").i32;
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  const double eps = 1e-3;
  Vec e = ref::embeddingForward(ids, p.at("embed.tokens"), 7, 8);
  Vec ln = ref::layerNormForward(e, p.at("attn.ln.gamma"), p.at("attn.ln.beta"),
                                 rows, 8, eps)
               .y;
  Vec att = ref::attentionForward(ln, p.at("attn.qkv"), p.at("attn.out"), n, 5,
                                  8, 4, /*causal=*/false)
                .y;
  Vec r = ref::addForward(e, att);
  Vec q = ref::addForward(
      r, ref::embeddingForward(positions, p.at("pos.table"), 5, 8));
  Vec logits = ref::denseForward(q, p.at("head.w"), p.at("head.b"), rows, 8, 7);
  Reference out;
  out.loss = ref::softmaxCrossEntropyForward(logits, labels, rows, 7);
  Vec dlogits = ref::softmaxCrossEntropyBackward(logits, labels, 1.0, rows, 7);
  auto gHead = ref::denseBackward(dlogits, q, p.at("head.w"), rows, 8, 7);
  const Vec &dq = gHead.dx; // = dr = dpos
  auto gAtt = ref::attentionBackward(dq, ln, p.at("attn.qkv"), p.at("attn.out"),
                                     n, 5, 8, 4, /*causal=*/false);
  auto gLn = ref::layerNormBackward(gAtt.dx, e, p.at("attn.ln.gamma"), rows, 8,
                                    eps);
  Vec de = ref::addForward(dq, gLn.dx);
  out.grads = {{"embed.tokens", ref::embeddingBackward(ids, de, 7, 8)},
               {"attn.ln.gamma", gLn.dgamma},
               {"attn.ln.beta", gLn.dbeta},
               {"attn.qkv", gAtt.dwqkv},
               {"attn.out", gAtt.dwo},
               {"pos.table", ref::embeddingBackward(positions, dq, 5, 8)},
               {"head.w", gHead.dw},
               {"head.b", gHead.db}};
  return out;
}

class CompiledAttentionGradients
    : public ::testing::TestWithParam<SweepParam> {};

TEST_P(CompiledAttentionGradients, MatchWholeBatchReference) {
  auto [k, m, remat] = GetParam();
  checkOneStep(withSplit(kAttnModel, leadingSplit(k), 5), k, m, remat,
               attnBatch(3, 8), attnReference);
}

INSTANTIATE_TEST_SUITE_P(Sweep, CompiledAttentionGradients,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 4u),
                                            ::testing::Values(1u, 2u, 3u),
                                            kRematPolicies),
                         sweepName);

// A weight computed from a parameter (tanh of it) whose first dimension
// equals the batch (12): it has no batch dimension, nor has its gradient.
// Softmax and an MSE loss against a model input.
const char *kWeightTransformModel = R"(
gpipe.model @weight_transform batch 12 {
  %x = gpipe.input "x" : tensor<12x12xf32>
  %t = gpipe.input "t" : tensor<12x4xf32>
  %h = gpipe.layer "fc1" -> tensor<12x16xf32>@COST0@ {
    %w = gpipe.param "fc1.w" glorot_uniform : tensor<12x16xf32>
    %wt = gpipe.tanh %w : tensor<12x16xf32>
    %0 = gpipe.dense %x, %wt : (tensor<12x12xf32>, tensor<12x16xf32>) -> tensor<12x16xf32>
    gpipe.yield %0 : tensor<12x16xf32>
  }
  %p = gpipe.layer "fc2" -> tensor<12x4xf32>@COST1@ {
    %w = gpipe.param "fc2.w" glorot_uniform : tensor<16x4xf32>
    %0 = gpipe.dense %h, %w : (tensor<12x16xf32>, tensor<16x4xf32>) -> tensor<12x4xf32>
    %1 = gpipe.softmax %0 : tensor<12x4xf32>
    gpipe.yield %1 : tensor<12x4xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32>@COST2@ {
    %0 = gpipe.mse_loss %p, %t : (tensor<12x4xf32>, tensor<12x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
)";

rt::Batch weightTransformBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> x(rows * 12), t(rows * 4);
  for (float &v : x)
    v = rng.uniform();
  for (float &v : t)
    v = 0.5f * (rng.uniform() + 1.0f);
  return {{"x", rt::HostTensor::floats({rows, 12}, x)},
          {"t", rt::HostTensor::floats({rows, 4}, t)}};
}

Reference weightTransformReference(const Params &p, const rt::Batch &batch) {
  const int64_t n = batch.at("x").shape[0];
  Vec x = toVec(batch.at("x").f32), t = toVec(batch.at("t").f32);
  Vec wt = ref::tanhForward(p.at("fc1.w"));
  Vec h = ref::denseForward(x, wt, Vec(16, 0.0), n, 12, 16);
  Vec z = ref::denseForward(h, p.at("fc2.w"), Vec(4, 0.0), n, 16, 4);
  Vec y = ref::softmaxForward(z, n, 4);
  Reference r;
  r.loss = ref::mseForward(y, t);
  Vec dz = ref::softmaxBackward(z, ref::mseBackward(y, t, 1.0), n, 4);
  auto g2 = ref::denseBackward(dz, h, p.at("fc2.w"), n, 16, 4);
  auto g1 = ref::denseBackward(g2.dx, x, wt, n, 12, 16);
  r.grads = {{"fc1.w", ref::tanhBackward(p.at("fc1.w"), g1.dw)},
             {"fc2.w", g2.dw}};
  return r;
}

class CompiledWeightTransformGradients
    : public ::testing::TestWithParam<SweepParam> {};

TEST_P(CompiledWeightTransformGradients, MatchWholeBatchReference) {
  auto [k, m, remat] = GetParam();
  checkOneStep(withSplit(kWeightTransformModel, leadingSplit(k), 3), k, m,
               remat, weightTransformBatch(12, 9), weightTransformReference);
}

INSTANTIATE_TEST_SUITE_P(Sweep, CompiledWeightTransformGradients,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u),
                                            ::testing::Values(1u, 3u),
                                            kRematPolicies),
                         sweepName);

//===----------------------------------------------------------------------===//
// Training over several steps
//===----------------------------------------------------------------------===//

/// Losses of `steps` Adam steps over four rotating batches, and the final
/// parameters.
struct Curve {
  std::vector<double> losses;
  Params params;
};

Curve trainCurve(const std::string &model, unsigned k, unsigned m,
                 gpipe::RematPolicy remat,
                 rt::Batch (*makeBatch)(int64_t, uint64_t), int64_t rows,
                 int steps, float learningRate) {
  Curve curve;
  Compiled compiled = compile(model, k, m, remat);
  EXPECT_TRUE(compiled.error.empty()) << compiled.error;
  if (!compiled.error.empty())
    return curve;
  rt::ExecutorConfig config;
  config.optimizer.kind = rt::OptimizerKind::Adam;
  config.optimizer.learningRate = learningRate;
  config.seed = 3;
  auto executor = makeExecutor(std::move(compiled.bundle), config);
  if (!executor)
    return curve;
  std::vector<rt::Batch> batches;
  for (uint64_t b = 0; b < 4; ++b)
    batches.push_back(makeBatch(rows, 100 + b));
  for (int s = 0; s < steps; ++s) {
    rt::StepResult step = executor->trainStep(batches[s % 4]);
    EXPECT_TRUE(step.ok()) << step.error;
    curve.losses.push_back(step.loss);
  }
  curve.params = currentParams(*executor);
  return curve;
}

void expectSameCurve(const std::vector<double> &piped,
                     const std::vector<double> &single) {
  ASSERT_EQ(piped.size(), single.size());
  ASSERT_FALSE(single.empty());
  for (size_t s = 0; s < piped.size(); ++s)
    EXPECT_LE(std::fabs(piped[s] - single[s]), 1e-4 * std::fabs(single[s]))
        << "step " << s << ": " << piped[s] << " vs " << single[s];
  EXPECT_LT(single.back(), 0.8 * single.front()) << "the model should learn";
}

// 50 Adam steps: the compiled K=4, M=8 pipeline (uneven micro-batches of 2
// and 1 rows) follows the compiled single-device, single-micro-batch curve.
TEST(CompiledTraining, MlpLossCurveK4M8MatchesK1M1) {
  std::string model = mlpModel();
  Curve single = trainCurve(model, 1, 1, gpipe::RematPolicy::None, mlpBatch,
                            kMlpBatch, 50, 0.01f);
  Curve piped = trainCurve(model, 4, 8, gpipe::RematPolicy::Full, mlpBatch,
                           kMlpBatch, 50, 0.01f);
  expectSameCurve(piped.losses, single.losses);
}

// The same for the Transformer (dropout on), K=4, M=5, except-last remat.
TEST(CompiledTraining, TransformerLossCurveK4M5MatchesK1M1) {
  TransformerOptions one, four;
  one.split = transformerSplit(1);
  four.split = transformerSplit(4);
  Curve single = trainCurve(transformerModel(one), 1, 1,
                            gpipe::RematPolicy::None, transformerBatch,
                            one.batch, 50, 0.01f);
  Curve piped = trainCurve(transformerModel(four), 4, 5,
                           gpipe::RematPolicy::ExceptLast, transformerBatch,
                           four.batch, 50, 0.01f);
  expectSameCurve(piped.losses, single.losses);
}

// Same compiled model, seed and data: bit-identical parameters.
TEST(CompiledTraining, RunsAreBitwiseDeterministic) {
  TransformerOptions options;
  options.split = transformerSplit(3);
  std::string model = transformerModel(options);
  auto run = [&] {
    return trainCurve(model, 3, 3, gpipe::RematPolicy::Full, transformerBatch,
                      options.batch, 5, 0.01f);
  };
  Curve a = run(), b = run();
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
  EXPECT_EQ(a.losses, b.losses);
}

} // namespace
