//===- TrainingFlags.h - A training tool's training options ----*- C++ -*-===//
//
// How long gpipe-run trains and how: epochs or steps, the optimizer, the
// (peak) learning rate and its schedule, the seed, and the options users
// expect beside them: weight decay (L2 for sgd and momentum, decoupled for
// adamw), clipping by the global gradient norm, the guard against non-finite
// values, a linear warmup before the schedule, and (in their own category) a
// plain log line every N steps and a metrics file of one JSON line per step
// and per evaluation. Header-only: it defines the options, so exactly one
// source file of a tool includes it.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TOOLS_TRAININGFLAGS_H
#define GPIPE_TOOLS_TRAININGFLAGS_H

#include "gpipe/Support/OptionParsers.h"
#include "gpipe/runtime/kernels/Optimizers.h"
#include "gpipe/runtime/base/Status.h"
#include "gpipe/runtime/train/Training.h"

#include "llvm/Support/CommandLine.h"

#include <string>

namespace gpipe::tools {

static llvm::cl::OptionCategory trainingCategory("Training");
static Count epochs("epochs", llvm::cl::init(10),
                    llvm::cl::desc("passes over the training set"),
                    llvm::cl::cat(trainingCategory));
static Count
    maxSteps("max-steps", llvm::cl::init(0),
             llvm::cl::desc("images: stop each epoch after this many steps "
                            "(0: the whole set); text: the number of training "
                            "steps (0: 1000)"),
             llvm::cl::cat(trainingCategory));
static llvm::cl::opt<std::string>
    optimizerName("optimizer", llvm::cl::init("adam"),
                  llvm::cl::desc("sgd, momentum, rmsprop, adam or adamw"),
                  llvm::cl::cat(trainingCategory));
static Real<float> learningRate("lr", llvm::cl::init(1e-3f),
                                llvm::cl::desc("(peak) learning rate"),
                                llvm::cl::cat(trainingCategory));
static llvm::cl::opt<runtime::LearningRateSchedule> lrSchedule(
    "lr-schedule", llvm::cl::desc("learning-rate schedule over the whole run"),
    llvm::cl::init(runtime::LearningRateSchedule::Cosine),
    llvm::cl::values(clEnumValN(runtime::LearningRateSchedule::Constant,
                                "constant", "--lr throughout"),
                     clEnumValN(runtime::LearningRateSchedule::Cosine, "cosine",
                                "cosine decay from --lr to 0")),
    llvm::cl::cat(trainingCategory));
static Whole<uint64_t> seed("seed", llvm::cl::init(1),
                            llvm::cl::desc("parameter and shuffling seed"),
                            llvm::cl::cat(trainingCategory));

static gpipe::Real<float> weightDecay(
    "weight-decay", llvm::cl::init(0.0f),
    llvm::cl::desc("sgd, momentum: L2 added to the gradient; adamw: "
                   "decoupled (default 0.01 for adamw, else 0)"),
    llvm::cl::cat(trainingCategory));
static gpipe::Real<float> clipGradNorm(
    "clip-grad-norm", llvm::cl::init(0.0f),
    llvm::cl::desc("scale the gradients of all stages by min(1, X / global "
                   "L2 norm) before each step (0: off)"),
    llvm::cl::cat(trainingCategory));
static llvm::cl::opt<bool> checkFinite(
    "check-finite", llvm::cl::init(true),
    llvm::cl::desc("stop (exit status 4) at the first loss, gradient or "
                   "parameter that is nan or inf, naming it"),
    llvm::cl::cat(trainingCategory));

static gpipe::Whole<int64_t> warmupSteps(
    "warmup-steps", llvm::cl::init(0),
    llvm::cl::desc("raise the learning rate linearly over the first N steps, "
                   "then follow --lr-schedule over the rest"),
    llvm::cl::cat(trainingCategory));

static llvm::cl::OptionCategory loggingCategory("Logging");
static gpipe::Count logEvery(
    "log-every", llvm::cl::init(0),
    llvm::cl::desc("off a terminal, print a line every N steps (loss, lr, "
                   "grad norm, samples/s; 0: none)"),
    llvm::cl::cat(loggingCategory));
static llvm::cl::opt<std::string> metricsPath(
    "metrics", llvm::cl::init(""),
    llvm::cl::desc("write one JSON line per step and per evaluation here"),
    llvm::cl::cat(loggingCategory));

/// AdamW's weight decay when --weight-decay is not given (PyTorch's).
constexpr float kAdamWDefaultDecay = 0.01f;

/// Sets `config`'s weight decay, clipping and guard from the flags (its kind
/// set before); InvalidArgument naming the flag that cannot train.
inline runtime::Status applyOptimizerFlags(runtime::OptimizerConfig &config) {
  const bool decayGiven = weightDecay.getNumOccurrences() > 0;
  config.weightDecay = decayGiven ? float(weightDecay)
                       : config.kind == runtime::OptimizerKind::AdamW
                           ? kAdamWDefaultDecay
                           : 0.0f;
  config.clipGradNorm = clipGradNorm;
  config.checkFinite = checkFinite;
  std::string error = runtime::checkOptimizerConfig(config);
  if (error.empty())
    return runtime::Status();
  return runtime::Status(runtime::StatusCode::InvalidArgument, error);
}

} // namespace gpipe::tools

#endif // GPIPE_TOOLS_TRAININGFLAGS_H
