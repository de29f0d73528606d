//===- DeviceGating.h - A step's update decided on the devices --*- C++ -*-===//
//
// Clipping by the global gradient norm and the non-finite guard need every
// device's gradient statistics before any device may update. Decided on the
// host, that costs a synchronize in the middle of each step: the devices
// idle while the host wakes, adds the sums and issues the updates, and a
// sleeping worker's wake-up after it measured up to 1.4 ms on two cores.
//
// A backend whose kernels on one device may read another device's memory
// once their stream has waited on an event recorded after the writes (the
// CPU backend: one address space) decides on the devices instead. Each
// device waits for every device's partial sums of squares, adds them all in
// the bundle's order into its own StepGate (so every device holds the same
// bits, and the norm does not depend on K), and its updates read the gate
// when they run: scaled by the clipping factor, or skipped where a loss or a
// gradient is not finite. The host issues the whole step at once and reads
// the same sums after the step's one synchronize, for the norm it reports
// and for the message that names what was not finite.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_DEVICEGATING_H
#define GPIPE_RUNTIME_DEVICE_DEVICEGATING_H

#include "gpipe/runtime/kernels/Optimizers.h"
#include "gpipe/runtime/kernels/KernelApi.h"

#include <cstdint>
#include <vector>

namespace gpipe::runtime::device {

/// One device's decision for the step (device memory).
struct StepGate {
  /// Every gradient's sum of squares, added in the bundle's order.
  double sumOfSquares = 0;
  /// clipScale(sqrt(sumOfSquares), clipGradNorm): the gradients' factor.
  float scale = 1.0f;
  /// 0: a loss or a gradient is nan or inf and the guard is on: no update.
  int32_t apply = 1;
};

/// What a decision reads, all of it device memory that the deciding stream
/// has waited for.
struct GateRequest {
  /// parts[i]: partsPerParameter partial sums of squares of the gradient of
  /// the i-th trainable parameter in the bundle's order (on any device).
  std::vector<const double *> parts;
  int64_t partsPerParameter = 0;
  /// The step's losses, one per micro-batch (null for none).
  const float *losses = nullptr;
  int64_t numLosses = 0;
  bool checkFinite = false;
  float clipGradNorm = 0.0f;
};

/// The flags of DeviceGating::gatedOptimizerStep's `nonFinite`.
constexpr int32_t kUpdatedInf = 1, kUpdatedNan = 2;

/// The decision from `request`'s sums and losses: the same arithmetic on
/// every device and on the host.
StepGate decideStep(const GateRequest &request);

/// A backend's optional capability (DeviceBackend::gating).
class DeviceGating {
public:
  virtual ~DeviceGating() = default;
  /// *gate = decideStep(request), when `s` reaches this point.
  virtual void decide(StreamId s, const GateRequest &request,
                      StepGate *gate) = 0;
  /// KernelApi::optimizerStep with the gradients scaled by gate->scale, or
  /// nothing where gate->apply is 0 (step->gradientScale is ignored).
  /// Where `nonFinite` (device memory) is not null, the update also ORs
  /// kUpdatedInf into it if a parameter it wrote is +-inf, kUpdatedNan if
  /// one is nan: the guard's check after the update, made while the values
  /// are at hand instead of in another pass.
  virtual void gatedOptimizerStep(StreamId s, const OptimizerConfig &config,
                                  float *params, const float *grads,
                                  float *const *slots, int64_t n,
                                  const StepScalars *step, const StepGate *gate,
                                  int32_t *nonFinite) = 0;
  /// KernelApi::batchNormRunningUpdate, or nothing where gate->apply is 0:
  /// a stopped step leaves the running statistics too as they were. Flags
  /// what it wrote into meanNonFinite and varNonFinite, where not null, as
  /// gatedOptimizerStep does.
  virtual void gatedBatchNormRunningUpdate(
      StreamId s, float *runningMean, float *runningVar, const float *sum,
      const float *squares, int64_t cols, int64_t count, float momentum,
      const StepGate *gate, int32_t *meanNonFinite, int32_t *varNonFinite) = 0;
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_DEVICEGATING_H
