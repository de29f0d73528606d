//===- ReferenceMatmul.h - numpy.matmul in double precision -----*- C++ -*-===//
//
// The matmul tests' reference: numpy.matmul's broadcasting written out as
// nested loops in double, walking y's batch indices with an odometer and
// reading each operand at the index its own dimensions give (0 where its
// size is 1, nothing where it has no such dimension). It shares no code
// with the runtime's MatmulGeometry.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_REFERENCEMATMUL_H
#define GPIPE_RUNTIME_TESTS_REFERENCEMATMUL_H

#include <algorithm>
#include <cstdint>
#include <vector>

namespace gpipe::runtime::testing {

struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

/// y = numpy.matmul(op(a), op(b)), op transposing the last two dimensions
/// where asked. The shapes must be valid.
inline RefTensor refMatmul(const RefTensor &a, const RefTensor &b,
                           bool transposeA, bool transposeB) {
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const int64_t aRows = a.shape[ra - 2], aCols = a.shape[ra - 1];
  const int64_t bRows = b.shape[rb - 2], bCols = b.shape[rb - 1];
  const int64_t m = transposeA ? aCols : aRows, k = transposeA ? aRows : aCols;
  const int64_t n = transposeB ? bRows : bCols;
  // y's batch dimensions; operand dimension d sits at y's d + (rank - its).
  const size_t rank = std::max(ra, rb) - 2;
  const size_t aShift = rank - (ra - 2), bShift = rank - (rb - 2);
  std::vector<int64_t> batch(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    if (i >= aShift)
      batch[i] = std::max(batch[i], a.shape[i - aShift]);
    if (i >= bShift)
      batch[i] = std::max(batch[i], b.shape[i - bShift]);
  }
  RefTensor y;
  y.shape = batch;
  y.shape.push_back(m);
  y.shape.push_back(n);
  int64_t count = 1;
  for (int64_t size : batch)
    count *= size;
  y.data.assign(size_t(count * m * n), 0.0);
  std::vector<int64_t> index(rank, 0); // the odometer over y's batch
  for (int64_t matrix = 0; matrix < count; ++matrix) {
    // The operands' matrices at this index, row-major over their own batch
    // dimensions.
    int64_t aMatrix = 0, bMatrix = 0;
    for (size_t d = 0; d + 2 < ra; ++d)
      aMatrix =
          aMatrix * a.shape[d] + (a.shape[d] == 1 ? 0 : index[d + aShift]);
    for (size_t d = 0; d + 2 < rb; ++d)
      bMatrix =
          bMatrix * b.shape[d] + (b.shape[d] == 1 ? 0 : index[d + bShift]);
    const double *pa = a.data.data() + aMatrix * aRows * aCols;
    const double *pb = b.data.data() + bMatrix * bRows * bCols;
    double *py = y.data.data() + matrix * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          double left = transposeA ? pa[p * aCols + i] : pa[i * aCols + p];
          double right = transposeB ? pb[j * bCols + p] : pb[p * bCols + j];
          sum += left * right;
        }
        py[i * n + j] = sum;
      }
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < batch[d])
        break;
      index[d] = 0;
    }
  }
  return y;
}

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_REFERENCEMATMUL_H
