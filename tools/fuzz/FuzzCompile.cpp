//===- FuzzCompile.cpp - libFuzzer target: parser, compiler, bundle -------===//
//
// Any bytes as gpipe dialect text: the MLIR parser, the op verifiers and the
// whole gpipe-compile pipeline (cost, partition, stages, autodiff, remat,
// send/recv, schedule, its proof, the memory plan) and the bundle writer must
// refuse them with diagnostics or compile them, never crash. K, M and the
// remat policy come from the input's length, so mutations try several. A bundle
// the compiler writes must then pass the runtime's reader and load-time proofs
// (validateBundle): a refusal there is a broken contract between compiler and
// runtime, and aborts like a crash. The seeds are the lit tests' models and
// the examples (scripts/fuzz-compiler.sh).
//
//===----------------------------------------------------------------------===//

#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/verify/BundleValidation.h"
#include "gpipe/runtime/exec/Executor.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace rt = gpipe::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Larger inputs only slow the search; the models that matter are small.
  if (size > (size_t(1) << 16))
    return 0;
  llvm::StringRef source(reinterpret_cast<const char *>(data), size);
  gpipe::CompilePipelineOptions options;
  options.numStages = 1 + unsigned(size % 3);
  options.numMicrobatches = 1 + unsigned(size / 3 % 3);
  // Every remat policy, the recompute lists of full and selective differing.
  const gpipe::RematPolicy policies[] = {
      gpipe::RematPolicy::Full, gpipe::RematPolicy::Selective,
      gpipe::RematPolicy::None, gpipe::RematPolicy::ExceptLast};
  options.remat = policies[size / 9 % 4];
  std::string bundleJson, diagnostics;
  if (mlir::failed(gpipe::compileSourceToBundle(source, options, bundleJson,
                                                diagnostics)))
    return 0;
  rt::StatusOr<rt::Bundle> bundle = rt::parseBundle(bundleJson, "fuzz");
  std::string refused =
      bundle.ok() ? rt::validateBundle(*bundle) : bundle.status().message();
  if (!refused.empty()) {
    std::fprintf(stderr,
                 "FuzzCompile: the runtime refuses a bundle the compiler "
                 "wrote (K=%u, M=%u, remat %s): %s\n",
                 unsigned(options.numStages), unsigned(options.numMicrobatches),
                 gpipe::stringifyRematPolicy(options.remat).str().c_str(),
                 refused.c_str());
    std::abort();
  }
  return 0;
}
