//===- PretrainedTrainingTest.cpp - Pretrained weights, end to end --------===//
//
// The chain of gpipe-run for a model with pretrained parameters: a .mlir
// file naming its weights file by a relative path (gpipe.weights) is compiled
// in process from the file (compileFileToBundle, as gpipe-run and gpipe-bench
// do), the bundle names the file by its absolute path, and the executor
// starts from the file's values, bit for bit, whatever its seed. The first
// step's loss is the one an independent double-precision reference computes
// from the file's values, and equals, bit for bit, that of the same bundle
// whose parameters were set by hand to those values.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/bundle/SafeTensors.h"

#include "CompiledSupport.h"
#include "ReferenceOps.h"
#include "TempDir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace rt = gpipe::runtime;
namespace ref = gpipe::reference;
using gpipe::runtime::testing::TempDir;

namespace {

constexpr int64_t kBatch = 8, kIn = 6, kHidden = 8, kClasses = 4;

const char *kModel = R"mlir(
gpipe.model @pretrained batch 8 attributes {gpipe.weights = "weights/tiny.safetensors"} {
  %x = gpipe.input "x" : tensor<8x6xf32>
  %y = gpipe.input "labels" : tensor<8xi32>
  %h = gpipe.layer "fc1" -> tensor<8x8xf32> {
    %w = gpipe.param "fc1.w" pretrained : tensor<6x8xf32>
    %b = gpipe.param "fc1.b" pretrained : tensor<8xf32>
    %0 = gpipe.dense %x, %w, %b : (tensor<8x6xf32>, tensor<6x8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
    %1 = gpipe.relu %0 : tensor<8x8xf32>
    gpipe.yield %1 : tensor<8x8xf32>
  }
  %o = gpipe.layer "fc2" -> tensor<8x4xf32> {
    %w = gpipe.param "fc2.w" pretrained : tensor<8x4xf32>
    %b = gpipe.param "fc2.b" zeros : tensor<4xf32>
    %0 = gpipe.dense %h, %w, %b : (tensor<8x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    gpipe.yield %0 : tensor<8x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %o, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
)mlir";

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// Deterministic values of either sign, with -0 and a subnormal first
/// (a conversion on the way would change their bits).
std::vector<float> valuesOf(int64_t n, int salt) {
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i)
    values[i] = float(std::sin(double(salt * 100 + i))) * 0.5f;
  values[0] = -0.0f;
  if (n > 1)
    values[1] = 1e-41f;
  return values;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(PretrainedTraining, StartsFromTheFilesValues) {
  TempDir dir("gpipe-pretrained-e2e");
  ASSERT_EQ(::mkdir((dir.path + "/weights").c_str(), 0700), 0);
  std::map<std::string, rt::NamedTensor> file = {
      {"fc1.w", {"fc1.w", {kIn, kHidden}, valuesOf(kIn * kHidden, 1)}},
      {"fc1.b", {"fc1.b", {kHidden}, valuesOf(kHidden, 2)}},
      {"fc2.w",
       {"fc2.w", {kHidden, kClasses}, valuesOf(kHidden * kClasses, 3)}},
  };
  std::vector<rt::NamedTensor> tensors;
  for (const auto &entry : file)
    tensors.push_back(entry.second);
  writeFile(dir.path + "/weights/tiny.safetensors",
            rt::encodeSafeTensors(tensors, {{"source", "test"}}));
  // The bundle names the file by the real path of the model's directory.
  char *real = ::realpath(dir.path.c_str(), nullptr);
  ASSERT_TRUE(real);
  const std::string weights = std::string(real) + "/weights/tiny.safetensors";
  std::free(real);
  const std::string modelPath = dir.path + "/tiny.mlir";
  writeFile(modelPath, kModel);

  gpipe::CompilePipelineOptions options;
  options.numStages = 2;
  options.numMicrobatches = 2;
  std::string json, error;
  ASSERT_TRUE(mlir::succeeded(
      gpipe::compileFileToBundle(modelPath, options, json, error)))
      << error;
  EXPECT_NE(json.find("\"weights\": \"" + weights + "\""), std::string::npos);
  rt::StatusOr<rt::Bundle> bundle = rt::parseBundle(json, modelPath);
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  EXPECT_EQ(bundle->weights, weights);

  rt::Batch batch = gpipe::testing::randomBatch(*bundle, 5);
  for (int32_t &label : batch.at("labels").i32)
    label %= kClasses;
  rt::ExecutorConfig config;
  config.optimizer.kind = rt::OptimizerKind::Sgd;
  config.optimizer.learningRate = 0.1f;
  double firstLoss = 0.0;
  for (uint64_t seed : {1u, 99u}) {
    config.seed = seed;
    auto executor = gpipe::testing::makeExecutor(*bundle, config);
    ASSERT_TRUE(executor);
    for (const auto &[name, tensor] : file)
      EXPECT_TRUE(sameBits(*executor->parameter(name), tensor.data)) << name;
    EXPECT_EQ(*executor->parameter("fc2.b"), std::vector<float>(kClasses));
    rt::StepResult step = executor->trainStep(batch);
    ASSERT_TRUE(step.error.empty()) << step.error;
    if (seed == 1u)
      firstLoss = step.loss;
    EXPECT_EQ(step.loss, firstLoss) << "the seed changed pretrained values";
  }

  // The reference, from the file's values.
  auto vec = [](const std::vector<float> &v) {
    return ref::Vec(v.begin(), v.end());
  };
  ref::Vec x = vec(batch.at("x").f32);
  ref::Vec hidden = ref::reluForward(
      ref::denseForward(x, vec(file.at("fc1.w").data),
                        vec(file.at("fc1.b").data), kBatch, kIn, kHidden));
  ref::Vec logits =
      ref::denseForward(hidden, vec(file.at("fc2.w").data),
                        ref::Vec(kClasses, 0.0), kBatch, kHidden, kClasses);
  double expected = ref::softmaxCrossEntropyForward(
      logits, batch.at("labels").i32, kBatch, kClasses);
  EXPECT_NEAR(firstLoss, expected, 1e-5 * std::abs(expected) + 1e-6);

  // The same bundle with the values set by hand: the same step, bit for bit.
  rt::Bundle byHand = *bundle;
  byHand.weights.clear();
  for (rt::ParamSpec &spec : byHand.params)
    spec.init = rt::InitKind::Zeros;
  config.seed = 1;
  auto executor = gpipe::testing::makeExecutor(byHand, config);
  ASSERT_TRUE(executor);
  for (const auto &[name, tensor] : file)
    ASSERT_EQ(executor->setParameter(name, tensor.data), "");
  rt::StepResult step = executor->trainStep(batch);
  ASSERT_TRUE(step.error.empty()) << step.error;
  EXPECT_EQ(step.loss, firstLoss);
}

} // namespace
