//===- FusedKernelsTest.cpp - Generated kernels against the CPU kernels ---===//
//
// Every kernel that gpipe-translate --gpipe-emit-kernels generated for the
// models (see CMakeLists.txt) runs through its host wrapper on random inputs,
// negative and large ones included; the reference replays the kernel's `ops`
// descriptor with the runtime's CPU kernels, one op at a time through
// materialized temporaries.
//
//===----------------------------------------------------------------------===//

#include "fused_kernels.h"
#include "gelu_erf_kernels.h"
#include "layers_kernels.h"
#include "mlp_kernels.h"
#include "transformer_kernels.h"

#include "gpipe/runtime/kernels/CpuKernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace cpu = gpipe::runtime::cpu;

namespace {

struct ModelKernels {
  const char *model;
  const GpipeKernelInfo *kernels;
  int numKernels;
};

const std::vector<ModelKernels> &allModels() {
  static const std::vector<ModelKernels> models = {
      {"transformer", gpipe_transformer_kernels::gpipeKernels,
       gpipe_transformer_kernels::gpipeNumKernels},
      {"mlp", gpipe_mlp_kernels::gpipeKernels,
       gpipe_mlp_kernels::gpipeNumKernels},
      {"fused", gpipe_fused_kernels::gpipeKernels,
       gpipe_fused_kernels::gpipeNumKernels},
      {"layers", gpipe_layers_kernels::gpipeKernels,
       gpipe_layers_kernels::gpipeNumKernels},
      {"gelu_erf", gpipe_gelu_erf_kernels::gpipeKernels,
       gpipe_gelu_erf_kernels::gpipeNumKernels},
  };
  return models;
}

/// One step of a descriptor: `op(args)->result`.
struct Step {
  std::string op;
  std::vector<std::string> args;
  std::string result;
};

std::string trim(const std::string &s) {
  size_t begin = s.find_first_not_of(' ');
  size_t end = s.find_last_not_of(' ');
  return begin == std::string::npos ? "" : s.substr(begin, end - begin + 1);
}

/// Parses "add(in0,in1)->t0; gelu(t0)->out"; an empty vector if malformed.
std::vector<Step> parseOps(const std::string &text) {
  std::vector<Step> steps;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(';', pos);
    if (end == std::string::npos)
      end = text.size();
    std::string item = trim(text.substr(pos, end - pos));
    size_t open = item.find('('), close = item.find(")->");
    if (open == std::string::npos || close == std::string::npos || close < open)
      return {};
    Step step;
    step.op = item.substr(0, open);
    step.result = item.substr(close + 3);
    std::string args = item.substr(open + 1, close - open - 1);
    size_t a = 0;
    while (a <= args.size()) {
      size_t comma = args.find(',', a);
      if (comma == std::string::npos)
        comma = args.size();
      step.args.push_back(trim(args.substr(a, comma - a)));
      a = comma + 1;
    }
    steps.push_back(std::move(step));
    pos = end + 1;
  }
  return steps;
}

/// The reference result of `steps` on `inputs`, or an error message.
std::string runReference(const std::vector<Step> &steps,
                         const std::vector<std::vector<float>> &inputs,
                         int64_t n, std::vector<float> &out) {
  std::map<std::string, std::vector<float>> values;
  for (size_t i = 0; i < inputs.size(); ++i)
    values["in" + std::to_string(i)] = inputs[i];
  for (const Step &step : steps) {
    std::vector<const float *> args;
    for (const std::string &arg : step.args) {
      auto it = values.find(arg);
      if (it == values.end())
        return "undefined value '" + arg + "' in step " + step.op;
      args.push_back(it->second.data());
    }
    const bool unary = step.op == "relu" || step.op == "gelu" ||
                       step.op == "gelu_erf" || step.op == "tanh";
    size_t expectedArgs = unary ? 1 : 2;
    if (args.size() != expectedArgs)
      return "step " + step.op + " expects " + std::to_string(expectedArgs) +
             " operands, got " + std::to_string(args.size());
    std::vector<float> result(n);
    // Dialect operand order: grads take dy first, then x (or y for tanh).
    if (step.op == "relu")
      cpu::reluForward(args[0], result.data(), n);
    else if (step.op == "gelu")
      cpu::geluForward(args[0], result.data(), n);
    else if (step.op == "gelu_erf")
      cpu::geluErfForward(args[0], result.data(), n);
    else if (step.op == "tanh")
      cpu::tanhForward(args[0], result.data(), n);
    else if (step.op == "add")
      cpu::addForward(args[0], args[1], result.data(), n);
    else if (step.op == "relu_grad")
      cpu::reluBackward(args[1], args[0], result.data(), n);
    else if (step.op == "gelu_grad")
      cpu::geluBackward(args[1], args[0], result.data(), n);
    else if (step.op == "gelu_erf_grad")
      cpu::geluErfBackward(args[1], args[0], result.data(), n);
    else if (step.op == "tanh_grad")
      cpu::tanhBackward(args[1], args[0], result.data(), n);
    else
      return "unknown op '" + step.op + "'";
    values[step.result] = std::move(result);
  }
  auto it = values.find("out");
  if (it == values.end())
    return "no step writes 'out'";
  out = it->second;
  return "";
}

/// Random inputs: mostly in [-4, 4], with zeros, large magnitudes (up to
/// 1e3, where exp saturates in GELU) and values near the relu kink.
std::vector<float> randomInput(std::mt19937 &rng, int64_t n) {
  std::uniform_real_distribution<float> small(-4.0f, 4.0f);
  std::uniform_real_distribution<float> large(-1000.0f, 1000.0f);
  std::uniform_int_distribution<int> kind(0, 15);
  std::vector<float> values(n);
  for (float &v : values) {
    switch (kind(rng)) {
    case 0:
      v = 0.0f;
      break;
    case 1:
    case 2:
      v = large(rng);
      break;
    case 3:
      v = small(rng) * 1e-3f;
      break;
    default:
      v = small(rng);
    }
  }
  return values;
}

struct KernelCase {
  const char *model;
  const GpipeKernelInfo *info;
};

std::vector<KernelCase> allKernels() {
  std::vector<KernelCase> cases;
  for (const ModelKernels &model : allModels())
    for (int i = 0; i < model.numKernels; ++i)
      cases.push_back({model.model, &model.kernels[i]});
  return cases;
}

class FusedKernelTest : public ::testing::TestWithParam<KernelCase> {};

TEST_P(FusedKernelTest, MatchesCpuKernels) {
  const GpipeKernelInfo &info = *GetParam().info;
  std::vector<Step> steps = parseOps(info.ops);
  ASSERT_FALSE(steps.empty()) << "malformed ops descriptor: " << info.ops;
  ASSERT_EQ(static_cast<int>(steps.size()), info.numOps) << info.ops;
  ASSERT_GT(info.numElements, 0);

  // An odd element count past the model's, so no loop assumes a multiple of 4.
  int64_t n = std::min<int64_t>(info.numElements, 65536) + 3;
  std::mt19937 rng(12345u + static_cast<unsigned>(info.numInputs));
  std::vector<std::vector<float>> inputs;
  std::vector<const float *> pointers;
  for (int i = 0; i < info.numInputs; ++i)
    inputs.push_back(randomInput(rng, n));
  for (const std::vector<float> &input : inputs)
    pointers.push_back(input.data());

  std::vector<float> expected;
  std::string error = runReference(steps, inputs, n, expected);
  ASSERT_EQ(error, "") << info.ops;

  std::vector<float> actual(n, std::nanf(""));
  info.host(pointers.data(), actual.data(), n);

  double worst = 0.0;
  int64_t worstAt = -1;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(expected[i])) << "reference at " << i;
    ASSERT_TRUE(std::isfinite(actual[i]))
        << info.name << " at " << i << ": " << actual[i];
    // Relative to the magnitudes going in as well as to the result: both
    // sides round their temporaries, and a result may cancel terms of the
    // inputs' size (gelu_grad(dy, x) near x = -0.75 is dy (0.26 - 0.26)).
    double scale = std::max(1.0, std::fabs(static_cast<double>(expected[i])));
    for (const std::vector<float> &input : inputs)
      scale = std::max(scale, std::fabs(static_cast<double>(input[i])));
    double error =
        std::fabs(static_cast<double>(actual[i]) - expected[i]) / scale;
    if (error > worst) {
      worst = error;
      worstAt = i;
    }
  }
  std::string where;
  if (worstAt >= 0)
    for (int i = 0; i < info.numInputs; ++i)
      where +=
          " in" + std::to_string(i) + "=" + std::to_string(inputs[i][worstAt]);
  EXPECT_LE(worst, 1e-5) << info.name << " (" << info.ops << ") at " << worstAt
                         << where << ": got " << actual[worstAt]
                         << ", expected " << expected[worstAt];
}

std::string caseName(const ::testing::TestParamInfo<KernelCase> &param) {
  return std::string(param.param.model) + "_" + param.param.info->name;
}

INSTANTIATE_TEST_SUITE_P(AllModels, FusedKernelTest,
                         ::testing::ValuesIn(allKernels()), caseName);

TEST(FusedKernelTable, EveryModelHasKernels) {
  for (const ModelKernels &model : allModels())
    EXPECT_GT(model.numKernels, 0) << model.model;
}

TEST(FusedKernelTable, SomeKernelFusesSeveralOps) {
  int fused = 0, maxOps = 0;
  for (const KernelCase &c : allKernels()) {
    fused += c.info->numOps >= 2;
    maxOps = std::max(maxOps, c.info->numOps);
  }
  EXPECT_GT(fused, 0);
  EXPECT_GE(maxOps, 4); // add, gelu, tanh, add across two layers.
}

TEST(FusedKernelTable, DescriptorParses) {
  std::vector<Step> steps = parseOps("add(in0,in1)->t0; gelu(t0)->out");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].op, "add");
  EXPECT_EQ(steps[0].args, (std::vector<std::string>{"in0", "in1"}));
  EXPECT_EQ(steps[1].result, "out");
  EXPECT_TRUE(parseOps("gelu t0").empty());
}

} // namespace
