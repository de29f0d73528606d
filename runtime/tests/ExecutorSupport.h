//===- ExecutorSupport.h - Creating executors in the executor tests -------===//

#ifndef GPIPE_RUNTIME_TESTS_EXECUTORSUPPORT_H
#define GPIPE_RUNTIME_TESTS_EXECUTORSUPPORT_H

#include "gpipe/runtime/Executor.h"
#include "gpipe/runtime/Initializers.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

namespace gpipe::runtime::testing {

/// The executor of `bundle`, or null after a test failure naming the error.
inline std::unique_ptr<PipelineExecutor>
makeExecutor(Bundle bundle, ExecutorConfig config = {}) {
  std::string error;
  auto executor = PipelineExecutor::create(std::move(bundle), config, error);
  EXPECT_TRUE(executor) << error;
  return executor;
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

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_EXECUTORSUPPORT_H
