//===- MatmulModelSupport.h - A one-stage model of matmul ops ---*- C++ -*-===//
//
// What the matmul bundle and model tests share: a hand-written one-stage
// bundle (batch 6, remat full) whose forward is all matmuls,
//
//   h = x [6, 4, 5] @ w [1, 5, 3]        (w broadcast over the batch)
//   s = h @ h^T        [6, 4, 4]         (transpose_b)
//   y = s @ h          [6, 4, 3]
//   loss = mse(y, t)
//
// or, with the head, flatten(y) [6, 12] @ v [12, 2] = p, loss = mse(p, t):
// the batch as a's rows (M) of a product of matrices. Its backward is
// matmuls too: dv = f^T dp contracts the batch (transpose_a), dh sums
// s^T dy + ds h + ds^T h, and dw sums the per-example x^T dh [6, 5, 3] over
// the batch by the stand-in column-sum kernel (GeneratedKernelsSupport.h).
// And the same model in double, for the references.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_MATMULMODELSUPPORT_H
#define GPIPE_RUNTIME_TESTS_MATMULMODELSUPPORT_H

#include "GeneratedKernelsSupport.h"
#include "ReferenceMatmul.h"

#include "gpipe/runtime/bundle/Bundle.h"

#include <string>
#include <vector>

namespace gpipe::runtime::testing::matmulmodel {

constexpr int64_t kBatch = 6;

/// Indices into the forward (the ops the refusal tests edit).
enum ForwardOp : size_t { kParamW = 0, kXw = 1, kHht = 2, kSh = 3 };
/// With the head: param v, flatten, the head's matmul, the loss.
constexpr size_t kHeadMatmul = 6;

inline Op matmulOp(int a, int b, int y, bool transposeA = false,
                   bool transposeB = false) {
  Op op;
  op.kind = OpKind::Matmul;
  op.operands = {a, b};
  op.results = {y};
  op.transposeA = transposeA;
  op.transposeB = transposeB;
  return op;
}

inline Op simpleOp(OpKind kind, std::vector<int> operands,
                   std::vector<int> results, std::string name = "") {
  Op op;
  op.kind = kind;
  op.operands = std::move(operands);
  op.results = std::move(results);
  op.name = std::move(name);
  return op;
}

/// The model of this header's comment in micro-batches of `rows`.
inline Bundle matmulModelBundle(std::vector<int64_t> rows, bool head) {
  Bundle bundle;
  bundle.model = head ? "matmul-head" : "matmul";
  bundle.batch = kBatch;
  bundle.microbatchRows = std::move(rows);
  bundle.remat = RematPolicy::Full;
  const std::vector<int64_t> target = head ? std::vector<int64_t>{kBatch, 2}
                                           : std::vector<int64_t>{kBatch, 4, 3};
  bundle.inputs = {{"x", {kBatch, 4, 5}, ElementType::F32},
                   {"t", target, ElementType::F32}};
  bundle.params = {{"w", {1, 5, 3}, InitKind::Uniform, 0.5, 0}};
  if (head)
    bundle.params.push_back({"v", {12, 2}, InitKind::Uniform, 0.5, 0});
  bundle.code = kernelCode(); // the column sum of dw
  StageProgram stage;
  auto value = [&](std::vector<int64_t> shape, bool batched) {
    stage.values.push_back({std::move(shape), ElementType::F32, batched});
    return int(stage.values.size() - 1);
  };
  const int x = value({kBatch, 4, 5}, true), t = value(target, true);
  const int w = value({1, 5, 3}, false);
  const int h = value({kBatch, 4, 3}, true), s = value({kBatch, 4, 4}, true);
  const int y = value({kBatch, 4, 3}, true);
  stage.inputs = {{x, false, 0, "x"}, {t, false, 0, "t"}};
  stage.forward = {simpleOp(OpKind::Param, {}, {w}, "w"), matmulOp(x, w, h),
                   matmulOp(h, h, s, false, true), matmulOp(s, h, y)};
  int v = -1, f = -1, p = y;
  if (head) {
    v = value({12, 2}, false);
    f = value({kBatch, 12}, true);
    p = value({kBatch, 2}, true);
    stage.forward.push_back(simpleOp(OpKind::Param, {}, {v}, "v"));
    stage.forward.push_back(simpleOp(OpKind::Flatten, {y}, {f}));
    stage.forward.push_back(matmulOp(f, v, p));
  }
  stage.loss = value({}, false);
  stage.forward.push_back(simpleOp(OpKind::MseLoss, {p, t}, {stage.loss}));
  stage.recompute = stage.forward;

  std::vector<Op> &back = stage.backward;
  const int dp =
      value(head ? target : std::vector<int64_t>{kBatch, 4, 3}, true);
  back.push_back(simpleOp(OpKind::MseLossGrad, {p, t}, {dp}));
  int dy = dp;
  if (head) {
    const int dv = value({12, 2}, false), df = value({kBatch, 12}, true);
    dy = value({kBatch, 4, 3}, true);
    back.push_back(matmulOp(f, dp, dv, true, false)); // the batch contracted
    back.push_back(simpleOp(OpKind::AccumulateGrad, {dv}, {}, "v"));
    back.push_back(matmulOp(dp, v, df, false, true));
    back.push_back(simpleOp(OpKind::FlattenGrad, {df}, {dy}));
  }
  const int ds = value({kBatch, 4, 4}, true);
  int dh[3];
  for (int &id : dh)
    id = value({kBatch, 4, 3}, true);
  const int dh01 = value({kBatch, 4, 3}, true),
            dhAll = value({kBatch, 4, 3}, true);
  const int dwPerExample = value({kBatch, 5, 3}, true),
            dw = value({1, 5, 3}, false);
  back.push_back(matmulOp(dy, h, ds, false, true)); // ds = dy h^T
  back.push_back(matmulOp(s, dy, dh[0], true));     // s^T dy
  back.push_back(matmulOp(ds, h, dh[1]));           // ds h
  back.push_back(matmulOp(ds, h, dh[2], true));     // ds^T h
  back.push_back(simpleOp(OpKind::AddGrads, {dh[0], dh[1]}, {dh01}));
  back.push_back(simpleOp(OpKind::AddGrads, {dh01, dh[2]}, {dhAll}));
  back.push_back(matmulOp(x, dhAll, dwPerExample, true)); // x^T dh
  back.push_back(kernelOp(kColumnSum, {dwPerExample}, dw, {kBatch, 15}, true));
  back.push_back(simpleOp(OpKind::AccumulateGrad, {dw}, {}, "w"));
  bundle.stages = {stage};
  bundle.programs = schedulePrograms(bundle);
  placeBundle(bundle);
  return bundle;
}

/// The model's prediction (y, or p with the head) and loss in double.
struct Forward {
  RefTensor prediction;
  double loss = 0;
};

inline Forward forwardInDouble(const RefTensor &x, const RefTensor &t,
                               const RefTensor &w, const RefTensor *v) {
  RefTensor h = refMatmul(x, w, false, false);
  RefTensor s = refMatmul(h, h, false, true);
  Forward out;
  out.prediction = refMatmul(s, h, false, false);
  if (v) {
    RefTensor flat = out.prediction;
    flat.shape = {kBatch, int64_t(flat.data.size()) / kBatch};
    out.prediction = refMatmul(flat, *v, false, false);
  }
  for (size_t i = 0; i < t.data.size(); ++i) {
    const double d = out.prediction.data[i] - t.data[i];
    out.loss += d * d / double(t.data.size());
  }
  return out;
}

} // namespace gpipe::runtime::testing::matmulmodel

#endif // GPIPE_RUNTIME_TESTS_MATMULMODELSUPPORT_H
