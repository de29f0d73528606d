//===- RowKernelsTest.cpp - Kernels with leading reductions ---------------===//
//
// A row kernel (KernelSpec::rowDims) reduces each row's columns before its
// last step and reads the results in the steps after: softmax (a maximum,
// then a sum of the shifted exponentials), RMSNorm with a gain (a mean of
// squares), a layer norm whose variance reads its mean (a reduction of a
// reduction's dependent) plus a per-row input, and a softmax over two column
// dimensions of two row dimensions. Each is compiled for the CPU (every
// variant this CPU runs, called with MLIR's descriptors as the runtime calls
// them) and as the PTX kernels' bodies on the host, and compared with the
// same arithmetic in double here, within float rounding (the CPU sums a
// row's lanes as a tree). Sizes straddle the vector widths.
//
//===----------------------------------------------------------------------===//

#include "NativeKernelsSupport.h"
#include "PtxHostKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

using namespace gpipe;
using namespace gpipe::testing;

namespace {

/// A row of `cols` values of input 0, the per-row and per-column inputs'
/// values at it, and the output row the definition gives.
using RowFn = std::function<std::vector<double>(
    const std::vector<double> &x, const std::vector<double> &perColumn,
    double perRow)>;

struct Case {
  std::string name;
  KernelSpec spec;
  std::vector<int64_t> space;
  /// Input 1 has the columns (a gain), the rows (an offset), or is absent.
  enum { None, PerColumn, PerRow } second;
  RowFn row;
};

KernelSpec rowSpec(unsigned rank, unsigned rows, unsigned inputs) {
  KernelSpec spec;
  spec.numInputs = inputs;
  spec.rank = rank;
  spec.rowDims = rows;
  llvm::SmallVector<unsigned> all;
  for (unsigned d = 0; d < rank; ++d)
    all.push_back(d);
  spec.inputDims.assign(inputs, all);
  spec.outputDims = all;
  return spec;
}

std::vector<double> softmaxRow(const std::vector<double> &x) {
  double m = -INFINITY, sum = 0;
  for (double v : x)
    m = std::max(m, v);
  std::vector<double> out;
  for (double v : x)
    sum += std::exp(v - m);
  for (double v : x)
    out.push_back(std::exp(v - m) / sum);
  return out;
}

Case softmax(std::string name, std::vector<int64_t> space, unsigned rows) {
  KernelSpec spec = rowSpec(unsigned(space.size()), rows, 1);
  spec.steps = {{"reduce_max", {0}},
                {"sub", {0, 1}},
                {"exp", {2}},
                {"reduce_sum", {3}},
                {"div", {3, 4}}};
  return {name, spec, space, Case::None,
          [](const auto &x, const auto &, double) { return softmaxRow(x); }};
}

Case rmsnorm(int64_t rows, int64_t cols) {
  KernelSpec spec = rowSpec(2, 1, 2);
  spec.inputDims[1] = {1};
  spec.steps = {{"mul", {0, 0}},
                {"reduce_mean", {2}, {{"count", double(cols)}}},
                {"rsqrt", {3}},
                {"mul", {0, 4}},
                {"mul", {5, 1}}};
  return {"rmsnorm", spec, {rows, cols}, Case::PerColumn,
          [](const auto &x, const auto &gain, double) {
            double ms = 0;
            for (double v : x)
              ms += v * v;
            ms /= double(x.size());
            std::vector<double> out;
            for (size_t j = 0; j < x.size(); ++j)
              out.push_back(x[j] / std::sqrt(ms) * gain[j]);
            return out;
          }};
}

Case layerNorm(int64_t rows, int64_t cols) {
  KernelSpec spec = rowSpec(2, 1, 2);
  spec.inputDims[1] = {0};
  spec.steps = {{"reduce_mean", {0}, {{"count", double(cols)}}},
                {"sub", {0, 2}},
                {"mul", {3, 3}},
                {"reduce_mean", {4}, {{"count", double(cols)}}},
                {"rsqrt", {5}},
                {"mul", {3, 6}},
                {"add", {7, 1}}};
  return {"layer_norm", spec, {rows, cols}, Case::PerRow,
          [](const auto &x, const auto &, double offset) {
            double mean = 0, var = 0;
            for (double v : x)
              mean += v;
            mean /= double(x.size());
            for (double v : x)
              var += (v - mean) * (v - mean);
            var /= double(x.size());
            std::vector<double> out;
            for (double v : x)
              out.push_back((v - mean) / std::sqrt(var) + offset);
            return out;
          }};
}

std::vector<Case> cases() {
  return {softmax("softmax", {7, 37}, 1),
          softmax("softmax_one_column", {5, 1}, 1),
          softmax("softmax_two_by_two", {2, 5, 3, 11}, 2),
          rmsnorm(6, 70),
          layerNorm(9, 33)};
}

struct Buffers {
  std::vector<float> x, second, out;
  std::vector<int64_t> secondShape;
};

Buffers buffersOf(const Case &c) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  Buffers b;
  b.x.resize(product(c.space));
  for (float &v : b.x)
    v = uniform(rng);
  const unsigned rows = c.spec.rowDims;
  if (c.second == Case::PerColumn)
    b.secondShape = {c.space.begin() + rows, c.space.end()};
  if (c.second == Case::PerRow)
    b.secondShape = {c.space.begin(), c.space.begin() + rows};
  if (c.second != Case::None) {
    b.second.resize(product(b.secondShape));
    for (float &v : b.second)
      v = uniform(rng);
  }
  b.out.assign(b.x.size(), -12345.0f);
  return b;
}

void expectRows(const Case &c, const Buffers &b, const std::string &what) {
  const int64_t rows = product(c.space, 0, c.spec.rowDims);
  const int64_t cols = product(c.space, c.spec.rowDims);
  std::vector<double> perColumn;
  if (c.second == Case::PerColumn)
    perColumn.assign(b.second.begin(), b.second.end());
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> x(b.x.begin() + r * cols, b.x.begin() + (r + 1) * cols);
    double perRow = c.second == Case::PerRow ? b.second[r] : 0.0;
    std::vector<double> want = c.row(x, perColumn, perRow);
    for (int64_t j = 0; j < cols; ++j) {
      double got = b.out[r * cols + j];
      ASSERT_NEAR(got, want[j], 2e-6 * std::max(1.0, std::fabs(want[j])))
          << what << " row " << r << " column " << j;
    }
  }
}

std::vector<NamedKernel> named(const std::vector<Case> &all) {
  std::vector<NamedKernel> kernels;
  for (size_t i = 0; i < all.size(); ++i)
    kernels.push_back({"rows_" + std::to_string(i), all[i].spec});
  return kernels;
}

TEST(RowKernels, CpuVariantsMatchTheDefinitions) {
  const std::vector<Case> all = cases();
  Compiled compiled = compile(named(all));
  ASSERT_FALSE(compiled.variants.empty()) << compiled.diagnostics;
  for (const NativeCodeVariant &variant : compiled.variants) {
    if (!cpuRuns(variant.isa))
      continue;
    Library library(variant.sharedObject);
    ASSERT_TRUE(library.handle) << library.error;
    for (size_t i = 0; i < all.size(); ++i) {
      const Case &c = all[i];
      Buffers b = buffersOf(c);
      std::vector<MemRefND> descriptors{contiguous(b.x.data(), c.space)};
      if (c.second != Case::None)
        descriptors.push_back(contiguous(b.second.data(), b.secondShape));
      descriptors.push_back(contiguous(b.out.data(), c.space));
      std::vector<void *> args;
      for (MemRefND &d : descriptors)
        args.push_back(&d);
      Entry entry = library.entry("rows_" + std::to_string(i));
      ASSERT_TRUE(entry) << c.name;
      entry(args.data());
      expectRows(c, b, variant.isa + " " + c.name);
    }
  }
}

TEST(RowKernels, PtxBodiesMatchTheDefinitions) {
  const std::vector<Case> all = cases();
  HostKernels host(named(all));
  ASSERT_TRUE(host.engine) << host.diagnostics;
  for (size_t i = 0; i < all.size(); ++i) {
    const Case &c = all[i];
    Buffers b = buffersOf(c);
    std::vector<float *> pointers{b.x.data()};
    if (c.second != Case::None)
      pointers.push_back(b.second.data());
    pointers.push_back(b.out.data());
    // A launch of 3 threads, each striding over the rows.
    host.run("rows_" + std::to_string(i), pointers, c.space, 3);
    if (HasFatalFailure())
      return;
    expectRows(c, b, "ptx " + c.name);
  }
}

TEST(RowKernels, MalformedRowKernelsAreRefused) {
  // Rows covering every dimension, and a leading reduction without rows.
  KernelSpec allRows = cases()[0].spec;
  allRows.rowDims = 2;
  KernelSpec noRows = cases()[0].spec;
  noRows.rowDims = 0;
  Compiled compiled = compile({{"all_rows", allRows}});
  EXPECT_TRUE(compiled.variants.empty());
  EXPECT_NE(compiled.diagnostics.find("has rows but is not a row kernel"),
            std::string::npos)
      << compiled.diagnostics;
  compiled = compile({{"no_rows", noRows}});
  EXPECT_TRUE(compiled.variants.empty());
  EXPECT_NE(compiled.diagnostics.find("before its last, but has no rows"),
            std::string::npos)
      << compiled.diagnostics;
}

} // namespace
