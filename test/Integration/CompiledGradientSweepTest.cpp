//===- CompiledGradientSweepTest.cpp - Compiled gradients, whole batch ----===//
//
// The whole chain of gpipe-run, in process: a model written as gpipe dialect
// text is compiled (gpipe::buildCompilePipeline: partition, form-stages,
// differentiate, rematerialize, channels, schedule), written as a bundle
// (gpipe::translateModuleToBundle), read back (runtime::parseBundle) and
// trained one step by the pipeline executor. The loss and every parameter
// gradient are compared with an independent whole-batch double-precision
// reference (CompiledTrainingSupport.h), at the executor's initial
// parameters, for an MLP and a pre-norm Transformer over K stages, M
// micro-batches (uneven splits included) and every remat policy; the compiled
// structure (skip values carried through a stage, stages and micro-batches)
// and dropout across splits and steps.
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
using namespace compiledtraining;

namespace {

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

} // namespace
