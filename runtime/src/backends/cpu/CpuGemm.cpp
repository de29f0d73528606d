//===- CpuGemm.cpp - GEMMs over a CPU device's threads --------------------===//

#include "backends/cpu/CpuGemm.h"

#include "gpipe/runtime/kernels/BlasLibrary.h"
#include "gpipe/runtime/backends/HostWork.h"

#include <algorithm>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

namespace {

/// Multiply-adds under which a GEMM runs on one thread.
constexpr int64_t kGemmSplitWork = int64_t(1) << 18;

} // namespace

void gpipe::runtime::device::runGemmSplit(const GemmBatch &g,
                                          IntraOpPool &pool) {
  if (pool.threads() == 1 || g.m * g.n * g.k * g.count < kGemmSplitWork ||
      (g.count < int64_t(pool.threads()) && g.m < 2 * cpu::kBlasRowGrain &&
       !cpu::blasSplitsColumns(g.m, g.n))) {
    runGemmOnHost(g);
    return;
  }
  if (g.count >= int64_t(pool.threads())) {
    pool.parallelFor(g.count, 1, [&](int64_t b, int64_t e) {
      GemmBatch part = g;
      part.a += b * g.strideA;
      part.b += b * g.strideB;
      part.c += b * g.strideC;
      part.count = e - b;
      runGemmOnHost(part);
    });
  } else if (cpu::blasSplitsColumns(g.m, g.n)) {
    // The blocks runGemmOnHost would run one after another.
    const int64_t block = cpu::kBlasColumnBlock;
    pool.parallelFor((g.n + block - 1) / block, 1, [&](int64_t b, int64_t e) {
      for (int64_t count = 0; count < g.count; ++count)
        for (int64_t blockIndex = b; blockIndex < e; ++blockIndex) {
          const int64_t first = blockIndex * block;
          GemmBatch part = g;
          part.count = 1;
          part.a += count * g.strideA;
          part.b += count * g.strideB + (g.transB ? first * g.ldb : first);
          part.c += count * g.strideC + first;
          part.n = std::min(block, g.n - first);
          runGemmOnHost(part);
        }
    });
  } else {
    const int64_t parts = pool.threads();
    pool.parallelFor(parts, 1, [&](int64_t first, int64_t last) {
      int64_t b = cpu::blasRowPartStart(g.m, parts, first);
      int64_t e = cpu::blasRowPartStart(g.m, parts, last);
      if (b == e)
        return;
      GemmBatch part = g;
      part.a += g.transA ? b : b * g.lda;
      part.c += b * g.ldc;
      part.m = e - b;
      runGemmOnHost(part, g.m); // the whole product's column blocks: none
    });
  }
}

void gpipe::runtime::device::runMatmulSplit(const MatmulCall &call,
                                            IntraOpPool &pool) {
  MatmulGeometry g;
  if (!matmulGeometryOf(call.aShape, call.bShape, call.transposeA,
                        call.transposeB, g))
    return; // validateBundle refused it
  const int64_t count = g.count();
  auto products = [&](int64_t begin, int64_t end) {
    for (int64_t matrix = begin; matrix < end; ++matrix)
      runGemmOnHost(matmulGemms(call, g, matrix, 1));
  };
  if (pool.threads() == 1 || g.m * g.n * g.k * count < kGemmSplitWork) {
    products(0, count);
  } else if (count >= int64_t(pool.threads())) {
    pool.parallelFor(count, 1, products);
  } else {
    // Fewer matrices than threads: each over all of them, with the bits of
    // its own single call.
    for (int64_t matrix = 0; matrix < count; ++matrix)
      runGemmSplit(matmulGemms(call, g, matrix, 1), pool);
  }
}

void gpipe::runtime::device::runPackedGemm(const GemmBatch &g,
                                           IntraOpPool &pool,
                                           PackedWeightCache &cache) {
  const bool alone = g.m * g.n * g.k < kGemmSplitWork;
  auto split = [&](int64_t n, auto body) {
    if (alone)
      body(int64_t(0), n);
    else
      pool.parallelFor(n, 1, body);
  };
  const PackedMatrix &b = cache.get(g.b, g.ldb, g.transB, g.k, g.n, split);
  if (b.panels() >= 2 * int64_t(pool.threads())) {
    split(b.panels(), [&](int64_t begin, int64_t end) {
      packedGemm(g.a, g.lda, b, g.alpha, g.beta, g.c, g.ldc, 0, g.m, begin,
                 end);
    });
  } else {
    const int64_t block = kPackedGemmRows;
    split((g.m + block - 1) / block, [&](int64_t begin, int64_t end) {
      packedGemm(g.a, g.lda, b, g.alpha, g.beta, g.c, g.ldc, block * begin,
                 std::min(g.m, block * end), 0, b.panels());
    });
  }
}
