//===- ExecutorSupport.h - Creating executors in the executor tests -------===//

#ifndef GPIPE_RUNTIME_TESTS_EXECUTORSUPPORT_H
#define GPIPE_RUNTIME_TESTS_EXECUTORSUPPORT_H

#include "gpipe/runtime/Executor.h"

#include <gtest/gtest.h>

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

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_EXECUTORSUPPORT_H
