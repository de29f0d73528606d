//===- CApiOptionsAbiTest.cpp - gpipe_session_options_t's struct_size -----===//
//
// A binary built against an older gpipe_runtime.h passes a smaller options
// struct: the library must read only its struct_size bytes, give the fields
// beyond them their defaults, and refuse a size it cannot read.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"

#include "CApiSessionSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <vector>

using namespace gpipe::runtime::testing::capi;

namespace {

/// The first layout of the options (API version 2), as a binary built
/// against that header has it: everything up to `device`.
struct FirstLayoutOptions {
  size_t struct_size;
  uint64_t seed;
  gpipe_optimizer_t optimizer;
  float learning_rate;
  float momentum;
  float decay;
  float beta1;
  float beta2;
  float epsilon;
  uint32_t recv_timeout_ms;
  int record_timeline;
  gpipe_device_t device;
};
static_assert(sizeof(FirstLayoutOptions) >= GPIPE_SESSION_OPTIONS_MIN_SIZE,
              "the first layout is the smallest accepted");
static_assert(sizeof(FirstLayoutOptions) < sizeof(gpipe_session_options_t),
              "fields were added after the first layout");
static_assert(offsetof(FirstLayoutOptions, device) ==
                  offsetof(gpipe_session_options_t, device),
              "the first layout is a prefix of the current one");

gpipe_session_options_t adamOptions() {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.seed = 7;
  options.optimizer = GPIPE_OPTIMIZER_ADAM;
  options.learning_rate = 0.02f;
  options.beta1 = 0.8f;
  options.beta2 = 0.99f;
  return options;
}

struct Trained {
  std::vector<double> losses;
  std::vector<std::vector<float>> params;
};

/// Three steps and the parameters after them; fails the test on an error.
Trained train(gpipe_session_t *session) {
  Trained result;
  for (uint64_t step = 1; step <= 3; ++step)
    result.losses.push_back(trainStep(session, step));
  result.params = parameters(session);
  return result;
}

void expectSame(const Trained &a, const Trained &b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_FALSE(std::isnan(a.losses[i])) << "step " << i + 1;
    EXPECT_EQ(a.losses[i], b.losses[i]) << "step " << i + 1;
  }
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_TRUE(bitwiseEqual(a.params[i], b.params[i])) << "parameter " << i;
}

// gpipe_session_options_init stamps the struct with the header's size.
TEST(CApiOptionsAbi, InitSetsTheStructSize) {
  gpipe_session_options_t options;
  std::memset(&options, 0xAB, sizeof(options));
  gpipe_session_options_init(&options);
  EXPECT_EQ(options.struct_size, sizeof(gpipe_session_options_t));
  EXPECT_EQ(options.threads_per_device, 0u);
}

// Options of the first layout, followed in memory by bytes that would be an
// invalid threads_per_device, give the session of the same settings in the
// current struct: the library reads no byte beyond struct_size.
TEST(CApiOptionsAbi, FirstLayoutStillRuns) {
  gpipe_session_options_t current = adamOptions();
  gpipe_session_t *expected = createSession(&current);
  ASSERT_NE(expected, nullptr) << gpipe_last_error();
  Trained reference = train(expected);
  gpipe_session_destroy(expected);

  alignas(gpipe_session_options_t) unsigned char
      memory[sizeof(gpipe_session_options_t)];
  std::memset(memory, 0xFF, sizeof(memory));
  auto *old = new (memory) FirstLayoutOptions;
  old->struct_size = sizeof(FirstLayoutOptions);
  old->seed = 7;
  old->optimizer = GPIPE_OPTIMIZER_ADAM;
  old->learning_rate = 0.02f;
  old->momentum = 0.9f;
  old->decay = 0.9f;
  old->beta1 = 0.8f;
  old->beta2 = 0.99f;
  old->epsilon = 1e-8f;
  old->recv_timeout_ms = 60000;
  old->record_timeline = 1;
  old->device = GPIPE_DEVICE_CPU;
  gpipe_session_t *session =
      createSession(reinterpret_cast<const gpipe_session_options_t *>(memory));
  ASSERT_NE(session, nullptr) << gpipe_last_error();
  expectSame(train(session), reference);
  gpipe_session_destroy(session);
}

// A struct_size below the first layout's, zero, or above the library's is
// refused at creation with the accepted range.
TEST(CApiOptionsAbi, WrongSizesAreRefused) {
  const std::string range = std::to_string(GPIPE_SESSION_OPTIONS_MIN_SIZE) +
                            " to " +
                            std::to_string(sizeof(gpipe_session_options_t));
  const std::string prefix =
      "gpipe_session_create_from_json: options->struct_size: expected " + range;
  struct Case {
    size_t size;
    std::string message;
  } cases[] = {
      {0, prefix + ", got 0 (initialize the options with "
                   "gpipe_session_options_init)"},
      {12, prefix + ", got 12"},
      {GPIPE_SESSION_OPTIONS_MIN_SIZE - 1,
       prefix + ", got " + std::to_string(GPIPE_SESSION_OPTIONS_MIN_SIZE - 1)},
      {sizeof(gpipe_session_options_t) + 8,
       prefix + ", got " + std::to_string(sizeof(gpipe_session_options_t) + 8) +
           " (options of a newer gpipe_runtime.h than this library's, " +
           gpipe_runtime_version() + ")"},
  };
  for (const Case &c : cases) {
    gpipe_session_options_t options = adamOptions();
    options.struct_size = c.size;
    EXPECT_EQ(createSession(&options), nullptr) << c.size;
    EXPECT_EQ(gpipe_last_error(), c.message);
  }
}

// The smallest accepted size works too (no tail padding read).
TEST(CApiOptionsAbi, MinimumSizeIsAccepted) {
  gpipe_session_options_t options = adamOptions();
  options.struct_size = GPIPE_SESSION_OPTIONS_MIN_SIZE;
  options.threads_per_device = 5000; // beyond struct_size: ignored
  gpipe_session_t *session = createSession(&options);
  ASSERT_NE(session, nullptr) << gpipe_last_error();
  gpipe_session_destroy(session);
}

// threads_per_device changes nothing in the numbers and is bounded.
TEST(CApiOptionsAbi, ThreadsPerDevice) {
  Trained byCount[2];
  uint32_t counts[] = {1, 3};
  for (int i = 0; i < 2; ++i) {
    gpipe_session_options_t options = adamOptions();
    options.threads_per_device = counts[i];
    gpipe_session_t *session = createSession(&options);
    ASSERT_NE(session, nullptr) << gpipe_last_error();
    byCount[i] = train(session);
    gpipe_session_destroy(session);
  }
  expectSame(byCount[0], byCount[1]);

  gpipe_session_options_t options = adamOptions();
  options.threads_per_device = 1025;
  EXPECT_EQ(createSession(&options), nullptr);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_create_from_json: options->threads_per_device: "
               "expected 0 (the cores divided among the devices) to 1024, "
               "got 1025");
}

} // namespace
