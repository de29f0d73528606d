//===- NativeKernelsTest.cpp - Generated kernels against a reference -----===//
//
// Compiles kernels with gpipe::compileNativeKernels, loads every variant this
// CPU can run (with dlopen, as a program would: not through the runtime) and
// compares each element with a double-precision evaluation of the runtime's
// definitions (DeviceKernels.h), written here independently. Inputs are
// random over [-8, 8] plus the edges: +-0, +-inf, NaN, large magnitudes.
// Then every general op's forward and its input gradients, as
// gpipe-differentiate writes them, against PyTorch autograd on committed
// fixtures.
//
//===----------------------------------------------------------------------===//

#include "NativeKernelsSupport.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <dlfcn.h>
#include <functional>
#include <limits>
#include <map>
#include <random>

using namespace gpipe;
using namespace gpipe::testing;

namespace {

/// MLIR's 1-D memref descriptor, the generated entries' argument.
struct MemRef1D {
  float *allocated, *aligned;
  int64_t offset, size, stride;
};

/// Runs `entry` on inputs of n elements each.
std::vector<float> run(Entry entry, std::vector<std::vector<float>> &inputs,
                       size_t n) {
  std::vector<float> out(n, -12345.0f);
  std::vector<MemRef1D> descs;
  for (std::vector<float> &in : inputs)
    descs.push_back({in.data(), in.data(), 0, int64_t(n), 1});
  descs.push_back({out.data(), out.data(), 0, int64_t(n), 1});
  std::vector<void *> args;
  for (MemRef1D &d : descs)
    args.push_back(&d);
  entry(args.data());
  return out;
}

// The reference, in double: the runtime's definitions (DeviceKernels.h),
// with 1 + tanh u written 2 / (1 + e), e = exp(min(-2u, 88.376...)), which
// also fixes the infinities (gelu(-inf) = -inf).
constexpr double kC = 0.7978845608028654, kA = 0.044715,
                 kExpMax = 88.3762626647949;
double geluE(double x) {
  return std::exp(std::fmin(-2 * kC * (x + kA * x * x * x), kExpMax));
}
double gelu(double x) { return 0.5 * x * (2 / (1 + geluE(x))); }
double geluSlope(double x) {
  double e = geluE(x), inv = 1 / (1 + e);
  double sech2 = 4 * (e * inv) * inv;
  return 0.5 * (2 * inv) + 0.5 * x * sech2 * kC * (1 + 3 * kA * x * x);
}
double phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double geluErf(double x) { return x * phi(x); }
double geluErfSlope(double x) {
  return phi(x) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

using Reference = std::function<double(const std::vector<double> &)>;
const std::map<std::string, Reference> &references() {
  static const std::map<std::string, Reference> table = {
      {"relu", [](auto &a) { return a[0] <= 0 ? 0.0 : a[0]; }},
      {"relu_grad", [](auto &a) { return a[1] <= 0 ? 0.0 : a[0]; }},
      {"add", [](auto &a) { return a[0] + a[1]; }},
      {"add_grads", [](auto &a) { return a[0] + a[1]; }},
      {"tanh", [](auto &a) { return std::tanh(a[0]); }},
      {"tanh_grad", [](auto &a) { return a[0] * (1 - a[1] * a[1]); }},
      {"gelu", [](auto &a) { return gelu(a[0]); }},
      {"gelu_grad", [](auto &a) { return a[0] * geluSlope(a[1]); }},
      {"gelu_erf", [](auto &a) { return geluErf(a[0]); }},
      {"gelu_erf_grad", [](auto &a) { return a[0] * geluErfSlope(a[1]); }},
      // The general ops (GPipeElementwiseOps.td) and their gradients.
      {"neg", [](auto &a) { return -a[0]; }},
      {"abs", [](auto &a) { return std::fabs(a[0]); }},
      {"exp", [](auto &a) { return std::exp(a[0]); }},
      {"log", [](auto &a) { return std::log(a[0]); }},
      {"sqrt", [](auto &a) { return std::sqrt(a[0]); }},
      {"rsqrt", [](auto &a) { return 1 / std::sqrt(a[0]); }},
      {"reciprocal", [](auto &a) { return 1 / a[0]; }},
      {"sigmoid", [](auto &a) { return 1 / (1 + std::exp(-a[0])); }},
      {"silu", [](auto &a) { return a[0] / (1 + std::exp(-a[0])); }},
      {"erf", [](auto &a) { return std::erf(a[0]); }},
      {"sin", [](auto &a) { return std::sin(a[0]); }},
      {"cos", [](auto &a) { return std::cos(a[0]); }},
      {"sub", [](auto &a) { return a[0] - a[1]; }},
      {"mul", [](auto &a) { return a[0] * a[1]; }},
      {"div", [](auto &a) { return a[0] / a[1]; }},
      {"pow", [](auto &a) { return std::pow(a[0], a[1]); }},
      {"max",
       [](auto &a) {
         return std::isnan(a[0]) || std::isnan(a[1]) ? NAN
                                                     : std::fmax(a[0], a[1]);
       }},
      {"min",
       [](auto &a) {
         return std::isnan(a[0]) || std::isnan(a[1]) ? NAN
                                                     : std::fmin(a[0], a[1]);
       }},
      {"abs_grad",
       [](auto &a) {
         double x = a[1];
         return a[0] * (std::isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0);
       }},
      {"exp_grad", [](auto &a) { return a[0] * a[1]; }},
      {"log_grad", [](auto &a) { return a[0] / a[1]; }},
      {"sqrt_grad", [](auto &a) { return a[0] / (2 * a[1]); }},
      {"rsqrt_grad", [](auto &a) { return -0.5 * a[0] * a[1] * a[1] * a[1]; }},
      {"reciprocal_grad", [](auto &a) { return -a[0] * a[1] * a[1]; }},
      {"sigmoid_grad", [](auto &a) { return a[0] * a[1] * (1 - a[1]); }},
      {"silu_grad",
       [](auto &a) {
         double s = 1 / (1 + std::exp(-a[1]));
         return a[0] * s * (1 + a[1] * (1 - s));
       }},
      {"erf_grad",
       [](auto &a) {
         return a[0] * 2 / std::sqrt(M_PI) * std::exp(-a[1] * a[1]);
       }},
      {"sin_grad", [](auto &a) { return a[0] * std::cos(a[1]); }},
      {"cos_grad", [](auto &a) { return -a[0] * std::sin(a[1]); }},
      {"div_rhs_grad", [](auto &a) { return -a[0] * a[1] / a[2]; }},
      {"pow_lhs_grad",
       [](auto &a) {
         return a[2] == 0 ? 0.0 : a[0] * a[2] * std::pow(a[1], a[2] - 1);
       }},
      {"pow_rhs_grad",
       [](auto &a) {
         return a[1] == 0 && a[2] >= 0
                    ? 0.0
                    : a[0] * std::pow(a[1], a[2]) * std::log(a[1]);
       }},
      {"max_lhs_grad",
       [](auto &a) {
         return a[1] < a[2] ? 0.0 : a[1] == a[2] ? a[0] / 2 : a[0];
       }},
      {"min_lhs_grad",
       [](auto &a) {
         return a[1] > a[2] ? 0.0 : a[1] == a[2] ? a[0] / 2 : a[0];
       }},
      // Broadcasting and the reductions' gradients (a mean's over 3).
      {"broadcast_to", [](auto &a) { return a[0]; }},
      {"reduce_sum_grad", [](auto &a) { return a[0]; }},
      {"reduce_mean_grad", [](auto &a) { return a[0] / 3; }},
      {"max_tie", [](auto &a) { return a[0] == a[1] ? 1.0 : 0.0; }},
      {"reduce_max_grad",
       [](auto &a) { return a[1] == a[2] ? a[0] / a[3] : 0.0; }},
  };
  return table;
}

/// The kernel's value at element i, in double, each step rounded to float
/// as the kernel stores nothing wider between steps.
double evaluate(const KernelSpec &spec,
                const std::vector<std::vector<float>> &inputs, size_t i) {
  std::vector<double> values;
  for (const std::vector<float> &in : inputs)
    values.push_back(in[i]);
  for (const KernelStep &step : spec.steps) {
    std::vector<double> args;
    for (unsigned operand : step.operands)
      args.push_back(values[operand]);
    values.push_back(float(references().at(step.op)(args)));
  }
  return values.back();
}

std::vector<float> sample(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
  const float edges[] = {0.0f,
                         -0.0f,
                         std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity(),
                         std::nanf(""),
                         100.0f,
                         -100.0f,
                         30.0f,
                         -30.0f,
                         1e-30f};
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i)
    x[i] = i % 7 == 3 ? edges[(i / 7) % std::size(edges)] : uniform(rng);
  return x;
}

/// Whether `got` is `want` up to `tolerance`, relative above 1 and absolute
/// below; NaN only for NaN, infinities exactly.
::testing::AssertionResult close(float got, double want, double tolerance) {
  if (std::isnan(want) || std::isnan(got))
    return std::isnan(want) == std::isnan(got) ? ::testing::AssertionSuccess()
                                               : ::testing::AssertionFailure()
                                                     << "got " << got
                                                     << ", want " << want;
  if (std::isinf(want) || std::isinf(got))
    return double(got) == want ? ::testing::AssertionSuccess()
                               : ::testing::AssertionFailure()
                                     << "got " << got << ", want " << want;
  double error = std::abs(double(got) - want) / std::max(1.0, std::abs(want));
  if (error <= tolerance)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << got << ", want " << want << " (error " << error << ")";
}

/// One step of `op` over `arity` inputs; clip and its gradient with the
/// bounds [-1, 1.5] unless `constants` says others.
KernelSpec single(const std::string &op, unsigned arity,
                  std::vector<std::pair<std::string, double>> constants = {}) {
  KernelSpec spec = KernelSpec::elementwise(arity);
  KernelStep step{op, {}};
  for (unsigned i = 0; i < arity; ++i)
    step.operands.push_back(i);
  if (constants.empty() && op.rfind("clip", 0) == 0)
    constants = {{"max", 1.5}, {"min", -1.0}};
  if (constants.empty() && op == "reduce_mean_grad")
    constants = {{"count", 3}};
  step.constants = std::move(constants);
  spec.steps.push_back(step);
  return spec;
}

/// add(in0, in1) -> gelu -> tanh_grad(in2, .) -> relu -> add(., in0): five
/// steps over three inputs, one read twice.
KernelSpec chain() {
  KernelSpec spec = KernelSpec::elementwise(3);
  spec.steps = {{"add", {0, 1}},
                {"gelu", {3}},
                {"tanh_grad", {2, 4}},
                {"relu", {5}},
                {"add", {6, 0}}};
  return spec;
}

} // namespace

TEST(NativeKernels, MatchTheReferenceOnEveryVariantThisCpuRuns) {
  std::vector<NamedKernel> kernels;
  for (auto &[op, reference] : references()) {
    unsigned arity = op.find("_grad") != std::string::npos ? 2 : 1;
    if (op == "add" || op == "add_grads" || op == "sub" || op == "mul" ||
        op == "div" || op == "pow" || op == "max" || op == "min")
      arity = 2;
    if (op == "div_rhs_grad" || op.rfind("pow_", 0) == 0 ||
        op == "max_lhs_grad" || op == "min_lhs_grad")
      arity = 3;
    if (op == "max_tie")
      arity = 2;
    if (op == "reduce_max_grad")
      arity = 4;
    if (op == "reduce_sum_grad" || op == "reduce_mean_grad")
      arity = 1;
    kernels.push_back({"gpipe_test_" + op, single(op, arity)});
  }
  kernels.push_back({"gpipe_test_chain", chain()});
  Compiled compiled = compile(kernels);
  ASSERT_EQ(compiled.variants.size(), nativeIsaVariants().size())
      << compiled.diagnostics;

  std::mt19937 rng(7);
  unsigned variantsRun = 0;
  for (const NativeCodeVariant &variant : compiled.variants) {
    if (!cpuRuns(variant.isa))
      continue;
    ++variantsRun;
    Library library(variant.sharedObject);
    ASSERT_TRUE(library.handle) << variant.isa << ": " << library.error;
    for (const NamedKernel &kernel : kernels) {
      Entry entry = library.entry(kernel.symbol);
      ASSERT_TRUE(entry) << kernel.symbol;
      for (size_t n :
           {size_t(0), size_t(1), size_t(7), size_t(37), size_t(1000)}) {
        std::vector<std::vector<float>> inputs;
        for (unsigned i = 0; i < kernel.spec.numInputs; ++i)
          inputs.push_back(sample(n, rng));
        std::vector<float> out = run(entry, inputs, n);
        for (size_t i = 0; i < n; ++i) {
          double want = evaluate(kernel.spec, inputs, i);
          // Polynomial exp/tanh/erfc: a few float ulps; the chain compounds.
          ASSERT_TRUE(
              close(out[i], want, kernel.spec.steps.size() > 1 ? 3e-5 : 4e-6))
              << variant.isa << " " << kernel.spec.describe() << " at " << i
              << " of " << n << ", inputs " << inputs[0][i]
              << (inputs.size() > 1 ? ", " + std::to_string(inputs[1][i]) : "");
        }
      }
    }
  }
  EXPECT_GE(variantsRun, 1u);
}

// A thread's chunk may start anywhere: the vector body and the scalar
// remainder must give each element the same bits.
TEST(NativeKernels, AnElementsBitsDoNotDependOnWhereTheCallStarts) {
  std::vector<NamedKernel> kernels = {{"gpipe_test_chain", chain()}};
  Compiled compiled = compile(kernels);
  ASSERT_FALSE(compiled.variants.empty()) << compiled.diagnostics;
  std::mt19937 rng(11);
  for (const NativeCodeVariant &variant : compiled.variants) {
    if (!cpuRuns(variant.isa))
      continue;
    Library library(variant.sharedObject);
    ASSERT_TRUE(library.handle) << library.error;
    Entry entry = library.entry("gpipe_test_chain");
    const size_t n = 200;
    std::vector<std::vector<float>> inputs = {sample(n, rng), sample(n, rng),
                                              sample(n, rng)};
    std::vector<float> whole = run(entry, inputs, n);
    for (size_t start = 1; start < 40; ++start) {
      std::vector<std::vector<float>> shifted;
      for (auto &in : inputs)
        shifted.emplace_back(in.begin() + start, in.end());
      std::vector<float> part = run(entry, shifted, n - start);
      for (size_t i = 0; i < part.size(); ++i)
        ASSERT_EQ(std::memcmp(&part[i], &whole[start + i], 4), 0)
            << variant.isa << ": element " << start + i << " from " << start;
    }
  }
}

TEST(NativeKernels, AStepWithTheWrongOperandsIsRefused) {
  KernelSpec wrongCount = single("mul", 1);
  Compiled compiled = compile({{"gpipe_test_bad", wrongCount}});
  EXPECT_TRUE(compiled.variants.empty());
  EXPECT_NE(compiled.diagnostics.find(
                "kernel 'gpipe_test_bad_body': 'mul' takes 2 operands, got 1"),
            std::string::npos)
      << compiled.diagnostics;

  KernelSpec later = single("neg", 1);
  later.steps[0].operands = {1}; // step 0's own value
  compiled = compile({{"gpipe_test_later", later}});
  EXPECT_TRUE(compiled.variants.empty());
  EXPECT_NE(compiled.diagnostics.find("kernel 'gpipe_test_later_body': step 0 "
                                      "reads value 1, which is not computed "
                                      "before it"),
            std::string::npos)
      << compiled.diagnostics;
}

TEST(NativeKernels, AnUnknownStepIsRefusedWithItsName) {
  Compiled compiled = compile({{"gpipe_test_bad", single("softmax", 1)}});
  EXPECT_TRUE(compiled.variants.empty());
  EXPECT_NE(compiled.diagnostics.find(
                "'softmax' is not an element-wise op a kernel computes"),
            std::string::npos)
      << compiled.diagnostics;
}

//===----------------------------------------------------------------------===//
// Against PyTorch autograd (test/Kernels/Inputs/elementwise-autograd.json,
// scripts/pytorch/make-elementwise-fixtures.sh)
//===----------------------------------------------------------------------===//

namespace {

/// Each general op's input gradients as gpipe-differentiate writes them
/// (Transforms/ElementwiseGradients.cpp): per input, a kernel step over the
/// named values dy, a (the first input), b (the second) and y (the forward's
/// result), or "dy" itself.
const std::map<std::string, std::vector<std::string>> &gradientRules() {
  static const std::map<std::string, std::vector<std::string>> rules = {
      {"neg", {"neg dy"}},
      {"abs", {"abs_grad dy a"}},
      {"clip", {"clip_grad dy a"}},
      {"exp", {"exp_grad dy y"}},
      {"log", {"log_grad dy a"}},
      {"sqrt", {"sqrt_grad dy y"}},
      {"rsqrt", {"rsqrt_grad dy y"}},
      {"reciprocal", {"reciprocal_grad dy y"}},
      {"sigmoid", {"sigmoid_grad dy y"}},
      {"silu", {"silu_grad dy a"}},
      {"erf", {"erf_grad dy a"}},
      {"sin", {"sin_grad dy a"}},
      {"cos", {"cos_grad dy a"}},
      {"sub", {"dy", "neg dy"}},
      {"mul", {"mul dy b", "mul dy a"}},
      {"div", {"div dy b", "div_rhs_grad dy y b"}},
      {"pow", {"pow_lhs_grad dy a b", "pow_rhs_grad dy a b"}},
      {"max", {"max_lhs_grad dy a b", "max_lhs_grad dy b a"}},
      {"min", {"min_lhs_grad dy a b", "min_lhs_grad dy b a"}},
  };
  return rules;
}

std::vector<float> floatsOf(const llvm::json::Value *value) {
  std::vector<float> out;
  for (const llvm::json::Value &v : *value->getAsArray())
    out.push_back(float(*v.getAsNumber()));
  return out;
}

std::vector<double> doublesOf(const llvm::json::Value *value) {
  std::vector<double> out;
  for (const llvm::json::Value &v : *value->getAsArray())
    out.push_back(*v.getAsNumber());
  return out;
}

} // namespace

TEST(NativeKernels, MatchPyTorchAutogradOnCommittedFixtures) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(GPIPE_KERNEL_FIXTURES_DIR
                                  "/elementwise-autograd.json");
  ASSERT_TRUE(file) << "no fixture file";
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*file)->getBuffer());
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  const llvm::json::Object *ops = parsed->getAsObject()->getObject("ops");
  ASSERT_TRUE(ops);
  ASSERT_EQ(ops->size(), gradientRules().size());

  // Each rule's kernel (a forward or one gradient), compiled together.
  std::vector<NamedKernel> kernels;
  std::map<std::string, size_t> kernelOf;
  auto add = [&](const std::string &key, const std::string &op,
                 unsigned arity) {
    kernelOf[key] = kernels.size();
    kernels.push_back(
        {"gpipe_fixture_" + std::to_string(kernels.size()), single(op, arity)});
  };
  for (auto &[name, rules] : gradientRules()) {
    add(name, name, rules.size());
    for (const std::string &rule : rules) {
      llvm::SmallVector<llvm::StringRef> words;
      llvm::StringRef(rule).split(words, ' ');
      if (words.size() > 1)
        add(rule, words[0].str(), words.size() - 1);
    }
  }
  Compiled compiled = compile(kernels);
  ASSERT_FALSE(compiled.variants.empty()) << compiled.diagnostics;

  for (const NativeCodeVariant &variant : compiled.variants) {
    if (!cpuRuns(variant.isa))
      continue;
    Library library(variant.sharedObject);
    ASSERT_TRUE(library.handle) << library.error;
    auto runKernel = [&](const std::string &key,
                         std::vector<std::vector<float>> inputs) {
      return run(library.entry(kernels[kernelOf.at(key)].symbol), inputs,
                 inputs[0].size());
    };
    for (auto &[name, rules] : gradientRules()) {
      const llvm::json::Object *fixture = ops->getObject(name);
      ASSERT_TRUE(fixture) << name;
      std::map<std::string, std::vector<float>> values;
      const llvm::json::Array *inputs = fixture->getArray("inputs");
      values["a"] = floatsOf(&(*inputs)[0]);
      if (inputs->size() > 1)
        values["b"] = floatsOf(&(*inputs)[1]);
      values["dy"] = floatsOf(fixture->get("dy"));
      std::vector<std::vector<float>> forwardInputs = {values["a"]};
      if (inputs->size() > 1)
        forwardInputs.push_back(values["b"]);
      values["y"] = runKernel(name, forwardInputs);
      std::vector<double> y = doublesOf(fixture->get("y"));
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_TRUE(close(values["y"][i], y[i], 4e-6))
            << variant.isa << " " << name << " forward at " << i;

      const llvm::json::Array *grads = fixture->getArray("grads");
      ASSERT_EQ(grads->size(), rules.size()) << name;
      for (size_t g = 0; g < rules.size(); ++g) {
        llvm::SmallVector<llvm::StringRef> words;
        llvm::StringRef(rules[g]).split(words, ' ');
        std::vector<float> got = values["dy"];
        if (words.size() > 1) {
          std::vector<std::vector<float>> args;
          for (llvm::StringRef word : llvm::drop_begin(words))
            args.push_back(values.at(word.str()));
          got = runKernel(rules[g], args);
        }
        std::vector<double> want = doublesOf(&(*grads)[g]);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_TRUE(close(got[i], want[i], 2e-5))
              << variant.isa << " " << name << ": gradient of input " << g
              << " at " << i;
      }
    }
  }
}
