//===- ComposedMatmul.cpp - A broadcasting matmul as GEMM batches ---------===//
//
// KernelApi's default matmul: y's matrices in runs of uniform strides
// (MatmulGeometry::innerRun: [B, M, K] x [K, N] is one run, its B matrices
// of a against the one of b), each run one strided GEMM batch, which cuBLAS
// runs as one cublasGemmStridedBatchedEx and the host as one product per
// matrix; where the broadcast is not uniform ([3, 1, M, K] x [2, K, N]) a
// loop of such batches. Every matrix of y is one product of the same m, n
// and k whatever the micro-batch. Pointers may be null in the executor's
// placement check at creation (nothing runs then), so offsets are taken only
// from non-null pointers.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/KernelApi.h"

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

namespace {
const float *at(const float *p, int64_t offset) { return p ? p + offset : p; }
float *at(float *p, int64_t offset) { return p ? p + offset : p; }
} // namespace

GemmBatch gpipe::runtime::device::matmulGemms(const MatmulCall &call,
                                              const MatmulGeometry &g,
                                              int64_t first, int64_t count) {
  const int64_t aMatrix = g.aRows * g.aCols, bMatrix = g.bRows * g.bCols;
  GemmBatch gemm;
  gemm.transA = call.transposeA, gemm.transB = call.transposeB;
  gemm.m = g.m, gemm.n = g.n, gemm.k = g.k;
  gemm.a = at(call.a, g.aMatrix(first) * aMatrix), gemm.lda = g.aCols;
  gemm.b = at(call.b, g.bMatrix(first) * bMatrix), gemm.ldb = g.bCols;
  gemm.c = at(call.y, first * g.m * g.n), gemm.ldc = g.n;
  gemm.count = count;
  if (count > 1) {
    const MatmulGeometry::Run run = g.innerRun();
    gemm.strideA = run.aStep * aMatrix;
    gemm.strideB = run.bStep * bMatrix;
    gemm.strideC = g.m * g.n;
  }
  return gemm;
}

void KernelApi::matmul(StreamId s, const MatmulCall &call) {
  MatmulGeometry g;
  if (!matmulGeometryOf(call.aShape, call.bShape, call.transposeA,
                        call.transposeB, g))
    return; // validateBundle refused it
  const int64_t count = g.count(), run = g.innerRun().count;
  for (int64_t first = 0; first < count; first += run)
    gemm(s, matmulGemms(call, g, first, run));
}
