//===- FuzzCApi.cpp - libFuzzer target: sequences of C API calls ----------===//
//
// The input is decoded into session options and then a sequence of up to 48
// calls on that session, each with arguments drawn from the input: names
// (real, unknown, NULL), counts and capacities around the right ones, enum
// values anywhere in int32, extreme numbers, NaN and infinite data, and any
// order (traces before steps, loads of checkpoints never saved, steps at the
// step limit). The only rules kept are the caller's own: a buffer holds the
// capacity it is said to hold, strings are NUL-terminated. Every call must
// return a status the header defines with a message that starts with the
// function's name (and "" on success), and the step count must stay within
// [0, GPIPE_MAX_STEPS_DONE]; anything else, or a crash, a hang or a
// sanitizer report, is a finding. The model is the seed corpus's two-device
// bundle (corpus/bundle/tiny-k2-m2.json).
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

const std::string &bundleText() {
  static const std::string text = [] {
    std::ifstream in(GPIPE_FUZZ_CAPI_BUNDLE);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }();
  return text;
}

/// A per-process scratch directory for checkpoints and traces.
const std::string &scratch() {
  static const std::string dir = [] {
    std::string d = "/tmp/gpipe-fuzz-capi-" + std::to_string(::getpid());
    std::string command = "mkdir -p " + d;
    if (std::system(command.c_str()) != 0)
      std::abort();
    return d;
  }();
  return dir;
}

[[noreturn]] void finding(const char *function, const char *what) {
  std::fprintf(stderr, "FuzzCApi: %s: %s (status message: '%s')\n", function,
               what, gpipe_last_error());
  std::abort();
}

/// The checks every status-returning call must pass.
gpipe_status_t checked(const char *function, gpipe_status_t status) {
  const int32_t code = status;
  if (code < GPIPE_OK || code > GPIPE_ERROR_NON_FINITE)
    finding(function, "a status the header does not define");
  const char *message = gpipe_last_error();
  if (message == nullptr)
    finding(function, "a NULL message");
  if (status == GPIPE_OK
          ? message[0] != '\0'
          : std::strncmp(message, function, std::strlen(function)) != 0)
    finding(function, "a message that does not fit the status");
  return status;
}

template <typename Enum> Enum rawEnum(int32_t value) {
  Enum e;
  std::memcpy(&e, &value, sizeof e);
  return e;
}

float anyFloat(FuzzedDataProvider &in) {
  switch (in.ConsumeIntegralInRange(0, 5)) {
  case 0:
    return std::numeric_limits<float>::quiet_NaN();
  case 1:
    return std::numeric_limits<float>::infinity();
  case 2:
    return -std::numeric_limits<float>::infinity();
  case 3:
    return in.ConsumeFloatingPointInRange<float>(-1.0f, 1.0f);
  default:
    return in.ConsumeFloatingPoint<float>();
  }
}

/// A size near `right`: it, one less, one more, 0 or a huge one.
size_t nearSize(FuzzedDataProvider &in, size_t right) {
  switch (in.ConsumeIntegralInRange(0, 5)) {
  case 0:
    return right ? right - 1 : 0;
  case 1:
    return right + 1;
  case 2:
    return 0;
  case 3:
    return std::numeric_limits<size_t>::max();
  default:
    return right;
  }
}

struct Fuzz {
  FuzzedDataProvider &in;
  gpipe_session_t *session = nullptr;
  gpipe_session_info_t info{};
  std::vector<gpipe_tensor_info_t> params, inputs;

  /// A parameter's name, an unknown one or NULL; `count` its elements.
  const char *name(size_t &count) {
    switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0:
      count = 0;
      return nullptr;
    case 1:
      count = 0;
      return "no such parameter";
    default: {
      const gpipe_tensor_info_t &p =
          params[in.ConsumeIntegralInRange<size_t>(0, params.size() - 1)];
      count = p.element_count;
      return p.name;
    }
    }
  }

  /// A capacity and a buffer that holds it (or NULL).
  float *buffer(size_t right, size_t &capacity, std::vector<float> &storage) {
    capacity = nearSize(in, right);
    if (capacity > (1u << 16) || in.ConsumeIntegralInRange(0, 7) == 0) {
      storage.clear();
      return nullptr;
    }
    storage.assign(capacity, 0.0f);
    return storage.data();
  }

  /// A batch of `rows` rows with bad elements, types and names mixed in;
  /// the data vectors keep what the inputs point to.
  std::vector<gpipe_input_t> batch(int64_t rows,
                                   std::vector<std::vector<int32_t>> &data) {
    std::vector<gpipe_input_t> batch;
    data.clear();
    for (const gpipe_tensor_info_t &input : inputs) {
      if (in.ConsumeIntegralInRange(0, 15) == 0)
        continue; // missing
      size_t perRow = input.element_count / size_t(input.shape[0]);
      size_t count = perRow * size_t(rows);
      gpipe_input_t one{input.name, input.type, nullptr, count};
      switch (in.ConsumeIntegralInRange(0, 15)) {
      case 0:
        one.type = rawEnum<gpipe_element_type_t>(in.ConsumeIntegral<int32_t>());
        break;
      case 1:
        one.element_count = nearSize(in, count);
        break;
      case 2:
        one.name = in.ConsumeBool() ? nullptr : "z";
        break;
      default:
        break;
      }
      std::vector<int32_t> values(std::min<size_t>(count, 1u << 16));
      for (int32_t &v : values) {
        if (input.type == GPIPE_ELEMENT_F32) {
          float f = in.ConsumeBool() ? anyFloat(in) : 0.5f;
          std::memcpy(&v, &f, sizeof f);
        } else {
          v = in.ConsumeBool() ? in.ConsumeIntegral<int32_t>()
                               : in.ConsumeIntegralInRange<int32_t>(0, 4);
        }
      }
      data.push_back(std::move(values));
      // The caller's rule: non-NULL data holds element_count elements.
      if (one.element_count <= data.back().size() &&
          in.ConsumeIntegralInRange(0, 15) != 0)
        one.data = data.back().data();
      batch.push_back(one);
      if (in.ConsumeIntegralInRange(0, 31) == 0)
        batch.push_back(one); // twice
    }
    return batch;
  }

  void call() {
    size_t count = 0, capacity = 0;
    std::vector<float> storage;
    double value = 0;
    int64_t steps = 0;
    switch (in.ConsumeIntegralInRange(0, 17)) {
    case 0: {
      std::vector<std::vector<int32_t>> data;
      std::vector<gpipe_input_t> b = batch(info.batch_size, data);
      checked("gpipe_session_train_step",
              gpipe_session_train_step(
                  session, b.data(), b.size(),
                  in.ConsumeIntegralInRange(0, 15) == 0 ? nullptr : &value));
      break;
    }
    case 1: {
      int64_t rows = in.ConsumeIntegralInRange<int64_t>(-2, 12);
      std::vector<std::vector<int32_t>> data;
      std::vector<gpipe_input_t> b = batch(rows < 1 ? 1 : rows, data);
      gpipe_tensor_info_t prediction{};
      gpipe_status_t known =
          checked("gpipe_session_prediction_info",
                  gpipe_session_prediction_info(session, rows, &prediction));
      float *out = buffer(known == GPIPE_OK ? prediction.element_count : 8,
                          capacity, storage);
      checked("gpipe_session_evaluate",
              gpipe_session_evaluate(session, rows, b.data(), b.size(),
                                     capacity, out, &value));
      break;
    }
    case 2: {
      const char *n = name(count);
      float *out = buffer(count, capacity, storage);
      checked("gpipe_session_get_parameter",
              gpipe_session_get_parameter(session, n, capacity, out));
      break;
    }
    case 3: {
      const char *n = name(count);
      float *out = buffer(count, capacity, storage);
      checked("gpipe_session_get_gradient",
              gpipe_session_get_gradient(session, n, capacity, out));
      break;
    }
    case 4: {
      const char *n = name(count);
      std::vector<float> values(count);
      for (float &v : values)
        v = in.ConsumeBool() ? anyFloat(in) : 0.1f;
      checked(
          "gpipe_session_set_parameter",
          gpipe_session_set_parameter(
              session, n, in.ConsumeBool() ? values.data() : nullptr,
              in.ConsumeBool() ? count : nearSize(in, count) % (count + 1)));
      break;
    }
    case 5: {
      const char *n = name(count);
      uint32_t slot = in.ConsumeBool() ? in.ConsumeIntegralInRange(0u, 2u)
                                       : in.ConsumeIntegral<uint32_t>();
      float *out = buffer(count, capacity, storage);
      checked(
          "gpipe_session_get_optimizer_state",
          gpipe_session_get_optimizer_state(session, n, slot, capacity, out));
      checked("gpipe_session_optimizer_state_size",
              gpipe_session_optimizer_state_size(session, n, slot, &capacity));
      break;
    }
    case 6: {
      const char *n = name(count);
      uint32_t slot = in.ConsumeIntegralInRange(0u, 3u);
      std::vector<float> values(count, 0.0f);
      for (float &v : values)
        v = in.ConsumeBool() ? anyFloat(in) : 0.0f;
      checked("gpipe_session_set_optimizer_state",
              gpipe_session_set_optimizer_state(session, n, slot, values.data(),
                                                count));
      break;
    }
    case 7: {
      int64_t set = in.ConsumeBool()
                        ? in.ConsumeIntegral<int64_t>()
                        : GPIPE_MAX_STEPS_DONE -
                              in.ConsumeIntegralInRange<int64_t>(-1, 2);
      checked("gpipe_session_set_steps_done",
              gpipe_session_set_steps_done(session, set));
      break;
    }
    case 8:
      checked("gpipe_session_set_learning_rate",
              gpipe_session_set_learning_rate(session, anyFloat(in)));
      break;
    case 9: {
      float rate;
      checked("gpipe_session_get_learning_rate",
              gpipe_session_get_learning_rate(session, &rate));
      checked("gpipe_session_gradient_norm",
              gpipe_session_gradient_norm(session, &value));
      checked("gpipe_session_bubble_fraction",
              gpipe_session_bubble_fraction(session, &value));
      break;
    }
    case 10: {
      std::string path = scratch() + "/trace.json";
      checked("gpipe_session_write_trace",
              gpipe_session_write_trace(
                  session, in.ConsumeBool() ? path.c_str() : "/nonexistent/t"));
      break;
    }
    case 11:
      checked("gpipe_session_save_checkpoint",
              gpipe_session_save_checkpoint(
                  session, (scratch() + "/checkpoints").c_str(),
                  in.ConsumeIntegralInRange(1u, 3u)));
      break;
    case 12:
      checked("gpipe_session_load_checkpoint",
              gpipe_session_load_checkpoint(
                  session, in.ConsumeBool()
                               ? (scratch() + "/checkpoints").c_str()
                               : "/nonexistent/checkpoints"));
      break;
    case 13: {
      int64_t bytes;
      checked("gpipe_session_peak_memory_bytes",
              gpipe_session_peak_memory_bytes(
                  session, in.ConsumeIntegralInRange<size_t>(0, 3), &bytes));
      break;
    }
    case 14: {
      gpipe_tensor_info_t tensor;
      size_t index = in.ConsumeIntegralInRange<size_t>(0, 3);
      checked("gpipe_session_input_info",
              gpipe_session_input_info(session, index, &tensor));
      checked("gpipe_session_parameter_info",
              gpipe_session_parameter_info(session, index, &tensor));
      const char *n = name(count);
      checked("gpipe_session_parameter_size",
              gpipe_session_parameter_size(session, n, &capacity));
      break;
    }
    case 15: {
      uint32_t slots;
      checked("gpipe_session_optimizer_slot_count",
              gpipe_session_optimizer_slot_count(session, &slots));
      (void)gpipe_status_string(
          rawEnum<gpipe_status_t>(in.ConsumeIntegral<int32_t>()));
      break;
    }
    default: {
      gpipe_session_info_t again;
      checked("gpipe_session_query_info",
              gpipe_session_query_info(session, &again));
      break;
    }
    }
    checked("gpipe_session_steps_done",
            gpipe_session_steps_done(session, &steps));
    if (steps < 0 || steps > GPIPE_MAX_STEPS_DONE)
      finding("gpipe_session_steps_done", "a step count out of range");
    if (gpipe_session_last_error(session) == nullptr)
      finding("gpipe_session_last_error", "NULL");
  }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider in(data, size);
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  if (in.ConsumeIntegralInRange(0, 7) == 0)
    options.struct_size = in.ConsumeIntegral<size_t>();
  options.seed = in.ConsumeIntegral<uint64_t>();
  options.optimizer = rawEnum<gpipe_optimizer_t>(
      in.ConsumeBool() ? in.ConsumeIntegralInRange(0, 4)
                       : in.ConsumeIntegral<int32_t>());
  if (in.ConsumeBool())
    options.learning_rate = anyFloat(in);
  if (in.ConsumeIntegralInRange(0, 3) == 0) {
    options.momentum = anyFloat(in);
    options.beta1 = anyFloat(in);
    options.beta2 = anyFloat(in);
    options.weight_decay = anyFloat(in);
    options.clip_grad_norm = anyFloat(in);
  }
  // Short timeouts keep a failing step from stalling the fuzzer.
  options.recv_timeout_ms = in.ConsumeIntegralInRange(0u, 2000u);
  options.record_timeline = in.ConsumeBool();
  options.device =
      rawEnum<gpipe_device_t>(in.ConsumeBool() ? in.ConsumeIntegralInRange(0, 2)
                                               : in.ConsumeIntegral<int32_t>());
  options.threads_per_device =
      in.ConsumeBool() ? in.ConsumeIntegralInRange(0u, 2u) : 1025u;
  options.check_finite = in.ConsumeBool();

  Fuzz fuzz{in};
  const std::string &json = bundleText();
  gpipe_status_t created =
      checked("gpipe_session_create_from_json",
              gpipe_session_create_from_json(json.data(), json.size(), "fuzz",
                                             &options, &fuzz.session));
  if (created != GPIPE_OK) {
    if (fuzz.session != nullptr)
      finding("gpipe_session_create_from_json", "a session after a failure");
    return 0;
  }
  checked("gpipe_session_query_info",
          gpipe_session_query_info(fuzz.session, &fuzz.info));
  for (size_t i = 0; i < fuzz.info.parameter_count; ++i) {
    gpipe_tensor_info_t t;
    checked("gpipe_session_parameter_info",
            gpipe_session_parameter_info(fuzz.session, i, &t));
    fuzz.params.push_back(t);
  }
  for (size_t i = 0; i < fuzz.info.input_count; ++i) {
    gpipe_tensor_info_t t;
    checked("gpipe_session_input_info",
            gpipe_session_input_info(fuzz.session, i, &t));
    fuzz.inputs.push_back(t);
  }
  for (int calls = 0; calls < 48 && in.remaining_bytes() > 0; ++calls)
    fuzz.call();
  gpipe_session_destroy(fuzz.session);
  return 0;
}
