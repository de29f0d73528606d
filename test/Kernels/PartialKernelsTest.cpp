//===- PartialKernelsTest.cpp - Slice, slice gradient and concat kernels --===//
//
// Kernels whose memrefs are not all the iteration space (KernelWindow): a
// slice reads every step-th element of its input from an offset, a slice's
// gradient writes dy there and 0 everywhere else, a concat copies each input
// to its part of the output. Each is compiled for the CPU (every variant this
// CPU runs, called with MLIR's descriptors of each memref's own shape, as the
// runtime calls them) and as the PTX kernels' bodies on the host (one thread
// per output element), and compared bit for bit with loops here that index
// the arrays directly: these kernels only move elements. Sizes straddle the
// vector widths (8, 16, 32) so that tiles are full, partial and absent.
//
//===----------------------------------------------------------------------===//

#include "NativeKernelsSupport.h"
#include "PtxHostKernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace gpipe;
using namespace gpipe::testing;

namespace {

/// A kernel case: the spec, the space's sizes, and what the output must
/// hold given the inputs (computed from the op's definition).
struct Case {
  std::string name;
  KernelSpec spec;
  std::vector<int64_t> space;
  std::function<std::vector<float>(const std::vector<std::vector<float>> &)>
      expected;
};

/// The own shape of memref `m` (the inputs, then the output).
std::vector<int64_t> shapeOf(const KernelSpec &spec,
                             const std::vector<int64_t> &space, unsigned m) {
  const bool output = m == spec.numInputs;
  llvm::ArrayRef<unsigned> dims =
      output ? llvm::ArrayRef<unsigned>(spec.outputDims) : spec.inputDims[m];
  const KernelWindow *w = output
                              ? (spec.outputWindow ? &*spec.outputWindow : nullptr)
                              : spec.inputWindow(m);
  std::vector<int64_t> shape;
  for (size_t i = 0; i < dims.size(); ++i)
    shape.push_back(w && !w->whole(i) ? w->extents[i] : space[dims[i]]);
  return shape;
}

KernelWindow whole(unsigned rank) {
  return {llvm::SmallVector<int64_t>(rank, 0),
          llvm::SmallVector<int64_t>(rank, 1),
          llvm::SmallVector<int64_t>(rank, -1)};
}

KernelSpec identitySpec(unsigned rank, unsigned inputs) {
  KernelSpec spec;
  spec.numInputs = inputs;
  spec.rank = rank;
  llvm::SmallVector<unsigned> all;
  for (unsigned d = 0; d < rank; ++d)
    all.push_back(d);
  spec.inputDims.assign(inputs, all);
  spec.outputDims = all;
  return spec;
}

/// A 2-D slice: out[i][j] = in[i][offset + step j], the input `extent`
/// wide.
Case slice2d(std::string name, int64_t rows, int64_t cols, int64_t offset,
             int64_t step, int64_t extent) {
  KernelSpec spec = identitySpec(2, 1);
  KernelWindow w = whole(2);
  w.offsets[1] = offset, w.steps[1] = step, w.extents[1] = extent;
  spec.inputWindows = {w};
  spec.steps = {{"slice", {0}}};
  return {name, spec, {rows, cols}, [=](const auto &in) {
            std::vector<float> out(rows * cols);
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t j = 0; j < cols; ++j)
                out[i * cols + j] = in[0][i * extent + offset + step * j];
            return out;
          }};
}

/// A 2-D slice gradient: out (rows x extent) is dy[i][j] at [i][offset +
/// step j], 0 elsewhere.
Case sliceGrad2d(std::string name, int64_t rows, int64_t cols, int64_t offset,
                 int64_t step, int64_t extent) {
  KernelSpec spec = identitySpec(2, 1);
  KernelWindow w = whole(2);
  w.offsets[1] = offset, w.steps[1] = step, w.extents[1] = extent;
  spec.outputWindow = w;
  spec.steps = {{"slice", {0}}};
  return {name, spec, {rows, cols}, [=](const auto &in) {
            std::vector<float> out(rows * extent, 0.0f);
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t j = 0; j < cols; ++j)
                out[i * extent + offset + step * j] = in[0][i * cols + j];
            return out;
          }};
}

/// A rank-3 slice of a unit leading dimension (an unbatched value sliced in
/// its first dimension): out[0][i][j] = in[0][a + s i][b + j].
Case slice3d() {
  KernelSpec spec = identitySpec(3, 1);
  KernelWindow w = whole(3);
  w.offsets = {0, 1, 3}, w.steps = {1, 2, 1}, w.extents = {-1, 12, 40};
  spec.inputWindows = {w};
  spec.steps = {{"slice", {0}}};
  return {"slice3d", spec, {1, 6, 33}, [](const auto &in) {
            std::vector<float> out(6 * 33);
            for (int64_t i = 0; i < 6; ++i)
              for (int64_t j = 0; j < 33; ++j)
                out[i * 33 + j] = in[0][(1 + 2 * i) * 40 + 3 + j];
            return out;
          }};
}

/// A concat along `axis` of a [rows, ?, inner] space of inputs `parts`
/// wide there.
Case concat(std::string name, int64_t rows, std::vector<int64_t> parts,
            int64_t inner) {
  int64_t total = 0;
  for (int64_t p : parts)
    total += p;
  KernelSpec spec = identitySpec(3, unsigned(parts.size()));
  llvm::SmallVector<unsigned> operands;
  for (size_t k = 0; k < parts.size(); ++k) {
    KernelWindow w = whole(3);
    w.extents[1] = parts[k];
    spec.inputWindows.push_back(w);
    operands.push_back(unsigned(k));
  }
  spec.steps = {{"concat", operands, {{"axis", 1.0}}}};
  return {name, spec, {rows, total, inner}, [=](const auto &in) {
            std::vector<float> out(rows * total * inner);
            for (int64_t r = 0; r < rows; ++r) {
              int64_t at = 0;
              for (size_t k = 0; k < parts.size(); ++k) {
                for (int64_t j = 0; j < parts[k]; ++j)
                  for (int64_t c = 0; c < inner; ++c)
                    out[(r * total + at + j) * inner + c] =
                        in[k][(r * parts[k] + j) * inner + c];
                at += parts[k];
              }
            }
            return out;
          }};
}

std::vector<Case> cases() {
  return {slice2d("strided", 5, 7, 2, 3, 23),
          slice2d("contiguous", 3, 40, 5, 1, 50),
          slice2d("last_element", 2, 1, 9, 4, 10),
          slice3d(),
          sliceGrad2d("strided_grad", 4, 9, 1, 2, 19),
          sliceGrad2d("contiguous_grad", 3, 37, 7, 1, 50),
          concat("three_parts", 2, {4, 1, 5}, 3),
          concat("inner", 3, {13, 32}, 1)};
}

std::vector<float> values(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = uniform(rng);
  if (n > 2)
    v[1] = -0.0f; // a copy keeps the sign of zero
  return v;
}

std::vector<NamedKernel> named(const std::vector<Case> &all) {
  std::vector<NamedKernel> kernels;
  for (size_t i = 0; i < all.size(); ++i)
    kernels.push_back({"partial_" + std::to_string(i), all[i].spec});
  return kernels;
}

std::vector<std::vector<float>> inputsOf(const Case &c) {
  std::vector<std::vector<float>> inputs;
  for (unsigned k = 0; k < c.spec.numInputs; ++k)
    inputs.push_back(values(product(shapeOf(c.spec, c.space, k)), 7 + k));
  return inputs;
}

TEST(PartialKernels, CpuVariantsMatchTheDefinitions) {
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
      std::vector<std::vector<float>> inputs = inputsOf(c);
      const std::vector<int64_t> outShape =
          shapeOf(c.spec, c.space, c.spec.numInputs);
      // Garbage first: a slice gradient writes its zeros itself.
      std::vector<float> out(product(outShape), -12345.0f);
      std::vector<MemRefND> descriptors;
      for (unsigned k = 0; k < c.spec.numInputs; ++k)
        descriptors.push_back(
            contiguous(inputs[k].data(), shapeOf(c.spec, c.space, k)));
      descriptors.push_back(contiguous(out.data(), outShape));
      std::vector<void *> args;
      for (MemRefND &d : descriptors)
        args.push_back(&d);
      Entry entry = library.entry("partial_" + std::to_string(i));
      ASSERT_TRUE(entry) << c.name;
      entry(args.data());
      expectBits(out, c.expected(inputs), variant.isa + " " + c.name);
    }
  }
}

TEST(PartialKernels, PtxBodiesMatchTheDefinitions) {
  const std::vector<Case> all = cases();
  HostKernels host(named(all));
  ASSERT_TRUE(host.engine) << host.diagnostics;
  for (size_t i = 0; i < all.size(); ++i) {
    const Case &c = all[i];
    std::vector<std::vector<float>> inputs = inputsOf(c);
    std::vector<float> out(
        product(shapeOf(c.spec, c.space, c.spec.numInputs)), -12345.0f);
    std::vector<float *> pointers;
    for (std::vector<float> &in : inputs)
      pointers.push_back(in.data());
    pointers.push_back(out.data());
    // A launch of 3 threads, each striding over the output.
    host.run("partial_" + std::to_string(i), pointers, c.space, 3);
    if (HasFatalFailure())
      return;
    expectBits(out, c.expected(inputs), "ptx " + c.name);
  }
}

TEST(PartialKernels, BadWindowsAreRefused) {
  // An extent along iteration dimension 0, which scales with the batch.
  Case bad = slice2d("bad", 2, 3, 0, 1, 5);
  bad.spec.inputWindows[0]->extents[0] = 4;
  bad.spec.inputWindows[0]->extents[1] = -1;
  bad.spec.inputWindows[0]->offsets[1] = 0;
  Compiled compiled = compile(named({bad}));
  EXPECT_TRUE(compiled.variants.empty());
  EXPECT_NE(compiled.diagnostics.find(
                "input 0 has an extent along iteration dimension 0"),
            std::string::npos)
      << compiled.diagnostics;
  // A concat along dimension 0.
  Case along0 = concat("along0", 2, {1, 2}, 3);
  along0.spec.steps[0].constants = {{"axis", 0.0}};
  compiled = compile(named({along0}));
  EXPECT_TRUE(compiled.variants.empty());
  EXPECT_NE(compiled.diagnostics.find("has a concat that is not its inputs in "
                                      "order along an axis other than 0"),
            std::string::npos)
      << compiled.diagnostics;
}

} // namespace
