//===- TestModels.cpp - The models and batches of the executor tests -----===//

#include "TestModels.h"
#include "gpipe/runtime/data/TextCorpus.h"

#include <algorithm>

namespace gpipe::runtime::testing {

//===----------------------------------------------------------------------===//
// Models
//===----------------------------------------------------------------------===//

/// 12 -> dense 16 relu -> dense 16 tanh -> dense 8 gelu -> dense 5, softmax
/// cross-entropy; one layer per dense.
ModelGraph mlpGraph(int64_t batch, int64_t hidden) {
  ModelGraph g(batch);
  int x = g.input("x", {batch, 12});
  int labels = g.input("labels", {batch}, ElementType::I32);
  auto denseLayer = [&](int in, int64_t from, int64_t to, int index) {
    std::string name = "l" + std::to_string(index);
    int w = g.param(name + ".w", {from, to}, InitKind::GlorotUniform);
    int b = g.param(name + ".b", {to}, InitKind::Uniform, 0.1);
    return g.dense(in, w, b);
  };
  int h = g.unary(OpKind::Relu, denseLayer(x, 12, hidden, 1));
  g.nextLayer();
  h = g.unary(OpKind::Tanh, denseLayer(h, hidden, hidden, 2));
  g.nextLayer();
  h = g.unary(OpKind::Gelu, denseLayer(h, hidden, 8, 3));
  g.nextLayer();
  g.softmaxCrossEntropy(denseLayer(h, 8, 5, 4), labels);
  return g;
}

ModelGraph deepMlpGraph(int64_t batch, unsigned layers) {
  ModelGraph g(batch);
  int h = g.input("x", {batch, 12});
  int labels = g.input("labels", {batch}, ElementType::I32);
  int64_t width = 12;
  for (unsigned l = 1; l <= layers; ++l) {
    const bool last = l == layers;
    const int64_t to = last ? 5 : 16;
    std::string name = "l" + std::to_string(l);
    int w = g.param(name + ".w", {width, to}, InitKind::GlorotUniform);
    int b = g.param(name + ".b", {to}, InitKind::Uniform, 0.1);
    h = g.dense(h, w, b);
    if (last) {
      g.softmaxCrossEntropy(h, labels);
      break;
    }
    h = g.unary(OpKind::Tanh, h);
    g.nextLayer();
    width = to;
  }
  return g;
}

std::vector<int> mlpSplit(unsigned k) {
  static const std::vector<int> splits[] = {
      {0}, {0, 2}, {0, 1, 3}, {0, 1, 2, 3}};
  return splits[k - 1];
}


/// Embedding, pre-norm causal attention with dropout and a residual whose
/// skip value (the embedding) crosses stages, a pre-norm GELU feed-forward
/// block with a second residual, and a softmax cross-entropy over
/// [batch, seq, vocab]. Seven layers.
ModelGraph residualGraph(int64_t batch, bool pytorchBlock) {
  ModelGraph g(batch);
  int ids = g.input("ids", {batch, kSeq}, ElementType::I32);
  int labels = g.input("labels", {batch, kSeq}, ElementType::I32);
  int table = g.param("table", {kVocab, kWidth}, InitKind::Normal, 0.5);
  int emb = g.embedding(ids, table); // layer 0
  g.nextLayer();
  int gamma1 = g.param("ln1.gamma", {kWidth}, InitKind::Ones);
  int beta1 = g.param("ln1.beta", {kWidth}, InitKind::Zeros);
  int ln1 = g.layerNorm(emb, gamma1, beta1); // layer 1
  g.nextLayer();
  int wqkv =
      g.param("attn.wqkv", {kWidth, 3 * kWidth}, InitKind::GlorotUniform);
  int wo = g.param("attn.wo", {kWidth, kWidth}, InitKind::GlorotUniform);
  int bqkv = -1, bo = -1;
  if (pytorchBlock) {
    bqkv = g.param("attn.bqkv", {3 * kWidth}, InitKind::Uniform, 0.5);
    bo = g.param("attn.bo", {kWidth}, InitKind::Uniform, 0.5);
  }
  int att = g.attention(ln1, wqkv, wo, kHeads, /*causal=*/true, bqkv, bo);
  int drop = g.dropout(att, kDropRate, kDropSeed); // layer 2
  g.nextLayer();
  int r1 = g.add(emb, drop); // layer 3: the skip from layer 0
  g.nextLayer();
  int gamma2 = g.param("ln2.gamma", {kWidth}, InitKind::Ones);
  int beta2 = g.param("ln2.beta", {kWidth}, InitKind::Zeros);
  int ln2 = g.layerNorm(r1, gamma2, beta2);
  int w1 = g.param("ffn.w1", {kWidth, 16}, InitKind::GlorotUniform);
  int b1 = g.param("ffn.b1", {16}, InitKind::Uniform, 0.1);
  int hidden = g.unary(pytorchBlock ? OpKind::GeluErf : OpKind::Gelu,
                       g.dense(ln2, w1, b1)); // layer 4
  g.nextLayer();
  int w2 = g.param("ffn.w2", {16, kWidth}, InitKind::GlorotUniform);
  int b2 = g.param("ffn.b2", {kWidth}, InitKind::Uniform, 0.1);
  int r2 = g.add(r1, g.dense(hidden, w2, b2)); // layer 5: skip from layer 3
  g.nextLayer();
  int wout = g.param("out.w", {kWidth, kVocab}, InitKind::GlorotUniform);
  int bout = g.param("out.b", {kVocab}, InitKind::Uniform, 0.1);
  g.softmaxCrossEntropy(g.dense(r2, wout, bout), labels); // layer 6
  return g;
}

/// K = 3 and 4 carry the embedding through an intermediate stage.
std::vector<int> residualSplit(unsigned k) {
  static const std::vector<int> splits[] = {
      {0}, {0, 3}, {0, 1, 3}, {0, 2, 3, 5}};
  return splits[k - 1];
}

ModelGraph characterGraph(int64_t batch, int64_t seq, int64_t width) {
  ModelGraph g(batch);
  int ids = g.input("ids", {batch, seq}, ElementType::I32);
  int positions = g.input("positions", {batch, seq}, ElementType::I32);
  int targets = g.input("targets", {batch, seq}, ElementType::I32);
  int tokens = g.param("tokens", {int64_t(kTextVocabSize), width},
                       InitKind::Normal, 0.02);
  int place = g.param("places", {seq, width}, InitKind::Normal, 0.02);
  int h = g.add(g.embedding(ids, tokens), g.embedding(positions, place));
  g.nextLayer();
  int w = g.param("out.w", {width, int64_t(kTextVocabSize)},
                  InitKind::GlorotUniform);
  int b = g.param("out.b", {int64_t(kTextVocabSize)}, InitKind::Zeros);
  g.softmaxCrossEntropy(g.dense(h, w, b), targets);
  return g;
}

/// x[6] -> dense 7 | softmax, MSE against a float target; two layers.
ModelGraph mseGraph(int64_t batch) {
  ModelGraph g(batch);
  int x = g.input("x", {batch, 6});
  int target = g.input("target", {batch, 7});
  int w = g.param("w", {6, 7}, InitKind::GlorotUniform);
  int b = g.param("b", {7}, InitKind::Uniform, 0.1);
  int z = g.dense(x, w, b);
  g.nextLayer();
  g.mse(g.unary(OpKind::Softmax, z), target);
  return g;
}

ModelGraph convGraph(int64_t batch) {
  ModelGraph g(batch);
  int x = g.input("x", {batch, 6, 5, 2});
  int labels = g.input("labels", {batch}, ElementType::I32);
  auto window = [](int64_t size, std::vector<int64_t> stride, int64_t pad,
                   int64_t groups = 1) {
    WindowAttrs attrs;
    attrs.window[0] = attrs.window[1] = size;
    attrs.stride[0] = stride[0], attrs.stride[1] = stride[1];
    attrs.padding[0] = attrs.padding[1] = pad;
    attrs.groups = groups;
    return attrs;
  };
  int w0 = g.param("conv0.w", {3, 3, 2, 4}, InitKind::GlorotUniform);
  int b0 = g.param("conv0.b", {4}, InitKind::Uniform, 0.1);
  int h = g.unary(OpKind::Relu, g.conv2d(x, w0, b0, window(3, {1, 1}, 1)));
  g.nextLayer();
  h = g.pool2d(OpKind::MaxPool2d, h, window(3, {2, 2}, 1)); // [3, 3, 4]
  int w1 = g.param("conv1.w", {2, 2, 2, 6}, InitKind::GlorotUniform);
  h = g.conv2d(h, w1, -1, window(2, {2, 1}, 1, 2)); // [2, 4, 6]
  g.nextLayer();
  h = g.pool2d(OpKind::AvgPool2d, h, window(3, {2, 2}, 1)); // [1, 2, 6]
  int w2 = g.param("conv2.w", {1, 1, 6, 6}, InitKind::GlorotUniform);
  int b2 = g.param("conv2.b", {6}, InitKind::Uniform, 0.1);
  h = g.unary(OpKind::Tanh, g.conv2d(h, w2, b2, window(1, {1, 1}, 0)));
  g.nextLayer();
  int w3 = g.param("fc.w", {12, 6}, InitKind::GlorotUniform);
  int mixed = g.add(g.globalAvgPool(h), g.dense(g.flatten(h), w3));
  int w4 = g.param("head.w", {6, 5}, InitKind::GlorotUniform);
  int b4 = g.param("head.b", {5}, InitKind::Uniform, 0.1);
  g.softmaxCrossEntropy(g.dense(mixed, w4, b4), labels);
  return g;
}

ModelGraph batchNormGraph(int64_t batch) {
  ModelGraph g(batch);
  int x = g.input("x", {batch, 4, 3, 2});
  int labels = g.input("labels", {batch}, ElementType::I32);
  auto norm = [&](int h, const std::string &name, int64_t channels) {
    int gamma = g.param(name + ".gamma", {channels}, InitKind::Ones);
    int beta = g.param(name + ".beta", {channels}, InitKind::Zeros);
    int mean = g.param(name + ".mean", {channels}, InitKind::Zeros);
    int variance = g.param(name + ".var", {channels}, InitKind::Ones);
    return g.batchNorm(h, gamma, beta, mean, variance);
  };
  WindowAttrs same;
  same.padding[0] = same.padding[1] = 1;
  int w0 = g.param("conv.w", {3, 3, 2, 4}, InitKind::GlorotUniform);
  int h = g.unary(OpKind::Relu, norm(g.conv2d(x, w0, -1, same), "bn0", 4));
  g.nextLayer();
  int w1 = g.param("fc.w", {48, 6}, InitKind::GlorotUniform);
  h = g.unary(OpKind::Tanh, norm(g.dense(g.flatten(h), w1), "bn1", 6));
  int w2 = g.param("head.w", {6, 5}, InitKind::GlorotUniform);
  int b2 = g.param("head.b", {5}, InitKind::Uniform, 0.1);
  g.softmaxCrossEntropy(g.dense(h, w2, b2), labels);
  return g;
}

std::vector<int> convSplit(unsigned k) {
  switch (k) {
  case 1:
    return {0};
  case 2:
    return {0, 2};
  default:
    return {0, 1, 2, 3};
  }
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//


Batch mlpBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> x(rows * 12);
  for (float &v : x)
    v = rng.uniform();
  std::vector<int32_t> labels(rows);
  for (int32_t &v : labels)
    v = rng.below(5);
  return {{"x", HostTensor::floats({rows, 12}, x)},
          {"labels", HostTensor::ints({rows}, labels)}};
}

Batch residualBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<int32_t> ids(rows * kSeq), labels(rows * kSeq);
  for (int32_t &v : ids)
    v = rng.below(kVocab);
  for (int32_t &v : labels)
    v = rng.below(kVocab);
  return {{"ids", HostTensor::ints({rows, kSeq}, ids)},
          {"labels", HostTensor::ints({rows, kSeq}, labels)}};
}

Batch mseBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> x(rows * 6), target(rows * 7);
  for (float &v : x)
    v = rng.uniform();
  for (float &v : target)
    v = 0.5f * (rng.uniform() + 1.0f) / 7.0f * 2.0f;
  return {{"x", HostTensor::floats({rows, 6}, x)},
          {"target", HostTensor::floats({rows, 7}, target)}};
}

Batch batchNormBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> x(rows * 4 * 3 * 2);
  for (float &v : x)
    v = 2.0f * rng.uniform() + 0.5f; // not centred: the mean matters
  std::vector<int32_t> labels(rows);
  for (int32_t &v : labels)
    v = rng.below(5);
  return {{"x", HostTensor::floats({rows, 4, 3, 2}, x)},
          {"labels", HostTensor::ints({rows}, labels)}};
}

Batch convBatch(int64_t rows, uint64_t seed) {
  Lcg rng(seed);
  std::vector<float> x(rows * 6 * 5 * 2);
  for (float &v : x)
    v = rng.uniform();
  std::vector<int32_t> labels(rows);
  for (int32_t &v : labels)
    v = rng.below(5);
  return {{"x", HostTensor::floats({rows, 6, 5, 2}, x)},
          {"labels", HostTensor::ints({rows}, labels)}};
}

ImageDataset brightestPixelSet(int64_t count, uint64_t seed) {
  Lcg rng(seed);
  ImageDataset data;
  data.count = count;
  data.height = 3;
  data.width = 4;
  for (int64_t i = 0; i < count; ++i) {
    for (int p = 0; p < 12; ++p)
      data.images.push_back(0.5f + 0.5f * rng.uniform());
    const float *first = data.images.data() + i * 12;
    data.labels.push_back(int32_t(std::max_element(first, first + 5) - first));
  }
  return data;
}

} // namespace gpipe::runtime::testing
