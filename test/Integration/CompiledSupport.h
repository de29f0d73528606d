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
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/Executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
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
                        RematPolicy remat,
                        KernelCodegen codegen = KernelCodegen::None) {
  Compiled out;
  CompilePipelineOptions options;
  options.numStages = k;
  options.numMicrobatches = m;
  options.remat = remat;
  options.codegen = codegen;
  std::string json, diagnostics;
  if (mlir::failed(compileSourceToBundle(text, options, json, diagnostics))) {
    out.error = "compilation failed: " + diagnostics;
    return out;
  }
  runtime::StatusOr<runtime::Bundle> load =
      runtime::parseBundle(json, "compiled");
  if (!load.ok()) {
    out.error = load.status().message();
    return out;
  }
  out.bundle = std::move((*load));
  return out;
}

/// The text of a file under python-free-examples.
inline std::string readExample(const std::string &relative) {
  std::ifstream file(std::string(GPIPE_EXAMPLES_DIR) + "/" + relative);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

/// A batch for every model input of `bundle`: normal floats, and ints in
/// [0, 9] (below every vocabulary, class count and sequence length of the
/// example models).
inline runtime::Batch randomBatch(const runtime::Bundle &bundle,
                                  unsigned seed) {
  std::mt19937 rng(seed);
  runtime::Batch batch;
  for (const runtime::ModelInputSpec &input : bundle.inputs) {
    int64_t n = 1;
    for (int64_t dim : input.shape)
      n *= dim;
    if (input.type == runtime::ElementType::F32) {
      std::normal_distribution<float> normal;
      std::vector<float> data(n);
      for (float &x : data)
        x = normal(rng);
      batch[input.name] = runtime::HostTensor::floats(input.shape, data);
    } else {
      // Ids, positions and labels: below every vocabulary, class count and
      // sequence length of the models here.
      std::uniform_int_distribution<int32_t> id(0, 9);
      std::vector<int32_t> data(n);
      for (int32_t &x : data)
        x = id(rng);
      batch[input.name] = runtime::HostTensor::ints(input.shape, data);
    }
  }
  return batch;
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

/// The policy's name without '-' (gtest parameter names allow only
/// alphanumerics and '_').
inline std::string rematName(RematPolicy remat) {
  std::string name = stringifyRematPolicy(remat).str();
  name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
  return name;
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
