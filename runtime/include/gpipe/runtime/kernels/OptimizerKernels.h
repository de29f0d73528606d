//===- OptimizerKernels.h - Scalar bodies of the updates --------*- C++ -*-===//
//
// The optimizers' update rules and the gradients' sums of squares (clipping
// and the non-finite guard), in DeviceKernels.h's style: one functor per
// kernel, compiled for the host backends and by nvcc alike.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_OPTIMIZERKERNELS_H
#define GPIPE_RUNTIME_DEVICE_OPTIMIZERKERNELS_H

#include "gpipe/runtime/kernels/DropoutHash.h" // GPIPE_HD
#include "gpipe/runtime/kernels/Optimizers.h"

#include <cmath>
#include <cstdint>

namespace gpipe::runtime::device::kernels {

//===-- optimizers (Optimizers.h): item = element -------------------------===//

// Every rule reads g = scale * grad (clipping), plus l2 * p for Sgd and
// Momentum (weight decay), in applyOptimizer's order of operations. The
// step's learning rate, gradient scale and bias corrections come from device
// memory (StepScalars), the rest of the rule from their own arguments.

struct SgdStep {
  float *params;
  const float *grads;
  const StepScalars *step;
  float l2;
  GPIPE_HD void operator()(int64_t i) const {
    params[i] -=
        step->learningRate * (step->gradientScale * grads[i] + l2 * params[i]);
  }
};

struct MomentumStep {
  float *params;
  const float *grads;
  float *velocity;
  const StepScalars *step;
  float momentum, l2;
  GPIPE_HD void operator()(int64_t i) const {
    float v = momentum * velocity[i] +
              (step->gradientScale * grads[i] + l2 * params[i]);
    velocity[i] = v;
    params[i] -= step->learningRate * v;
  }
};

struct RmsPropStep {
  float *params;
  const float *grads;
  float *meanSquare, *mom;
  const StepScalars *step;
  float decay, momentum, epsilon;
  GPIPE_HD void operator()(int64_t i) const {
    float g = step->gradientScale * grads[i];
    float ms = decay * meanSquare[i] + (1.0f - decay) * g * g;
    float m = momentum * mom[i] + step->learningRate * g / ::sqrtf(ms + epsilon);
    meanSquare[i] = ms;
    mom[i] = m;
    params[i] -= m;
  }
};

/// decoupled: AdamW's weight decay (0 for Adam).
struct AdamStep {
  float *params;
  const float *grads;
  float *m, *v;
  const StepScalars *step;
  float beta1, beta2, epsilon, decoupled;
  GPIPE_HD void operator()(int64_t i) const {
    float g = step->gradientScale * grads[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] -= step->learningRate *
                 ((mi / step->correction1) /
                      (::sqrtf(vi / step->correction2) + epsilon) +
                  decoupled * params[i]);
  }
};

//===-- gradient statistics: item = part ---------------------------------===//

/// partials[r] = the sum, in double, of x[i]^2 over part r of `parts`
/// consecutive parts of ceil(n / parts) elements (the last may be shorter):
/// the same sums in the same order on every backend, whatever runs them.
struct SquaresPartial {
  const float *x;
  int64_t n, chunk;
  double *partials;
  GPIPE_HD void operator()(int64_t r) const {
    int64_t begin = r * chunk, end = begin + chunk;
    if (end > n)
      end = n;
    // Eight running sums, element i in sum i mod 8 counted from the chunk's
    // start, added pairwise at the end: one chain of dependent double adds
    // took 4 cycles an element (1.8 ms a step for the MLP's 1.1M weights on
    // one device, twice under the guard); the lanes vectorise. The order is
    // fixed, so every backend and every K gives the same bits.
    constexpr int kLanes = 8;
    double sums[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = begin;
    for (; i + kLanes <= end; i += kLanes)
      for (int lane = 0; lane < kLanes; ++lane) {
        const double value = x[i + lane];
        sums[lane] += value * value;
      }
    for (int lane = 0; i < end; ++i, ++lane) {
      const double value = x[i];
      sums[lane] += value * value;
    }
    partials[r] = ((sums[0] + sums[1]) + (sums[2] + sums[3])) +
                  ((sums[4] + sums[5]) + (sums[6] + sums[7]));
  }
};

} // namespace gpipe::runtime::device::kernels

#endif // GPIPE_RUNTIME_DEVICE_OPTIMIZERKERNELS_H
