//===- BlasLibrary.h - The sgemm the CPU kernels call -----------*- C++ -*-===//
//
// The CPU kernels multiply through one CBLAS sgemm: OpenBLAS's, which the
// runtime links, or another library's, loaded once per process from the
// path in the environment variable GPIPE_BLAS_LIBRARY (Intel's MKL from PyPI,
// libmkl_rt.so.2, was 1.1x OpenBLAS's single-thread GEMM here:
// docs/Benchmarks.md). A loaded library runs single-threaded: the devices'
// threads share the cores. A path that cannot serve is an error when an
// engine is created, never a silent fall-back.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_BLASLIBRARY_H
#define GPIPE_RUNTIME_BLASLIBRARY_H

#include "gpipe/runtime/base/Status.h"

#include <cstdint>
#include <string>

namespace gpipe::runtime::cpu {

/// cblas_sgemm's signature, with CBLAS's enums as ints (row major 101, no
/// transpose 111, transpose 112).
using Sgemm = void (*)(int order, int transA, int transB, int m, int n, int k,
                       float alpha, const float *a, int lda, const float *b,
                       int ldb, float beta, float *c, int ldc);

/// Rows of C per part where a GEMM splits over threads. A BLAS groups the
/// rows of each call for its kernels, so a part gets the bits of the whole
/// call only if it starts on a group: measured with OpenBLAS 0.3.21,
/// multiples of 12 rows of a row-major C with its Zen/Haswell kernels (4,
/// 8 and 16 changed bits), 8 with SkylakeX's, and no split of the columns at
/// all (nearly every column split changed some bits). So the kernels split
/// rows only, at multiples of both.
constexpr int64_t kBlasRowGrain = 24;

/// A product whose C has too few rows to split evenly (under 4
/// kBlasRowGrain) but more than kBlasColumnBlock columns runs as one call
/// per block of that many columns, on one thread as on many: a fixed
/// decomposition, so its bits do not depend on the thread count, and the
/// threads share the blocks. (A micro-batch of 64 rows times a 512-wide
/// layer: the row split would give one of two threads 40 rows of 64.)
constexpr int64_t kBlasColumnBlock = 128;
inline bool blasSplitsColumns(int64_t m, int64_t n) {
  return m < 4 * kBlasRowGrain && n > kBlasColumnBlock;
}

/// The first row of part `part` of `parts` when a GEMM's m rows split over
/// threads: the multiple of kBlasRowGrain nearest an even share (m for the
/// end). Parts may be empty; 64 rows in two parts are 24 and 40.
inline int64_t blasRowPartStart(int64_t m, int64_t parts, int64_t part) {
  if (part >= parts)
    return m;
  int64_t even = m * part / parts;
  int64_t snapped = (even + kBlasRowGrain / 2) / kBlasRowGrain * kBlasRowGrain;
  return snapped < m ? snapped : m;
}

struct BlasLibrary {
  Sgemm sgemm = nullptr;
  /// "OpenBLAS 0.3.21" or the loaded file's path.
  std::string name;
  /// Why the library asked for could not be used ("" when it serves); the
  /// sgemm is then OpenBLAS's.
  std::string error;
};

/// Loads `path` (dlopen) and sets it to one thread: MKL's sequential
/// threading layer, OpenBLAS's or BLIS's thread count. An error names the
/// path and what failed; "" gives OpenBLAS's, linked.
BlasLibrary loadBlasLibrary(const std::string &path);

/// The process's library: loadBlasLibrary of GPIPE_BLAS_LIBRARY, read once.
const BlasLibrary &blas();

/// OK, or Unavailable with blas().error, for an engine about to run CPU
/// devices (or the host emulation, whose kernels are the CPU's).
Status checkBlas();

} // namespace gpipe::runtime::cpu

#endif // GPIPE_RUNTIME_BLASLIBRARY_H
