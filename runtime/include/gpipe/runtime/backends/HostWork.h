//===- HostWork.h - Stream work that backends on the host share -*- C++ -*-===//
//
// The bodies of the DeviceBackend calls that mean the same on every backend
// whose memory is host memory (the threaded CPU backend and the emulation of
// streams): a GEMM batch through CBLAS, and the timeline's clock.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_HOSTWORK_H
#define GPIPE_RUNTIME_DEVICE_HOSTWORK_H

#include "gpipe/runtime/kernels/ColumnKernels.h"
#include "gpipe/runtime/backends/DeviceBackend.h"
#include "gpipe/runtime/kernels/DeviceKernels.h"
#include "gpipe/runtime/kernels/KernelApi.h"

#include <cstdlib>
#include <functional>
#include <memory>

namespace gpipe::runtime::device {

/// Host memory from malloc, not operator new: the new-handler a tool may
/// install (LLVM's aborts with "out of memory") must not turn a device
/// allocation that fails into a crash; it is an error the caller reports.
struct HostBlock {
  std::unique_ptr<char, void (*)(void *)> owner{nullptr, std::free};
  char *aligned = nullptr; ///< null when the allocation failed
};

/// `bytes` at an address that is a multiple of `alignment` (a power of 2).
HostBlock allocateHostBlock(int64_t bytes, int64_t alignment);

/// Runs `call` with cblas_sgemm, one product per batch entry, in blocks of
/// kBlasColumnBlock columns where blasSplitsColumns (BlasLibrary.h).
void runGemmOnHost(const GemmBatch &call);
/// The same for a part of a product of `wholeRows` rows, split by rows: its
/// columns are blocked as the whole product's are, since OpenBLAS's
/// Haswell/Zen kernels give other bits for a column split.
void runGemmOnHost(const GemmBatch &call, int64_t wholeRows);

/// The host's steady clock in microseconds (DeviceBackend::recordTime).
double hostMicroseconds();

/// A DeviceBackend whose memory is host memory and whose streams are queues of
/// host closures: the data movement, GEMM and clock calls are one closure each
/// and mean the same whichever way the queues are drained, so they live here
/// and each backend supplies only `enqueue` (and its kernels and draining).
class HostStreamBackend : public DeviceBackend {
public:
  /// KernelsByFunctor's element-wise loop: one closure over all `n` indices.
  template <class F> void forEach(StreamId stream, int64_t n, const F &f) {
    enqueue(stream, [f, n] {
      for (int64_t i = 0; i < n; ++i)
        f(i);
    });
  }

  /// KernelsByFunctor's row kernels: one closure over all `rows` rows.
  template <class F>
  void forEachRow(StreamId stream, int64_t rows, const F &f) {
    enqueue(stream, [f, rows] {
      for (int64_t r = 0; r < rows; ++r)
        kernels::runRowOnHost(f, r);
    });
  }

  /// KernelsByFunctor's column kernels: one closure over all `cols` columns.
  template <class F>
  void forEachColumn(StreamId stream, int64_t cols, const F &f) {
    enqueue(stream, [f, cols] {
      for (int64_t c = 0; c < cols; ++c)
        kernels::runColumnOnHost(f, c);
    });
  }

  void copyToDevice(StreamId s, void *dst, const void *hostSrc,
                    int64_t bytes) override;
  void copyToHost(StreamId s, void *hostDst, const void *src,
                  int64_t bytes) override;
  void copyBetweenDevices(StreamId s, void *dst, unsigned dstDevice,
                          const void *src, unsigned srcDevice,
                          int64_t bytes) override;
  void fillZero(StreamId s, void *dst, int64_t bytes) override;
  void recordTime(StreamId s, double *slot) override;
  void gemm(StreamId stream, const GemmBatch &call) override;
  /// Host memory, host threads: the bundle's CPU code runs here, as one
  /// closure over all its elements.
  bool runsHostCode() const override { return true; }
  void generated(StreamId s, const GeneratedCall &call) override;

  /// Runs `work` on the host when `stream` reaches this point: how a
  /// transport across processes (MpiTransport) puts its transfers in stream
  /// order. An exception it throws is the stream's error.
  void runInStreamOrder(StreamId stream, std::function<void()> work) {
    enqueue(stream, std::move(work));
  }

protected:
  /// Appends `work` to `stream`'s queue.
  virtual void enqueue(StreamId stream, std::function<void()> work) = 0;
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_HOSTWORK_H
