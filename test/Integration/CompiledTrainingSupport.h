//===- CompiledTrainingSupport.h - Models, data, references -*- C++ -*- ---===//
//
// What the compiled end-to-end training tests share: an MLP and a pre-norm
// Transformer written as gpipe dialect text (the compiler's estimated costs or
// a forced split), their batches, the independent whole-batch
// double-precision references (runtime/tests/ReferenceOps.h), and one
// compiled step checked against a reference for a K, M, remat sweep.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TEST_INTEGRATION_COMPILEDTRAININGSUPPORT_H
#define GPIPE_TEST_INTEGRATION_COMPILEDTRAININGSUPPORT_H

#include "gpipe/runtime/exec/Executor.h"

#include "AllClose.h"
#include "CompiledSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace compiledtraining {

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

/// `tensor<{shape}x{element}>`.
std::string tensor(std::vector<int64_t> shape, const char *element = "f32");

/// ` attributes {cost = ...}` forcing the partitioner's hand, or nothing.
std::string costAttr(const std::vector<uint64_t> &costs, size_t layer);

/// Layer costs under which the variance-minimising partition into
/// firstLayers.size() cells is exactly `firstLayers`.
std::vector<uint64_t> costsForSplit(const std::vector<int> &firstLayers,
                                    unsigned numLayers);

// --- MLP: 12 -> dense 16 relu -> dense 16 tanh -> dense 8 gelu -> dense 5,
// softmax cross-entropy over int labels; one layer per dense and a loss layer.
// Costs are the compiler's own estimates.

constexpr int64_t kMlpBatch = 10;
constexpr int64_t kMlpIn = 12, kMlpH1 = 16, kMlpH2 = 16, kMlpH3 = 8,
                  kMlpClasses = 5;

/// The MLP with `batch` rows.
std::string mlpModel(int64_t batch = kMlpBatch);

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

/// The Transformer with `o`'s batch, dropout rate and split.
std::string transformerModel(const TransformerOptions &o);

/// The forced splits of the Transformer into K stages.
std::vector<int> transformerSplit(unsigned k);

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

/// A small deterministic generator for the batches.
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

gpipe::runtime::Batch mlpBatch(int64_t rows, uint64_t seed);
gpipe::runtime::Batch transformerBatch(int64_t rows, uint64_t seed);

//===----------------------------------------------------------------------===//
// The independent reference: whole batch, one device, double precision
//===----------------------------------------------------------------------===//

Reference mlpReference(const Params &p, const gpipe::runtime::Batch &batch);

/// `step` is the training step the dropout masks are drawn for.
Reference transformerReference(const Params &p,
                               const gpipe::runtime::Batch &batch, double rate,
                               uint64_t step);

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

using gpipe::testing::allClose;

/// One compiled step checked against `reference` at the executor's initial
/// parameters: the loss and every parameter's gradient.
template <typename ReferenceFn>
void checkOneStep(const std::string &model, unsigned k, unsigned m,
                  gpipe::RematPolicy remat, const gpipe::runtime::Batch &batch,
                  ReferenceFn reference) {
  Compiled compiled = compile(model, k, m, remat);
  ASSERT_TRUE(compiled.error.empty()) << compiled.error;
  ASSERT_EQ(compiled.bundle.stages.size(), k);
  ASSERT_EQ(compiled.bundle.microbatchRows.size(), m);
  gpipe::runtime::ExecutorConfig config;
  config.seed = 42;
  auto executor = makeExecutor(std::move(compiled.bundle), config);
  ASSERT_TRUE(executor);
  Params initial = currentParams(*executor);
  gpipe::runtime::StepResult step = executor->trainStep(batch);
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

inline std::string
sweepName(const ::testing::TestParamInfo<SweepParam> &info) {
  auto [k, m, remat] = info.param;
  return "K" + std::to_string(k) + "_M" + std::to_string(m) + "_" +
         rematName(remat);
}

inline const auto kRematPolicies = ::testing::Values(
    gpipe::RematPolicy::None, gpipe::RematPolicy::Full,
    gpipe::RematPolicy::ExceptLast, gpipe::RematPolicy::Selective);

} // namespace compiledtraining

#endif // GPIPE_TEST_INTEGRATION_COMPILEDTRAININGSUPPORT_H
