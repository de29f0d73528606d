//===- FuzzBundle.cpp - libFuzzer target: bundle reader and loader --------===//
//
// Any bytes as the body of a bundle, sealed with its checksum first (a
// mutation that only breaks the checksum is refused at once, and
// BundleCorruptionTest covers that): the reader and the load-time proofs
// (validateBundle: stages, programs, placement, schedule) must refuse them
// with an error or accept them; an accepted bundle is then loaded by the
// executor on the host emulation (its placement checked by the dry run),
// which must not crash either. The seeds are unsealed bundles. A bundle
// with generated kernels is read and validated but not loaded: its code is
// a program (docs/BundleFormat.md, "Trust"), and mutating a program finds
// crashes in the program, not in the runtime.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/backends/host/HostBackend.h"
#include "gpipe/runtime/bundle/BundleChecksum.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/verify/BundleValidation.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace rt = gpipe::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text = rt::sealBundleText(
      std::string_view(reinterpret_cast<const char *>(data), size));
  rt::StatusOr<rt::Bundle> bundle = rt::parseBundle(text, "fuzz");
  if (!bundle.ok())
    return 0;
  if (!bundle->code.kernels.empty()) {
    (void)rt::validateBundle(*bundle);
    return 0;
  }
  // Arenas beyond 64 MiB would only measure the allocator.
  for (const rt::PlannedDeviceMemory &device : bundle->memoryPlan.devices)
    if (device.arenaBytes > (int64_t(1) << 26))
      return 0;
  std::string error;
  unsigned devices = bundle->stages.size();
  if (devices == 0 || devices > 8)
    return 0;
  rt::device::DeviceExecutorConfig config;
  config.stepTimeout = std::chrono::milliseconds(2000);
  auto executor = rt::device::DeviceExecutor::create(
      std::move(*bundle), std::make_unique<rt::device::HostBackend>(devices, 1),
      config, error);
  (void)executor;
  return 0;
}
