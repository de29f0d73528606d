//===- DeviceOnlyBackend.h - A backend that runs nothing on the host -*- C++ -*-===//
//
// For the executor's refusals at creation: a one-device backend whose
// kernels would not run on this host (as CUDA's) and that keeps
// DeviceBackend's defaults (no generated code of its own, f32 products only).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_DEVICEONLYBACKEND_H
#define GPIPE_RUNTIME_TESTS_DEVICEONLYBACKEND_H

#include "gpipe/runtime/backends/DeviceBackend.h"
#include "gpipe/runtime/kernels/KernelsByFunctor.h"

#include <gtest/gtest.h>

namespace gpipe::runtime::testing {

/// A backend whose kernels do not run on this host (as CUDA's): it runs
/// nothing, and no generated call may reach it.
class DeviceOnlyBackend final
    : public device::KernelsByFunctor<DeviceOnlyBackend,
                                      device::DeviceBackend> {
public:
  template <class F> void forEach(device::StreamId, int64_t, const F &) {}
  template <class F> void forEachRow(device::StreamId, int64_t, const F &) {}
  template <class F> void forEachColumn(device::StreamId, int64_t, const F &) {}
  std::string describe() const override { return "a device"; }
  unsigned numDevices() const override { return 1; }
  std::string allocate(unsigned, int64_t, void **pointer) override {
    *pointer = nullptr;
    return {};
  }
  device::StreamId computeStream(unsigned d) override { return 2 * d; }
  device::StreamId copyStream(unsigned d) override { return 2 * d + 1; }
  device::EventId recordEvent(device::StreamId) override { return 0; }
  void waitEvent(device::StreamId, device::EventId) override {}
  std::string allocateStaging(int64_t, void **pointer) override {
    *pointer = nullptr;
    return {};
  }
  void copyToDevice(device::StreamId, void *, const void *, int64_t) override {}
  void copyToHost(device::StreamId, void *, const void *, int64_t) override {}
  void copyBetweenDevices(device::StreamId, void *, unsigned, const void *,
                          unsigned, int64_t) override {}
  void fillZero(device::StreamId, void *, int64_t) override {}
  void recordTime(device::StreamId, double *) override {}
  void gemm(device::StreamId, const device::GemmBatch &) override {}
  void generated(device::StreamId, const device::GeneratedCall &) override {
    ADD_FAILURE() << "a generated kernel was issued to a device backend";
  }
  std::string synchronize(std::chrono::milliseconds) override { return {}; }
  std::string error() const override { return {}; }
};

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_DEVICEONLYBACKEND_H
