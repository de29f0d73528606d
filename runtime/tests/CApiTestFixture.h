//===- CApiTestFixture.h - The C API tests' session -*- C++ -*- -----------===//
//
// What the C API tests share: the dropout MLP's bundle on three devices,
// its data as a Batch and as C inputs, Adam with non-default hyper-parameters
// both as session options and as an executor configuration, and the CApiTest
// fixture: a session over the MLP bundle, written to a file once per test.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_CAPITESTFIXTURE_H
#define GPIPE_RUNTIME_TESTS_CAPITESTFIXTURE_H

#include "gpipe/runtime/gpipe_runtime.h"

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/Executor.h"

#include "CApiSessionSupport.h"
#include "TestBundles.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace gpipe::runtime::testing::capitest {

using capi::kBatch;
using capi::kClasses;
using capi::kFeatures;

inline ModelGraph mlpGraph() { return capi::dropoutMlpGraph(); }

/// Four micro-batches of 3, 3, 2, 2 rows on three devices.
inline Bundle mlpBundle() {
  return buildBundle(mlpGraph(), {0, 1, 2}, 4, RematPolicy::Full);
}

using capi::Data;
using capi::makeData;

inline Batch toBatch(const Data &data) {
  int64_t rows = data.labels.size();
  return {{"x", HostTensor::floats({rows, kFeatures}, data.x)},
          {"labels", HostTensor::ints({rows}, data.labels)}};
}

inline std::vector<gpipe_input_t> toInputs(const Data &data) {
  return {
      {"x", GPIPE_ELEMENT_F32, data.x.data(), data.x.size()},
      {"labels", GPIPE_ELEMENT_I32, data.labels.data(), data.labels.size()}};
}

inline bool bitwiseEqual(const std::vector<float> &a,
                         const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "gpipe_capi_" + std::to_string(::getpid()) +
         "_" + name;
}

inline void writeFile(const std::string &path, const std::string &text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
}

inline std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

/// Adam with non-default hyper-parameters, seed 7.
inline gpipe_session_options_t adamOptions() {
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.seed = 7;
  options.optimizer = GPIPE_OPTIMIZER_ADAM;
  options.learning_rate = 0.02f;
  options.beta1 = 0.8f;
  options.beta2 = 0.99f;
  options.epsilon = 1e-6f;
  return options;
}

inline ExecutorConfig adamConfig() {
  ExecutorConfig config;
  config.seed = 7;
  config.optimizer.kind = OptimizerKind::Adam;
  config.optimizer.learningRate = 0.02f;
  config.optimizer.beta1 = 0.8f;
  config.optimizer.beta2 = 0.99f;
  config.optimizer.epsilon = 1e-6f;
  return config;
}

/// A session over the MLP bundle, written to a file once per test.
class CApiTest : public ::testing::Test {
protected:
  void SetUp() override {
    bundlePath = tempPath("mlp.bundle.json");
    bundleText = writeBundle(mlpBundle());
    writeFile(bundlePath, bundleText);
    gpipe_session_options_t options = adamOptions();
    ASSERT_EQ(
        gpipe_session_create_from_file(bundlePath.c_str(), &options, &session),
        GPIPE_OK)
        << gpipe_last_error();
    ASSERT_NE(session, nullptr);
  }
  void TearDown() override {
    gpipe_session_destroy(session);
    std::remove(bundlePath.c_str());
  }

  /// The executor driven directly, from the same file and configuration.
  std::unique_ptr<PipelineExecutor> directExecutor() {
    StatusOr<Bundle> load = loadBundle(bundlePath);
    EXPECT_TRUE(load.ok()) << load.status().message();
    std::string error;
    auto executor =
        PipelineExecutor::create(std::move((*load)), adamConfig(), error);
    EXPECT_TRUE(executor) << error;
    return executor;
  }

  std::vector<float> parameter(const std::string &name, bool gradient = false) {
    size_t size = 0;
    EXPECT_EQ(gpipe_session_parameter_size(session, name.c_str(), &size),
              GPIPE_OK)
        << gpipe_last_error();
    std::vector<float> values(size);
    gpipe_status_t status =
        gradient ? gpipe_session_get_gradient(session, name.c_str(), size,
                                              values.data())
                 : gpipe_session_get_parameter(session, name.c_str(), size,
                                               values.data());
    EXPECT_EQ(status, GPIPE_OK) << gpipe_last_error();
    return values;
  }

  /// Expects `status` to be `expected` with exactly `message`, both from
  /// gpipe_last_error and (for a non-const call) the session's last error.
  void expectError(gpipe_status_t status, gpipe_status_t expected,
                   const std::string &message, bool onSession = false) {
    EXPECT_EQ(gpipe_status_string(status),
              std::string(gpipe_status_string(expected)));
    EXPECT_EQ(gpipe_last_error(), message);
    if (onSession) {
      EXPECT_EQ(gpipe_session_last_error(session), message);
    }
  }

  std::string bundlePath, bundleText;
  gpipe_session_t *session = nullptr;
};

} // namespace gpipe::runtime::testing::capitest

#endif // GPIPE_RUNTIME_TESTS_CAPITESTFIXTURE_H
