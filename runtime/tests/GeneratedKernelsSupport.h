//===- GeneratedKernelsSupport.h - Bundles with generated kernels -*- C++
//-*-===//
//
// What the generated-kernel tests share: the stand-in kernels
// (testdata/GeneratedKernels.c, built as a shared object beside the tests)
// as a bundle's code section, and a one-stage model that runs two of them,
// one in its forward (and recompute), one in its backward:
//
//   h = dense(x, w); r = kernel 0 (h, x) = relu(h + x);
//   loss = softmax_cross_entropy(r, labels)
//   dr = its gradient; dh = kernel 2 (dr, r) = dr where r > 0;
//   dw = x^T dh
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

/// The code section of the stand-in kernels: add-relu (2 inputs),
/// mul-sub (3), relu-grad (2), in one x86-64 variant.
inline GeneratedCode kernelCode(const std::string &isa = "x86-64") {
  GeneratedCode code;
  code.kernels = {
      {"gpipe_kernel_0_test", 2, "add(in0,in1)->t0; relu(t0)->out"},
      {"gpipe_kernel_1_test", 3, "mul(in0,in1)->t0; sub(t0,in2)->out"},
      {"gpipe_kernel_2_test", 2, "relu_grad(in0,in1)->out"}};
  code.cpu = {{isa, kernelLibraryBytes()}};
  return code;
}

inline Op kernelOp(int kernel, std::vector<int> operands, int result) {
  Op op;
  op.kind = OpKind::Kernel;
  op.kernel = kernel;
  op.operands = std::move(operands);
  op.results = {result};
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
  stage.forward = {param, dense, kernelOp(0, {3, 0}, 4), loss};
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
  stage.backward = {lossGrad, kernelOp(2, {6, 4}, 7), denseGrad, accumulate};
  bundle.stages = {stage};
  bundle.programs = schedulePrograms(bundle);
  placeBundle(bundle);
  return bundle;
}

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_GENERATEDKERNELSSUPPORT_H
