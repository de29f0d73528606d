//===- CublasGemm.cpp - Row-major float GEMM on cuBLAS --------------------===//

#include "gpipe/cuda/CublasGemm.h"

#include "Bf16Convert.h"

#include <cublas_v2.h>

#include <algorithm>
#include <climits>

namespace gpipe::cuda {

namespace {

std::string cublasText(cublasStatus_t s) {
  return std::string(cublasGetStatusName(s)) + ": " + cublasGetStatusString(s);
}

CudaStatus cudaFailure(const std::string &what, cudaError_t err) {
  (void)cudaGetLastError();
  return CudaStatus::failure(what + " failed: " + cudaErrorText(err));
}

/// Elements spanned by a row-major rows x cols matrix with row stride ld.
size_t storedExtent(int64_t rows, int64_t cols, int64_t ld) {
  if (rows == 0 || cols == 0)
    return 0;
  return static_cast<size_t>((rows - 1) * ld + cols);
}

} // namespace

const char *gemmPrecisionName(GemmPrecision p) {
  switch (p) {
  case GemmPrecision::F32:
    return "f32";
  case GemmPrecision::TF32:
    return "tf32";
  case GemmPrecision::BF16:
    return "bf16";
  }
  return "?";
}

CudaStatus checkGemmArgs(const GemmArgs &g) {
  auto shape = [&] {
    return "gemm (m=" + std::to_string(g.m) + ", n=" + std::to_string(g.n) +
           ", k=" + std::to_string(g.k) + ", transA=" +
           (g.transA ? "1" : "0") + ", transB=" + (g.transB ? "1" : "0") +
           ")";
  };
  if (g.m < 0 || g.n < 0 || g.k < 0)
    return CudaStatus::failure(shape() + ": negative size");
  const int64_t intMax = INT_MAX;
  if (g.m > intMax || g.n > intMax || g.k > intMax || g.lda > intMax ||
      g.ldb > intMax || g.ldc > intMax)
    return CudaStatus::failure(shape() +
                               ": a size or leading dimension exceeds "
                               "cuBLAS's 32-bit int range");
  // Stored row lengths (row-major).
  int64_t aCols = g.transA ? g.m : g.k, aRows = g.transA ? g.k : g.m;
  int64_t bCols = g.transB ? g.k : g.n, bRows = g.transB ? g.n : g.k;
  auto checkLd = [&](const char *name, int64_t ld, int64_t cols) {
    int64_t need = cols > 1 ? cols : 1;
    if (ld < need)
      return CudaStatus::failure(shape() + ": ld" + name + "=" +
                                 std::to_string(ld) + " is less than the " +
                                 std::to_string(need) +
                                 " columns stored per row of " + name);
    return CudaStatus::success();
  };
  if (CudaStatus st = checkLd("a", g.lda, aCols); !st.ok)
    return st;
  if (CudaStatus st = checkLd("b", g.ldb, bCols); !st.ok)
    return st;
  if (CudaStatus st = checkLd("c", g.ldc, g.n); !st.ok)
    return st;
  if (aRows * aCols > 0 && !g.a)
    return CudaStatus::failure(shape() + ": A is null");
  if (bRows * bCols > 0 && !g.b)
    return CudaStatus::failure(shape() + ": B is null");
  if (g.m * g.n > 0 && !g.c)
    return CudaStatus::failure(shape() + ": C is null");
  return CudaStatus::success();
}

CublasGemm::~CublasGemm() { release(); }

void CublasGemm::release() {
  if (gpu >= 0)
    (void)cudaSetDevice(gpu);
  if (handle)
    (void)cublasDestroy(static_cast<cublasHandle_t>(handle));
  if (scratch)
    (void)cudaFree(scratch);
  handle = nullptr;
  scratch = nullptr;
  scratchElements = 0;
  stream = nullptr;
  gpu = -1;
  (void)cudaGetLastError();
}

CudaStatus CublasGemm::init(int gpuOrdinal, cudaStream_t s) {
  release();
  cudaError_t err = cudaSetDevice(gpuOrdinal);
  if (err != cudaSuccess)
    return cudaFailure("cublas gemm: cudaSetDevice(" +
                           std::to_string(gpuOrdinal) + ")",
                       err);
  cublasHandle_t h = nullptr;
  cublasStatus_t cs = cublasCreate(&h);
  if (cs != CUBLAS_STATUS_SUCCESS)
    return CudaStatus::failure("cublasCreate on GPU " +
                               std::to_string(gpuOrdinal) +
                               " failed: " + cublasText(cs));
  cs = cublasSetStream(h, s);
  if (cs != CUBLAS_STATUS_SUCCESS) {
    (void)cublasDestroy(h);
    return CudaStatus::failure("cublasSetStream failed: " + cublasText(cs));
  }
  handle = h;
  stream = s;
  gpu = gpuOrdinal;
  return CudaStatus::success();
}

CudaStatus CublasGemm::ensureScratch(size_t elements) {
  if (elements <= scratchElements)
    return CudaStatus::success();
  // Stream-ordered: the old buffer is freed once the conversions queued
  // before it have run, and nothing synchronizes the device mid-step (as
  // cudaFree would). Growth by half again keeps reallocations rare.
  elements = std::max(elements, scratchElements + scratchElements / 2);
  if (scratch) {
    cudaError_t err = cudaFreeAsync(scratch, stream);
    scratch = nullptr;
    scratchElements = 0;
    if (err != cudaSuccess)
      return cudaFailure("cublas gemm: cudaFreeAsync of the bf16 scratch", err);
  }
  cudaError_t err =
      cudaMallocAsync(&scratch, elements * 2 /*sizeof bf16*/, stream);
  if (err != cudaSuccess) {
    scratch = nullptr;
    return cudaFailure("cublas gemm: cudaMallocAsync of " +
                           std::to_string(elements * 2) +
                           " bytes of bf16 scratch",
                       err);
  }
  scratchElements = elements;
  return CudaStatus::success();
}

CudaStatus CublasGemm::gemm(GemmPrecision precision, const GemmArgs &g) {
  return gemmStridedBatched(precision, g, 1, 0, 0, 0);
}

CudaStatus CublasGemm::gemmStridedBatched(GemmPrecision precision,
                                          const GemmArgs &g, int64_t count,
                                          int64_t strideA, int64_t strideB,
                                          int64_t strideC) {
  if (!handle)
    return CudaStatus::failure("cublas gemm: init() was not called");
  if (CudaStatus st = checkGemmArgs(g); !st.ok)
    return st;
  if (count < 0 || count > INT_MAX)
    return CudaStatus::failure("cublas gemm: batch count " +
                               std::to_string(count) + " outside [0, INT_MAX]");
  if (strideA < 0 || strideB < 0 || strideC < 0)
    return CudaStatus::failure("cublas gemm: negative batch stride");
  if (g.m == 0 || g.n == 0 || count == 0)
    return CudaStatus::success();
  cudaError_t err = cudaSetDevice(gpu);
  if (err != cudaSuccess)
    return cudaFailure("cublas gemm: cudaSetDevice(" + std::to_string(gpu) +
                           ")",
                       err);

  // Row-major C (m x n) is column-major C^T (n x m) with the same ld, so
  // compute C^T = op(B)^T op(A)^T: cuBLAS's first operand is B, the second
  // A. A row-major matrix read as column-major is its transpose, so op(B)^T
  // is B's buffer untransposed exactly when transB is false (same for A).
  cublasOperation_t opB = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opA = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const void *aPtr = g.a, *bPtr = g.b;
  cudaDataType_t abType = CUDA_R_32F;
  cublasComputeType_t compute = precision == GemmPrecision::TF32
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  if (precision == GemmPrecision::BF16) {
    // Each operand's whole batched span, converted once: attention's heads
    // are strided views of one interleaved buffer, which a conversion per
    // head would convert `count` times. The copies keep the layout, so the
    // strides and leading dimensions stay as they are.
    auto span = [count](size_t extent, int64_t stride) {
      return extent == 0 ? 0 : extent + size_t(count - 1) * size_t(stride);
    };
    size_t aN =
        span(storedExtent(g.transA ? g.k : g.m, g.transA ? g.m : g.k, g.lda),
             strideA);
    size_t bN =
        g.bBf16 ? 0
                : span(storedExtent(g.transB ? g.n : g.k, g.transB ? g.k : g.n,
                                    g.ldb),
                       strideB);
    size_t aPadded = (aN + 127) / 128 * 128; // keep B 256-byte aligned
    if (CudaStatus st = ensureScratch(aPadded + bN); !st.ok)
      return st;
    char *base = static_cast<char *>(scratch);
    void *aBf = base, *bBf = base + aPadded * 2;
    if ((err = detail::launchFloatToBf16(g.a, aBf, aN, stream)) !=
        cudaSuccess)
      return cudaFailure("cublas gemm: bf16 conversion of A", err);
    if (g.bBf16)
      bBf = const_cast<void *>(g.bBf16);
    else if ((err = detail::launchFloatToBf16(g.b, bBf, bN, stream)) !=
             cudaSuccess)
      return cudaFailure("cublas gemm: bf16 conversion of B", err);
    aPtr = aBf;
    bPtr = bBf;
    abType = CUDA_R_16BF;
  }

  // k == 0 is legal for cuBLAS (C = beta * C) but A/B may be null then and
  // their leading dimensions must still be >= 1; checkGemmArgs ensured that.
  cublasStatus_t cs = cublasGemmStridedBatchedEx(
      static_cast<cublasHandle_t>(handle), opB, opA, static_cast<int>(g.n),
      static_cast<int>(g.m), static_cast<int>(g.k), &g.alpha, bPtr, abType,
      static_cast<int>(g.ldb), strideB, aPtr, abType, static_cast<int>(g.lda),
      strideA, &g.beta, g.c, CUDA_R_32F, static_cast<int>(g.ldc), strideC,
      static_cast<int>(count), compute, CUBLAS_GEMM_DEFAULT);
  if (cs != CUBLAS_STATUS_SUCCESS)
    return CudaStatus::failure(std::string("cublasGemmStridedBatchedEx (") +
                               gemmPrecisionName(precision) +
                               ") failed: " + cublasText(cs));
  return CudaStatus::success();
}

} // namespace gpipe::cuda
