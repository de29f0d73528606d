//===- Optimizers.h - Synchronous parameter updates -------------*- C++ -*-===//
//
// The `optimizer_step` of a pipeline device: one synchronous update of its
// parameters from the gradients accumulated over all micro-batches of a
// batch. Per-parameter state lives in `optimizerSlots(kind)` buffers the size
// of the parameter, owned and zero-initialized by the caller.
//
// Update rules, for each element (g the gradient, t the step, from 1):
//   Sgd:      p -= lr g
//   Momentum: v = momentum v + g;  p -= lr v          (heavy ball, as in
//             TensorFlow's MomentumOptimizer; slot 0 = v)
//   RmsProp:  ms = decay ms + (1 - decay) g^2;
//             mom = momentum mom + lr g / sqrt(ms + epsilon);  p -= mom
//             (TensorFlow's RMSPropOptimizer, the GPipe paper's optimizer;
//             slot 0 = ms, slot 1 = mom)
//   Adam:     m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
//             p -= lr (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + epsilon)
//             (Kingma & Ba, with bias correction; slot 0 = m, slot 1 = v)
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_OPTIMIZERS_H
#define GPIPE_RUNTIME_OPTIMIZERS_H

#include <cstdint>
#include <string>

namespace gpipe::runtime {

enum class OptimizerKind { Sgd, Momentum, RmsProp, Adam };

/// The hyper-parameters; each kind reads only those of its update rule.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Sgd;
  float learningRate = 0.01f;
  /// Momentum and RmsProp.
  float momentum = 0.9f;
  /// RmsProp: the decay of the mean square.
  float decay = 0.9f;
  /// Adam.
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  /// RmsProp and Adam.
  float epsilon = 1e-8f;
};

/// The number of state buffers, each the size of the parameter, that `kind`
/// keeps per parameter: Sgd 0, Momentum 1, RmsProp 2, Adam 2.
unsigned optimizerSlots(OptimizerKind kind);

/// One synchronous update of the `n` parameters `params` in place from
/// `grads`. `slots[i]` points to the `n` floats of state slot i (zeroed by the
/// caller before step 1); `step` counts from 1. Elements are independent, so
/// disjoint ranges may be updated concurrently.
void applyOptimizer(const OptimizerConfig &config, float *params,
                    const float *grads, float *const *slots, int64_t n,
                    int64_t step);

/// Parses the command-line name of an optimizer: "sgd", "momentum",
/// "rmsprop" or "adam". Returns false (leaving `kind` unchanged) otherwise.
bool parseOptimizerKind(const std::string &name, OptimizerKind &kind);

/// The command-line name of `kind` (the inverse of parseOptimizerKind).
const char *optimizerKindName(OptimizerKind kind);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_OPTIMIZERS_H
