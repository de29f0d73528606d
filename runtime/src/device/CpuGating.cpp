//===- CpuGating.cpp - The CPU backend decides a step on its devices ------===//
//
// The CPU devices share one address space, so a device's worker reads every
// device's partial sums once its queue has waited for their events
// (DeviceGating.h). The gated updates read the gate when they run, on the
// device's threads.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/device/BatchNormKernels.h"
#include "gpipe/runtime/device/CpuBackend.h"

#include <array>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

void CpuBackend::decide(StreamId s, const GateRequest &request,
                        StepGate *gate) {
  enqueue(s, [request, gate] { *gate = decideStep(request); });
}

void CpuBackend::gatedOptimizerStep(StreamId s, const OptimizerConfig &config,
                                    float *params, const float *grads,
                                    float *const *slots, int64_t n,
                                    int64_t step, const StepGate *gate) {
  if (n <= 0)
    return;
  // `slots` is read now, as optimizerStep does.
  const std::array<float *, 2> slotCopy = {
      slots && optimizerSlots(config.kind) > 0 ? slots[0] : nullptr,
      slots && optimizerSlots(config.kind) > 1 ? slots[1] : nullptr};
  IntraOpPool *pool = poolOf(s);
  enqueue(s, [=] {
    if (!gate->apply)
      return;
    OptimizerConfig scaled = config;
    scaled.gradientScale = gate->scale;
    pool->parallelFor(n, kElementGrain, [&](int64_t b, int64_t e) {
      float *slotsAt[2] = {slotCopy[0] ? slotCopy[0] + b : nullptr,
                           slotCopy[1] ? slotCopy[1] + b : nullptr};
      applyOptimizer(scaled, params + b, grads + b, slotsAt, e - b, step);
    });
  });
}

void CpuBackend::gatedBatchNormRunningUpdate(StreamId s, float *runningMean,
                                             float *runningVar,
                                             const float *sum,
                                             const float *squares, int64_t cols,
                                             int64_t count, float momentum,
                                             const StepGate *gate) {
  if (count <= 0 || cols <= 0)
    return;
  const kernels::BatchNormRunningUpdate update{
      runningMean, runningVar, sum, squares, static_cast<float>(count),
      momentum};
  enqueue(s, [=] {
    if (!gate->apply)
      return;
    for (int64_t c = 0; c < cols; ++c)
      update(c);
  });
}
