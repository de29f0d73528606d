//===- GatherKernelsTest.cpp - Gather and gather gradient kernels ---------===//
//
// A gather reads its table (every dimension, its own extent along the axis)
// at i32 indices (the axis, and the batch when batched), counting from the
// end where negative and reading NaN outside [-n, n); its gradient adds dy
// into a zeroed output at the same places, each element's contributions in
// index order. Each kernel is compiled for the CPU (every variant this CPU
// runs, called with MLIR's descriptors of each memref's own shape, as the
// runtime calls them) and as the PTX kernels' bodies on the host (one thread
// per output element), and compared bit for bit with loops here.
//
//===----------------------------------------------------------------------===//

#include "NativeKernelsSupport.h"
#include "PtxHostKernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

using namespace gpipe;
using namespace gpipe::testing;

namespace {

/// A case over the space [rows, k, inner] gathering along dimension 1
/// (the table has `extent` there); `batched` indices are [rows, k].
struct Case {
  std::string name;
  bool gradient, batched;
  int64_t rows, k, inner, extent;
  std::vector<int32_t> indices;

  KernelSpec spec() const {
    KernelSpec spec;
    spec.numInputs = 2;
    spec.rank = 3;
    spec.inputDims = {{0, 1, 2}, batched ? llvm::SmallVector<unsigned>{0, 1}
                                         : llvm::SmallVector<unsigned>{1}};
    spec.outputDims = {0, 1, 2};
    KernelWindow table{{0, 0, 0}, {1, 1, 1}, {-1, extent, -1}};
    if (gradient)
      spec.outputWindow = table;
    else
      spec.inputWindows = {table, std::nullopt};
    spec.inputTypes = {KernelElement::F32, KernelElement::I32};
    spec.steps = {{gradient ? "gather_grad" : "gather", {0, 1}, {{"axis", 1.0}}}};
    return spec;
  }
  int32_t index(int64_t r, int64_t j) const {
    return indices[batched ? r * k + j : j];
  }
  std::vector<int64_t> tableShape() const { return {rows, extent, inner}; }
  std::vector<int64_t> spaceShape() const { return {rows, k, inner}; }
  std::vector<int64_t> indexShape() const {
    return batched ? std::vector<int64_t>{rows, k} : std::vector<int64_t>{k};
  }

  /// The output given input 0 (the table, or dy).
  std::vector<float> expected(const std::vector<float> &in) const {
    std::vector<float> out(gradient ? rows * extent * inner : rows * k * inner,
                           0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < k; ++j) {
        int64_t at = index(r, j);
        at = at < 0 ? at + extent : at;
        bool inside = at >= 0 && at < extent;
        for (int64_t c = 0; c < inner; ++c) {
          if (gradient) {
            if (inside) {
              float &acc = out[(r * extent + at) * inner + c];
              acc = acc + in[(r * k + j) * inner + c];
            }
          } else {
            out[(r * k + j) * inner + c] =
                inside ? in[(r * extent + at) * inner + c]
                       : std::numeric_limits<float>::quiet_NaN();
          }
        }
      }
    return out;
  }
};

std::vector<Case> cases() {
  // Repeats, negative positions, one past each end.
  const std::vector<int32_t> six = {6, -1, 0, 7, -7, -8};
  std::vector<int32_t> perRow;
  for (int32_t r = 0; r < 4; ++r)
    for (int32_t v : {r, -1 - r, 3, 9, -10, r})
      perRow.push_back(v);
  return {{"gather", false, false, 3, 6, 33, 7, six},
          {"gather_batched", false, true, 4, 6, 17, 9, perRow},
          {"gather_last_axis", false, false, 5, 6, 1, 7, six},
          {"gather_grad", true, false, 3, 6, 33, 7, six},
          {"gather_grad_batched", true, true, 4, 6, 17, 9, perRow},
          {"gather_grad_last_axis", true, false, 5, 6, 1, 7, six}};
}

std::vector<float> values(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = uniform(rng);
  return v;
}

/// The indices' words in a float buffer (every element is 4 bytes).
std::vector<float> words(const std::vector<int32_t> &indices) {
  std::vector<float> out(indices.size());
  std::memcpy(out.data(), indices.data(), indices.size() * 4);
  return out;
}

std::vector<NamedKernel> named(const std::vector<Case> &all) {
  std::vector<NamedKernel> kernels;
  for (size_t i = 0; i < all.size(); ++i)
    kernels.push_back({"gather_" + std::to_string(i), all[i].spec()});
  return kernels;
}

/// Input 0 (the table, or dy), the indices' words, and the output's shape.
struct Buffers {
  std::vector<float> in, indices, out;
  std::vector<int64_t> inShape, outShape;
};

Buffers buffersOf(const Case &c) {
  Buffers b;
  b.inShape = c.gradient ? c.spaceShape() : c.tableShape();
  b.outShape = c.gradient ? c.tableShape() : c.spaceShape();
  b.in = values(product(b.inShape), 7);
  b.indices = words(c.indices);
  // Garbage first: a gradient writes its zeros itself.
  b.out.assign(product(b.outShape), -12345.0f);
  return b;
}

TEST(GatherKernels, CpuVariantsMatchTheDefinitions) {
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
      MemRefND descriptors[] = {contiguous(b.in.data(), b.inShape),
                                contiguous(b.indices.data(), c.indexShape()),
                                contiguous(b.out.data(), b.outShape)};
      void *args[] = {&descriptors[0], &descriptors[1], &descriptors[2]};
      Entry entry = library.entry("gather_" + std::to_string(i));
      ASSERT_TRUE(entry) << c.name;
      entry(args);
      expectBits(b.out, c.expected(b.in), variant.isa + " " + c.name);
    }
  }
}

TEST(GatherKernels, PtxBodiesMatchTheDefinitions) {
  const std::vector<Case> all = cases();
  HostKernels host(named(all));
  ASSERT_TRUE(host.engine) << host.diagnostics;
  for (size_t i = 0; i < all.size(); ++i) {
    const Case &c = all[i];
    Buffers b = buffersOf(c);
    // A launch of 3 threads, each striding over the output.
    host.run("gather_" + std::to_string(i),
             {b.in.data(), b.indices.data(), b.out.data()}, c.spaceShape(), 3);
    if (HasFatalFailure())
      return;
    expectBits(b.out, c.expected(b.in), "ptx " + c.name);
  }
}

TEST(GatherKernels, MalformedGathersAreRefused) {
  // Indices of f32, and indices along another dimension than the axis.
  KernelSpec floats = cases()[0].spec();
  floats.inputTypes = {};
  KernelSpec elsewhere = cases()[0].spec();
  elsewhere.inputDims[1] = {2};
  for (const KernelSpec &spec : {floats, elsewhere}) {
    Compiled compiled = compile({{"bad", spec}});
    EXPECT_TRUE(compiled.variants.empty());
    EXPECT_NE(compiled.diagnostics.find(
                  "has a gather that is not an f32 table read or written at "
                  "i32 indices along one axis"),
              std::string::npos)
        << compiled.diagnostics;
  }
}

} // namespace
