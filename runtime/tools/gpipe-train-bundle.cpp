//===- gpipe-train-bundle.cpp - Train a compiled bundle, runtime only -----===//
//
// The runner for machines that have the runtime but not the compiler (the
// runtime-only build, -DGPIPE_BUILD_COMPILER=OFF: a GPU machine without
// LLVM/MLIR). It trains a bundle that gpipe-opt | gpipe-translate wrote
// elsewhere, through the C API's training loops, the ones gpipe-run runs:
//
//   gpipe-train-bundle BUNDLE.json --images FASHION_MNIST_DIR [--epochs N]
//   gpipe-train-bundle BUNDLE.json --text CORPUS [--steps N]
//       [--device cpu|cuda|host-emulation] [--optimizer adam] [--lr X]
//       [--seed S] [--max-steps-per-epoch N] [--eval-every N]
//
// One line per report (epoch or evaluation), then the final figure. Exit
// status: 0, 1 for a failure, 2 for a bad command line or a device that is
// not there ("no CUDA device").
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"
#ifdef GPIPE_HAVE_CUDA
#include "gpipe/cuda/gpipe_cuda.h"
#endif

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

const char *const kUsage =
    "usage: gpipe-train-bundle BUNDLE.json (--images DIR | --text CORPUS)\n"
    "         [--device cpu|cuda|host-emulation] [--epochs N] [--steps N]\n"
    "         [--optimizer sgd|momentum|rmsprop|adam] [--lr X] [--seed S]\n"
    "         [--max-steps-per-epoch N] [--eval-every N]\n"
    "  --images: Fashion-MNIST's IDX files; --epochs (default 10)\n"
    "  --text: a file or directory of text; --steps (default 1000)\n"
    "  options also take --name=value\n";

struct Options {
  std::string bundle, images, text, device = "cpu", optimizer = "adam";
  long long epochs = 10, steps = 1000, maxStepsPerEpoch = 0, evalEvery = 100;
  double lr = 1e-3;
  long long seed = 1;
};

int usageError(const std::string &message) {
  std::fprintf(stderr, "gpipe-train-bundle: error: %s\n%s", message.c_str(),
               kUsage);
  return 2;
}

/// Parses a whole number in [low, high] into `out`; false with `why` set
/// when `text` is not one.
bool parseCount(const std::string &name, const std::string &text, long long low,
                long long high, long long &out, std::string &why) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno == ERANGE || v < low || v > high) {
    why = name + " expects a whole number from " + std::to_string(low) +
          " to " + std::to_string(high) + ", got '" + text + "'";
    return false;
  }
  out = v;
  return true;
}

/// "" or what is wrong with the command line.
std::string parseArgs(int argc, char **argv, Options &o, bool &help) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help = true;
      return {};
    }
    if (arg.rfind("--", 0) != 0) {
      if (!o.bundle.empty())
        return "unexpected argument '" + arg + "' (one bundle only)";
      o.bundle = arg;
      continue;
    }
    std::string name = arg, value;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 >= argc)
        return "option " + name + " expects a value";
      value = argv[++i];
    }
    std::string why;
    if (name == "--images")
      o.images = value;
    else if (name == "--text")
      o.text = value;
    else if (name == "--device")
      o.device = value;
    else if (name == "--optimizer")
      o.optimizer = value;
    else if (name == "--epochs") {
      if (!parseCount(name, value, 1, 100000, o.epochs, why))
        return why;
    } else if (name == "--steps") {
      if (!parseCount(name, value, 1, 1000000000LL, o.steps, why))
        return why;
    } else if (name == "--max-steps-per-epoch") {
      if (!parseCount(name, value, 0, 1000000000LL, o.maxStepsPerEpoch, why))
        return why;
    } else if (name == "--eval-every") {
      if (!parseCount(name, value, 0, 1000000000LL, o.evalEvery, why))
        return why;
    } else if (name == "--seed") {
      if (!parseCount(name, value, 0, INT64_MAX, o.seed, why))
        return why;
    } else if (name == "--lr") {
      char *end = nullptr;
      o.lr = std::strtod(value.c_str(), &end);
      if (value.empty() || *end || !std::isfinite(o.lr) || o.lr <= 0)
        return "--lr expects a finite positive number, got '" + value + "'";
    } else {
      return "unknown option '" + name + "'";
    }
  }
  if (o.bundle.empty())
    return "no bundle given";
  if (o.images.empty() == o.text.empty())
    return "give exactly one of --images DIR and --text CORPUS";
  return {};
}

void printReport(const gpipe_training_report_t *r, void *) {
  // The report before the first step has no training loss (NaN).
  char trainLoss[32] = "-";
  if (!std::isnan(r->train_loss))
    std::snprintf(trainLoss, sizeof trainLoss, "%.4f", r->train_loss);
  if (!std::isnan(r->test_accuracy))
    std::printf("epoch %u: %" PRId64 " steps, train loss %s, test accuracy "
                "%.2f%%, %.0f samples/s\n",
                r->epoch, r->step, trainLoss, 100.0 * r->test_accuracy,
                r->samples_per_second);
  else
    std::printf("step %" PRId64 ": train loss %s, validation loss %.4f "
                "nats/char, %.0f samples/s\n",
                r->step, trainLoss, r->validation_loss, r->samples_per_second);
  std::fflush(stdout);
}

int fail(const char *what) {
  std::fprintf(stderr, "gpipe-train-bundle: error: %s: %s\n", what,
               gpipe_last_error());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  bool help = false;
  std::string error = parseArgs(argc, argv, o, help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!error.empty())
    return usageError(error);

  gpipe_session_options_t session;
  gpipe_session_options_init(&session);
  session.seed = uint64_t(o.seed);
  session.record_timeline = 0;
  if (o.device == "cpu")
    session.device = GPIPE_DEVICE_CPU;
  else if (o.device == "cuda")
    session.device = GPIPE_DEVICE_CUDA;
  else if (o.device == "host-emulation")
    session.device = GPIPE_DEVICE_HOST_EMULATION;
  else
    return usageError("unknown device '" + o.device +
                      "': expected cpu, cuda or host-emulation");
  const char *optimizers[] = {"sgd", "momentum", "rmsprop", "adam"};
  int kind = -1;
  for (int k = 0; k < 4; ++k)
    if (o.optimizer == optimizers[k])
      kind = k;
  if (kind < 0)
    return usageError("unknown optimizer '" + o.optimizer +
                      "': expected sgd, momentum, rmsprop or adam");
  session.optimizer = gpipe_optimizer_t(kind);
#ifdef GPIPE_HAVE_CUDA
  gpipe_register_cuda_backend();
#endif

  gpipe_session_t *s = nullptr;
  gpipe_status_t status =
      gpipe_session_create_from_file(o.bundle.c_str(), &session, &s);
  if (status != GPIPE_OK) {
    std::fprintf(stderr, "gpipe-train-bundle: error: %s\n", gpipe_last_error());
    return status == GPIPE_ERROR_UNAVAILABLE ? 2 : 1;
  }
  int exitCode = 0;
  if (!o.images.empty()) {
    gpipe_image_training_options_t train;
    gpipe_image_training_options_init(&train);
    train.epochs = uint32_t(o.epochs);
    train.max_steps_per_epoch = o.maxStepsPerEpoch;
    train.learning_rate = float(o.lr);
    train.shuffle_seed = uint64_t(o.seed);
    double accuracy = 0;
    if (gpipe_session_train_images(s, o.images.c_str(), &train, printReport,
                                   nullptr, &accuracy) != GPIPE_OK)
      exitCode = fail("training");
    else
      std::printf("final test accuracy: %.2f%%\n", 100.0 * accuracy);
  } else {
    gpipe_text_training_options_t train;
    gpipe_text_training_options_init(&train);
    train.steps = o.steps;
    train.eval_every = uint32_t(o.evalEvery);
    train.learning_rate = float(o.lr);
    train.seed = uint64_t(o.seed);
    double loss = 0;
    if (gpipe_session_train_text(s, o.text.c_str(), &train, printReport,
                                 nullptr, &loss) != GPIPE_OK)
      exitCode = fail("training");
    else
      std::printf("final validation loss: %.4f nats/char\n", loss);
  }
  gpipe_session_destroy(s);
  return exitCode;
}
