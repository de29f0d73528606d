//===- BroadcastKernelsTest.cpp - Generated N-D kernels against loops -----===//
//
// Kernels over iteration spaces of several dimensions (KernelToLinalg.h):
// inputs that lack dimensions (broadcast) and reductions (sum, mean, max)
// over the dimensions the output lacks. Each variant this CPU runs is called
// with MLIR's strided descriptors, as the runtime calls it, and compared with
// plain loops here in double over the same points. Sizes are chosen around
// the vector widths (8, 16, 32), so that tiles are full, partial and absent.
//
//===----------------------------------------------------------------------===//

#include "NativeKernelsSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

using namespace gpipe;
using namespace gpipe::testing;

namespace {

/// Row-major contiguous descriptor of `data` with the space's sizes at
/// `dims`.
MemRefND describe(float *data, llvm::ArrayRef<unsigned> dims,
                  llvm::ArrayRef<int64_t> space) {
  MemRefND d{data, data, 0, {}};
  int64_t stride = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    d.sizesAndStrides[k] = space[dims[k]];
    d.sizesAndStrides[dims.size() + k] = stride;
    stride *= space[dims[k]];
  }
  return d;
}

/// The steps this file uses, in double.
double stepValue(const KernelStep &step, const std::vector<double> &a) {
  const std::string &op = step.op;
  if (op == "add")
    return a[0] + a[1];
  if (op == "mul")
    return a[0] * a[1];
  if (op == "sub")
    return a[0] - a[1];
  if (op == "exp")
    return std::exp(a[0]);
  if (op == "rsqrt")
    return 1 / std::sqrt(a[0]);
  if (op == "broadcast_to" || op == "reduce_sum_grad")
    return a[0];
  if (op == "max_tie")
    return a[0] == a[1] ? 1.0 : 0.0;
  if (op == "reduce_max_grad")
    return a[1] == a[2] ? a[0] / a[3] : 0.0;
  ADD_FAILURE() << "no reference for " << op;
  return 0;
}

/// What the kernel writes, in double: its steps at every point of the
/// space, each rounded to float as the kernel keeps floats between steps,
/// then reduced into the output's elements (sum, mean or max) or written.
std::vector<double> reference(const KernelSpec &spec,
                              llvm::ArrayRef<int64_t> space,
                              const std::vector<std::vector<float>> &inputs) {
  const bool reduces = spec.reduces();
  const std::string kind = reduces ? spec.steps.back().op : "";
  std::vector<double> out(countOf(spec.outputDims, space),
                          kind == "reduce_max"
                              ? -std::numeric_limits<double>::infinity()
                              : 0.0);
  std::vector<int64_t> point(space.size(), 0);
  for (int64_t flat = 0; flat < countOf(llvm::to_vector(llvm::seq<unsigned>(
                                            0, unsigned(space.size()))),
                                        space);
       ++flat) {
    int64_t rest = flat;
    for (size_t d = space.size(); d-- > 0;) {
      point[d] = rest % space[d];
      rest /= space[d];
    }
    std::vector<double> values;
    for (unsigned k = 0; k < spec.numInputs; ++k)
      values.push_back(inputs[k][indexAt(spec.inputDims[k], space, point)]);
    size_t pointwise = spec.steps.size() - (reduces ? 1 : 0);
    for (size_t i = 0; i < pointwise; ++i) {
      std::vector<double> args;
      for (unsigned operand : spec.steps[i].operands)
        args.push_back(values[operand]);
      values.push_back(float(stepValue(spec.steps[i], args)));
    }
    double v = reduces ? values[spec.steps.back().operands[0]] : values.back();
    double &slot = out[indexAt(spec.outputDims, space, point)];
    if (kind == "reduce_max")
      slot = std::isnan(slot) || std::isnan(v) ? NAN : std::max(slot, v);
    else if (reduces)
      slot += v;
    else
      slot = v;
  }
  if (kind == "reduce_mean")
    for (double &v : out)
      v /= spec.steps.back().constant("count");
  return out;
}

std::vector<float> run(Entry entry, const KernelSpec &spec,
                       llvm::ArrayRef<int64_t> space,
                       std::vector<std::vector<float>> &inputs) {
  std::vector<float> out(countOf(spec.outputDims, space), -12345.0f);
  std::vector<MemRefND> descriptors;
  for (unsigned k = 0; k < spec.numInputs; ++k)
    descriptors.push_back(describe(inputs[k].data(), spec.inputDims[k], space));
  descriptors.push_back(describe(out.data(), spec.outputDims, space));
  std::vector<void *> args;
  for (MemRefND &d : descriptors)
    args.push_back(&d);
  entry(args.data());
  return out;
}

struct Case {
  std::string name;
  KernelSpec spec;
  /// Spaces to run it over.
  std::vector<std::vector<int64_t>> spaces;
};

KernelSpec kernel(unsigned rank, std::vector<llvm::SmallVector<unsigned>> in,
                  llvm::SmallVector<unsigned> out,
                  std::vector<KernelStep> steps) {
  KernelSpec spec;
  spec.rank = rank;
  spec.numInputs = in.size();
  spec.inputDims = std::move(in);
  spec.outputDims = std::move(out);
  spec.steps = std::move(steps);
  return spec;
}

std::vector<Case> cases() {
  std::vector<std::vector<int64_t>> flat = {{1, 1}, {3, 37}, {5, 16}, {2, 70}};
  return {
      // x * w[col] + b[row]: a scale per feature and a bias per row.
      {"scale_and_shift",
       kernel(2, {{0, 1}, {1}, {0}}, {0, 1},
              {{"mul", {0, 1}}, {"add", {3, 2}}}),
       flat},
      // exp summed over each row (softmax's denominator).
      {"row_sum", kernel(2, {{0, 1}}, {0}, {{"exp", {0}}, {"reduce_sum", {1}}}),
       flat},
      // A bias gradient: dy x summed over the rows.
      {"column_sum",
       kernel(2, {{0, 1}, {0, 1}}, {1},
              {{"mul", {0, 1}}, {"reduce_sum", {2}}}),
       flat},
      // RMSNorm's mean of squares over the last axis.
      {"row_mean_of_squares",
       kernel(2, {{0, 1}}, {0},
              {{"mul", {0, 0}}, {"reduce_mean", {1}, {{"count", 0}}}}),
       flat},
      // The maximum over the middle of three dimensions.
      {"middle_max", kernel(3, {{0, 1, 2}}, {0, 2}, {{"reduce_max", {0}}}),
       {{2, 3, 17}, {1, 40, 1}, {4, 1, 33}}},
      // Everything summed into one number.
      {"total", kernel(1, {{0}}, {}, {{"reduce_sum", {0}}}),
       {{1}, {31}, {1000}}},
      // reduce_max's gradient: dy[row] where x is the row's maximum, over
      // the count of ties.
      {"max_grad",
       kernel(2, {{0}, {0, 1}, {0}, {0}}, {0, 1},
              {{"reduce_max_grad", {0, 1, 2, 3}}}),
       flat},
      // A transposed input (its dimensions in its own order) times a
      // broadcast one: out[i, j, k] = a[j, i, k] * b[k].
      {"transposed",
       kernel(3, {{1, 0, 2}, {2}}, {0, 1, 2}, {{"mul", {0, 1}}}),
       {{2, 3, 17}, {4, 1, 40}, {3, 5, 1}}},
      // A broadcast through an inner step: (a[row] - b[col]) * c.
      {"outer_difference",
       kernel(2, {{0}, {1}, {0, 1}}, {0, 1},
              {{"sub", {0, 1}}, {"mul", {3, 2}}}),
       flat},
  };
}

} // namespace

TEST(BroadcastKernels, MatchLoopsOnEveryVariantThisCpuRuns) {
  std::vector<Case> all = cases();
  std::vector<NamedKernel> kernels;
  for (Case &c : all) {
    // A mean's count is that of the reduced dimension: fixed per space, so
    // each space below sets it before comparing (the kernel divides by the
    // constant it was compiled with: 37 here).
    for (KernelStep &step : c.spec.steps)
      if (step.op == "reduce_mean")
        step.constants = {{"count", 37}};
    kernels.push_back({"gpipe_test_" + c.name, c.spec});
  }
  Compiled compiled = compile(kernels);
  ASSERT_EQ(compiled.variants.size(), nativeIsaVariants().size())
      << compiled.diagnostics;

  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  unsigned variantsRun = 0;
  for (const NativeCodeVariant &variant : compiled.variants) {
    if (!cpuRuns(variant.isa))
      continue;
    ++variantsRun;
    Library library(variant.sharedObject);
    ASSERT_TRUE(library.handle) << variant.isa << ": " << library.error;
    for (const Case &c : all) {
      Entry entry = library.entry("gpipe_test_" + c.name);
      ASSERT_TRUE(entry) << c.name;
      for (const std::vector<int64_t> &space : c.spaces) {
        std::vector<std::vector<float>> inputs;
        for (unsigned k = 0; k < c.spec.numInputs; ++k) {
          std::vector<float> in(countOf(c.spec.inputDims[k], space));
          for (float &v : in)
            v = uniform(rng);
          inputs.push_back(std::move(in));
        }
        if (c.name == "max_grad") {
          // x's row maxima as y, one tie per row, and its count.
          for (int64_t row = 0; row < space[0]; ++row) {
            float *x = inputs[1].data() + row * space[1];
            if (space[1] > 2)
              x[2] = x[0];
            float best = *std::max_element(x, x + space[1]);
            inputs[2][row] = best;
            inputs[3][row] = float(std::count(x, x + space[1], best));
          }
        }
        std::vector<float> got = run(entry, c.spec, space, inputs);
        std::vector<double> want = reference(c.spec, space, inputs);
        ASSERT_EQ(got.size(), want.size());
        // Sums round in float over up to 1000 terms of magnitude <= 4.
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0, std::abs(want[i])) +
                                            (c.spec.reduces() ? 2e-4 : 0))
              << variant.isa << " " << c.name << " at " << i << " over "
              << ::testing::PrintToString(space);
      }
    }
  }
  EXPECT_GE(variantsRun, 1u);
}

// The CPU backend splits a reduction over dimension 0 (a bias gradient) by
// its output's columns: each part is a call whose memrefs start at the
// part's first column, with the part's size there and the whole memrefs'
// strides (GeneratedCall.h). Every part, wherever it starts, gives each
// column the bits of the whole call.
TEST(BroadcastKernels, AColumnPartOfADim0ReductionHasTheWholeCallsBits) {
  const KernelSpec spec = kernel(2, {{0, 1}, {0, 1}}, {1},
                                 {{"mul", {0, 1}}, {"reduce_sum", {2}}});
  Compiled compiled = compile({{"gpipe_test_column_sum", spec}});
  ASSERT_FALSE(compiled.variants.empty()) << compiled.diagnostics;
  const int64_t rows = 37, cols = 70;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<float> dy(rows * cols), x(rows * cols);
  for (float &v : dy)
    v = uniform(rng);
  for (float &v : x)
    v = uniform(rng);
  for (const NativeCodeVariant &variant : compiled.variants) {
    if (!cpuRuns(variant.isa))
      continue;
    Library library(variant.sharedObject);
    ASSERT_TRUE(library.handle) << library.error;
    Entry entry = library.entry("gpipe_test_column_sum");
    auto call = [&](int64_t begin, int64_t end, float *out) {
      MemRefND in[2];
      float *data[2] = {dy.data(), x.data()};
      for (int k = 0; k < 2; ++k)
        in[k] = {data[k] + begin, data[k] + begin, 0,
                 {rows, end - begin, cols, 1}};
      MemRefND result{out + begin, out + begin, 0, {end - begin, 1}};
      void *args[] = {&in[0], &in[1], &result};
      entry(args);
    };
    std::vector<float> whole(cols, -1.0f);
    call(0, cols, whole.data());
    for (int64_t begin : {0, 1, 5, 16, 17, 33, 64})
      for (int64_t end : {begin + 1, begin + 6, cols}) {
        if (end > cols)
          continue;
        std::vector<float> part(cols, -1.0f);
        call(begin, end, part.data());
        for (int64_t c = begin; c < end; ++c)
          ASSERT_EQ(std::memcmp(&part[c], &whole[c], 4), 0)
              << variant.isa << ": column " << c << " of part [" << begin
              << ", " << end << ")";
      }
  }
}

// The maximum propagates NaN, as torch.amax; a row without NaN is
// unaffected.
TEST(BroadcastKernels, AMaximumOverANaNIsNaN) {
  KernelSpec spec = kernel(2, {{0, 1}}, {0}, {{"reduce_max", {0}}});
  Compiled compiled = compile({{"gpipe_test_max", spec}});
  ASSERT_FALSE(compiled.variants.empty()) << compiled.diagnostics;
  for (const NativeCodeVariant &variant : compiled.variants) {
    if (!cpuRuns(variant.isa))
      continue;
    Library library(variant.sharedObject);
    ASSERT_TRUE(library.handle) << library.error;
    const std::vector<int64_t> space = {2, 40};
    std::vector<std::vector<float>> inputs = {std::vector<float>(80, 1.0f)};
    inputs[0][17] = std::nanf("");
    inputs[0][40 + 33] = 3.0f;
    std::vector<float> got =
        run(library.entry("gpipe_test_max"), spec, space, inputs);
    EXPECT_TRUE(std::isnan(got[0])) << variant.isa;
    EXPECT_EQ(got[1], 3.0f) << variant.isa;
  }
}

TEST(BroadcastKernels, BadDimensionsAreRefused) {
  // A reduction step before the last; outputs lacking dimensions without a
  // reduction; an input with a dimension twice.
  std::vector<std::pair<KernelSpec, std::string>> bad = {
      {kernel(2, {{0, 1}}, {0}, {{"reduce_sum", {0}}, {"exp", {1}}}),
       "reduces at step 0, before its last"},
      {kernel(2, {{0, 1}}, {0}, {{"exp", {0}}}),
       "lacks output dimensions but does not reduce"},
      {kernel(2, {{1, 1}}, {0, 1}, {{"exp", {0}}}), "has bad dimensions"},
  };
  for (auto &[spec, message] : bad) {
    Compiled compiled = compile({{"gpipe_test_bad", spec}});
    EXPECT_TRUE(compiled.variants.empty()) << message;
    EXPECT_NE(compiled.diagnostics.find(message), std::string::npos)
        << compiled.diagnostics;
  }
}
