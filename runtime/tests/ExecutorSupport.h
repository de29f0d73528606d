//===- ExecutorSupport.h - Creating executors in the executor tests -------===//

#ifndef GPIPE_RUNTIME_TESTS_EXECUTORSUPPORT_H
#define GPIPE_RUNTIME_TESTS_EXECUTORSUPPORT_H

#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/bundle/Initializers.h"

#include "AllClose.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

namespace gpipe::runtime::testing {

/// The executor of `bundle`, or null after a test failure naming the error.
inline std::unique_ptr<PipelineExecutor>
makeExecutor(Bundle bundle, ExecutorConfig config = {}) {
  std::string error;
  auto executor = PipelineExecutor::create(std::move(bundle), config, error);
  EXPECT_TRUE(executor) << error;
  return executor;
}

/// "none", "full", "exceptlast", "selective": test-name parts.
inline const char *rematName(RematPolicy remat) {
  switch (remat) {
  case RematPolicy::None:
    return "none";
  case RematPolicy::Full:
    return "full";
  case RematPolicy::ExceptLast:
    return "exceptlast";
  case RematPolicy::Selective:
    return "selective";
  }
  return "?";
}

/// The sweeps' parameters: K, M, remat and schedule.
using PipelineParam =
    std::tuple<unsigned, unsigned, RematPolicy, gpipe::schedule::ScheduleKind>;

/// "K2_M3_full_onefoneb".
inline std::string
pipelineParamName(const ::testing::TestParamInfo<PipelineParam> &info) {
  using gpipe::schedule::ScheduleKind;
  auto [k, m, remat, kind] = info.param;
  return "K" + std::to_string(k) + "_M" + std::to_string(m) + "_" +
         rematName(remat) + "_" +
         (kind == ScheduleKind::GPipe      ? "gpipe"
          : kind == ScheduleKind::OneFOneB ? "onefoneb"
                                           : "zbh1");
}

/// Parameters in double precision, by name: the references' inputs.
using Params = std::map<std::string, std::vector<double>>;

inline std::vector<double> toVec(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

/// The parameters as the initializers define them (not read back from the
/// executor).
inline Params initialParams(const Bundle &bundle, uint64_t seed) {
  Params params;
  for (const ParamSpec &spec : bundle.params) {
    int64_t n = 1;
    for (int64_t d : spec.shape)
      n *= d;
    std::vector<float> values(n);
    initializeParameter(spec.init, spec.scale, spec.shape, seed, spec.name,
                        values.data());
    params[spec.name] = toVec(values);
  }
  return params;
}

/// Every gradient of `expected` (by parameter name) matches the executor's.
inline void expectGradientsMatch(const PipelineExecutor &executor,
                                 const Params &expected, double rtol,
                                 double atol) {
  for (const auto &[name, grad] : expected) {
    const std::vector<float> *actual = executor.gradient(name);
    ASSERT_TRUE(actual) << name;
    EXPECT_TRUE(gpipe::testing::allClose(*actual, grad, rtol, atol))
        << "gradient " << name;
  }
}

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_EXECUTORSUPPORT_H
