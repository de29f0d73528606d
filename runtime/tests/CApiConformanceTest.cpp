//===- CApiConformanceTest.cpp - Every C API function, careless callers ---===//
//
// The C API as a careless application calls it: NULL pointers, wrong sizes
// and types, enums outside their enumerators, extreme numbers, and calls in
// the wrong order. One table: each case names the function it calls, the
// status and the exact message (gpipe_last_error(); for a call that takes a
// non-const session, gpipe_session_last_error() too) it must get, and the
// session's whole observable state (parameters, gradients, optimizer state,
// steps, learning rate, gradient norm) must be what it was. A last test
// reads gpipe_runtime.h and checks that the table covers every function it
// declares. scripts/sanitize.sh runs this under ASan, UBSan and TSan.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"

#include "gpipe/runtime/SafeTensors.h"

#include "CApiSessionSupport.h"
#include "TempDir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace gpipe::runtime::testing::capi;
using gpipe::runtime::testing::TempDir;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kMaxSteps = GPIPE_MAX_STEPS_DONE;

/// An out-of-range enum value, stored as the application's int32 would be.
template <typename Enum> Enum rawEnum(int32_t value) {
  Enum e;
  static_assert(sizeof(Enum) == sizeof(int32_t), "the C enums are 32-bit");
  std::memcpy(&e, &value, sizeof e);
  return e;
}

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// What a session shows through its const calls.
struct Observed {
  std::vector<std::vector<float>> tensors;
  int64_t steps = -1;
  float learningRate = -1;
  gpipe_status_t normStatus = GPIPE_OK;
  double norm = 0;
  bool operator==(const Observed &o) const {
    if (tensors.size() != o.tensors.size())
      return false;
    for (size_t t = 0; t < tensors.size(); ++t)
      if (!bitwiseEqual(tensors[t], o.tensors[t]))
        return false;
    return steps == o.steps && learningRate == o.learningRate &&
           normStatus == o.normStatus &&
           std::memcmp(&norm, &o.norm, sizeof norm) == 0;
  }
};

Observed observe(const gpipe_session_t *session) {
  Observed o;
  gpipe_session_info_t info;
  uint32_t slots = 0;
  if (gpipe_session_query_info(session, &info) != GPIPE_OK ||
      gpipe_session_optimizer_slot_count(session, &slots) != GPIPE_OK)
    return o;
  for (size_t p = 0; p < info.parameter_count; ++p) {
    gpipe_tensor_info_t param;
    gpipe_session_parameter_info(session, p, &param);
    std::vector<float> values(param.element_count);
    gpipe_session_get_parameter(session, param.name, values.size(),
                                values.data());
    o.tensors.push_back(values);
    gpipe_session_get_gradient(session, param.name, values.size(),
                               values.data());
    o.tensors.push_back(values);
    for (uint32_t slot = 0; slot < slots; ++slot) {
      gpipe_session_get_optimizer_state(session, param.name, slot,
                                        values.size(), values.data());
      o.tensors.push_back(values);
    }
  }
  gpipe_session_steps_done(session, &o.steps);
  gpipe_session_get_learning_rate(session, &o.learningRate);
  o.normStatus = gpipe_session_gradient_norm(session, &o.norm);
  return o;
}

/// The world a case runs in: a session trained one step (Adam, the guard
/// on), one never trained, good inputs and scratch files.
struct World {
  gpipe_session_t *trained = nullptr;
  gpipe_session_t *fresh = nullptr;
  Data data = makeData(kBatch, 3);
  std::vector<float> buffer = std::vector<float>(1024);
  TempDir dir{"gpipe-conformance"};
  std::string checkpoint; ///< a checkpoint of `trained`
  std::string regularFile;

  World() {
    gpipe_session_options_t options;
    gpipe_session_options_init(&options);
    options.optimizer = GPIPE_OPTIMIZER_ADAM;
    trained = createSession(&options);
    fresh = createSession(&options);
    if (!trained || !fresh)
      return;
    trainStep(trained, 1);
    gpipe_session_save_checkpoint(trained, (dir.path + "/saved").c_str(), 0);
    checkpoint = dir.path + "/saved/step-0000000001";
    regularFile = dir.path + "/file";
    writeText(regularFile, "not a directory\n");
  }
  ~World() {
    gpipe_session_destroy(trained);
    gpipe_session_destroy(fresh);
  }
  World(const World &) = delete;
  World &operator=(const World &) = delete;

  std::vector<gpipe_input_t> inputs() const { return data.inputs(); }

  /// A copy of the checkpoint (at {dir}/bad, replacing the last) with
  /// state.json's step written as `step`.
  std::string withStep(const std::string &step) {
    std::string copy = dir.path + "/bad";
    ::mkdir(copy.c_str(), 0755);
    std::string state = readText(checkpoint + "/state.json");
    state = std::regex_replace(state, std::regex("\"step\": 1"),
                               "\"step\": " + step);
    writeText(copy + "/state.json", state);
    writeText(copy + "/tensors.safetensors",
              readText(checkpoint + "/tensors.safetensors"));
    return copy;
  }
  /// A copy of the checkpoint whose tensor `name` has `value` at element 0.
  std::string withValue(const std::string &name, float value) {
    std::string copy = withStep("1");
    namespace rt = gpipe::runtime;
    std::string bytes = readText(copy + "/tensors.safetensors");
    std::map<std::string, std::string> metadata;
    rt::StatusOr<std::vector<rt::NamedTensor>> tensors =
        rt::decodeSafeTensors(bytes, "copy", &metadata);
    if (!tensors.ok())
      return copy;
    for (rt::NamedTensor &tensor : *tensors)
      if (tensor.name == name)
        tensor.data[0] = value;
    writeText(copy + "/tensors.safetensors",
              rt::encodeSafeTensors(*tensors, metadata));
    return copy;
  }
};

/// One careless call: `function` is the C API function it makes.
struct Case {
  const char *function;
  const char *what;
  std::function<gpipe_status_t(World &)> call;
  gpipe_status_t status;
  /// The exact message; `{dir}` stands for the world's scratch directory.
  std::string message;
  /// The session the call takes non-const (its last error is the message
  /// too), if any; the `trained` one unless `fresh`.
  bool recordsOnSession = false;
  bool fresh = false;
};

gpipe_session_options_t defaultOptions() {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  return options;
}

/// Creates a session over the test model with `edit` applied to the default
/// options; the out_session must come back NULL.
gpipe_status_t
createWith(const std::function<void(gpipe_session_options_t &)> &edit) {
  gpipe_session_options_t options = defaultOptions();
  edit(options);
  const std::string &json = dropoutMlpJson();
  gpipe_session_t *session = reinterpret_cast<gpipe_session_t *>(&options);
  gpipe_status_t status = gpipe_session_create_from_json(
      json.data(), json.size(), "mlp", &options, &session);
  if (status != GPIPE_OK)
    EXPECT_EQ(session, nullptr) << "a failed creation sets *out_session NULL";
  else
    gpipe_session_destroy(session);
  return status;
}

gpipe_image_training_options_t imageOptions() {
  gpipe_image_training_options_t o;
  gpipe_image_training_options_init(&o);
  return o;
}

gpipe_text_training_options_t textOptions() {
  gpipe_text_training_options_t o;
  gpipe_text_training_options_init(&o);
  return o;
}

/// IDX files of `count` 3x4 images (the test model's 12 features) in `dir`.
std::string writeImages(const std::string &dir, uint32_t count) {
  ::mkdir(dir.c_str(), 0755);
  auto bigEndian = [](uint32_t v) {
    return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  };
  for (const char *prefix : {"train", "t10k"}) {
    std::string images = bigEndian(0x803) + bigEndian(count) + bigEndian(3) +
                         bigEndian(4) + std::string(count * 12, char(7));
    std::string labels = bigEndian(0x801) + bigEndian(count);
    for (uint32_t i = 0; i < count; ++i)
      labels += char(i % kClasses);
    writeText(dir + "/" + prefix + "-images-idx3-ubyte", images);
    writeText(dir + "/" + prefix + "-labels-idx1-ubyte", labels);
  }
  return dir;
}

const std::string kParams = "'l1.w', 'l1.b', 'l2.w', 'l2.b', 'l3.w', 'l3.b'";
const std::string kBadOptimizer =
    "options->optimizer: expected GPIPE_OPTIMIZER_SGD, _MOMENTUM, _RMSPROP, "
    "_ADAM or _ADAMW (0 to 4), got ";
const std::string kBadDevice = "options->device: expected GPIPE_DEVICE_CPU, "
                               "_CUDA or _HOST_EMULATION (0 to 2), got ";
const std::string kNoTimeline =
    "no timeline: no training step has run yet, or the session was created "
    "with record_timeline = 0";
const std::string kStepRange =
    "expected 0 to 9223372036854775806 steps done, got ";

std::string structSizeError(size_t got, const char *tail) {
  return "options->struct_size: expected " +
         std::to_string(GPIPE_SESSION_OPTIONS_MIN_SIZE) + " to " +
         std::to_string(sizeof(gpipe_session_options_t)) + ", got " +
         std::to_string(got) + tail;
}

/// Every case. The functions that return no status (the version, the
/// status strings, the _init functions, destroy and the last errors) are
/// checked by their own tests below and listed in kUnstatused.
std::vector<Case> cases() {
  using O = gpipe_session_options_t;
  const std::string json = "gpipe_session_create_from_json: ";
  std::vector<Case> c;
  auto create = [&](const char *what, std::function<void(O &)> edit,
                    gpipe_status_t status, const std::string &message) {
    c.push_back({"gpipe_session_create_from_json", what,
                 [edit](World &) { return createWith(edit); }, status,
                 json + message});
  };

  // Creation: paths, bytes and every option.
  c.push_back({"gpipe_session_create_from_file", "NULL path",
               [](World &) {
                 gpipe_session_t *s = nullptr;
                 return gpipe_session_create_from_file(nullptr, nullptr, &s);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               "gpipe_session_create_from_file: bundle_path is null"});
  c.push_back({"gpipe_session_create_from_file", "NULL out_session",
               [](World &) {
                 return gpipe_session_create_from_file("x.json", nullptr,
                                                       nullptr);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               "gpipe_session_create_from_file: out_session is null"});
  c.push_back({"gpipe_session_create_from_file", "a missing file",
               [](World &w) {
                 gpipe_session_t *s = nullptr;
                 return gpipe_session_create_from_file(
                     (w.dir.path + "/none.json").c_str(), nullptr, &s);
               },
               GPIPE_ERROR_IO,
               "gpipe_session_create_from_file: cannot open "
               "'{dir}/none.json': No such file or directory"});
  c.push_back({"gpipe_session_create_from_json", "NULL json",
               [](World &) {
                 gpipe_session_t *s = nullptr;
                 return gpipe_session_create_from_json(nullptr, 3, "m", nullptr,
                                                       &s);
               },
               GPIPE_ERROR_INVALID_ARGUMENT, json + "json is null"});
  c.push_back({"gpipe_session_create_from_json", "NULL out_session",
               [](World &) {
                 return gpipe_session_create_from_json("{}", 2, "m", nullptr,
                                                       nullptr);
               },
               GPIPE_ERROR_INVALID_ARGUMENT, json + "out_session is null"});
  create(
      "struct_size 0", [](O &o) { o.struct_size = 0; },
      GPIPE_ERROR_INVALID_ARGUMENT,
      structSizeError(
          0, " (initialize the options with gpipe_session_options_init)"));
  create(
      "struct_size one byte short of the first layout",
      [](O &o) { o.struct_size = GPIPE_SESSION_OPTIONS_MIN_SIZE - 1; },
      GPIPE_ERROR_INVALID_ARGUMENT,
      structSizeError(GPIPE_SESSION_OPTIONS_MIN_SIZE - 1, ""));
  create(
      "struct_size of a newer header",
      [](O &o) { o.struct_size = sizeof(O) + 8; }, GPIPE_ERROR_INVALID_ARGUMENT,
      structSizeError(sizeof(O) + 8,
                      " (options of a newer gpipe_runtime.h than this "
                      "library's, " GPIPE_EXPECTED_VERSION ")"));
  create(
      "struct_size of uninitialized memory",
      [](O &o) { o.struct_size = 0xbebebebebebebebeull; },
      GPIPE_ERROR_INVALID_ARGUMENT,
      structSizeError(
          0xbebebebebebebebeull,
          " (initialize the options with gpipe_session_options_init)"));
  for (int32_t value : {-1, 5, std::numeric_limits<int32_t>::min(),
                        std::numeric_limits<int32_t>::max()}) {
    create(
        "optimizer out of range",
        [value](O &o) { o.optimizer = rawEnum<gpipe_optimizer_t>(value); },
        GPIPE_ERROR_INVALID_ARGUMENT, kBadOptimizer + std::to_string(value));
    create(
        "device out of range",
        [value](O &o) { o.device = rawEnum<gpipe_device_t>(value); },
        GPIPE_ERROR_INVALID_ARGUMENT, kBadDevice + std::to_string(value));
  }
  struct RealOption {
    const char *field;
    float O::*member;
    float value;
    const char *expected, *found;
  } reals[] = {
      {"learning_rate", &O::learning_rate, kNaN, "a finite value >= 0", "nan"},
      {"learning_rate", &O::learning_rate, -1, "a finite value >= 0", "-1"},
      {"learning_rate", &O::learning_rate, kInf, "a finite value >= 0", "inf"},
      {"momentum", &O::momentum, -0.5f, "a finite value >= 0", "-0.5"},
      {"epsilon", &O::epsilon, kInf, "a finite value >= 0", "inf"},
      {"weight_decay", &O::weight_decay, -1, "a finite value >= 0", "-1"},
      {"clip_grad_norm", &O::clip_grad_norm, kNaN, "a finite value >= 0",
       "nan"},
      {"decay", &O::decay, 1, "a value in [0, 1)", "1"},
      {"beta1", &O::beta1, kNaN, "a value in [0, 1)", "nan"},
      {"beta2", &O::beta2, -0.1f, "a value in [0, 1)", "-0.1"},
  };
  for (const RealOption &r : reals)
    create(
        r.field, [r](O &o) { o.*r.member = r.value; },
        GPIPE_ERROR_INVALID_ARGUMENT,
        std::string("options->") + r.field + ": expected " + r.expected +
            ", got " + r.found);
  create(
      "recv_timeout_ms 0", [](O &o) { o.recv_timeout_ms = 0; },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "options->recv_timeout_ms: expected at least 1, got 0");
  for (uint32_t threads : {1025u, 0xffffffffu})
    create(
        "threads_per_device too many",
        [threads](O &o) { o.threads_per_device = threads; },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "options->threads_per_device: expected 0 (the cores divided "
        "among the devices) to 1024, got " +
            std::to_string(threads));
  for (gpipe_optimizer_t optimizer :
       {GPIPE_OPTIMIZER_ADAM, GPIPE_OPTIMIZER_RMSPROP})
    create(
        "weight decay without a rule for it",
        [optimizer](O &o) {
          o.optimizer = optimizer;
          o.weight_decay = 0.01f;
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        std::string("options->weight_decay: weight decay applies to sgd "
                    "and momentum (L2 added to the gradient) and to adamw "
                    "(decoupled), not to ") +
            (optimizer == GPIPE_OPTIMIZER_ADAM ? "adam: use adamw"
                                               : "rmsprop"));
  create(
      "a CUDA device in a program without the CUDA backend",
      [](O &o) { o.device = GPIPE_DEVICE_CUDA; }, GPIPE_ERROR_UNAVAILABLE,
      "no CUDA device: this program has no CUDA backend (built without a "
      "CUDA compiler, or it does not link runtime/cuda)");

  // Queries.
  auto query = [&](const char *function, const char *what,
                   std::function<gpipe_status_t(World &)> call,
                   gpipe_status_t status, const std::string &message,
                   bool fresh = false) {
    c.push_back({function, what, call, status,
                 std::string(function) + ": " + message, false, fresh});
  };
  query(
      "gpipe_session_query_info", "NULL session",
      [](World &) {
        gpipe_session_info_t info;
        return gpipe_session_query_info(nullptr, &info);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "session is null");
  query(
      "gpipe_session_query_info", "NULL out_info",
      [](World &w) { return gpipe_session_query_info(w.trained, nullptr); },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_info is null");
  for (size_t index : {size_t(2), std::numeric_limits<size_t>::max()})
    query(
        "gpipe_session_input_info", "index out of range",
        [index](World &w) {
          gpipe_tensor_info_t info;
          return gpipe_session_input_info(w.trained, index, &info);
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "index " + std::to_string(index) +
            " out of range: the model has 2 inputs");
  query(
      "gpipe_session_input_info", "NULL out_info",
      [](World &w) { return gpipe_session_input_info(w.trained, 0, nullptr); },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_info is null");
  query(
      "gpipe_session_parameter_info", "index out of range",
      [](World &w) {
        gpipe_tensor_info_t info;
        return gpipe_session_parameter_info(w.trained, 6, &info);
      },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "index 6 out of range: the model has 6 parameters");
  query(
      "gpipe_session_parameter_info", "NULL session",
      [](World &) {
        gpipe_tensor_info_t info;
        return gpipe_session_parameter_info(nullptr, 0, &info);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "session is null");
  for (int64_t rows :
       {int64_t(0), int64_t(-1), std::numeric_limits<int64_t>::min()})
    query(
        "gpipe_session_prediction_info", "rows < 1",
        [rows](World &w) {
          gpipe_tensor_info_t info;
          return gpipe_session_prediction_info(w.trained, rows, &info);
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "expected at least 1 row, got " + std::to_string(rows));
  query(
      "gpipe_session_prediction_info", "rows that overflow",
      [](World &w) {
        gpipe_tensor_info_t info;
        return gpipe_session_prediction_info(
            w.trained, std::numeric_limits<int64_t>::max(), &info);
      },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "the prediction of 9223372036854775807 rows has more elements than "
      "fit in size_t");
  query(
      "gpipe_session_steps_done", "NULL out_steps",
      [](World &w) { return gpipe_session_steps_done(w.trained, nullptr); },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_steps is null");
  query(
      "gpipe_session_peak_memory_bytes", "device out of range",
      [](World &w) {
        int64_t bytes;
        return gpipe_session_peak_memory_bytes(w.trained, 3, &bytes);
      },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "device 3 out of range: the pipeline has 3 devices");
  query(
      "gpipe_session_peak_memory_bytes", "NULL out_bytes",
      [](World &w) {
        return gpipe_session_peak_memory_bytes(w.trained, 0, nullptr);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_bytes is null");
  query(
      "gpipe_session_bubble_fraction", "before the first step",
      [](World &w) {
        double fraction;
        return gpipe_session_bubble_fraction(w.fresh, &fraction);
      },
      GPIPE_ERROR_FAILED_PRECONDITION, kNoTimeline, /*fresh=*/true);
  query(
      "gpipe_session_bubble_fraction", "NULL out_fraction",
      [](World &w) {
        return gpipe_session_bubble_fraction(w.trained, nullptr);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_fraction is null");
  query(
      "gpipe_session_write_trace", "before the first step",
      [](World &w) {
        return gpipe_session_write_trace(w.fresh,
                                         (w.dir.path + "/t.json").c_str());
      },
      GPIPE_ERROR_FAILED_PRECONDITION, kNoTimeline, /*fresh=*/true);
  query(
      "gpipe_session_write_trace", "NULL path",
      [](World &w) { return gpipe_session_write_trace(w.trained, nullptr); },
      GPIPE_ERROR_INVALID_ARGUMENT, "path is null");
  query(
      "gpipe_session_gradient_norm", "before the first step",
      [](World &w) {
        double norm;
        return gpipe_session_gradient_norm(w.fresh, &norm);
      },
      GPIPE_ERROR_FAILED_PRECONDITION, "no training step has run yet",
      /*fresh=*/true);
  query(
      "gpipe_session_gradient_norm", "NULL out_norm",
      [](World &w) { return gpipe_session_gradient_norm(w.trained, nullptr); },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_norm is null");

  // Training and evaluation: what the inputs can get wrong.
  auto step = [&](const char *what,
                  std::function<void(std::vector<gpipe_input_t> &)> edit,
                  gpipe_status_t status, const std::string &message) {
    for (bool evaluate : {false, true}) {
      const char *function =
          evaluate ? "gpipe_session_evaluate" : "gpipe_session_train_step";
      c.push_back(
          {function, what,
           [edit, evaluate](World &w) {
             std::vector<gpipe_input_t> inputs = w.inputs();
             edit(inputs);
             double loss;
             return evaluate
                        ? gpipe_session_evaluate(w.trained, kBatch,
                                                 inputs.data(), inputs.size(),
                                                 0, nullptr, &loss)
                        : gpipe_session_train_step(w.trained, inputs.data(),
                                                   inputs.size(), &loss);
           },
           status, std::string(function) + ": " + message, true});
    }
  };
  step(
      "a missing input", [](auto &in) { in.pop_back(); },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "missing model input 'labels' (expected i32 [10])");
  step(
      "an unknown input", [](auto &in) { in[0].name = "y"; },
      GPIPE_ERROR_NOT_FOUND,
      "inputs[0]: unknown model input 'y' (the model reads 'x', 'labels')");
  step(
      "an input twice", [](auto &in) { in[1] = in[0]; },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "inputs[1]: model input 'x' is given twice (also inputs[0])");
  step(
      "a NULL name", [](auto &in) { in[0].name = nullptr; },
      GPIPE_ERROR_INVALID_ARGUMENT, "inputs[0].name is null");
  for (int32_t type : {-1, 2, std::numeric_limits<int32_t>::min()})
    step(
        "an element type out of range",
        [type](auto &in) { in[0].type = rawEnum<gpipe_element_type_t>(type); },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "input 'x': unknown element type " + std::to_string(type) +
            " (expected GPIPE_ELEMENT_F32 or GPIPE_ELEMENT_I32)");
  step(
      "the wrong element type",
      [](auto &in) { in[0].type = GPIPE_ELEMENT_I32; },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "input 'x': expected f32 elements, got i32");
  for (size_t count : {size_t(119), std::numeric_limits<size_t>::max()})
    step(
        "the wrong element count",
        [count](auto &in) { in[0].element_count = count; },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "input 'x': expected 120 f32 elements (shape [10, 12]), got " +
            std::to_string(count));
  step(
      "NULL data", [](auto &in) { in[1].data = nullptr; },
      GPIPE_ERROR_INVALID_ARGUMENT, "input 'labels': data is null");
  for (float bad : {kNaN, kInf, -kInf})
    step(
        "a non-finite input under the guard",
        [bad](auto &in) {
          static thread_local std::vector<float> x;
          const float *given = static_cast<const float *>(in[0].data);
          x.assign(given, given + in[0].element_count);
          x[37] = bad;
          in[0].data = x.data();
        },
        GPIPE_ERROR_NON_FINITE,
        std::string("input 'x': expected finite values (the session guards: "
                    "check_finite), got ") +
            (std::isnan(bad) ? "nan"
             : bad > 0       ? "inf"
                             : "-inf") +
            " at element 37");
  c.push_back({"gpipe_session_train_step", "NULL inputs with a count",
               [](World &w) {
                 double loss;
                 return gpipe_session_train_step(w.trained, nullptr, 2, &loss);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               "gpipe_session_train_step: inputs is null but input_count is 2",
               true});
  c.push_back({"gpipe_session_train_step", "NULL out_loss",
               [](World &w) {
                 std::vector<gpipe_input_t> inputs = w.inputs();
                 return gpipe_session_train_step(w.trained, inputs.data(),
                                                 inputs.size(), nullptr);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               "gpipe_session_train_step: out_loss is null", true});
  c.push_back({"gpipe_session_train_step", "NULL session",
               [](World &w) {
                 std::vector<gpipe_input_t> inputs = w.inputs();
                 double loss;
                 return gpipe_session_train_step(nullptr, inputs.data(),
                                                 inputs.size(), &loss);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               "gpipe_session_train_step: session is null"});
  const std::string evaluate = "gpipe_session_evaluate: ";
  for (int64_t rows : {int64_t(0), std::numeric_limits<int64_t>::min()})
    c.push_back(
        {"gpipe_session_evaluate", "rows < 1",
         [rows](World &w) {
           std::vector<gpipe_input_t> inputs = w.inputs();
           double loss;
           return gpipe_session_evaluate(w.trained, rows, inputs.data(),
                                         inputs.size(), 0, nullptr, &loss);
         },
         GPIPE_ERROR_INVALID_ARGUMENT,
         evaluate + "expected at least 1 row, got " + std::to_string(rows),
         true});
  c.push_back({"gpipe_session_evaluate", "rows that overflow",
               [](World &w) {
                 std::vector<gpipe_input_t> inputs = w.inputs();
                 double loss;
                 return gpipe_session_evaluate(
                     w.trained, std::numeric_limits<int64_t>::max(),
                     inputs.data(), inputs.size(), 0, nullptr, &loss);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               evaluate + "the prediction of 9223372036854775807 rows has "
                          "more elements than fit in size_t",
               true});
  c.push_back({"gpipe_session_evaluate", "a prediction buffer too small",
               [](World &w) {
                 std::vector<gpipe_input_t> inputs = w.inputs();
                 double loss;
                 return gpipe_session_evaluate(w.trained, kBatch, inputs.data(),
                                               inputs.size(), 49,
                                               w.buffer.data(), &loss);
               },
               GPIPE_ERROR_BUFFER_TOO_SMALL,
               evaluate + "the prediction of 10 rows (shape [10, 5]) needs 50 "
                          "floats, the buffer holds 49",
               true});
  c.push_back(
      {"gpipe_session_evaluate", "NULL prediction with a capacity",
       [](World &w) {
         std::vector<gpipe_input_t> inputs = w.inputs();
         double loss;
         return gpipe_session_evaluate(w.trained, kBatch, inputs.data(),
                                       inputs.size(), 50, nullptr, &loss);
       },
       GPIPE_ERROR_INVALID_ARGUMENT,
       evaluate + "out_prediction is null but prediction_capacity is 50",
       true});

  // The library's loops: options and data.
  auto images = [&](const char *what,
                    std::function<void(gpipe_image_training_options_t &)> edit,
                    std::function<std::string(World &)> dataset,
                    gpipe_status_t status, const std::string &message) {
    c.push_back({"gpipe_session_train_images", what,
                 [edit, dataset](World &w) {
                   gpipe_image_training_options_t o = imageOptions();
                   edit(o);
                   std::string dir = dataset(w);
                   return gpipe_session_train_images(w.trained, dir.c_str(), &o,
                                                     nullptr, nullptr, nullptr);
                 },
                 status, "gpipe_session_train_images: " + message, true});
  };
  auto enough = [](World &w) { return writeImages(w.dir.path + "/img", 20); };
  images(
      "epochs 0", [](auto &o) { o.epochs = 0; }, enough,
      GPIPE_ERROR_INVALID_ARGUMENT, "expected at least 1 epoch, got 0");
  images(
      "max_steps_per_epoch < 0", [](auto &o) { o.max_steps_per_epoch = -1; },
      enough, GPIPE_ERROR_INVALID_ARGUMENT,
      "expected at least 0 steps per epoch (0: all), got -1");
  images(
      "warmup_steps < 0", [](auto &o) { o.warmup_steps = -3; }, enough,
      GPIPE_ERROR_INVALID_ARGUMENT, "expected at least 0 warmup steps, got -3");
  images(
      "struct_size 0", [](auto &o) { o.struct_size = 0; }, enough,
      GPIPE_ERROR_INVALID_ARGUMENT,
      "options->struct_size: expected " +
          std::to_string(GPIPE_IMAGE_TRAINING_OPTIONS_MIN_SIZE) + " to " +
          std::to_string(sizeof(gpipe_image_training_options_t)) +
          ", got 0 (initialize the options with "
          "gpipe_image_training_options_init)");
  images(
      "a training set smaller than one batch", [](auto &) {},
      [](World &w) { return writeImages(w.dir.path + "/few", 5); },
      GPIPE_ERROR_INVALID_ARGUMENT,
      "the training set has 5 examples, fewer than one mini-batch of 10 "
      "rows");
  c.push_back({"gpipe_session_train_images", "NULL dataset_dir",
               [](World &w) {
                 return gpipe_session_train_images(w.trained, nullptr, nullptr,
                                                   nullptr, nullptr, nullptr);
               },
               GPIPE_ERROR_INVALID_ARGUMENT,
               "gpipe_session_train_images: dataset_dir is null", true});
  auto text = [&](const char *what,
                  std::function<void(gpipe_text_training_options_t &)> edit,
                  const char *corpus, gpipe_status_t status,
                  const std::string &message) {
    c.push_back({"gpipe_session_train_text", what,
                 [edit, corpus](World &w) {
                   gpipe_text_training_options_t o = textOptions();
                   edit(o);
                   return gpipe_session_train_text(w.trained, corpus, &o,
                                                   nullptr, nullptr, nullptr);
                 },
                 status, "gpipe_session_train_text: " + message, true});
  };
  text(
      "NULL corpus_path", [](auto &) {}, nullptr, GPIPE_ERROR_INVALID_ARGUMENT,
      "corpus_path is null");
  text(
      "steps 0", [](auto &o) { o.steps = 0; }, "/nonexistent",
      GPIPE_ERROR_INVALID_ARGUMENT, "expected at least 1 step, got 0");
  text(
      "learning_rate nan", [](auto &o) { o.learning_rate = kNaN; },
      "/nonexistent", GPIPE_ERROR_INVALID_ARGUMENT,
      "the learning rate must be a finite positive number, got nan");
  text(
      "warmup as long as the run",
      [](auto &o) {
        o.steps = 10;
        o.warmup_steps = 10;
      },
      "/nonexistent", GPIPE_ERROR_INVALID_ARGUMENT,
      "expected fewer warmup steps than the run's 10 steps, got 10");

  // Parameters and optimizer state.
  auto tensor = [&](const char *function, const char *what,
                    std::function<gpipe_status_t(World &)> call,
                    gpipe_status_t status, const std::string &message,
                    bool mutating) {
    c.push_back({function, what, call, status,
                 std::string(function) + ": " + message, mutating});
  };
  tensor(
      "gpipe_session_parameter_size", "an unknown name",
      [](World &w) {
        size_t n;
        return gpipe_session_parameter_size(w.trained, "nope", &n);
      },
      GPIPE_ERROR_NOT_FOUND,
      "unknown parameter 'nope' (the model has " + kParams + ")", false);
  tensor(
      "gpipe_session_parameter_size", "NULL name",
      [](World &w) {
        size_t n;
        return gpipe_session_parameter_size(w.trained, nullptr, &n);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "name is null", false);
  tensor(
      "gpipe_session_parameter_size", "NULL out_element_count",
      [](World &w) {
        return gpipe_session_parameter_size(w.trained, "l1.w", nullptr);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_element_count is null", false);
  for (const char *function :
       {"gpipe_session_get_parameter", "gpipe_session_get_gradient"}) {
    const bool gradient =
        std::strcmp(function, "gpipe_session_get_gradient") == 0;
    auto get = [gradient](World &w, const char *name, size_t capacity,
                          float *out) {
      return gradient
                 ? gpipe_session_get_gradient(w.trained, name, capacity, out)
                 : gpipe_session_get_parameter(w.trained, name, capacity, out);
    };
    tensor(
        function, "a buffer one short",
        [get](World &w) { return get(w, "l1.w", 191, w.buffer.data()); },
        GPIPE_ERROR_BUFFER_TOO_SMALL,
        "parameter 'l1.w' has 192 elements, the buffer holds 191", false);
    tensor(
        function, "an unknown name",
        [get](World &w) { return get(w, "l9.w", 1024, w.buffer.data()); },
        GPIPE_ERROR_NOT_FOUND,
        "unknown parameter 'l9.w' (the model has " + kParams + ")", false);
    tensor(
        function, "NULL out_values",
        [get](World &w) { return get(w, "l1.w", 1024, nullptr); },
        GPIPE_ERROR_INVALID_ARGUMENT, "out_values is null", false);
    tensor(
        function, "NULL name",
        [get](World &w) { return get(w, nullptr, 1024, w.buffer.data()); },
        GPIPE_ERROR_INVALID_ARGUMENT, "name is null", false);
  }
  auto setParameter = [](const char *name, size_t count, float first) {
    return [=](World &w) {
      std::vector<float> values(192, 0.5f);
      values[0] = first;
      return gpipe_session_set_parameter(w.trained, name, values.data(), count);
    };
  };
  tensor("gpipe_session_set_parameter", "a NaN",
         setParameter("l1.w", 192, kNaN), GPIPE_ERROR_INVALID_ARGUMENT,
         "parameter 'l1.w': expected finite values, got nan at element 0",
         true);
  tensor("gpipe_session_set_parameter", "-inf",
         setParameter("l1.w", 192, -kInf), GPIPE_ERROR_INVALID_ARGUMENT,
         "parameter 'l1.w': expected finite values, got -inf at element 0",
         true);
  tensor("gpipe_session_set_parameter", "the wrong count",
         setParameter("l1.w", 191, 0), GPIPE_ERROR_INVALID_ARGUMENT,
         "parameter 'l1.w': expected 192 elements (shape [12, 16]), got 191",
         true);
  tensor("gpipe_session_set_parameter", "an unknown name",
         setParameter("w", 192, 0), GPIPE_ERROR_NOT_FOUND,
         "unknown parameter 'w' (the model has " + kParams + ")", true);
  tensor(
      "gpipe_session_set_parameter", "NULL values",
      [](World &w) {
        return gpipe_session_set_parameter(w.trained, "l1.w", nullptr, 192);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "values is null", true);
  for (float rate : {kNaN, -1.0f, kInf})
    tensor(
        "gpipe_session_set_learning_rate", "a rate out of range",
        [rate](World &w) {
          return gpipe_session_set_learning_rate(w.trained, rate);
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        std::string("expected a finite learning rate >= 0, got ") +
            (std::isnan(rate) ? "nan"
             : rate > 0       ? "inf"
                              : "-1"),
        true);
  tensor(
      "gpipe_session_get_learning_rate", "NULL out_learning_rate",
      [](World &w) {
        return gpipe_session_get_learning_rate(w.trained, nullptr);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_learning_rate is null", false);
  tensor(
      "gpipe_session_optimizer_slot_count", "NULL out_slot_count",
      [](World &w) {
        return gpipe_session_optimizer_slot_count(w.trained, nullptr);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_slot_count is null", false);
  for (uint32_t slot : {2u, 0xffffffffu})
    tensor(
        "gpipe_session_optimizer_state_size", "a slot out of range",
        [slot](World &w) {
          size_t n;
          return gpipe_session_optimizer_state_size(w.trained, "l1.w", slot,
                                                    &n);
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "optimizer state slot " + std::to_string(slot) +
            " out of range: adam keeps 2 per parameter (slots 0 to 1)",
        false);
  tensor(
      "gpipe_session_optimizer_state_size", "an unknown name",
      [](World &w) {
        size_t n;
        return gpipe_session_optimizer_state_size(w.trained, "x", 0, &n);
      },
      GPIPE_ERROR_NOT_FOUND,
      "unknown parameter 'x' (the model has " + kParams + ")", false);
  tensor(
      "gpipe_session_get_optimizer_state", "a buffer one short",
      [](World &w) {
        return gpipe_session_get_optimizer_state(w.trained, "l1.w", 1, 191,
                                                 w.buffer.data());
      },
      GPIPE_ERROR_BUFFER_TOO_SMALL,
      "optimizer state 1 of parameter 'l1.w' has 192 elements, the buffer "
      "holds 191",
      false);
  tensor(
      "gpipe_session_get_optimizer_state", "NULL out_values",
      [](World &w) {
        return gpipe_session_get_optimizer_state(w.trained, "l1.w", 0, 192,
                                                 nullptr);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "out_values is null", false);
  auto setState = [](uint32_t slot, size_t count, float first) {
    return [=](World &w) {
      std::vector<float> values(192, 0.25f);
      values[0] = first;
      return gpipe_session_set_optimizer_state(w.trained, "l1.w", slot,
                                               values.data(), count);
    };
  };
  tensor("gpipe_session_set_optimizer_state", "a negative mean square",
         setState(1, 192, -1), GPIPE_ERROR_INVALID_ARGUMENT,
         "optimizer state 1 of parameter 'l1.w': expected finite values >= 0 "
         "(adam's mean of squared gradients), got -1 at element 0",
         true);
  tensor("gpipe_session_set_optimizer_state", "a NaN", setState(0, 192, kNaN),
         GPIPE_ERROR_INVALID_ARGUMENT,
         "optimizer state 0 of parameter 'l1.w': expected finite values, got "
         "nan at element 0",
         true);
  tensor("gpipe_session_set_optimizer_state", "the wrong count",
         setState(0, 0, 0), GPIPE_ERROR_INVALID_ARGUMENT,
         "optimizer state 0 of parameter 'l1.w': expected 192 elements (shape "
         "[12, 16]), got 0",
         true);
  tensor("gpipe_session_set_optimizer_state", "a slot out of range",
         setState(7, 192, 0), GPIPE_ERROR_INVALID_ARGUMENT,
         "optimizer state slot 7 out of range: adam keeps 2 per parameter "
         "(slots 0 to 1)",
         true);
  for (int64_t steps : {int64_t(-1), std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max()})
    tensor(
        "gpipe_session_set_steps_done", "a count out of range",
        [steps](World &w) {
          return gpipe_session_set_steps_done(w.trained, steps);
        },
        GPIPE_ERROR_INVALID_ARGUMENT, kStepRange + std::to_string(steps), true);

  // Checkpoints.
  tensor(
      "gpipe_session_save_checkpoint", "NULL dir",
      [](World &w) {
        return gpipe_session_save_checkpoint(w.trained, nullptr, 0);
      },
      GPIPE_ERROR_INVALID_ARGUMENT, "dir is null or empty", true);
  tensor(
      "gpipe_session_save_checkpoint", "a regular file as the directory",
      [](World &w) {
        return gpipe_session_save_checkpoint(w.trained, w.regularFile.c_str(),
                                             0);
      },
      GPIPE_ERROR_IO,
      "cannot create the checkpoint directory '{dir}/file': Not a "
      "directory",
      true);
  tensor(
      "gpipe_session_load_checkpoint", "an empty path",
      [](World &w) { return gpipe_session_load_checkpoint(w.trained, ""); },
      GPIPE_ERROR_INVALID_ARGUMENT, "path is null or empty", true);
  tensor(
      "gpipe_session_load_checkpoint", "a FIFO as `latest`",
      [](World &w) {
        std::string save = w.dir.path + "/fifo-save";
        ::mkdir(save.c_str(), 0755);
        ::mkfifo((save + "/latest").c_str(), 0644);
        return gpipe_session_load_checkpoint(w.trained, save.c_str());
      },
      GPIPE_ERROR_IO,
      "cannot read '{dir}/fifo-save/latest': expected a regular file, "
      "found a FIFO",
      true);
  for (const char *step : {"-5", "18446744073709551615", "9223372036854775807"})
    tensor(
        "gpipe_session_load_checkpoint", "a step out of range",
        [step](World &w) {
          return gpipe_session_load_checkpoint(w.trained,
                                               w.withStep(step).c_str());
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "'{dir}/bad/state.json': step " + std::string(step) +
            " is not a count of steps done (expected 0 to "
            "9223372036854775806)",
        true);
  struct BadTensor {
    const char *name;
    float value;
    const char *message;
  } badTensors[] = {
      {"l2.b", kNaN,
       "tensor 'l2.b': expected finite values, got nan at "
       "element 0"},
      {"optimizer.0/l1.w", kInf,
       "tensor 'optimizer.0/l1.w': expected finite values, got inf at "
       "element 0"},
      {"optimizer.1/l3.w", -2,
       "tensor 'optimizer.1/l3.w': expected finite values >= 0 (adam's mean "
       "of squared gradients), got -2 at element 0"},
  };
  for (const BadTensor &bad : badTensors)
    tensor(
        "gpipe_session_load_checkpoint", "a tensor set_* refuses",
        [bad](World &w) {
          return gpipe_session_load_checkpoint(
              w.trained, w.withValue(bad.name, bad.value).c_str());
        },
        GPIPE_ERROR_INVALID_ARGUMENT,
        "'{dir}/bad': " + std::string(bad.message), true);
  return c;
}

/// The functions without a status, each checked by a test of its own below.
const char *const kUnstatused[] = {"gpipe_runtime_version",
                                   "gpipe_runtime_api_version",
                                   "gpipe_status_string",
                                   "gpipe_last_error",
                                   "gpipe_session_options_init",
                                   "gpipe_image_training_options_init",
                                   "gpipe_text_training_options_init",
                                   "gpipe_session_destroy",
                                   "gpipe_session_last_error"};

std::string expand(std::string message, const World &w) {
  const std::string key = "{dir}";
  for (size_t at; (at = message.find(key)) != std::string::npos;)
    message.replace(at, key.size(), w.dir.path);
  return message;
}

TEST(CApiConformance, EveryCaseGetsItsStatusAndMessageAndChangesNothing) {
  World w;
  ASSERT_NE(w.trained, nullptr) << gpipe_last_error();
  ASSERT_NE(w.fresh, nullptr) << gpipe_last_error();
  const Observed trained = observe(w.trained), fresh = observe(w.fresh);
  ASSERT_FALSE(trained.tensors.empty());
  ASSERT_EQ(trained.steps, 1);
  for (const Case &c : cases()) {
    SCOPED_TRACE(std::string(c.function) + ", " + c.what);
    gpipe_session_t *session = c.fresh ? w.fresh : w.trained;
    const std::string sessionErrorBefore = gpipe_session_last_error(session);
    gpipe_status_t status = c.call(w);
    const std::string message = expand(c.message, w);
    EXPECT_EQ(gpipe_status_string(status), gpipe_status_string(c.status));
    EXPECT_EQ(gpipe_last_error(), message);
    EXPECT_EQ(gpipe_session_last_error(session),
              c.recordsOnSession ? message : sessionErrorBefore)
        << (c.recordsOnSession ? "a non-const call records its error"
                               : "a const call leaves the session's error");
    EXPECT_TRUE(observe(w.trained) == trained) << "the trained session changed";
    EXPECT_TRUE(observe(w.fresh) == fresh) << "the fresh session changed";
  }
}

TEST(CApiConformance, FunctionsWithoutAStatus) {
  EXPECT_STREQ(gpipe_runtime_version(), GPIPE_EXPECTED_VERSION);
  EXPECT_EQ(gpipe_runtime_api_version(), GPIPE_RUNTIME_API_VERSION);
  // Any int32 is a value of gpipe_status_t (its _ENUM_MIN/_MAX sentinels).
  for (int32_t value : {-1, 13, 1000, std::numeric_limits<int32_t>::min(),
                        std::numeric_limits<int32_t>::max()})
    EXPECT_STREQ(gpipe_status_string(rawEnum<gpipe_status_t>(value)),
                 "GPIPE_ERROR_UNKNOWN")
        << value;
  EXPECT_STREQ(gpipe_status_string(GPIPE_ERROR_NON_FINITE),
               "GPIPE_ERROR_NON_FINITE");
  // The _init functions and destroy take NULL; the last errors never are.
  gpipe_session_options_init(nullptr);
  gpipe_image_training_options_init(nullptr);
  gpipe_text_training_options_init(nullptr);
  gpipe_session_destroy(nullptr);
  EXPECT_STREQ(gpipe_session_last_error(nullptr), "");
  gpipe_session_t *session = nullptr;
  EXPECT_EQ(gpipe_session_create_from_file(nullptr, nullptr, &session),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_create_from_file: bundle_path is null");
  uint32_t slots;
  session = createSession(nullptr);
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(gpipe_session_optimizer_slot_count(session, &slots), GPIPE_OK);
  EXPECT_STREQ(gpipe_last_error(), "") << "a success clears the thread's error";
  EXPECT_STREQ(gpipe_session_last_error(session), "");
  gpipe_session_destroy(session);
}

/// Calls in an order the session does not allow: steps past the count's
/// limit. The count may reach GPIPE_MAX_STEPS_DONE; a step then is refused
/// before it runs, and the session stays as it was.
TEST(CApiConformance, TheStepCountStopsAtItsLimit) {
  gpipe_session_t *session = createSession(nullptr);
  ASSERT_NE(session, nullptr) << gpipe_last_error();
  ASSERT_EQ(gpipe_session_set_steps_done(session, kMaxSteps), GPIPE_OK);
  const Observed before = observe(session);
  ASSERT_TRUE(std::isnan(trainStep(session, 1)));
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_train_step: the session has done "
               "9223372036854775806 steps, the most it counts "
               "(GPIPE_MAX_STEPS_DONE)");
  EXPECT_TRUE(observe(session) == before);
  // One below the limit, a step runs and reaches it.
  ASSERT_EQ(gpipe_session_set_steps_done(session, kMaxSteps - 1), GPIPE_OK);
  ASSERT_FALSE(std::isnan(trainStep(session, 1))) << gpipe_last_error();
  int64_t steps = 0;
  ASSERT_EQ(gpipe_session_steps_done(session, &steps), GPIPE_OK);
  EXPECT_EQ(steps, kMaxSteps);
  gpipe_session_destroy(session);
}

/// The guard also stops an evaluation whose loss is not finite, though
/// every input is: inputs near FLT_MAX overflow the forward. Without the
/// guard the same evaluation reports the non-finite loss.
TEST(CApiConformance, EvaluateGuardsItsLoss) {
  Data data = makeData(kBatch, 5);
  for (float &v : data.x)
    v = v < 0 ? -3e38f : 3e38f;
  std::vector<gpipe_input_t> inputs = data.inputs();
  gpipe_session_t *guarded = createSession(nullptr);
  ASSERT_NE(guarded, nullptr) << gpipe_last_error();
  const Observed before = observe(guarded);
  double loss = 0;
  EXPECT_EQ(gpipe_session_evaluate(guarded, kBatch, inputs.data(),
                                   inputs.size(), 0, nullptr, &loss),
            GPIPE_ERROR_NON_FINITE);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_evaluate: evaluate: the loss of rows 0 to 3 "
               "is nan (the non-finite guard is on)");
  EXPECT_TRUE(observe(guarded) == before);
  gpipe_session_destroy(guarded);

  gpipe_session_options_t options = defaultOptions();
  options.check_finite = 0;
  gpipe_session_t *unguarded = createSession(&options);
  ASSERT_NE(unguarded, nullptr) << gpipe_last_error();
  ASSERT_EQ(gpipe_session_evaluate(unguarded, kBatch, inputs.data(),
                                   inputs.size(), 0, nullptr, &loss),
            GPIPE_OK)
      << gpipe_last_error();
  EXPECT_FALSE(std::isfinite(loss));
  gpipe_session_destroy(unguarded);
}

/// The table covers every function gpipe_runtime.h declares.
TEST(CApiConformance, CoversEveryPublicFunction) {
  std::ifstream header(GPIPE_RUNTIME_HEADER);
  ASSERT_TRUE(header) << GPIPE_RUNTIME_HEADER;
  std::ostringstream text;
  text << header.rdbuf();
  const std::string source = text.str();
  std::set<std::string> declared;
  std::regex declaration(R"(GPIPE_API[^;(]*?\b(gpipe_\w+)\s*\()");
  for (std::sregex_iterator it(source.begin(), source.end(), declaration), end;
       it != end; ++it)
    declared.insert((*it)[1]);
  ASSERT_GE(declared.size(), 37u);
  std::set<std::string> covered(std::begin(kUnstatused), std::end(kUnstatused));
  for (const Case &c : cases())
    covered.insert(c.function);
  for (const std::string &function : declared)
    EXPECT_TRUE(covered.count(function)) << function << " has no case";
}

} // namespace
