//===- PackedGemm.h - Weights packed once per step for the CPU --*- C++ -*-===//
//
// A pipeline step multiplies every weight by M micro-batches (and again in
// the recompute and in the input gradient). A BLAS packs and streams B anew
// for each of those products, which at 64-row micro-batches costs more than
// the arithmetic.
// Here a weight is packed once into 32-column panels (each panel row after
// row, the last padded with zeros), and each product runs an AVX-512 kernel
// over 12 rows x 32 columns of C (an AVX2 one over 3 rows without it). Every
// element of C is one dot product over k in order, so the bits depend neither
// on how rows or panels are split over threads nor on the micro-batch size.
//
// The CPU backend uses it for GEMMs whose B is a parameter
// (GemmBatch::bIsParameter), packing each on first use after a synchronize
// (PackedWeightCache); on CPUs with neither AVX-512 nor AVX2 and FMA it
// keeps calling the BLAS.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_PACKEDGEMM_H
#define GPIPE_RUNTIME_DEVICE_PACKEDGEMM_H

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

namespace gpipe::runtime::device {

/// The rows of C one kernel call computes; split rows in multiples of it.
constexpr int64_t kPackedGemmRows = 12;

/// Whether this CPU runs packedGemm (AVX-512F, or AVX2 with FMA, on x86-64).
bool packedGemmSupported();

/// B (k x n) in panels of kPanel columns: panel p holds columns
/// [kPanel p, kPanel p + kPanel) of rows 0 .. k-1, row after row.
class PackedMatrix {
public:
  static constexpr int64_t kPanel = 32;

  /// Sizes the storage for a k x n B (reusing it when large enough).
  void resize(int64_t k, int64_t n);
  /// Packs panels [begin, end) of B: element (r, c) at b[r ldb + c], or at
  /// b[c ldb + r] when `transposed` (B is then the transpose of a stored
  /// n x k matrix).
  void packPanels(const float *b, int64_t ldb, bool transposed, int64_t begin,
                  int64_t end);

  int64_t k() const { return rows; }
  int64_t n() const { return cols; }
  int64_t panels() const { return (cols + kPanel - 1) / kPanel; }
  const float *panel(int64_t p) const {
    return storage.get() + p * rows * kPanel;
  }
  /// Bytes held (capacity).
  int64_t bytes() const { return capacity * int64_t(sizeof(float)); }

private:
  struct Free {
    void operator()(float *p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> storage;
  int64_t capacity = 0, rows = 0, cols = 0;
};

/// C = alpha A B + beta C on rows [rowBegin, rowEnd) of C and the columns of
/// B's panels [panelBegin, panelEnd); A is row-major with leading dimension
/// lda (not transposed), C row-major with ldc. beta = 0 ignores C's old
/// values (as BLAS does). Requires packedGemmSupported().
void packedGemm(const float *a, int64_t lda, const PackedMatrix &b, float alpha,
                float beta, float *c, int64_t ldc, int64_t rowBegin,
                int64_t rowEnd, int64_t panelBegin, int64_t panelEnd);

/// One device's packed parameters. A parameter does not change between two
/// synchronizes of the backend (the optimizer writes it at the end of a
/// pass, setParameter and checkpoints between passes), so a packed copy is
/// valid until the next synchronize: `invalidate` marks every copy stale and
/// keeps the storage, so that steady-state steps allocate nothing.
///
/// A device waiting for a peer has nothing else to do, so the backend packs
/// ahead there: at issue time `expect` lists the parameters the run's GEMMs
/// will multiply by, in their order, and `packAhead` packs the next panels of
/// the first not yet packed. A pipeline's later stages wait for their first
/// input and its first stage for its first gradient; packed there, a step's
/// packing leaves its critical path.
/// Used from the device's own worker thread only (`expect`: by the issuing
/// host, while the workers sleep).
class PackedWeightCache {
public:
  /// The packed copy of B (see PackedMatrix::packPanels), packed now as far
  /// as it is stale; split(n, body) runs body(begin, end) over [0, n), on as
  /// many threads as it likes.
  template <class Split>
  const PackedMatrix &get(const float *b, int64_t ldb, bool transposed,
                          int64_t k, int64_t n, Split split) {
    Entry &entry = entries[Key(b, ldb, transposed, k, n)];
    packPanels(entry, b, ldb, transposed, k, n, panelsOf(n), split);
    return entry.matrix;
  }
  /// A GEMM issued for this run multiplies by B (the key of `get`).
  void expect(const float *b, int64_t ldb, bool transposed, int64_t k,
              int64_t n) {
    if (!expecting)
      return;
    Key key(b, ldb, transposed, k, n);
    Entry &entry = entries[key];
    if (!entry.expected) {
      entry.expected = true;
      expected.push_back(key);
    }
  }
  /// The GEMMs issued after this may multiply by parameters written before
  /// them in this run (by an optimizer step): none is packed ahead.
  void stopExpecting() { expecting = false; }
  /// Packs up to `maxPanels` panels of the first expected B not yet packed;
  /// false when every expected B is.
  template <class Split> bool packAhead(int64_t maxPanels, Split split) {
    for (; nextExpected < expected.size(); ++nextExpected) {
      const auto &[b, ldb, transposed, k, n] = expected[nextExpected];
      Entry &entry = entries[expected[nextExpected]];
      const int64_t done = entry.panelsDone;
      if (done == panelsOf(n))
        continue;
      const int64_t until = std::min(panelsOf(n), done + maxPanels);
      packPanels(entry, b, ldb, transposed, k, n, until, split);
      aheadPanels.fetch_add(until - done, std::memory_order_relaxed);
      return true;
    }
    return false;
  }
  /// Marks every copy stale (keeping the storage) and forgets the run's
  /// expected parameters.
  void invalidate() {
    for (auto &[key, entry] : entries) {
      entry.panelsDone = 0;
      entry.expected = false;
    }
    expected.clear();
    nextExpected = 0;
    expecting = true;
  }
  /// Bytes held by all copies.
  int64_t bytes() const;
  /// Panels packed ahead (by packAhead) since construction; read from any
  /// thread.
  int64_t panelsPackedAhead() const {
    return aheadPanels.load(std::memory_order_relaxed);
  }

private:
  using Key = std::tuple<const float *, int64_t, bool, int64_t, int64_t>;
  struct Entry {
    PackedMatrix matrix;
    int64_t panelsDone = 0; ///< packed in this run; the rest are stale
    bool expected = false;  ///< listed in `expected` for this run
  };
  static int64_t panelsOf(int64_t n) {
    return (n + PackedMatrix::kPanel - 1) / PackedMatrix::kPanel;
  }
  /// Packs `entry`'s panels [panelsDone, until), sizing it first.
  template <class Split>
  void packPanels(Entry &entry, const float *b, int64_t ldb, bool transposed,
                  int64_t k, int64_t n, int64_t until, Split split) {
    const int64_t from = entry.panelsDone;
    if (from >= until)
      return;
    PackedMatrix &matrix = entry.matrix;
    if (from == 0)
      matrix.resize(k, n);
    split(until - from, [&](int64_t begin, int64_t end) {
      matrix.packPanels(b, ldb, transposed, from + begin, from + end);
    });
    entry.panelsDone = until;
  }
  std::map<Key, Entry> entries;
  std::vector<Key> expected; ///< in issue order
  size_t nextExpected = 0;
  bool expecting = true;
  std::atomic<int64_t> aheadPanels{0};
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_PACKEDGEMM_H
