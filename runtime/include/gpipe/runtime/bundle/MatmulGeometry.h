//===- MatmulGeometry.h - The matrices of a broadcasting matmul -*- C++ -*-===//
//
// numpy.matmul for ranks >= 2, as the bundle's `matmul` op computes it: a is
// [A..., ra, ca] and b [B..., rb, cb]; op(a) is a, or a with its last two
// dimensions swapped (transpose_a), so [..., M, K]; op(b) likewise [..., K,
// N]. The result y is [C..., M, N], C the NumPy broadcast of A and B
// (aligned at the right; a missing or size-1 dimension stretches), and its
// matrix c is op(a)'s matrix at c's index in A times op(b)'s at c's index in
// B. The validation (MatmulValidation.cpp) and every backend's kernel
// (KernelApi's matmul) read the same geometry. Header-only and free of any
// dependency, like OpTable.h.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_MATMULGEOMETRY_H
#define GPIPE_RUNTIME_MATMULGEOMETRY_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpipe::runtime {

struct MatmulGeometry {
  /// op(a) is m x k, op(b) k x n.
  int64_t m = 0, n = 0, k = 0;
  /// The stored matrices: a's rows x cols (its last two dimensions), b's.
  int64_t aRows = 0, aCols = 0, bRows = 0, bCols = 0;
  /// y's batch dimensions C..., and per dimension how many of a's (b's)
  /// matrices one step of it moves by: 0 where a (b) broadcasts over it.
  std::vector<int64_t> batch, aStep, bStep;

  /// y's matrices: the product of `batch`.
  int64_t count() const {
    int64_t n = 1;
    for (int64_t size : batch)
      n *= size;
    return n;
  }
  /// y's shape: C..., m, n.
  std::vector<int64_t> resultShape() const {
    std::vector<int64_t> shape = batch;
    shape.push_back(m);
    shape.push_back(n);
    return shape;
  }
  /// The index of a's (b's) matrix that y's matrix `matrix` reads.
  int64_t aMatrix(int64_t matrix) const { return sourceOf(matrix, aStep); }
  int64_t bMatrix(int64_t matrix) const { return sourceOf(matrix, bStep); }

  /// y's last batch dimensions merged into one run of uniform strides: its
  /// `count` consecutive matrices of y read a's matrices `aStep` apart and
  /// b's `bStep` apart (a strided GEMM batch), from any first matrix that
  /// is a multiple of `count`.
  struct Run {
    int64_t count = 1, aStep = 0, bStep = 0;
  };
  Run innerRun() const {
    Run run;
    bool first = true;
    for (size_t d = batch.size(); d-- > 0;) {
      if (batch[d] == 1)
        continue; // no steps along it
      if (first) {
        run = {batch[d], aStep[d], bStep[d]};
        first = false;
      } else if (aStep[d] == run.aStep * run.count &&
                 bStep[d] == run.bStep * run.count) {
        run.count *= batch[d];
      } else {
        break;
      }
    }
    return run;
  }

private:
  int64_t sourceOf(int64_t matrix, const std::vector<int64_t> &step) const {
    int64_t index = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      index += matrix % batch[d] * step[d];
      matrix /= batch[d];
    }
    return index;
  }
};

/// The geometry of a matmul of `a` (`aRank` sizes) and `b`, or false where
/// a rank is under 2, the contracted sizes differ or the batch dimensions
/// do not broadcast (the validation names which).
inline bool matmulGeometryOf(const int64_t *a, size_t aRank, const int64_t *b,
                             size_t bRank, bool transposeA, bool transposeB,
                             MatmulGeometry &g) {
  if (aRank < 2 || bRank < 2)
    return false;
  g = MatmulGeometry();
  g.aRows = a[aRank - 2], g.aCols = a[aRank - 1];
  g.bRows = b[bRank - 2], g.bCols = b[bRank - 1];
  g.m = transposeA ? g.aCols : g.aRows;
  g.k = transposeA ? g.aRows : g.aCols;
  const int64_t bK = transposeB ? g.bCols : g.bRows;
  g.n = transposeB ? g.bRows : g.bCols;
  if (bK != g.k)
    return false;
  const size_t aBatch = aRank - 2, bBatch = bRank - 2;
  const size_t rank = aBatch > bBatch ? aBatch : bBatch;
  g.batch.assign(rank, 1);
  g.aStep.assign(rank, 0);
  g.bStep.assign(rank, 0);
  // From the right: each operand's matrices are row-major over its own
  // batch dimensions.
  int64_t aStride = 1, bStride = 1;
  for (size_t i = 0; i < rank; ++i) {
    const size_t d = rank - 1 - i;
    const int64_t aSize = i < aBatch ? a[aBatch - 1 - i] : 1;
    const int64_t bSize = i < bBatch ? b[bBatch - 1 - i] : 1;
    if (aSize != bSize && aSize != 1 && bSize != 1)
      return false;
    g.batch[d] = aSize == 1 ? bSize : aSize;
    g.aStep[d] = aSize == 1 ? 0 : aStride;
    g.bStep[d] = bSize == 1 ? 0 : bStride;
    aStride *= aSize;
    bStride *= bSize;
  }
  return true;
}

inline bool matmulGeometryOf(const std::vector<int64_t> &a,
                             const std::vector<int64_t> &b, bool transposeA,
                             bool transposeB, MatmulGeometry &g) {
  return matmulGeometryOf(a.data(), a.size(), b.data(), b.size(), transposeA,
                          transposeB, g);
}

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_MATMULGEOMETRY_H
