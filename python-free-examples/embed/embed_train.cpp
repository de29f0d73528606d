//===- embed_train.cpp - Train a compiled bundle through the C API --------===//
//
// How an application embeds gpipe: it links only the runtime library
// (GPipeRuntime, no MLIR), loads a program bundle that gpipe-opt and
// gpipe-translate produced ahead of time, and drives it through the C API
// (here through its C++ layer, gpipe/runtime/Runtime.hpp):
//
//   embed_train mlp.bundle.json /usr/share/datasets/fashion-mnist
//       [--steps 50] [--optimizer adam|adamw|...] [--lr 0.001] [--seed 1]
//       [--trace trace.json] [--help]
//
// It binds the model's inputs to Fashion-MNIST by their shapes (an f32 input
// of 784 values per example, an i32 label input of shape [batch]), trains
// --steps mini-batches (past the end of the set, a new epoch, reshuffled),
// evaluates the test accuracy, and prints a short
// report. docs/RuntimeAPI.md walks through it. Every error ends the program
// with a message on stderr and exit status 1 (2 for a bad command line).
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/Runtime.hpp"
#ifdef GPIPE_HAVE_CUDA
#include "gpipe/cuda/gpipe_cuda.h"
#endif

// The runtime's IDX reader (gzip or raw) for the data set; any loader that
// yields float pixels and int32 labels would do.
#include "gpipe/runtime/data/Dataset.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

struct Options {
  std::string bundlePath, dataDir, tracePath;
  long steps = 50;
  std::string optimizer = "adam";
  float learningRate = 1e-3f;
  uint64_t seed = 1;
  long timeoutMs = 60000;
  std::string device = "cpu";
  bool help = false;
};

const char *const kUsage =
    "usage: embed_train BUNDLE.json FASHION_MNIST_DIR [--steps N] "
    "[--optimizer sgd|momentum|rmsprop|adam|adamw] [--lr X] [--seed S] "
    "[--device cpu|cuda|host-emulation] [--timeout-ms MS] [--trace PATH]\n"
    "  (options also take --name=value)\n";

int fail(const std::string &message) {
  std::fprintf(stderr, "embed_train: error: %s\n", message.c_str());
  return 1;
}

int usageError(const std::string &message) {
  std::fprintf(stderr, "embed_train: error: %s\n%s", message.c_str(), kUsage);
  return 2;
}

/// Parses the command line; returns "" or what is wrong with it.
std::string parseArgs(int argc, char **argv, Options &options) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      return {};
    }
    if (arg.rfind("--", 0) != 0) {
      positional.push_back(arg);
      continue;
    }
    std::string value;
    size_t equals = arg.find('=');
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
      arg = arg.substr(0, equals);
    } else if (i + 1 >= argc) {
      return "option " + arg + " expects a value";
    } else {
      value = argv[++i];
    }
    char *end = nullptr;
    if (arg == "--steps") {
      errno = 0;
      options.steps = std::strtol(value.c_str(), &end, 10);
      if (*end || value.empty() || errno == ERANGE || options.steps < 1 ||
          options.steps > 1000000000L)
        return "--steps expects an integer from 1 to 1000000000, got '" +
               value + "'";
    } else if (arg == "--lr") {
      options.learningRate = std::strtof(value.c_str(), &end);
      if (*end || value.empty() || !std::isfinite(options.learningRate) ||
          !(options.learningRate > 0))
        return "--lr expects a finite positive number, got '" + value + "'";
    } else if (arg == "--seed") {
      errno = 0;
      options.seed = std::strtoull(value.c_str(), &end, 10);
      if (*end || value.empty() || value[0] == '-' || errno == ERANGE)
        return "--seed expects an integer from 0 to 2^64 - 1, got '" + value +
               "'";
    } else if (arg == "--timeout-ms") {
      errno = 0;
      options.timeoutMs = std::strtol(value.c_str(), &end, 10);
      if (*end || value.empty() || errno == ERANGE || options.timeoutMs < 1 ||
          options.timeoutMs > 86400000L)
        return "--timeout-ms expects an integer from 1 to 86400000 (a day), "
               "got '" +
               value + "'";
    } else if (arg == "--optimizer") {
      options.optimizer = value;
    } else if (arg == "--trace") {
      options.tracePath = value;
    } else if (arg == "--device") {
      options.device = value;
    } else {
      return "unknown option " + arg;
    }
  }
  if (positional.size() != 2)
    return "expected 2 arguments (the bundle and the data directory), got " +
           std::to_string(positional.size());
  options.bundlePath = positional[0];
  options.dataDir = positional[1];
  return {};
}

bool optimizerKind(const std::string &name, gpipe_optimizer_t &kind) {
  static const struct {
    const char *name;
    gpipe_optimizer_t kind;
  } kinds[] = {{"sgd", GPIPE_OPTIMIZER_SGD},
               {"momentum", GPIPE_OPTIMIZER_MOMENTUM},
               {"rmsprop", GPIPE_OPTIMIZER_RMSPROP},
               {"adam", GPIPE_OPTIMIZER_ADAM},
               {"adamw", GPIPE_OPTIMIZER_ADAMW}};
  for (const auto &k : kinds)
    if (name == k.name) {
      kind = k.kind;
      return true;
    }
  return false;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string mebibytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", double(bytes) / (1 << 20));
  return text;
}

/// The model inputs that take the images and the labels.
struct Binding {
  std::string images, labels;
};

/// Finds the image input (f32, `pixels` values per example) and the label
/// input (i32, shape [batch]); returns "" or what does not match.
std::string bindInputs(const std::vector<gpipe::TensorInfo> &inputs,
                       int64_t pixels, Binding &binding) {
  for (const gpipe::TensorInfo &input : inputs) {
    int64_t perExample = int64_t(input.elementCount) / input.shape[0];
    if (input.type == GPIPE_ELEMENT_F32 && perExample == pixels)
      binding.images = input.name;
    else if (input.type == GPIPE_ELEMENT_I32 && input.shape.size() == 1)
      binding.labels = input.name;
  }
  if (inputs.size() == 2 && !binding.images.empty() && !binding.labels.empty())
    return {};
  std::string found;
  for (const gpipe::TensorInfo &input : inputs)
    found += (found.empty() ? "" : ", ") + input.name + " " +
             shapeString(input.shape) +
             (input.type == GPIPE_ELEMENT_F32 ? " f32" : " i32");
  return "the model's inputs do not match Fashion-MNIST: expected an f32 "
         "input of " +
         std::to_string(pixels) +
         " values per example and an i32 label input of shape [batch], "
         "found " +
         found;
}

/// Rows `order[first, first + rows)` of a data set as host buffers.
struct HostBatch {
  std::vector<float> images;
  std::vector<int32_t> labels;
};

HostBatch gather(const gpipe::runtime::ImageDataset &data,
                 const std::vector<int64_t> &order, int64_t first,
                 int64_t rows) {
  int64_t pixels = data.height * data.width;
  HostBatch batch;
  batch.images.resize(rows * pixels);
  batch.labels.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t example = order[first + r];
    std::copy_n(data.images.begin() + example * pixels, pixels,
                batch.images.begin() + r * pixels);
    batch.labels[r] = data.labels[example];
  }
  return batch;
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  std::string error = parseArgs(argc, argv, options);
  if (!error.empty())
    return usageError(error);
  if (options.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }

  // 1. Open a session on the bundle.
  gpipe::Session::Options sessionOptions = gpipe::Session::defaultOptions();
  if (!optimizerKind(options.optimizer, sessionOptions.optimizer))
    return usageError("unknown optimizer '" + options.optimizer +
                      "': expected sgd, momentum, rmsprop, adam or adamw");
  // AdamW decays by gpipe-run's default (PyTorch's); the others take none.
  if (sessionOptions.optimizer == GPIPE_OPTIMIZER_ADAMW)
    sessionOptions.weight_decay = 0.01f;
  sessionOptions.learning_rate = options.learningRate;
  sessionOptions.seed = options.seed;
  // How long a device waits for its peer before the step fails, naming both.
  sessionOptions.recv_timeout_ms = uint32_t(options.timeoutMs);
  if (options.device == "cpu")
    sessionOptions.device = GPIPE_DEVICE_CPU;
  else if (options.device == "cuda")
    sessionOptions.device = GPIPE_DEVICE_CUDA;
  else if (options.device == "host-emulation")
    sessionOptions.device = GPIPE_DEVICE_HOST_EMULATION;
  else
    return usageError("unknown device '" + options.device +
                      "': expected cpu, cuda or host-emulation");
#ifdef GPIPE_HAVE_CUDA
  gpipe_register_cuda_backend();
#endif
  gpipe::Result<gpipe::Session> opened =
      gpipe::Session::open(options.bundlePath, sessionOptions);
  if (!opened.ok()) {
    fail(opened.status().toString());
    return opened.status().code() == GPIPE_ERROR_UNAVAILABLE ? 2 : 1;
  }
  gpipe::Session session = std::move(opened).value();

  const int64_t batch = session.batchSize();
  const size_t devices = session.deviceCount();
  const size_t microbatches = session.microbatchCount();
  size_t paramFloats = 0;
  std::vector<gpipe::TensorInfo> params = session.parameters();
  for (const gpipe::TensorInfo &param : params)
    paramFloats += param.elementCount;
  std::printf("embed_train: model '%s' from %s: %zu devices, %zu "
              "micro-batches per mini-batch of %" PRId64
              ", %zu parameters (%zu floats)\n",
              session.model().c_str(), options.bundlePath.c_str(), devices,
              microbatches, batch, params.size(), paramFloats);

  // 2. Load the data and bind it to the model's inputs.
  gpipe::runtime::StatusOr<gpipe::runtime::ImageDataset> train =
      gpipe::runtime::loadFashionMnist(options.dataDir, /*train=*/true);
  if (!train.ok())
    return fail(train.status().message());
  gpipe::runtime::StatusOr<gpipe::runtime::ImageDataset> test =
      gpipe::runtime::loadFashionMnist(options.dataDir, /*train=*/false);
  if (!test.ok())
    return fail(test.status().message());
  Binding binding;
  error =
      bindInputs(session.inputs(), (*train).height * (*train).width, binding);
  if (!error.empty())
    return fail(error);
  // Steps past the end of the set start a new epoch, reshuffled.
  const long stepsPerEpoch = long((*train).count / batch);
  if (stepsPerEpoch < 1)
    return fail("a mini-batch of " + std::to_string(batch) +
                " examples needs more than the " +
                std::to_string((*train).count) + " the training set has");

  // 3. Train: one C API call per mini-batch.
  std::vector<int64_t> order((*train).count);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 shuffler(options.seed);
  std::shuffle(order.begin(), order.end(), shuffler);
  double windowLoss = 0, firstLoss = 0, lastLoss = 0;
  long window = 0;
  auto start = std::chrono::steady_clock::now();
  for (long step = 0; step < options.steps; ++step) {
    if (step > 0 && step % stepsPerEpoch == 0)
      std::shuffle(order.begin(), order.end(), shuffler);
    HostBatch host =
        gather((*train), order, (step % stepsPerEpoch) * batch, batch);
    gpipe::Result<double> loss =
        session.trainStep({gpipe::Input::f32(binding.images, host.images),
                           gpipe::Input::i32(binding.labels, host.labels)});
    if (!loss.ok())
      return fail("step " + std::to_string(step + 1) + ": " +
                  loss.status().toString());
    if (step == 0)
      firstLoss = *loss;
    lastLoss = *loss;
    windowLoss += *loss;
    ++window;
    if ((step + 1) % 10 == 0 || step + 1 == options.steps) {
      std::printf("  step %4ld/%ld: mean loss %.4f over the last %ld steps\n",
                  step + 1, options.steps, windowLoss / window, window);
      windowLoss = 0;
      window = 0;
    }
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  // 4. Evaluate on the whole test set: the prediction is the logits.
  std::vector<int64_t> testOrder((*test).count);
  std::iota(testOrder.begin(), testOrder.end(), 0);
  int64_t correct = 0;
  double testLoss = 0;
  const int64_t chunk = 1000; // evaluate takes any row count
  for (int64_t first = 0; first < (*test).count; first += chunk) {
    int64_t rows = std::min(chunk, (*test).count - first);
    HostBatch host = gather((*test), testOrder, first, rows);
    gpipe::Result<gpipe::Evaluation> eval = session.evaluate(
        rows, {gpipe::Input::f32(binding.images, host.images),
               gpipe::Input::i32(binding.labels, host.labels)});
    if (!eval.ok())
      return fail("evaluation: " + eval.status().toString());
    int64_t classes = eval->shape.back();
    for (int64_t r = 0; r < rows; ++r) {
      const float *logits = eval->prediction.data() + r * classes;
      correct +=
          std::max_element(logits, logits + classes) - logits == host.labels[r];
    }
    testLoss += eval->loss * double(rows);
  }

  // 5. Report.
  std::printf("trained %ld steps (%" PRId64 " examples) in %.2f s: %.0f "
              "samples/s; loss %.4f -> %.4f\n",
              options.steps, options.steps * batch, seconds,
              double(options.steps * batch) / seconds, firstLoss, lastLoss);
  std::printf("test: accuracy %.2f%% (%" PRId64 "/%" PRId64 "), loss %.4f\n",
              100.0 * double(correct) / double((*test).count), correct,
              (*test).count, testLoss / double((*test).count));
  gpipe::Result<double> bubble = session.bubbleFraction();
  if (!bubble.ok())
    return fail(bubble.status().toString());
  std::vector<int64_t> peaks = session.peakMemoryBytes();
  std::string memory;
  for (size_t d = 0; d < peaks.size(); ++d)
    memory += (d ? ", " : "") + mebibytes(peaks[d]);
  std::printf("last step: bubble %.3f (ideal (K-1)/(M+K-1) = %.3f), peak "
              "memory per device [%s]\n",
              *bubble, double(devices - 1) / double(microbatches + devices - 1),
              memory.c_str());
  if (!options.tracePath.empty()) {
    gpipe::Status written = session.writeTrace(options.tracePath);
    if (!written.ok())
      return fail(written.toString());
    std::printf("timeline of the last step: %s\n", options.tracePath.c_str());
  }
  return 0;
}
