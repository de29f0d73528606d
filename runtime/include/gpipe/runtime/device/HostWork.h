//===- HostWork.h - Stream work that backends on the host share -*- C++ -*-===//
//
// The bodies of the DeviceBackend calls that mean the same on every backend
// whose memory is host memory (the threaded CPU backend and the emulation of
// streams): a GEMM batch through CBLAS, and the timeline's clock.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_HOSTWORK_H
#define GPIPE_RUNTIME_DEVICE_HOSTWORK_H

#include "gpipe/runtime/device/KernelApi.h"

namespace gpipe::runtime::device {

/// Runs `call` with cblas_sgemm, one product per batch entry.
void runGemmOnHost(const GemmBatch &call);

/// The host's steady clock in microseconds (DeviceBackend::recordTime).
double hostMicroseconds();

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_HOSTWORK_H
