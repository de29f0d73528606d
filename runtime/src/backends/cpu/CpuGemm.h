//===- CpuGemm.h - GEMMs over a CPU device's threads -----------*- C++ -*-===//
//
// The CPU backend's GEMMs, split over the device's IntraOpPool threads so that
// every element of C gets the bits of one single-threaded call: through the
// BLAS, or with the packed copy of a parameter (PackedGemm.h); and matmul's
// products, one BLAS call per matrix of its result.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_CPUGEMM_H
#define GPIPE_RUNTIME_DEVICE_CPUGEMM_H

#include "gpipe/runtime/backends/cpu/IntraOpPool.h"
#include "gpipe/runtime/kernels/KernelApi.h"
#include "gpipe/runtime/kernels/PackedGemm.h"

namespace gpipe::runtime::device {

/// `g` through the BLAS over `pool`'s threads: by batch entries when there
/// are enough, else by the column blocks runGemmOnHost runs, else by C's
/// rows in parts starting at multiples of kBlasRowGrain, else on one thread.
void runGemmSplit(const GemmBatch &g, IntraOpPool &pool);

/// `call`'s products (KernelApi's matmul), one runGemmOnHost each: the
/// matrices over `pool`'s threads when there are as many as threads, else
/// each in turn through runGemmSplit (by rows or column blocks).
void runMatmulSplit(const MatmulCall &call, IntraOpPool &pool);

/// `g` (one product, A not transposed) with B's packed copy from `cache`,
/// over `pool`'s threads: by panels of B when there are two per thread,
/// else by blocks of kPackedGemmRows rows of C.
void runPackedGemm(const GemmBatch &g, IntraOpPool &pool,
                   PackedWeightCache &cache);

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_CPUGEMM_H
