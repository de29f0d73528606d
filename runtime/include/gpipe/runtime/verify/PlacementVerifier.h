//===- PlacementVerifier.h - The compiler's placement, checked --*- C++ -*-===//
//
// The runtime places no buffer itself when the bundle carries the
// compiler's placement (memory_plan.devices[d].buffers): it checks it. The
// reader has checked that every buffer lies inside the arena; this checks
// that no two buffers live at the same time share a byte. A device executor
// then checks, buffer by buffer, that its program defines the buffers the
// plan lists, in that order and of those sizes.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_PLACEMENTVERIFIER_H
#define GPIPE_RUNTIME_PLACEMENTVERIFIER_H

#include "gpipe/runtime/bundle/Bundle.h"

#include <string>

namespace gpipe::runtime {

/// "" or "device 1: buffers 3 and 7 share bytes [64, 96) while both live
/// (events [10, 20) and [15, 30))". O(n log n).
std::string verifyPlacement(const PlannedDeviceMemory &device,
                            unsigned deviceIndex);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_PLACEMENTVERIFIER_H
