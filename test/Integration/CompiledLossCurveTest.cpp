//===- CompiledLossCurveTest.cpp - Compiled training over many steps ------===//
//
// Compiled pipelines trained over many Adam steps: the K-stage,
// M-micro-batch loss curves of the MLP and the Transformer follow the
// single-device curve, and runs are bitwise deterministic.
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
