//===- HostWork.cpp - Stream work that backends on the host share ---------===//

#include "gpipe/runtime/backends/HostWork.h"
#include "gpipe/runtime/kernels/BlasLibrary.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstring>

using namespace gpipe::runtime::device;

HostBlock gpipe::runtime::device::allocateHostBlock(int64_t bytes,
                                                    int64_t alignment) {
  HostBlock block;
  if (bytes < 0 || uint64_t(bytes) > SIZE_MAX - uint64_t(alignment))
    return block;
  block.owner.reset(
      static_cast<char *>(std::malloc(size_t(bytes) + alignment)));
  if (block.owner)
    block.aligned = reinterpret_cast<char *>(
        (reinterpret_cast<uintptr_t>(block.owner.get()) + alignment - 1) &
        ~uintptr_t(alignment - 1));
  return block;
}

void gpipe::runtime::device::runGemmOnHost(const GemmBatch &g) {
  runGemmOnHost(g, g.m);
}

void gpipe::runtime::device::runGemmOnHost(const GemmBatch &g,
                                           int64_t wholeRows) {
  for (int64_t i = 0; i < g.count; ++i) {
    float *c = g.c + i * g.strideC;
    if (g.k == 0) { // cblas leaves C untouched for k = 0; beta still scales
      for (int64_t r = 0; r < g.m; ++r)
        for (int64_t col = 0; col < g.n; ++col)
          c[r * g.ldc + col] *= g.beta;
      continue;
    }
    const int64_t block =
        cpu::blasSplitsColumns(wholeRows, g.n) ? cpu::kBlasColumnBlock : g.n;
    for (int64_t first = 0; first < g.n; first += block) {
      const float *b = g.b + i * g.strideB + (g.transB ? first * g.ldb : first);
      cpu::blas().sgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans,
                        g.transB ? CblasTrans : CblasNoTrans, int(g.m),
                        int(std::min(block, g.n - first)), int(g.k), g.alpha,
                        g.a + i * g.strideA, int(g.lda), b, int(g.ldb), g.beta,
                        c + first, int(g.ldc));
    }
  }
}

double gpipe::runtime::device::hostMicroseconds() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void HostStreamBackend::copyToDevice(StreamId s, void *dst, const void *hostSrc,
                                     int64_t bytes) {
  enqueue(s, [=] { std::memcpy(dst, hostSrc, size_t(bytes)); });
}

void HostStreamBackend::copyToHost(StreamId s, void *hostDst, const void *src,
                                   int64_t bytes) {
  enqueue(s, [=] { std::memcpy(hostDst, src, size_t(bytes)); });
}

void HostStreamBackend::copyBetweenDevices(StreamId s, void *dst, unsigned,
                                           const void *src, unsigned,
                                           int64_t bytes) {
  enqueue(s, [=] { std::memmove(dst, src, size_t(bytes)); });
}

void HostStreamBackend::fillZero(StreamId s, void *dst, int64_t bytes) {
  enqueue(s, [=] { std::memset(dst, 0, size_t(bytes)); });
}

void HostStreamBackend::recordTime(StreamId s, double *slot) {
  enqueue(s, [slot] { *slot = hostMicroseconds(); });
}

void HostStreamBackend::gemm(StreamId stream, const GemmBatch &call) {
  enqueue(stream, [call] { runGemmOnHost(call); });
}

void HostStreamBackend::generated(StreamId s, const GeneratedCall &call) {
  if (call.outputElements() > 0)
    enqueue(s, [call] { runGeneratedOnHost(call); });
}
