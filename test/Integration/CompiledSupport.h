//===- CompiledSupport.h - Compile in process, inspect an executor -*- C++ -*-===//
//
// Shared by the end-to-end tests: a model written as gpipe dialect text is
// compiled (gpipe-compile), written as a bundle and read back by the runtime's
// reader, as gpipe-run does; the executor's parameters are read back in
// double precision for the independent references (runtime/tests/
// ReferenceOps.h).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TEST_INTEGRATION_COMPILEDSUPPORT_H
#define GPIPE_TEST_INTEGRATION_COMPILEDSUPPORT_H

#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/BundleReader.h"
#include "gpipe/runtime/Executor.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gpipe::testing {

struct Compiled {
  runtime::Bundle bundle;
  std::string error; ///< empty on success
};

/// Parses `text`, runs gpipe-compile with (K, M, remat), translates the
/// result to a bundle and reads it back with the runtime's reader.
inline Compiled compile(const std::string &text, unsigned k, unsigned m,
                        RematPolicy remat) {
  Compiled out;
  CompilePipelineOptions options;
  options.numStages = k;
  options.numMicrobatches = m;
  options.remat = remat;
  std::string json, diagnostics;
  if (mlir::failed(compileSourceToBundle(text, options, json, diagnostics))) {
    out.error = "compilation failed: " + diagnostics;
    return out;
  }
  runtime::BundleLoad load = runtime::parseBundle(json, "compiled");
  if (!load.ok()) {
    out.error = load.error;
    return out;
  }
  out.bundle = std::move(load.bundle);
  return out;
}

/// Parameter or gradient name -> values, in double precision.
using Params = std::map<std::string, std::vector<double>>;

/// What an independent reference computes: the loss and every parameter's
/// gradient.
struct Reference {
  double loss = 0.0;
  Params grads;
};

inline std::vector<double> toVec(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

/// The executor's current parameters (before a step: the initial values).
inline Params currentParams(const runtime::PipelineExecutor &executor) {
  Params params;
  for (const runtime::ParamSpec &spec : executor.bundle().params)
    params[spec.name] = toVec(*executor.parameter(spec.name));
  return params;
}

inline std::unique_ptr<runtime::PipelineExecutor>
makeExecutor(runtime::Bundle bundle, const runtime::ExecutorConfig &config) {
  std::string error;
  auto executor =
      runtime::PipelineExecutor::create(std::move(bundle), config, error);
  EXPECT_TRUE(executor) << error;
  return executor;
}

} // namespace gpipe::testing

#endif // GPIPE_TEST_INTEGRATION_COMPILEDSUPPORT_H
