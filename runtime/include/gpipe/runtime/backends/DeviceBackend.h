//===- DeviceBackend.h - Memory, streams and events of K devices -*- C++ -*-===//
//
// What the device executor (DeviceExecutor.h) needs from a machine with K
// pipeline devices: per device one block of device memory, a compute stream
// and a copy stream, events between streams, copies, GEMMs and the kernels of
// KernelApi. Two implementations:
//   - CudaBackend (runtime/cuda): CUDA streams and events, cuBLAS, the
//     kernels of DeviceKernels.h launched on the GPU; pipeline devices map to
//     GPUs d % G, so K devices may share one GPU.
//   - HostBackend (HostBackend.h): every stream is a queue of host closures
//     run at `synchronize`, in an order that respects only stream order and
//     events, chosen at random — so a missing event shows up as a wrong
//     result in the host tests, before any GPU runs the executor.
//
// Errors of asynchronous work are sticky: the first one is kept and returned
// by `synchronize` (and by `error`); later calls are still accepted.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_DEVICEBACKEND_H
#define GPIPE_RUNTIME_DEVICE_DEVICEBACKEND_H

#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/kernels/DeviceGating.h"
#include "gpipe/runtime/kernels/KernelApi.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpipe::runtime::device {

/// An event recorded on a stream, by index.
using EventId = unsigned;

class DeviceBackend : public KernelApi {
public:
  /// Short description for messages and benchmark labels ("host emulation",
  /// "NVIDIA H100 80GB HBM3 (GPU 0) x 4 pipeline devices").
  virtual std::string describe() const = 0;
  virtual unsigned numDevices() const = 0;

  /// One allocation of `bytes` on `device`; "" or an error that names the
  /// device and the size. Valid until the backend is destroyed.
  virtual std::string allocate(unsigned device, int64_t bytes,
                               void **pointer) = 0;

  virtual StreamId computeStream(unsigned device) = 0;
  /// Transfers to and from `device`'s neighbours run here, beside compute.
  virtual StreamId copyStream(unsigned device) = 0;

  /// Marks the current end of `stream`.
  virtual EventId recordEvent(StreamId stream) = 0;
  /// Work queued on `stream` from now on starts after `event` completed.
  /// The event must have been recorded already (in issue order).
  virtual void waitEvent(StreamId stream, EventId event) = 0;

  /// Host memory that copies to the devices read asynchronously, for the
  /// executor to stage each step's inputs in: page-locked on CUDA, where a
  /// copy from pageable memory makes the issuing thread wait until the stream
  /// reaches it (and one thread issues every device's program). Sets
  /// *pointer = nullptr when the backend copies as fast from any host memory
  /// (the CPU threads); "" or an error. Valid until the backend is destroyed.
  virtual std::string allocateStaging(int64_t bytes, void **pointer) = 0;

  virtual void copyToDevice(StreamId s, void *dst, const void *hostSrc,
                            int64_t bytes) = 0;
  /// `hostDst` must stay valid until `synchronize` returns.
  virtual void copyToHost(StreamId s, void *hostDst, const void *src,
                          int64_t bytes) = 0;
  /// A copy between two devices' memory (peer copy; a plain device copy when
  /// they share a GPU).
  virtual void copyBetweenDevices(StreamId s, void *dst, unsigned dstDevice,
                                  const void *src, unsigned srcDevice,
                                  int64_t bytes) = 0;
  virtual void fillZero(StreamId s, void *dst, int64_t bytes) = 0;
  /// When `s` reaches this point, writes the host's steady clock in
  /// microseconds to `*slot` (valid once `synchronize` returned): the
  /// executor's timeline marks each instruction's start and end with it.
  virtual void recordTime(StreamId s, double *slot) = 0;

  /// Waits for all queued work, at most `timeout`; returns "" or the first
  /// error, or on timeout which device's which stream had not finished.
  /// Events recorded so far are released afterwards.
  virtual std::string synchronize(std::chrono::milliseconds timeout) = 0;
  /// The first error so far ("" if none).
  virtual std::string error() const = 0;

  /// For libraries that take the backend's own handles (NCCL): stream `s`
  /// as a cudaStream_t, and the GPU (CUDA ordinal) of pipeline device
  /// `device`; null and -1 for backends without them.
  virtual void *nativeStream(StreamId s) {
    (void)s;
    return nullptr;
  }
  virtual int nativeDevice(unsigned device) const {
    (void)device;
    return -1;
  }

  /// Where a step's clipping and guard can be decided on the devices
  /// (DeviceGating.h): the backend's kernels may then read another device's
  /// memory once their stream waited on an event recorded after the writes.
  /// Null: the host decides, after a synchronize.
  virtual DeviceGating *gating() { return nullptr; }

  /// Whether its kernels run on this host's CPU, so that it can run a
  /// bundle's generated CPU code (KernelApi::generated): the CPU threads and
  /// the host emulation; not a GPU. The executor asks before it loads any.
  virtual bool runsHostCode() const { return false; }

  /// A backend whose kernels do not run on the host (runsHostCode false)
  /// loads the bundle's generated kernels in its own form here, once, before
  /// any is issued (the CUDA backend: code.cuda's PTX on each GPU); "" or
  /// why they cannot run on it. Its KernelApi::generated then finds a
  /// call's kernel by GeneratedCall::kernel (the entry is null).
  virtual std::string loadGeneratedKernels(const GeneratedCode &code) {
    (void)code;
    return "this backend cannot run the bundle's generated kernels: compile "
           "with codegen=none";
  }

  /// The bundle's precision for its GEMMs' operands (Precision.h), once,
  /// before any is issued; "" or why the backend cannot compute in it. By
  /// default f32 only.
  virtual std::string usePrecision(Precision precision) {
    if (precision == Precision::F32)
      return {};
    return describe() + " computes its products in f32 only, not " +
           precisionName(precision);
  }

  /// Bytes the backend holds on `device` beside the allocations (the CPU
  /// backend's packed parameter copies), as of the last synchronize.
  virtual int64_t workspaceBytes(unsigned device) const {
    (void)device;
    return 0;
  }

  /// The intervals (hostMicroseconds, start and end) in which `device` did
  /// work of the step while it waited for a peer (the CPU backend packs
  /// weights ahead there), since the last call: the timeline counts them as
  /// compute. A backend keeps a bounded number.
  virtual std::vector<std::pair<double, double>>
  takeWorkInWaits(unsigned device) {
    (void)device;
    return {};
  }
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_DEVICEBACKEND_H
