//===- ExampleBundles.cpp - The examples compiled for the benchmarks ------===//

#include "ExampleBundles.h"

#include "gpipe/runtime/data/SyntheticBatch.h"

#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/bundle/BundleReader.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>
#include <vector>

#ifndef GPIPE_EXAMPLES_DIR
#error "GPIPE_EXAMPLES_DIR must name the python-free-examples directory"
#endif

using namespace gpipe;
namespace rt = gpipe::runtime;

benchmarks::Compiled benchmarks::compileExample(
    const std::string &example, unsigned k, unsigned m, RematPolicy remat,
    int64_t batch, schedule::ScheduleKind kind, unsigned virtualStages) {
  benchmarks::Compiled out;
  std::string path =
      std::string(GPIPE_EXAMPLES_DIR) + "/" + example + "/" + example + ".mlir";
  std::string openError;
  std::unique_ptr<llvm::MemoryBuffer> file =
      mlir::openInputFile(path, &openError);
  if (!file) {
    out.error = openError;
    return out;
  }
  std::string source = file->getBuffer().str();
  if (batch > 0) {
    size_t model = source.find("gpipe.model @");
    size_t at = source.find(" batch ", model);
    size_t end = source.find(' ', at + 7);
    if (model == std::string::npos || at == std::string::npos ||
        end == std::string::npos) {
      out.error = path + " declares no batch";
      return out;
    }
    std::string old = source.substr(at + 7, end - at - 7);
    auto replaceAll = [&](const std::string &from, const std::string &to) {
      for (size_t pos = 0; (pos = source.find(from, pos)) != std::string::npos;
           pos += to.size())
        source.replace(pos, from.size(), to);
    };
    replaceAll(" batch " + old + " ", " batch " + std::to_string(batch) + " ");
    replaceAll("tensor<" + old + "x", "tensor<" + std::to_string(batch) + "x");
  }
  gpipe::CompilePipelineOptions options;
  options.numStages = k;
  options.numMicrobatches = m;
  options.remat = remat;
  options.schedule = kind;
  options.numVirtualStages = virtualStages;
  std::string json, diagnostics;
  if (mlir::failed(
          gpipe::compileSourceToBundle(source, options, json, diagnostics))) {
    out.error = "cannot compile " + path + ": " + diagnostics;
    return out;
  }
  rt::StatusOr<rt::Bundle> load = rt::parseBundle(json, path);
  if (!load.ok()) {
    out.error = load.status().message();
    return out;
  }
  out.bundle = std::move((*load));
  return out;
}

rt::Batch benchmarks::randomBatch(const rt::Bundle &bundle, uint64_t seed) {
  return rt::syntheticBatch(bundle, seed);
}
