//===- CApiConcurrencyTest.cpp - Const calls from many threads at once ---===//
//
// gpipe_runtime.h promises that the functions taking a const session may run
// concurrently on one session. Right after each training step (when the
// host copies of the parameters are stale and the first readers fill them),
// several threads read every parameter, gradient and optimizer state and
// every other const query at once; then one thread reads them again, alone,
// and every concurrent answer must equal that one. scripts/sanitize.sh runs
// this under ThreadSanitizer, where any race is a report that fails it.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"

#include "CApiSessionSupport.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace gpipe::runtime::testing::capi;

namespace {

/// Everything one reader saw: the tensors in a fixed order, then the scalar
/// answers, and the first failure's message.
struct Reading {
  std::vector<std::vector<float>> tensors;
  std::vector<double> scalars;
  std::string failure;
};

/// Reads every const query of `session` into `out`. Returns on the first
/// failure, recording which call failed and gpipe_last_error().
void readEverything(const gpipe_session_t *session, Reading &out) {
  auto check = [&](gpipe_status_t status, const std::string &call) {
    if (status != GPIPE_OK && out.failure.empty())
      out.failure =
          call + ": " + gpipe_status_string(status) + ": " + gpipe_last_error();
    return status == GPIPE_OK;
  };
  gpipe_session_info_t info;
  if (!check(gpipe_session_query_info(session, &info), "query_info"))
    return;
  uint32_t slots = 0;
  if (!check(gpipe_session_optimizer_slot_count(session, &slots),
             "optimizer_slot_count"))
    return;
  for (size_t p = 0; p < info.parameter_count; ++p) {
    gpipe_tensor_info_t param;
    if (!check(gpipe_session_parameter_info(session, p, &param),
               "parameter_info"))
      return;
    std::vector<float> values(param.element_count);
    const std::string name = param.name;
    if (!check(gpipe_session_get_parameter(session, param.name, values.size(),
                                           values.data()),
               "get_parameter " + name))
      return;
    out.tensors.push_back(values);
    if (!check(gpipe_session_get_gradient(session, param.name, values.size(),
                                          values.data()),
               "get_gradient " + name))
      return;
    out.tensors.push_back(values);
    for (uint32_t slot = 0; slot < slots; ++slot) {
      if (!check(gpipe_session_get_optimizer_state(
                     session, param.name, slot, values.size(), values.data()),
                 "get_optimizer_state " + name))
        return;
      out.tensors.push_back(values);
    }
  }
  int64_t steps = 0, bytes = 0;
  double norm = 0, bubble = 0;
  float rate = 0;
  check(gpipe_session_steps_done(session, &steps), "steps_done");
  check(gpipe_session_gradient_norm(session, &norm), "gradient_norm");
  check(gpipe_session_bubble_fraction(session, &bubble), "bubble_fraction");
  check(gpipe_session_get_learning_rate(session, &rate), "get_learning_rate");
  check(gpipe_session_peak_memory_bytes(session, 0, &bytes),
        "peak_memory_bytes");
  out.scalars = {double(steps), norm, bubble, double(rate), double(bytes)};
}

/// Rounds of a step, then kReaders threads reading at once, on `device`.
void readConcurrentlyAfterEachStep(gpipe_device_t device) {
  // GPIPE_CONCURRENCY_ITERATIONS: more rounds when hunting a race by hand.
  const char *env = std::getenv("GPIPE_CONCURRENCY_ITERATIONS");
  const int iterations = env ? std::atoi(env) : 100;
  constexpr int kReaders = 4;
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.optimizer = GPIPE_OPTIMIZER_ADAM; // two state slots to read
  options.learning_rate = 1e-3f;
  options.device = device;
  gpipe_session_t *session = createSession(&options);
  ASSERT_NE(session, nullptr) << gpipe_last_error();

  for (int iteration = 0; iteration < iterations; ++iteration) {
    ASSERT_FALSE(std::isnan(trainStep(session, uint64_t(iteration + 1))))
        << gpipe_session_last_error(session);
    std::vector<Reading> readings(kReaders);
    std::atomic<int> ready{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < kReaders; ++r)
      readers.emplace_back([&, r] {
        // All start together: the first reads after a step are the racy ones.
        ready.fetch_add(1);
        while (ready.load() < kReaders)
          std::this_thread::yield();
        readEverything(session, readings[r]);
      });
    for (std::thread &reader : readers)
      reader.join();

    Reading alone;
    readEverything(session, alone);
    ASSERT_EQ(alone.failure, "");
    for (int r = 0; r < kReaders; ++r) {
      ASSERT_EQ(readings[r].failure, "") << "reader " << r;
      ASSERT_EQ(readings[r].tensors.size(), alone.tensors.size());
      for (size_t t = 0; t < alone.tensors.size(); ++t)
        ASSERT_TRUE(bitwiseEqual(readings[r].tensors[t], alone.tensors[t]))
            << "iteration " << iteration << ", reader " << r << ", tensor "
            << t;
      ASSERT_EQ(readings[r].scalars, alone.scalars) << "reader " << r;
    }
    ASSERT_EQ(alone.scalars[0], double(iteration + 1)); // steps done
  }
  gpipe_session_destroy(session);
}

// The CPU devices: the pipeline executor's host copies, filled by the first
// readers.
TEST(CApiConcurrency, ConstCallsRunConcurrentlyOnOneSession) {
  readConcurrentlyAfterEachStep(GPIPE_DEVICE_CPU);
}

// The device executor on the host emulation of streams (the CUDA path): each
// read is a copy-back and a synchronize of the backend.
TEST(CApiConcurrency, ConstCallsRunConcurrentlyOnEmulatedStreams) {
  readConcurrentlyAfterEachStep(GPIPE_DEVICE_HOST_EMULATION);
}

/// The readers of distinct sessions share nothing either: two sessions read
/// by two threads each, while a third session trains.
TEST(CApiConcurrency, DistinctSessionsAreIndependent) {
  gpipe_session_t *trained = createSession(nullptr);
  gpipe_session_t *read = createSession(nullptr);
  ASSERT_NE(trained, nullptr) << gpipe_last_error();
  ASSERT_NE(read, nullptr) << gpipe_last_error();
  ASSERT_FALSE(std::isnan(trainStep(read, 7)));
  Reading before;
  readEverything(read, before);
  ASSERT_EQ(before.failure, "");

  std::vector<Reading> readings(2);
  std::thread trainer([&] {
    for (uint64_t seed = 1; seed <= 5; ++seed)
      trainStep(trained, seed);
  });
  std::vector<std::thread> readers;
  for (Reading &reading : readings)
    readers.emplace_back([&] { readEverything(read, reading); });
  for (std::thread &reader : readers)
    reader.join();
  trainer.join();

  int64_t steps = 0;
  ASSERT_EQ(gpipe_session_steps_done(trained, &steps), GPIPE_OK);
  EXPECT_EQ(steps, 5);
  for (const Reading &reading : readings) {
    ASSERT_EQ(reading.failure, "");
    ASSERT_EQ(reading.tensors.size(), before.tensors.size());
    for (size_t t = 0; t < before.tensors.size(); ++t)
      EXPECT_TRUE(bitwiseEqual(reading.tensors[t], before.tensors[t]));
  }
  gpipe_session_destroy(trained);
  gpipe_session_destroy(read);
}

} // namespace
