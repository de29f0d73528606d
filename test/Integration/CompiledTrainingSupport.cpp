//===- CompiledTrainingSupport.cpp - Models, data, references -------------===//
//
// The models as gpipe dialect text, their batches and the independent
// whole-batch references of CompiledTrainingSupport.h. The references are
// plain double-precision loops (runtime/tests/ReferenceOps.h); dropout takes
// its mask from cpu::dropoutForward over the whole batch (the mask rule is a
// specification: a function of seed, step, global row and column; see
// CpuKernels.h), and applies it with its own loops.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/kernels/CpuKernels.h"
#include "gpipe/runtime/exec/Executor.h"

#include "AllClose.h"
#include "CompiledSupport.h"
#include "CompiledTrainingSupport.h"
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

namespace compiledtraining {

//===----------------------------------------------------------------------===//
// The models, as gpipe dialect text
//===----------------------------------------------------------------------===//

std::string tensor(std::vector<int64_t> shape, const char *element) {
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

namespace {

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

} // namespace

std::string mlpModel(int64_t batch) {
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

namespace {

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

} // namespace

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

} // namespace compiledtraining
