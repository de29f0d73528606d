//===- ElementwiseGradientsTest.cpp - General ops' gradients, end to end --===//
//
// Each general element-wise op (GPipeElementwiseOps.td) in a small model:
// a = x w1 (and b = x w2 for a binary op), z = the op's chain, loss =
// mse(z, y). The model is compiled (gpipe-differentiate's rule, the bundle's
// generated kernels), trained one step by the runtime, and the parameters'
// gradients are compared with f64 central differences of the same function
// evaluated here in double with the C library's math: an independent check
// of the gradient rule, the generated code and their wiring. Chains keep
// each op in its domain (log and sqrt of positive values). Run at K = 1 and
// 2 (the op in the second stage) and with the named element-wise ops fused
// too (codegen=native).
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/exec/Executor.h"

#include "AllClose.h"
#include "CompiledSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace rt = gpipe::runtime;
using gpipe::testing::compile;

namespace {

constexpr int64_t kRows = 4, kIn = 5, kOut = 6;

/// A model whose layer "op" computes `chain` (MLIR lines over %a, %b: the
/// dense outputs, each tensor<4x6xf32>; the last defines %z).
std::string model(const std::string &chain) {
  std::string t = "tensor<4x6xf32>";
  return R"(gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x5xf32>
  %y = gpipe.input "y" : tensor<4x6xf32>
  %ab:2 = gpipe.layer "proj" -> tensor<4x6xf32>, tensor<4x6xf32> {
    %w1 = gpipe.param "w1" normal scale 0.5 : tensor<5x6xf32>
    %w2 = gpipe.param "w2" normal scale 0.5 : tensor<5x6xf32>
    %0 = gpipe.dense %x, %w1 : (tensor<4x5xf32>, tensor<5x6xf32>) -> )" +
         t + R"(
    %1 = gpipe.dense %x, %w2 : (tensor<4x5xf32>, tensor<5x6xf32>) -> )" +
         t + R"(
    gpipe.yield %0, %1 : )" +
         t + ", " + t + R"(
  }
  %out = gpipe.layer "op" -> )" +
         t + R"( {
    %a = gpipe.add %ab#0, %ab#0 : )" +
         t + R"(
    %b = gpipe.add %ab#1, %ab#1 : )" +
         t + "\n" + chain + R"(
    gpipe.yield %z : )" +
         t + R"(
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %out, %y : ()" +
         t + ", " + t + R"() -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
)";
}

/// `%name = gpipe.op %args : tensor<4x6xf32>`.
std::string line(const std::string &name, const std::string &op,
                 const std::string &args) {
  return "    %" + name + " = gpipe." + op + " " + args +
         " : tensor<4x6xf32>\n";
}

using Fn = std::function<double(double a, double b)>;
double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

struct Case {
  std::string name;
  std::string chain;
  Fn f; ///< z from a and b (a = 2 x w1, b = 2 x w2)
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

std::vector<Case> cases() {
  auto unary = [](const std::string &op, Fn f) {
    return Case{op, line("z", op, "%a"), f};
  };
  auto binary = [](const std::string &op, Fn f) {
    return Case{op, line("z", op, "%a, %b"), f};
  };
  return {
      unary("neg", [](double a, double) { return -a; }),
      {"clip", line("z", "clip", "%a min -1.0 max 1.0"),
       [](double a, double) { return std::min(std::max(a, -1.0), 1.0); }},
      unary("abs", [](double a, double) { return std::fabs(a); }),
      unary("exp", [](double a, double) { return std::exp(a); }),
      unary("sigmoid", [](double a, double) { return sigmoid(a); }),
      unary("silu", [](double a, double) { return a * sigmoid(a); }),
      unary("erf", [](double a, double) { return std::erf(a); }),
      unary("sin", [](double a, double) { return std::sin(a); }),
      unary("cos", [](double a, double) { return std::cos(a); }),
      {"log", line("s", "sigmoid", "%a") + line("z", "log", "%s"),
       [](double a, double) { return std::log(sigmoid(a)); }},
      {"sqrt", line("e", "exp", "%a") + line("z", "sqrt", "%e"),
       [](double a, double) { return std::sqrt(std::exp(a)); }},
      {"rsqrt", line("e", "exp", "%a") + line("z", "rsqrt", "%e"),
       [](double a, double) { return 1 / std::sqrt(std::exp(a)); }},
      {"reciprocal", line("s", "sigmoid", "%a") + line("z", "reciprocal", "%s"),
       [](double a, double) { return 1 / sigmoid(a); }},
      binary("sub", [](double a, double b) { return a - b; }),
      binary("mul", [](double a, double b) { return a * b; }),
      {"div", line("e", "exp", "%b") + line("z", "div", "%a, %e"),
       [](double a, double b) { return a / std::exp(b); }},
      {"pow", line("e", "exp", "%a") + line("z", "pow", "%e, %b"),
       [](double a, double b) { return std::pow(std::exp(a), b); }},
      binary("max", [](double a, double b) { return std::fmax(a, b); }),
      binary("min", [](double a, double b) { return std::fmin(a, b); }),
      // SwiGLU's gate: silu(a) b, one kernel forward and backward parts.
      {"swiglu", line("s", "silu", "%a") + line("z", "mul", "%s, %b"),
       [](double a, double b) { return a * sigmoid(a) * b; }},
  };
}

/// The loss at parameters w1, w2 (row-major [5, 6]), in double.
double loss(const Case &c, const std::vector<double> &w1,
            const std::vector<double> &w2, const std::vector<float> &x,
            const std::vector<float> &y) {
  double sum = 0;
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < kOut; ++j) {
      double a = 0, b = 0;
      for (int64_t i = 0; i < kIn; ++i) {
        a += double(x[r * kIn + i]) * w1[i * kOut + j];
        b += double(x[r * kIn + i]) * w2[i * kOut + j];
      }
      double d = c.f(2 * a, 2 * b) - y[r * kOut + j];
      sum += d * d;
    }
  return sum / (kRows * kOut);
}

void checkGradients(const Case &c, unsigned k, gpipe::KernelCodegen codegen) {
  gpipe::testing::Compiled compiled =
      compile(model(c.chain), k, /*m=*/2, gpipe::RematPolicy::Full, codegen);
  ASSERT_TRUE(compiled.error.empty()) << compiled.error;
  ASSERT_FALSE(compiled.bundle.code.kernels.empty());
  rt::ExecutorConfig config;
  config.seed = 3;
  auto executor =
      gpipe::testing::makeExecutor(std::move(compiled.bundle), config);
  ASSERT_TRUE(executor);

  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  rt::Batch batch;
  std::vector<float> x(kRows * kIn), y(kRows * kOut);
  for (float &v : x)
    v = u(rng);
  for (float &v : y)
    v = u(rng);
  batch["x"] = rt::HostTensor::floats({kRows, kIn}, x);
  batch["y"] = rt::HostTensor::floats({kRows, kOut}, y);

  std::map<std::string, std::vector<double>> w;
  for (const char *name : {"w1", "w2"}) {
    const std::vector<float> *value = executor->parameter(name);
    ASSERT_TRUE(value);
    w[name].assign(value->begin(), value->end());
  }
  rt::StepResult step = executor->trainStep(batch);
  ASSERT_TRUE(step.ok()) << step.error;
  double expected = loss(c, w["w1"], w["w2"], x, y);
  EXPECT_NEAR(step.loss, expected, 1e-5 * std::max(1.0, std::fabs(expected)))
      << c.name;

  for (const char *name : {"w1", "w2"}) {
    const std::vector<float> *grad = executor->gradient(name);
    ASSERT_TRUE(grad);
    std::vector<double> numeric(grad->size());
    for (size_t i = 0; i < numeric.size(); ++i) {
      const double h = 1e-6;
      std::map<std::string, std::vector<double>> up = w, down = w;
      up[name][i] += h;
      down[name][i] -= h;
      numeric[i] = (loss(c, up["w1"], up["w2"], x, y) -
                    loss(c, down["w1"], down["w2"], x, y)) /
                   (2 * h);
    }
    EXPECT_TRUE(gpipe::testing::allClose(*grad, numeric, 2e-4, 2e-5))
        << c.name << ": gradient of " << name;
  }
}

class ElementwiseGradients : public ::testing::TestWithParam<Case> {};

TEST_P(ElementwiseGradients, MatchCentralDifferencesOnOneStage) {
  checkGradients(GetParam(), 1, gpipe::KernelCodegen::None);
}

TEST_P(ElementwiseGradients, MatchCentralDifferencesAcrossTwoStages) {
  checkGradients(GetParam(), 2, gpipe::KernelCodegen::None);
}

TEST_P(ElementwiseGradients, MatchCentralDifferencesWithNamedOpsFused) {
  checkGradients(GetParam(), 1, gpipe::KernelCodegen::Native);
}

INSTANTIATE_TEST_SUITE_P(GeneralOps, ElementwiseGradients,
                         ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

} // namespace
