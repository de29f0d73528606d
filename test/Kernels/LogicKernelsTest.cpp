//===- LogicKernelsTest.cpp - Comparisons, logic, where and casts ---------===//
//
// Kernels over f32, i32 and i1 elements (KernelElement: an i1 is stored as
// an i32 word, 0 or 1): the comparisons (false with a NaN), and/or/not,
// where and its gradients, and the casts (f32 to i32 toward zero and
// saturating, NaN 0; to i1 x != 0, NaN true). Each is compiled for the CPU
// (every variant this CPU runs) and as the PTX kernels' bodies on the host,
// and compared bit for bit with C++'s own definitions over edge values
// (+-0, +-inf, NaN, +-2^31, halves, denormals) and random ones.
//
//===----------------------------------------------------------------------===//

#include "NativeKernelsSupport.h"
#include "PtxHostKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace gpipe;
using namespace gpipe::testing;

namespace {

using K = KernelElement;
constexpr float kInf = std::numeric_limits<float>::infinity();

/// A 1-D kernel of one step over inputs of `types` into `out`, and what its
/// output word must be given the inputs' words.
struct Case {
  std::string step;
  std::vector<K> types;
  K out;
  std::function<uint32_t(const std::vector<uint32_t> &)> expected;
};

float asFloat(uint32_t w) {
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
uint32_t word(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  return w;
}
uint32_t word(int32_t i) { return uint32_t(i); }

/// f32 to i32 as the kernels define it.
int32_t toInt(float x) {
  if (std::isnan(x))
    return 0;
  if (x >= 2147483648.0f)
    return std::numeric_limits<int32_t>::max();
  if (x <= -2147483648.0f)
    return std::numeric_limits<int32_t>::min();
  return int32_t(x); // toward zero
}

std::vector<Case> cases() {
  auto cmp = [](std::string name, std::function<bool(float, float)> f) {
    return Case{name, {K::F32, K::F32}, K::I1, [f](const auto &w) {
                  return uint32_t(f(asFloat(w[0]), asFloat(w[1])));
                }};
  };
  return {
      cmp("eq", [](float a, float b) { return a == b; }),
      cmp("lt", [](float a, float b) { return a < b; }),
      cmp("le", [](float a, float b) { return a <= b; }),
      cmp("gt", [](float a, float b) { return a > b; }),
      cmp("ge", [](float a, float b) { return a >= b; }),
      {"and", {K::I1, K::I1}, K::I1,
       [](const auto &w) { return uint32_t(w[0] && w[1]); }},
      {"or", {K::I1, K::I1}, K::I1,
       [](const auto &w) { return uint32_t(w[0] || w[1]); }},
      {"not", {K::I1}, K::I1, [](const auto &w) { return uint32_t(!w[0]); }},
      {"where", {K::I1, K::F32, K::F32}, K::F32,
       [](const auto &w) { return w[0] ? w[1] : w[2]; }},
      {"where_lhs_grad", {K::F32, K::I1}, K::F32,
       [](const auto &w) { return w[1] ? w[0] : word(0.0f); }},
      {"where_rhs_grad", {K::F32, K::I1}, K::F32,
       [](const auto &w) { return w[1] ? word(0.0f) : w[0]; }},
      {"cast_i32", {K::F32}, K::I32,
       [](const auto &w) { return word(toInt(asFloat(w[0]))); }},
      {"cast_i1", {K::F32}, K::I1,
       [](const auto &w) { return uint32_t(asFloat(w[0]) != 0.0f); }},
      {"cast_f32", {K::I32}, K::F32,
       [](const auto &w) { return word(float(int32_t(w[0]))); }},
      {"cast_f32", {K::I1}, K::F32,
       [](const auto &w) { return word(float(w[0])); }},
      {"cast_i1", {K::I32}, K::I1,
       [](const auto &w) { return uint32_t(w[0] != 0); }},
      {"cast_i32", {K::I1}, K::I32, [](const auto &w) { return w[0]; }},
  };
}

KernelSpec specOf(const Case &c) {
  KernelSpec spec = KernelSpec::elementwise(unsigned(c.types.size()));
  llvm::SmallVector<unsigned> operands;
  for (unsigned k = 0; k < c.types.size(); ++k)
    operands.push_back(k);
  spec.steps.push_back({c.step, operands});
  spec.inputTypes = c.types;
  spec.outputType = c.out;
  return spec;
}

/// `n` words of `type`: edge values first, then random ones.
std::vector<uint32_t> inputWords(K type, size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> words(n);
  if (type == K::I1) {
    for (uint32_t &w : words)
      w = rng() & 1;
    return words;
  }
  if (type == K::I32) {
    const int32_t edges[] = {0, 1, -1, 7, -7, 16777217, -16777217,
                             std::numeric_limits<int32_t>::max(),
                             std::numeric_limits<int32_t>::min()};
    for (size_t i = 0; i < n; ++i)
      words[i] = word(i < std::size(edges) ? edges[(i + seed) % std::size(edges)]
                                           : int32_t(rng()));
    return words;
  }
  const float edges[] = {0.0f,          -0.0f,        kInf,      -kInf,
                         std::nanf(""), 1.0f,         -1.0f,     2.5f,
                         -2.5f,         0.75f,        -0.75f,    2147483648.0f,
                         -2147483648.0f, 2147483520.0f, 3e9f,    -3e9f,
                         1e-40f,        -1e-40f,      1.0f,      2.5f};
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  for (size_t i = 0; i < n; ++i)
    words[i] = word(i < std::size(edges) ? edges[(i * 7 + seed) % std::size(edges)]
                                         : uniform(rng));
  return words;
}

constexpr size_t kCount = 83; // full vector tiles and a remainder

struct MemRef1D {
  void *allocated, *aligned;
  int64_t offset, size, stride;
};

void expectWords(const Case &c, const std::vector<std::vector<uint32_t>> &in,
                 const std::vector<uint32_t> &out, const std::string &where) {
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<uint32_t> args;
    for (const auto &words : in)
      args.push_back(words[i]);
    ASSERT_EQ(out[i], c.expected(args))
        << where << " " << c.step << " element " << i << " (input words "
        << args[0] << (args.size() > 1 ? ", " + std::to_string(args[1]) : "")
        << ")";
  }
}

std::vector<NamedKernel> named(const std::vector<Case> &all) {
  std::vector<NamedKernel> kernels;
  for (size_t i = 0; i < all.size(); ++i)
    kernels.push_back({"logic_" + std::to_string(i), specOf(all[i])});
  return kernels;
}

std::vector<std::vector<uint32_t>> inputsOf(const Case &c) {
  std::vector<std::vector<uint32_t>> in;
  for (size_t k = 0; k < c.types.size(); ++k)
    in.push_back(inputWords(c.types[k], kCount, unsigned(3 + 5 * k)));
  return in;
}

TEST(LogicKernels, CpuVariantsMatchTheDefinitions) {
  const std::vector<Case> all = cases();
  Compiled compiled = compile(named(all));
  ASSERT_FALSE(compiled.variants.empty()) << compiled.diagnostics;
  for (const NativeCodeVariant &variant : compiled.variants) {
    if (!cpuRuns(variant.isa))
      continue;
    Library library(variant.sharedObject);
    ASSERT_TRUE(library.handle) << library.error;
    for (size_t i = 0; i < all.size(); ++i) {
      std::vector<std::vector<uint32_t>> in = inputsOf(all[i]);
      std::vector<uint32_t> out(kCount, 0xdeadbeef);
      std::vector<MemRef1D> descriptors;
      for (auto &words : in)
        descriptors.push_back(
            {words.data(), words.data(), 0, int64_t(kCount), 1});
      descriptors.push_back({out.data(), out.data(), 0, int64_t(kCount), 1});
      std::vector<void *> args;
      for (MemRef1D &d : descriptors)
        args.push_back(&d);
      Entry entry = library.entry("logic_" + std::to_string(i));
      ASSERT_TRUE(entry);
      entry(args.data());
      expectWords(all[i], in, out, variant.isa);
    }
  }
}

TEST(LogicKernels, PtxBodiesMatchTheDefinitions) {
  const std::vector<Case> all = cases();
  HostKernels host(named(all));
  ASSERT_TRUE(host.engine) << host.diagnostics;
  for (size_t i = 0; i < all.size(); ++i) {
    std::vector<std::vector<uint32_t>> in = inputsOf(all[i]);
    std::vector<uint32_t> out(kCount, 0xdeadbeef);
    // The kernels move 4-byte words; the launcher passes them as floats.
    std::vector<float *> pointers;
    for (auto &words : in)
      pointers.push_back(reinterpret_cast<float *>(words.data()));
    pointers.push_back(reinterpret_cast<float *>(out.data()));
    host.run("logic_" + std::to_string(i), pointers, {int64_t(kCount)}, 1);
    if (HasFatalFailure())
      return;
    expectWords(all[i], in, out, "ptx");
  }
}

TEST(LogicKernels, AReductionIntoAnIntegerIsRefused) {
  KernelSpec spec;
  spec.numInputs = 1;
  spec.rank = 2;
  spec.inputDims = {{0, 1}};
  spec.outputDims = {0};
  spec.steps = {{"reduce_sum", {0}}};
  spec.outputType = K::I32;
  Compiled compiled = compile({{"bad", spec}});
  EXPECT_TRUE(compiled.variants.empty());
  EXPECT_NE(compiled.diagnostics.find("reduces into i32 (reductions are f32)"),
            std::string::npos)
      << compiled.diagnostics;
}

} // namespace
