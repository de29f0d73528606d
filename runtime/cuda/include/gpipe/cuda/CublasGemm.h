//===- CublasGemm.h - Row-major float GEMM on cuBLAS -------------*- C++ -*-===//
//
// C = alpha * op(A) * op(B) + beta * C for row-major float matrices, with a
// choice of precision:
//   F32  - CUBLAS_COMPUTE_32F (true fp32 arithmetic),
//   TF32 - CUBLAS_COMPUTE_32F_FAST_TF32 (tensor cores, tf32 inputs),
//   BF16 - A and B converted to bf16 on the device (round to nearest even),
//          fp32 accumulation (CUBLAS_COMPUTE_32F) and fp32 output.
// Row-major is handled by computing C^T = op(B)^T op(A)^T in cuBLAS's
// column-major convention, which needs no copies.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_CUDA_CUBLASGEMM_H
#define GPIPE_CUDA_CUBLASGEMM_H

#include "gpipe/cuda/CudaDevices.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gpipe::cuda {

enum class GemmPrecision { F32, TF32, BF16 };

const char *gemmPrecisionName(GemmPrecision p);

/// A row-major GEMM: op(A) is M x K, op(B) is K x N, C is M x N. A is stored
/// M x K (K x M when transA) with row stride lda; likewise B (K x N, or
/// N x K when transB) with ldb and C (M x N) with ldc. Pointers are device
/// pointers.
struct GemmArgs {
  bool transA = false;
  bool transB = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float *a = nullptr;
  int64_t lda = 0;
  const float *b = nullptr;
  int64_t ldb = 0;
  float beta = 0.0f;
  float *c = nullptr;
  int64_t ldc = 0;
  /// BF16 only: B already converted to bf16 in B's layout (a parameter's
  /// copy, converted once per step), or null to convert it here.
  const void *bBf16 = nullptr;
};

/// Shape / stride validation (no CUDA calls): sizes >= 0, leading dimensions
/// at least the stored row length, everything within cuBLAS's int range,
/// non-null pointers when the matrix is non-empty. Pure; exposed for tests.
CudaStatus checkGemmArgs(const GemmArgs &args);

/// One cuBLAS handle bound to one GPU and stream, plus the bf16 scratch
/// buffers of the BF16 path. Not thread-safe; use one per pipeline device.
class CublasGemm {
public:
  CublasGemm() = default;
  ~CublasGemm();
  CublasGemm(const CublasGemm &) = delete;
  CublasGemm &operator=(const CublasGemm &) = delete;

  /// Creates the handle on GPU `gpu` and binds it to `stream`.
  CudaStatus init(int gpu, cudaStream_t stream);

  /// Enqueues the GEMM on the stream (asynchronous: synchronize the stream
  /// before reading C on the host).
  CudaStatus gemm(GemmPrecision precision, const GemmArgs &args);
  /// `count` GEMMs whose A, B and C start `strideA`, `strideB`, `strideC`
  /// elements apart (attention's heads): one cublasGemmStridedBatchedEx in
  /// every precision. BF16 first converts each operand's whole span to bf16
  /// once, on the stream, into scratch that grows stream-ordered
  /// (cudaMallocAsync), never synchronizing the device.
  CudaStatus gemmStridedBatched(GemmPrecision precision, const GemmArgs &args,
                                int64_t count, int64_t strideA,
                                int64_t strideB, int64_t strideC);

  void release();

private:
  CudaStatus ensureScratch(std::size_t elements);

  int gpu = -1;
  cudaStream_t stream = nullptr;
  void *handle = nullptr;   ///< cublasHandle_t
  void *scratch = nullptr;  ///< bf16 copies of A then B
  std::size_t scratchElements = 0;
};

} // namespace gpipe::cuda

#endif // GPIPE_CUDA_CUBLASGEMM_H
