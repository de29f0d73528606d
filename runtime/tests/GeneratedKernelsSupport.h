//===- GeneratedKernelsSupport.h - Bundles with generated kernels -*- C++
//-*-===//
//
// What the generated-kernel tests share: the stand-in kernels
// (testdata/GeneratedKernels.c, built as a shared object beside the tests)
// as a bundle's code section, and two one-stage models. The first runs two
// element-wise kernels, one in its forward (and recompute), one in its
// backward:
//
//   h = dense(x, w); r = kernel 0 (h, x) = relu(h + x);
//   loss = softmax_cross_entropy(r, labels)
//   dr = its gradient; dh = kernel 2 (dr, r) = dr where r > 0;
//   dw = x^T dh
//
// The second adds a bias by a broadcasting kernel and reduces its gradient
// over the batch by a column sum:
//
//   h = dense(x, w); hb = kernel 3 (h, b) = h + b (b broadcast over rows);
//   r = kernel 0 (hb, x); loss = softmax_cross_entropy(r, labels)
//   dr = its gradient; dh = kernel 2 (dr, r); db = kernel 5 (dh) = the
//   column sums of dh (dimension 0, the batch, reduced); dw = x^T dh
//
// The third (sliceModelBundle) slices by a kernel whose input has a fixed
// extent, and takes the slice's gradient by one whose output has one
// (extentKernelCode).
//
// The fourth (maskModelBundle) computes a mask as an i32 value by one
// kernel and reads it with an f32 value by another, in its forward and its
// backward (typedKernelCode).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_GENERATEDKERNELSSUPPORT_H
#define GPIPE_RUNTIME_TESTS_GENERATEDKERNELSSUPPORT_H

#include "TestBundles.h"
#include "TestPlacement.h"

#include "gpipe/runtime/base/FileRead.h"
#include "gpipe/runtime/bundle/Bundle.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpipe::runtime::testing {

/// The bytes of a stand-in kernel library: tag "test" (the bundle's), or
/// "other" (the same kernels under other symbols: another bundle's code).
inline std::string kernelLibraryBytes(bool other = false) {
  const char *path =
      other ? GPIPE_TEST_OTHER_KERNELS_PATH : GPIPE_TEST_KERNELS_PATH;
  StatusOr<std::string> bytes = readRegularFile(path, 1 << 26, "a library");
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? *bytes : std::string();
}

/// The kernels of testdata/GeneratedKernels.c by index.
enum StandInKernel : int {
  kAddRelu = 0,      ///< rank 1: relu(in0 + in1), element-wise
  kMulSub = 1,       ///< rank 1: in0 * in1 - in2, element-wise
  kReluGrad = 2,     ///< rank 1: in0 where in1 > 0, element-wise
  kBroadcastAdd = 3, ///< rank 2: in0 [0, 1] + in1 [1] -> out [0, 1]
  kRowSum = 4,       ///< rank 2: in0 [0, 1] -> out [0], dim 1 reduced
  kColumnSum = 5,    ///< rank 2: in0 [0, 1] -> out [1], dim 0 reduced
  kRowSumAdd = 6,    ///< rank 2: in0 [0, 1], in1 [0] -> out [0], dim 1 reduced
  // Fixed extents along dimension 1 (extentKernelCode):
  kSlice = 7,     ///< space [rows, 3]: in0 [rows, 6] -> its columns 1, 3, 5
  kSliceGrad = 8, ///< space [rows, 3]: in0 -> out [rows, 6], 0 at 0, 2, 4
  kConcat = 9,    ///< space [rows, 6]: in0 [rows, 2], in1 [rows, 4] -> out
  // i32 memrefs, rank 1, element-wise (typedKernelCode):
  kGreater = 10, ///< in0 f32 -> out i32: 1 where in0 > 0, else 0
  kWhere = 11,   ///< in0 i32, in1 f32 -> out f32: in1 where in0 != 0, else 0
  kCastI32 = 12, ///< in0 f32 -> out i32, toward zero
  kCastF32 = 13  ///< in0 i32 -> out f32
};

/// Stand-in kernel `index`'s entry: gpipe_kernel_<index>_test, as many
/// inputs as `inputDims` lists.
inline GeneratedKernelSpec standIn(int index, const char *ops, unsigned rank,
                                   std::vector<std::vector<unsigned>> inputDims,
                                   std::vector<unsigned> outputDims) {
  GeneratedKernelSpec spec;
  spec.symbol = "gpipe_kernel_" + std::to_string(index) + "_test";
  spec.inputs = unsigned(inputDims.size());
  spec.ops = ops;
  spec.rank = rank;
  spec.inputDims = std::move(inputDims);
  spec.outputDims = std::move(outputDims);
  return spec;
}

/// The code section of the stand-in kernels, in one x86-64 variant.
inline GeneratedCode kernelCode(const std::string &isa = "x86-64") {
  GeneratedCode code;
  code.kernels = {
      standIn(0, "add(in0,in1)->t0; relu(t0)->out", 1, {{0}, {0}}, {0}),
      standIn(1, "mul(in0,in1)->t0; sub(t0,in2)->out", 1, {{0}, {0}, {0}}, {0}),
      standIn(2, "relu_grad(in0,in1)->out", 1, {{0}, {0}}, {0}),
      standIn(3, "add(in0,in1)->out", 2, {{0, 1}, {1}}, {0, 1}),
      standIn(4, "reduce_sum[dims=1](in0)->out", 2, {{0, 1}}, {0}),
      standIn(5, "reduce_sum[dims=0](in0)->out", 2, {{0, 1}}, {1}),
      standIn(6, "reduce_sum[dims=1](in0)->t0; add(t0,in1)->out", 2,
              {{0, 1}, {0}}, {0})};
  code.cpu = {{isa, kernelLibraryBytes()}};
  return code;
}

/// kernelCode() and the kernels with fixed extents (kSlice, kSliceGrad,
/// kConcat), as the compiler describes a slice, its gradient and a concat.
inline GeneratedCode extentKernelCode() {
  GeneratedCode code = kernelCode();
  GeneratedKernelSpec slice =
      standIn(7, "slice[dim=1,start=1,step=2](in0)->out", 2, {{0, 1}}, {0, 1});
  slice.extents = {{-1, 6}, {-1, -1}};
  GeneratedKernelSpec sliceGrad = standIn(
      8, "slice_grad[dim=1,start=1,step=2](in0)->out", 2, {{0, 1}}, {0, 1});
  sliceGrad.extents = {{-1, -1}, {-1, 6}};
  GeneratedKernelSpec concat =
      standIn(9, "concat[dim=1](in0,in1)->out", 2, {{0, 1}, {0, 1}}, {0, 1});
  concat.extents = {{-1, 2}, {-1, 4}, {-1, -1}};
  code.kernels.insert(code.kernels.end(), {slice, sliceGrad, concat});
  return code;
}

/// extentKernelCode() and the kernels over i32 memrefs (kGreater, kWhere,
/// kCastI32, kCastF32) with their `types`, as the compiler describes a
/// comparison, a `where` and the casts.
inline GeneratedCode typedKernelCode() {
  GeneratedCode code = extentKernelCode();
  constexpr ElementType F = ElementType::F32, I = ElementType::I32;
  GeneratedKernelSpec greater = standIn(10, "gt(in0,0)->out", 1, {{0}}, {0});
  greater.types = {F, I};
  GeneratedKernelSpec where =
      standIn(11, "where(in0,in1,0)->out", 1, {{0}, {0}}, {0});
  where.types = {I, F, F};
  GeneratedKernelSpec castI32 =
      standIn(12, "cast_i32(in0)->out", 1, {{0}}, {0});
  castI32.types = {F, I};
  GeneratedKernelSpec castF32 =
      standIn(13, "cast_f32(in0)->out", 1, {{0}}, {0});
  castF32.types = {I, F};
  code.kernels.insert(code.kernels.end(), {greater, where, castI32, castF32});
  return code;
}

inline Op kernelOp(int kernel, std::vector<int> operands, int result,
                   std::vector<int64_t> space, bool batched) {
  Op op;
  op.kind = OpKind::Kernel;
  op.kernel = kernel;
  op.operands = std::move(operands);
  op.results = {result};
  op.space = std::move(space);
  op.spaceBatched = batched;
  return op;
}

/// The model of this header's comment: batch 8 in `microbatches`
/// micro-batches, 6 features and classes, remat full (the recompute runs
/// kernel 0 again), placed as the compiler would.
inline Bundle kernelModelBundle(unsigned microbatches = 2) {
  constexpr int64_t kBatch = 8, kWidth = 6;
  Bundle bundle;
  bundle.model = "kernels";
  bundle.batch = kBatch;
  bundle.microbatchRows.assign(microbatches, kBatch / microbatches);
  bundle.remat = RematPolicy::Full;
  bundle.inputs = {{"x", {kBatch, kWidth}, ElementType::F32},
                   {"labels", {kBatch}, ElementType::I32}};
  bundle.params = {{"w", {kWidth, kWidth}, InitKind::GlorotUniform, 1.0, 0}};
  bundle.code = kernelCode();
  StageProgram stage;
  const ValueSpec rows{{kBatch, kWidth}, ElementType::F32, true};
  const ValueSpec weight{{kWidth, kWidth}, ElementType::F32, false};
  stage.values = {rows,  {{kBatch}, ElementType::I32, true}, weight, rows,
                  rows,  {{}, ElementType::F32, false},      rows,   rows,
                  weight};
  stage.inputs = {{0, false, 0, "x"}, {1, false, 0, "labels"}};
  stage.loss = 5;
  Op param;
  param.kind = OpKind::Param;
  param.name = "w";
  param.results = {2};
  Op dense;
  dense.kind = OpKind::Dense;
  dense.operands = {0, 2};
  dense.results = {3};
  Op loss;
  loss.kind = OpKind::SoftmaxCrossEntropy;
  loss.operands = {4, 1};
  loss.results = {5};
  stage.forward = {param, dense,
                   kernelOp(kAddRelu, {3, 0}, 4, {kBatch * kWidth}, true),
                   loss};
  stage.recompute = stage.forward;
  Op lossGrad;
  lossGrad.kind = OpKind::SoftmaxCrossEntropyGrad;
  lossGrad.operands = {5, 1};
  lossGrad.results = {6};
  Op denseGrad;
  denseGrad.kind = OpKind::DenseGrad;
  denseGrad.operands = {7, 0, 2};
  denseGrad.results = {-1, 8};
  Op accumulate;
  accumulate.kind = OpKind::AccumulateGrad;
  accumulate.name = "w";
  accumulate.operands = {8};
  stage.backward = {lossGrad,
                    kernelOp(kReluGrad, {6, 4}, 7, {kBatch * kWidth}, true),
                    denseGrad, accumulate};
  bundle.stages = {stage};
  bundle.programs = schedulePrograms(bundle);
  placeBundle(bundle);
  return bundle;
}

/// The second model of this header's comment: batch 8 in micro-batches of
/// `rows` (uneven ones allowed), 6 features and classes, the bias b
/// uniform in [-0.5, 0.5], remat full, placed as the compiler would.
inline Bundle biasModelBundle(std::vector<int64_t> rows = {3, 5}) {
  constexpr int64_t kBatch = 8, kWidth = 6;
  Bundle bundle;
  bundle.model = "kernel-bias";
  bundle.batch = kBatch;
  bundle.microbatchRows = std::move(rows);
  bundle.remat = RematPolicy::Full;
  bundle.inputs = {{"x", {kBatch, kWidth}, ElementType::F32},
                   {"labels", {kBatch}, ElementType::I32}};
  bundle.params = {{"w", {kWidth, kWidth}, InitKind::GlorotUniform, 1.0, 0},
                   {"b", {kWidth}, InitKind::Uniform, 0.5, 0}};
  bundle.code = kernelCode();
  StageProgram stage;
  const ValueSpec rowsOf{{kBatch, kWidth}, ElementType::F32, true};
  const ValueSpec weight{{kWidth, kWidth}, ElementType::F32, false};
  const ValueSpec bias{{kWidth}, ElementType::F32, false};
  // 0 x, 1 labels, 2 w, 3 b, 4 h, 5 hb, 6 r, 7 loss, 8 dr, 9 dh, 10 db,
  // 11 dw
  stage.values = {rowsOf, {{kBatch}, ElementType::I32, true},
                  weight, bias,
                  rowsOf, rowsOf,
                  rowsOf, {{}, ElementType::F32, false},
                  rowsOf, rowsOf,
                  bias,   weight};
  stage.inputs = {{0, false, 0, "x"}, {1, false, 0, "labels"}};
  stage.loss = 7;
  Op paramW;
  paramW.kind = OpKind::Param;
  paramW.name = "w";
  paramW.results = {2};
  Op paramB = paramW;
  paramB.name = "b";
  paramB.results = {3};
  Op dense;
  dense.kind = OpKind::Dense;
  dense.operands = {0, 2};
  dense.results = {4};
  Op loss;
  loss.kind = OpKind::SoftmaxCrossEntropy;
  loss.operands = {6, 1};
  loss.results = {7};
  stage.forward = {paramW,
                   paramB,
                   dense,
                   kernelOp(kBroadcastAdd, {4, 3}, 5, {kBatch, kWidth}, true),
                   kernelOp(kAddRelu, {5, 0}, 6, {kBatch * kWidth}, true),
                   loss};
  stage.recompute = stage.forward;
  Op lossGrad;
  lossGrad.kind = OpKind::SoftmaxCrossEntropyGrad;
  lossGrad.operands = {7, 1};
  lossGrad.results = {8};
  Op denseGrad;
  denseGrad.kind = OpKind::DenseGrad;
  denseGrad.operands = {9, 0, 2};
  denseGrad.results = {-1, 11};
  Op accumulateW;
  accumulateW.kind = OpKind::AccumulateGrad;
  accumulateW.name = "w";
  accumulateW.operands = {11};
  Op accumulateB = accumulateW;
  accumulateB.name = "b";
  accumulateB.operands = {10};
  stage.backward = {lossGrad,
                    kernelOp(kReluGrad, {8, 6}, 9, {kBatch * kWidth}, true),
                    kernelOp(kColumnSum, {9}, 10, {kBatch, kWidth}, true),
                    accumulateB,
                    denseGrad,
                    accumulateW};
  bundle.stages = {stage};
  bundle.programs = schedulePrograms(bundle);
  placeBundle(bundle);
  return bundle;
}

/// A model that slices by a generated kernel and takes the slice's
/// gradient by another: batch 8 in micro-batches of `rows`, 6 features, 3
/// classes, remat full:
///
///   h = dense(x, w) [8, 6]; s = kernel 7 (h) = h's columns 1, 3, 5;
///   loss = softmax_cross_entropy(s, labels)
///   ds = its gradient [8, 3]; dh = kernel 8 (ds) = ds at columns 1, 3, 5
///   of [8, 6], 0 elsewhere; dw = x^T dh
inline Bundle sliceModelBundle(std::vector<int64_t> rows = {3, 5}) {
  constexpr int64_t kBatch = 8, kWidth = 6, kClasses = 3;
  Bundle bundle;
  bundle.model = "kernel-slice";
  bundle.batch = kBatch;
  bundle.microbatchRows = std::move(rows);
  bundle.remat = RematPolicy::Full;
  bundle.inputs = {{"x", {kBatch, kWidth}, ElementType::F32},
                   {"labels", {kBatch}, ElementType::I32}};
  bundle.params = {{"w", {kWidth, kWidth}, InitKind::GlorotUniform, 1.0, 0}};
  bundle.code = extentKernelCode();
  StageProgram stage;
  const ValueSpec wide{{kBatch, kWidth}, ElementType::F32, true};
  const ValueSpec narrow{{kBatch, kClasses}, ElementType::F32, true};
  const ValueSpec weight{{kWidth, kWidth}, ElementType::F32, false};
  // 0 x, 1 labels, 2 w, 3 h, 4 s, 5 loss, 6 ds, 7 dh, 8 dw
  stage.values = {wide,   {{kBatch}, ElementType::I32, true}, weight, wide,
                  narrow, {{}, ElementType::F32, false},      narrow, wide,
                  weight};
  stage.inputs = {{0, false, 0, "x"}, {1, false, 0, "labels"}};
  stage.loss = 5;
  Op param;
  param.kind = OpKind::Param;
  param.name = "w";
  param.results = {2};
  Op dense;
  dense.kind = OpKind::Dense;
  dense.operands = {0, 2};
  dense.results = {3};
  Op loss;
  loss.kind = OpKind::SoftmaxCrossEntropy;
  loss.operands = {4, 1};
  loss.results = {5};
  stage.forward = {param, dense,
                   kernelOp(kSlice, {3}, 4, {kBatch, kClasses}, true), loss};
  stage.recompute = stage.forward;
  Op lossGrad;
  lossGrad.kind = OpKind::SoftmaxCrossEntropyGrad;
  lossGrad.operands = {5, 1};
  lossGrad.results = {6};
  Op denseGrad;
  denseGrad.kind = OpKind::DenseGrad;
  denseGrad.operands = {7, 0, 2};
  denseGrad.results = {-1, 8};
  Op accumulate;
  accumulate.kind = OpKind::AccumulateGrad;
  accumulate.name = "w";
  accumulate.operands = {8};
  stage.backward = {lossGrad,
                    kernelOp(kSliceGrad, {6}, 7, {kBatch, kClasses}, true),
                    denseGrad, accumulate};
  bundle.stages = {stage};
  bundle.programs = schedulePrograms(bundle);
  placeBundle(bundle);
  return bundle;
}

/// A model whose kernels compute a mask as an i32 value and read it with an
/// f32 one: batch 8 in micro-batches of `rows`, 6 features and classes,
/// remat full (the recompute computes the mask again):
///
///   h = dense(x, w) [8, 6]; m = kernel 10 (h) = h > 0 as i32 words 0 or 1;
///   r = kernel 11 (m, h) = h where m, else 0;
///   loss = softmax_cross_entropy(r, labels)
///   dr = its gradient; dh = kernel 11 (m, dr) = dr where m, else 0;
///   dw = x^T dh
inline Bundle maskModelBundle(std::vector<int64_t> rows = {3, 5}) {
  constexpr int64_t kBatch = 8, kWidth = 6;
  Bundle bundle;
  bundle.model = "kernel-mask";
  bundle.batch = kBatch;
  bundle.microbatchRows = std::move(rows);
  bundle.remat = RematPolicy::Full;
  bundle.inputs = {{"x", {kBatch, kWidth}, ElementType::F32},
                   {"labels", {kBatch}, ElementType::I32}};
  bundle.params = {{"w", {kWidth, kWidth}, InitKind::GlorotUniform, 1.0, 0}};
  bundle.code = typedKernelCode();
  StageProgram stage;
  const ValueSpec rowsOf{{kBatch, kWidth}, ElementType::F32, true};
  const ValueSpec mask{{kBatch, kWidth}, ElementType::I32, true};
  const ValueSpec weight{{kWidth, kWidth}, ElementType::F32, false};
  // 0 x, 1 labels, 2 w, 3 h, 4 m, 5 r, 6 loss, 7 dr, 8 dh, 9 dw
  stage.values = {
      rowsOf, {{kBatch}, ElementType::I32, true}, weight, rowsOf, mask,
      rowsOf, {{}, ElementType::F32, false},      rowsOf, rowsOf, weight};
  stage.inputs = {{0, false, 0, "x"}, {1, false, 0, "labels"}};
  stage.loss = 6;
  Op param;
  param.kind = OpKind::Param;
  param.name = "w";
  param.results = {2};
  Op dense;
  dense.kind = OpKind::Dense;
  dense.operands = {0, 2};
  dense.results = {3};
  Op loss;
  loss.kind = OpKind::SoftmaxCrossEntropy;
  loss.operands = {5, 1};
  loss.results = {6};
  stage.forward = {param, dense,
                   kernelOp(kGreater, {3}, 4, {kBatch * kWidth}, true),
                   kernelOp(kWhere, {4, 3}, 5, {kBatch * kWidth}, true), loss};
  stage.recompute = stage.forward;
  Op lossGrad;
  lossGrad.kind = OpKind::SoftmaxCrossEntropyGrad;
  lossGrad.operands = {6, 1};
  lossGrad.results = {7};
  Op denseGrad;
  denseGrad.kind = OpKind::DenseGrad;
  denseGrad.operands = {8, 0, 2};
  denseGrad.results = {-1, 9};
  Op accumulate;
  accumulate.kind = OpKind::AccumulateGrad;
  accumulate.name = "w";
  accumulate.operands = {9};
  stage.backward = {lossGrad,
                    kernelOp(kWhere, {4, 7}, 8, {kBatch * kWidth}, true),
                    denseGrad, accumulate};
  bundle.stages = {stage};
  bundle.programs = schedulePrograms(bundle);
  placeBundle(bundle);
  return bundle;
}

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_GENERATEDKERNELSSUPPORT_H
