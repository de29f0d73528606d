//===- TestModels.h - The models and batches of the executor tests -------===//
//
// Small models that exercise every op kind, shared by the CPU executor's
// tests and the device executor's, with deterministic batches.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_TESTMODELS_H
#define GPIPE_RUNTIME_TESTS_TESTMODELS_H

#include "gpipe/runtime/data/Dataset.h"
#include "gpipe/runtime/exec/Executor.h"

#include "TestBundles.h"

#include <vector>

namespace gpipe::runtime::testing {

constexpr int64_t kSeq = 4, kWidth = 8, kVocab = 11, kHeads = 2;
constexpr float kDropRate = 0.1f;
constexpr uint64_t kDropSeed = 7;

/// 12 -> dense 16 relu -> dense 16 tanh -> dense 8 gelu -> dense 5, softmax
/// cross-entropy; one layer per dense.
ModelGraph mlpGraph(int64_t batch, int64_t hidden = 16);
/// First layers of a K-stage split of mlpGraph (K = 1..4).
std::vector<int> mlpSplit(unsigned k);
/// 12 -> `layers` - 1 times dense 16 tanh -> dense 5, softmax cross-entropy;
/// one layer per dense: deep enough for a stage per layer (interleaving 8
/// stages on 4 devices).
ModelGraph deepMlpGraph(int64_t batch, unsigned layers);

/// Embedding, pre-norm causal attention with dropout and a residual whose
/// skip value (the embedding) crosses stages, a pre-norm GELU feed-forward
/// block with a second residual, and a softmax cross-entropy over
/// [batch, seq, vocab]. Seven layers. `pytorchBlock`: the attention's
/// projections have biases ("attn.bqkv", "attn.bo") and the GELU is the
/// exact one (gelu_erf), as in an imported PyTorch Transformer.
ModelGraph residualGraph(int64_t batch, bool pytorchBlock = false);
/// K = 3 and 4 carry the embedding through an intermediate stage.
std::vector<int> residualSplit(unsigned k);

/// x[6] -> dense 7 | softmax, MSE against a float target; two layers.
ModelGraph mseGraph(int64_t batch);

/// A character model: i32 inputs ids, positions and targets [batch, seq];
/// token ("tokens") and position ("places") embeddings of `width` added |
/// one dense layer to the 96 characters and softmax cross-entropy.
ModelGraph characterGraph(int64_t batch, int64_t seq, int64_t width);

/// Images [batch, 6, 5, 2] through every op over images, in four layers:
/// conv 3x3 (padding 1, bias) and relu; max pool 3x3 (stride 2, padding 1)
/// and a grouped 2x2 conv (2 groups, stride [2, 1], padding 1); average
/// pool 3x3 (stride 2, padding 1), a pointwise conv with bias and tanh;
/// global average pool plus a dense of the flattened image, then a dense
/// to 5 classes and softmax cross-entropy.
ModelGraph convGraph(int64_t batch);
/// First layers of a K-stage split of convGraph (K = 1, 2, 4).
std::vector<int> convSplit(unsigned k);

/// Batch norm over an image and over features: x [batch, 4, 3, 2], conv
/// 3x3 (padding 1, no bias) to 4 channels, batch norm, relu; flatten,
/// dense to 6, batch norm, tanh, dense to 5 classes and softmax
/// cross-entropy. Two layers; each batch norm "bnK" has parameters
/// bnK.gamma (ones), bnK.beta (zeros), bnK.mean (zeros), bnK.var (ones).
ModelGraph batchNormGraph(int64_t batch);
Batch batchNormBatch(int64_t rows, uint64_t seed);

/// A small deterministic generator for test data.
struct Lcg {
  uint64_t state;
  explicit Lcg(uint64_t seed) : state(seed * 2862933555777941757ull + 1) {}
  uint32_t next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 33);
  }
  float uniform() { return float(next() % 2000001) / 1000000.0f - 1.0f; }
  int32_t below(int32_t n) { return int32_t(next() % uint32_t(n)); }
};

/// `count` images of 3 x 4 pixels in [0, 1); the label is the index of the
/// largest of the first five pixels (a task a small MLP learns).
ImageDataset brightestPixelSet(int64_t count, uint64_t seed);

Batch mlpBatch(int64_t rows, uint64_t seed);
Batch residualBatch(int64_t rows, uint64_t seed);
Batch mseBatch(int64_t rows, uint64_t seed);
Batch convBatch(int64_t rows, uint64_t seed);

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_TESTMODELS_H
