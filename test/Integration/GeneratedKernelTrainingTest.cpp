//===- GeneratedKernelTrainingTest.cpp - Generated kernels across pipelines
//===//
//
// A seven-layer model whose activations are general element-wise ops (one
// generated kernel per run: silu and mul; exp, neg and sigmoid; sin, cos and
// sub; an RMSNorm's square and row mean, and its broadcasting muls; a
// softmax of general ops, whose maximum and sum lead row kernels; the
// gradients' runs in the backward, the gain's summed over the rows) and a
// named softmax trains
// three Adam steps under
// K = 1, 2 and 4, every schedule and every remat policy, at M = 4 (rows 3,
// 3, 3, 3). The parameters must equal K = 1's under the same schedule bit
// for bit: a kernel's
// element does not depend on which thread's chunk holds it, nor on the stage
// that runs it. The same model with the named ops fused too
// (codegen=native) trains to the same losses within float rounding.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/Executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace rt = gpipe::runtime;

namespace {

constexpr int64_t kBatch = 12;

/// dense, then the layer's chain over %h, yielding %z; the last layer also
/// has a relu and an add, named ops that fuse only under codegen=native.
std::string layer(int i, const std::string &in, const std::string &chain) {
  std::string t = "tensor<12x8xf32>", n = std::to_string(i);
  return "  %l" + n + " = gpipe.layer \"l" + n + "\" -> " + t + " {\n" +
         "    %w = gpipe.param \"w" + n +
         "\" glorot_uniform : tensor<8x8xf32>\n" + "    %h = gpipe.dense " +
         in + ", %w : (" + t + ", tensor<8x8xf32>) -> " + t + "\n" + chain +
         "    gpipe.yield %z : " + t + "\n  }\n";
}

std::string model() {
  auto op = [](const std::string &r, const std::string &o,
               const std::string &a) {
    return "    %" + r + " = gpipe." + o + " " + a + " : tensor<12x8xf32>\n";
  };
  return "gpipe.model @generated batch 12 {\n"
         "  %x = gpipe.input \"x\" : tensor<12x8xf32>\n"
         "  %y = gpipe.input \"y\" : tensor<12x8xf32>\n" +
         layer(0, "%x", op("s", "silu", "%h") + op("z", "mul", "%s, %h")) +
         layer(1, "%l0",
               op("e", "exp", "%h") + op("n", "neg", "%e") +
                   op("z", "sigmoid", "%n")) +
         layer(2, "%l1",
               op("s", "sin", "%h") + op("c", "cos", "%h") +
                   op("z", "sub", "%s, %c")) +
         layer(3, "%l2",
               op("r", "relu", "%h") + op("t", "tanh", "%r") +
                   op("z", "add", "%t, %h")) +
         // RMSNorm with a gain: a row reduction and two broadcasts.
         layer(4, "%l3",
               op("sq", "mul", "%h, %h") +
                   "    %ms = gpipe.reduce_mean %sq axes [1] : "
                   "tensor<12x8xf32> -> tensor<12x1xf32>\n"
                   "    %r = gpipe.rsqrt %ms : tensor<12x1xf32>\n"
                   "    %n = gpipe.mul %h, %r : tensor<12x8xf32>, "
                   "tensor<12x1xf32> -> tensor<12x8xf32>\n"
                   "    %g = gpipe.param \"g4\" ones : tensor<8xf32>\n"
                   "    %z = gpipe.mul %n, %g : tensor<12x8xf32>, "
                   "tensor<8xf32> -> tensor<12x8xf32>\n") +
         // Softmax of general ops: row kernels (the maximum and the sum
         // leading) in the forward and the backward.
         layer(5, "%l4",
               "    %m = gpipe.reduce_max %h axes [1] : tensor<12x8xf32> -> "
               "tensor<12x1xf32>\n"
               "    %d = gpipe.sub %h, %m : tensor<12x8xf32>, "
               "tensor<12x1xf32> -> tensor<12x8xf32>\n" +
                   op("e", "exp", "%d") +
                   "    %s = gpipe.reduce_sum %e axes [1] : tensor<12x8xf32> "
                   "-> tensor<12x1xf32>\n"
                   "    %z = gpipe.div %e, %s : tensor<12x8xf32>, "
                   "tensor<12x1xf32> -> tensor<12x8xf32>\n") +
         // The named softmax: the library's kernels either way.
         layer(6, "%l5", op("z", "softmax", "%h")) +
         "  %loss = gpipe.layer \"loss\" -> tensor<f32> {\n"
         "    %0 = gpipe.mse_loss %l6, %y : (tensor<12x8xf32>, "
         "tensor<12x8xf32>) -> tensor<f32>\n"
         "    gpipe.yield %0 : tensor<f32>\n  }\n"
         "  gpipe.return %loss : tensor<f32>\n}\n";
}

struct TrainedRun {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> params;
  std::string error;
};

TrainedRun train(unsigned k, gpipe::schedule::ScheduleKind schedule,
                 gpipe::RematPolicy remat, gpipe::KernelCodegen codegen) {
  TrainedRun run;
  gpipe::CompilePipelineOptions options;
  options.numStages = k;
  options.numMicrobatches = 4;
  options.schedule = schedule;
  options.remat = remat;
  options.codegen = codegen;
  std::string json, diagnostics;
  if (mlir::failed(
          gpipe::compileSourceToBundle(model(), options, json, diagnostics))) {
    run.error = diagnostics;
    return run;
  }
  rt::StatusOr<rt::Bundle> bundle = rt::parseBundle(json, "generated");
  if (!bundle.ok()) {
    run.error = bundle.status().message();
    return run;
  }
  if (bundle->code.kernels.empty()) {
    run.error = "the bundle has no generated kernels";
    return run;
  }
  rt::ExecutorConfig config;
  config.seed = 9;
  config.optimizer.kind = rt::OptimizerKind::Adam;
  config.optimizer.learningRate = 0.01f;
  std::unique_ptr<rt::PipelineExecutor> executor =
      rt::PipelineExecutor::create(std::move(*bundle), config, run.error);
  if (!executor)
    return run;
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  for (int step = 0; step < 3; ++step) {
    std::vector<float> x(kBatch * 8), y(kBatch * 8);
    for (float &v : x)
      v = normal(rng);
    for (float &v : y)
      v = normal(rng);
    rt::Batch batch{{"x", rt::HostTensor::floats({kBatch, 8}, x)},
                    {"y", rt::HostTensor::floats({kBatch, 8}, y)}};
    rt::StepResult result = executor->trainStep(batch);
    if (!result.ok()) {
      run.error = result.error;
      return run;
    }
    run.losses.push_back(result.loss);
  }
  for (const rt::ParamSpec &spec : executor->bundle().params)
    run.params[spec.name] = *executor->parameter(spec.name);
  return run;
}

TEST(GeneratedKernelTraining, BitIdenticalAcrossStagesUnderEverySchedule) {
  using gpipe::schedule::ScheduleKind;
  // A schedule fixes the order gradients accumulate over micro-batches
  // (GPipe from the last, 1F1B and ZB-H1 from the first): K = 2 and 4 are
  // held to K = 1 under the same schedule.
  for (gpipe::RematPolicy remat :
       {gpipe::RematPolicy::None, gpipe::RematPolicy::Full,
        gpipe::RematPolicy::ExceptLast, gpipe::RematPolicy::Selective})
    for (ScheduleKind schedule : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                                  ScheduleKind::ZeroBubbleH1}) {
      TrainedRun single = train(1, schedule, remat, gpipe::KernelCodegen::None);
      ASSERT_TRUE(single.error.empty()) << single.error;
      for (unsigned k : {2u, 4u}) {
        TrainedRun piped =
            train(k, schedule, remat, gpipe::KernelCodegen::None);
        ASSERT_TRUE(piped.error.empty()) << piped.error;
        EXPECT_EQ(piped.losses, single.losses)
            << "K=" << k << " schedule " << int(schedule) << " remat "
            << int(remat);
        for (const auto &[name, values] : single.params) {
          const std::vector<float> &other = piped.params.at(name);
          ASSERT_EQ(values.size(), other.size());
          EXPECT_EQ(std::memcmp(values.data(), other.data(),
                                values.size() * sizeof(float)),
                    0)
              << name << " at K=" << k << " schedule " << int(schedule)
              << " remat " << int(remat);
        }
      }
    }
}

TEST(GeneratedKernelTraining, NamedOpsFusedTrainToTheSameLossesWithinRounding) {
  using gpipe::schedule::ScheduleKind;
  TrainedRun library = train(2, ScheduleKind::GPipe, gpipe::RematPolicy::Full,
                             gpipe::KernelCodegen::None);
  TrainedRun fused = train(2, ScheduleKind::GPipe, gpipe::RematPolicy::Full,
                           gpipe::KernelCodegen::Native);
  ASSERT_TRUE(library.error.empty()) << library.error;
  ASSERT_TRUE(fused.error.empty()) << fused.error;
  ASSERT_EQ(library.losses.size(), fused.losses.size());
  for (size_t i = 0; i < library.losses.size(); ++i)
    EXPECT_NEAR(fused.losses[i], library.losses[i],
                1e-5 * std::fabs(library.losses[i]))
        << "step " << i;
}

} // namespace
