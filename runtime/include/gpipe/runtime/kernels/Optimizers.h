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
//   AdamW:    Adam's m and v, then
//             p -= lr (m_hat / (sqrt(v_hat) + epsilon) + weightDecay p)
//             (Loshchilov & Hutter's decoupled weight decay; slots as Adam)
// Weight decay for Sgd and Momentum is L2: g += weightDecay p before the
// rule (PyTorch's weight_decay). Adam and RmsProp take none: L2 through
// Adam's normalisation barely regularises (Loshchilov & Hutter), so
// checkOptimizerConfig refuses it and names AdamW.
// Clipping (the executor): every rule reads g = gradientScale * grad.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_OPTIMIZERS_H
#define GPIPE_RUNTIME_OPTIMIZERS_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace gpipe::runtime {

enum class OptimizerKind { Sgd, Momentum, RmsProp, Adam, AdamW };

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
  /// RmsProp, Adam and AdamW.
  float epsilon = 1e-8f;
  /// Sgd and Momentum: L2 (g += weightDecay p); AdamW: decoupled. 0 for
  /// the others (checkOptimizerConfig).
  float weightDecay = 0.0f;
  /// > 0: the executor scales every gradient by
  /// min(1, clipGradNorm / (norm + 1e-6)) before the update, norm the L2
  /// norm of all the gradients of every stage on every device (clipScale);
  /// 0: no clipping.
  float clipGradNorm = 0.0f;
  /// The executor's guard: a step whose loss or gradients are not finite
  /// fails before the update, leaving the parameters as they were; one whose
  /// update makes a parameter non-finite fails after it. Either way the
  /// message names the step, the stage and the tensor. An evaluation whose
  /// loss is not finite fails too, naming its rows.
  bool checkFinite = false;
  /// The factor every rule applies to the gradient (g = gradientScale *
  /// grad): the executor sets it per step when it clips; 1 otherwise.
  float gradientScale = 1.0f;
};

/// "" or why `config` cannot train: a weight decay or a clipping norm that
/// is negative or not finite, or a weight decay for Adam or RmsProp.
std::string checkOptimizerConfig(const OptimizerConfig &config);

/// The clipping factor for a global gradient norm `norm`:
/// min(1, maxNorm / (norm + 1e-6)) (PyTorch's clip_grad_norm_); 1 when
/// maxNorm is 0 (no clipping).
float clipScale(double norm, float maxNorm);

/// What an update reads that changes from step to step. The device updates
/// read it from device memory, which the executor writes before each step's
/// updates, so that a step's kernels keep the same arguments from step to
/// step (what a captured CUDA graph needs to be replayed).
struct StepScalars {
  float learningRate = 0.01f;
  /// OptimizerConfig::gradientScale (the clipping factor).
  float gradientScale = 1.0f;
  /// Adam's and AdamW's bias corrections 1 - beta1^t and 1 - beta2^t,
  /// computed in double (beta^t underflows gracefully, and 1 - beta2^t keeps
  /// its precision for small t); 1 for the other rules.
  float correction1 = 1.0f, correction2 = 1.0f;
};

/// The scalars of step `step` (from 1) under `config`.
StepScalars stepScalarsOf(const OptimizerConfig &config, int64_t step);

/// The number of state buffers, each the size of the parameter, that `kind`
/// keeps per parameter: Sgd 0, Momentum 1, RmsProp 2, Adam 2, AdamW 2.
unsigned optimizerSlots(OptimizerKind kind);

/// One synchronous update of the `n` parameters `params` in place from
/// `grads`. `slots[i]` points to the `n` floats of state slot i (zeroed by the
/// caller before step 1); `step` counts from 1. Elements are independent, so
/// disjoint ranges may be updated concurrently.
void applyOptimizer(const OptimizerConfig &config, float *params,
                    const float *grads, float *const *slots, int64_t n,
                    int64_t step);
/// The same update with the step's scalars given (their learning rate and
/// gradient scale replace config's): what the device kernels run.
void applyOptimizer(const OptimizerConfig &config, const StepScalars &scalars,
                    float *params, const float *grads, float *const *slots,
                    int64_t n);

/// The slot whose values the update rule takes the square root of (a mean
/// of squared gradients: RMSProp's ms, Adam's and AdamW's v), or -1.
int squaredMeanSlot(OptimizerKind kind);

/// "" or why the `n` values at `values` cannot be a parameter (slot -1) or
/// `kind`'s optimizer state `slot`: "expected finite values, got nan at
/// element 3", with ">= 0 (adam's mean of squared gradients)" for the
/// squared-mean slot. What set_parameter, set_optimizer_state and a
/// checkpoint's load all refuse.
std::string checkStateValues(OptimizerKind kind, int slot, const float *values,
                             size_t n);

/// The most steps a run counts (gpipe_runtime.h's GPIPE_MAX_STEPS_DONE):
/// the next step's number, steps done + 1, is an int64_t.
constexpr int64_t kMaxStepsDone = INT64_MAX - 1;

/// "" or why `steps` is not a count of steps done: "expected 0 to
/// 9223372036854775806 steps done, got -5".
std::string checkStepsDone(int64_t steps);

/// Parses the command-line name of an optimizer: "sgd", "momentum",
/// "rmsprop", "adam" or "adamw". Returns false (leaving `kind` unchanged)
/// otherwise.
bool parseOptimizerKind(const std::string &name, OptimizerKind &kind);

/// The command-line name of `kind` (the inverse of parseOptimizerKind).
const char *optimizerKindName(OptimizerKind kind);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_OPTIMIZERS_H
