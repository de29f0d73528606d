//===- Optimizers.cpp - Synchronous parameter updates ---------------------===//

#include "gpipe/runtime/kernels/Optimizers.h"

#include <cassert>
#include <cmath>
#include <cstdio>

using namespace gpipe::runtime;

unsigned gpipe::runtime::optimizerSlots(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::Sgd:
    return 0;
  case OptimizerKind::Momentum:
    return 1;
  case OptimizerKind::RmsProp:
  case OptimizerKind::Adam:
  case OptimizerKind::AdamW:
    return 2;
  }
  assert(false && "unknown optimizer kind");
  return 0;
}

/// "%g" of `value`.
static std::string formatReal(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", double(value));
  return text;
}

std::string
gpipe::runtime::checkOptimizerConfig(const OptimizerConfig &config) {
  if (!std::isfinite(config.weightDecay) || config.weightDecay < 0)
    return "the weight decay must be a finite number >= 0, got " +
           formatReal(config.weightDecay);
  if (!std::isfinite(config.clipGradNorm) || config.clipGradNorm < 0)
    return "the gradient clipping norm must be a finite number >= 0 (0: no "
           "clipping), got " +
           formatReal(config.clipGradNorm);
  if (config.weightDecay > 0 && (config.kind == OptimizerKind::Adam ||
                                 config.kind == OptimizerKind::RmsProp))
    return std::string("weight decay applies to sgd and momentum (L2 added "
                       "to the gradient) and to adamw (decoupled), not to ") +
           optimizerKindName(config.kind) +
           (config.kind == OptimizerKind::Adam ? ": use adamw" : "");
  return {};
}

int gpipe::runtime::squaredMeanSlot(OptimizerKind kind) {
  if (kind == OptimizerKind::RmsProp)
    return 0;
  if (kind == OptimizerKind::Adam || kind == OptimizerKind::AdamW)
    return 1;
  return -1;
}

std::string gpipe::runtime::checkStateValues(OptimizerKind kind, int slot,
                                             const float *values, size_t n) {
  const bool nonNegative = slot >= 0 && squaredMeanSlot(kind) == slot;
  for (size_t i = 0; i < n; ++i) {
    if (std::isfinite(values[i]) && (!nonNegative || values[i] >= 0))
      continue;
    return std::string("expected finite values") +
           (nonNegative ? std::string(" >= 0 (") + optimizerKindName(kind) +
                              "'s mean of squared gradients)"
                        : std::string()) +
           ", got " + formatReal(values[i]) + " at element " +
           std::to_string(i);
  }
  return {};
}

std::string gpipe::runtime::checkStepsDone(int64_t steps) {
  if (steps >= 0 && steps <= kMaxStepsDone)
    return {};
  return "expected 0 to " + std::to_string(kMaxStepsDone) +
         " steps done, got " + std::to_string(steps);
}

float gpipe::runtime::clipScale(double norm, float maxNorm) {
  if (maxNorm <= 0)
    return 1.0f;
  double scale = double(maxNorm) / (norm + 1e-6);
  // A NaN norm gives a NaN scale, as PyTorch's clamp(coef, max=1) does: the
  // update becomes NaN instead of silently going unclipped.
  return scale >= 1.0 ? 1.0f : float(scale);
}

StepScalars gpipe::runtime::stepScalarsOf(const OptimizerConfig &config,
                                          int64_t step) {
  assert(step >= 1 && "optimizer steps count from 1");
  StepScalars scalars;
  scalars.learningRate = config.learningRate;
  scalars.gradientScale = config.gradientScale;
  if (config.kind == OptimizerKind::Adam ||
      config.kind == OptimizerKind::AdamW) {
    scalars.correction1 = static_cast<float>(
        1.0 - std::pow(static_cast<double>(config.beta1),
                       static_cast<double>(step)));
    scalars.correction2 = static_cast<float>(
        1.0 - std::pow(static_cast<double>(config.beta2),
                       static_cast<double>(step)));
  }
  return scalars;
}

void gpipe::runtime::applyOptimizer(const OptimizerConfig &config,
                                    float *params, const float *grads,
                                    float *const *slots, int64_t n,
                                    int64_t step) {
  applyOptimizer(config, stepScalarsOf(config, step), params, grads, slots, n);
}

void gpipe::runtime::applyOptimizer(const OptimizerConfig &config,
                                    const StepScalars &scalars, float *params,
                                    const float *grads, float *const *slots,
                                    int64_t n) {
  assert(checkOptimizerConfig(config).empty() && "checkOptimizerConfig");
  const float lr = scalars.learningRate;
  const float scale = scalars.gradientScale, l2 = config.weightDecay;
  // The gradient the rule reads: clipped, plus L2 for Sgd and Momentum.
  auto gradient = [&](int64_t i) { return scale * grads[i] + l2 * params[i]; };
  switch (config.kind) {
  case OptimizerKind::Sgd:
    for (int64_t i = 0; i < n; ++i)
      params[i] -= lr * gradient(i);
    return;
  case OptimizerKind::Momentum: {
    float *velocity = slots[0];
    const float momentum = config.momentum;
    for (int64_t i = 0; i < n; ++i) {
      velocity[i] = momentum * velocity[i] + gradient(i);
      params[i] -= lr * velocity[i];
    }
    return;
  }
  case OptimizerKind::RmsProp: {
    float *meanSquare = slots[0];
    float *mom = slots[1];
    const float decay = config.decay, momentum = config.momentum;
    const float eps = config.epsilon;
    for (int64_t i = 0; i < n; ++i) {
      float g = scale * grads[i];
      meanSquare[i] = decay * meanSquare[i] + (1.0f - decay) * g * g;
      mom[i] = momentum * mom[i] + lr * g / std::sqrt(meanSquare[i] + eps);
      params[i] -= mom[i];
    }
    return;
  }
  case OptimizerKind::Adam:
  case OptimizerKind::AdamW: {
    float *m = slots[0];
    float *v = slots[1];
    const float beta1 = config.beta1, beta2 = config.beta2;
    const float eps = config.epsilon;
    // Decoupled: AdamW's decay is outside the normalised step.
    const float decoupled =
        config.kind == OptimizerKind::AdamW ? config.weightDecay : 0.0f;
    const float correction1 = scalars.correction1;
    const float correction2 = scalars.correction2;
    for (int64_t i = 0; i < n; ++i) {
      float g = scale * grads[i];
      m[i] = beta1 * m[i] + (1.0f - beta1) * g;
      v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
      params[i] -=
          lr * ((m[i] / correction1) / (std::sqrt(v[i] / correction2) + eps) +
                decoupled * params[i]);
    }
    return;
  }
  }
  assert(false && "unknown optimizer kind");
}

bool gpipe::runtime::parseOptimizerKind(const std::string &name,
                                        OptimizerKind &kind) {
  for (OptimizerKind candidate :
       {OptimizerKind::Sgd, OptimizerKind::Momentum, OptimizerKind::RmsProp,
        OptimizerKind::Adam, OptimizerKind::AdamW}) {
    if (name == optimizerKindName(candidate)) {
      kind = candidate;
      return true;
    }
  }
  return false;
}

const char *gpipe::runtime::optimizerKindName(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::Sgd:
    return "sgd";
  case OptimizerKind::Momentum:
    return "momentum";
  case OptimizerKind::RmsProp:
    return "rmsprop";
  case OptimizerKind::Adam:
    return "adam";
  case OptimizerKind::AdamW:
    return "adamw";
  }
  assert(false && "unknown optimizer kind");
  return "";
}
