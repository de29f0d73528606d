//===- gpipe-onnx-conformance.cpp - ONNX's own tests through gpipe --------===//
//
//   gpipe-onnx-conformance [DIR] [--suites node,pytorch-converted]
//       [--filter TEXT] [--verbose]
//
// For every test model under DIR/<suite>/ (Debian's libonnx-testdata by
// default) whose op types gpipe's importer maps: binds the graph inputs that
// sit where gpipe wants a parameter (Gemm's B and C, Conv's W and B, ...) to
// the test's input tensors as initializers, keeps the first graph output
// (the one output_0.pb holds), imports the model (with an MSE
// loss when it has none, to read the loss's input back), compiles it, runs
// the forward pass through the runtime at K = 1, and at K = 2 where the model
// has two or more layers, and compares with the test's output_0.pb at the
// ONNX backend tests' tolerance (|got - want| <= 1e-7 + 1e-3 |want|). The
// test case but for the compile is gpipe/Import/OnnxTestCase.h's.
//
// Prints, per op type (or combination), the tests run, passed, failed and
// skipped, with the reason of each skip (the importer's error: the
// attribute, dtype or shape gpipe does not support). Exits 1 when any test
// failed, 2 on bad usage.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Import/OnnxImporter.h"
#include "gpipe/Import/OnnxTestCase.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/bundle/SafeTensors.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace cl = llvm::cl;
namespace rt = gpipe::runtime;
using namespace gpipe::onnx_conformance;

namespace {

cl::OptionCategory category("gpipe-onnx-conformance");
cl::opt<std::string> root(cl::Positional, cl::desc("[DIR]"),
                          cl::init("/usr/share/libonnx-testdata/data"),
                          cl::cat(category));
cl::opt<std::string> suites("suites",
                            cl::desc("comma-separated subdirectories of DIR"),
                            cl::init("node,pytorch-converted"),
                            cl::cat(category));
cl::opt<std::string> filter("filter",
                            cl::desc("only tests whose name contains TEXT"),
                            cl::value_desc("TEXT"), cl::cat(category));
cl::opt<bool> verbose("verbose", cl::desc("one line per test"),
                      cl::cat(category));

const char *kTarget = "conformance_target";
const char *kNoCompile = "the imported model does not compile";

/// One forward at K stages; "" or how it differs from `want`.
std::string runAt(const std::string &mlir, unsigned k, const PreparedTest &test,
                  const TestTensor &want) {
  gpipe::CompilePipelineOptions options;
  options.numStages = k;
  options.numMicrobatches = 1;
  options.remat = gpipe::RematPolicy::None;
  std::string json, diagnostics;
  if (mlir::failed(
          gpipe::compileSourceToBundle(mlir, options, json, diagnostics)))
    return kNoCompile + std::string(" at K=") + std::to_string(k) +
           ": " + diagnostics.substr(0, diagnostics.find('\n'));
  return runForward(json, k, test, want);
}

Verdict runTest(const std::string &dir, onnx::ModelProto model,
                const std::string &scratch) {
  PreparedTest test;
  if (Verdict prepared = prepareTest(dir, model, test);
      prepared.outcome != Outcome::Passed)
    return prepared;
  const bool lossOutput = test.lossOutput;
  gpipe::OnnxImportOptions options;
  options.loss = lossOutput ? "" : "mse";
  options.labels = kTarget;
  options.weightsFile = scratch + "/weights.safetensors";
  options.modelName = "conformance";
  gpipe::OnnxImport imported;
  std::string error =
      gpipe::importOnnx(model.SerializeAsString(), options, imported);
  if (!error.empty()) {
    size_t cut = error.find("): ");
    return {Outcome::Skipped,
            cut == std::string::npos ? error : error.substr(cut + 3)};
  }
  {
    std::ofstream file(options.weightsFile, std::ios::binary);
    file << rt::encodeSafeTensors(imported.weights, {});
  }
  test.outputChannelsLast = imported.outputChannelsLast;
  TestTensor want;
  if (Verdict expected = readExpected(dir, want);
      expected.outcome != Outcome::Passed)
    return expected;
  size_t layers = 0;
  for (size_t at = imported.mlir.find("gpipe.layer \"");
       at != std::string::npos;
       at = imported.mlir.find("gpipe.layer \"", at + 1))
    ++layers;
  if (!lossOutput)
    --layers; // the added loss layer
  for (unsigned k : {1u, 2u}) {
    if (k == 2 && layers < 2)
      break;
    std::string diff = runAt(imported.mlir, k, test, want);
    // A test whose first dimension is not a batch (a transpose or a
    // reduction over it, an input of another first dimension) is no
    // per-example model; the compiler says so, naming the batch.
    if (diff.rfind(kNoCompile, 0) == 0 &&
        diff.find("batch") != std::string::npos)
      return {Outcome::Skipped, diff.substr(diff.find(": ") + 2)};
    if (!diff.empty())
      return {Outcome::Failed, diff};
  }
  return {};
}

struct Row {
  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, int> reasons;
  std::vector<std::string> failures;
};

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "runs ONNX's test models through gpipe's importer, compiler and "
      "runtime\n");
  const std::set<std::string> supported(gpipe::supportedOnnxOps().begin(),
                                        gpipe::supportedOnnxOps().end());
  llvm::SmallString<128> scratch;
  if (llvm::sys::fs::createUniqueDirectory("gpipe-onnx-conformance", scratch)) {
    llvm::errs() << "gpipe-onnx-conformance: error: cannot make a scratch "
                    "directory\n";
    return 1;
  }
  std::map<std::string, Row> rows;
  int unclaimed = 0, suitesFound = 0;
  std::stringstream list(suites);
  for (std::string suite; std::getline(list, suite, ',');) {
    if (suite.empty())
      continue;
    const std::string base = root + "/" + suite;
    std::error_code ec;
    std::vector<std::string> tests;
    for (llvm::sys::fs::directory_iterator it(base, ec), end; it != end && !ec;
         it.increment(ec))
      tests.push_back(it->path());
    if (ec || tests.empty()) {
      llvm::errs() << "gpipe-onnx-conformance: error: no test models in '"
                   << base << "' (expected DIR/" << suite
                   << "/<test>/model.onnx; on Debian: apt-get install "
                      "libonnx-testdata)\n";
      return 2;
    }
    ++suitesFound;
    std::sort(tests.begin(), tests.end());
    for (const std::string &dir : tests) {
      const std::string name = llvm::sys::path::filename(dir).str();
      if (!filter.empty() && name.find(filter) == std::string::npos)
        continue;
      onnx::ModelProto model;
      if (!model.ParseFromString(readFile(dir + "/model.onnx")))
        continue;
      std::set<std::string> ops;
      bool claimed = true;
      for (const onnx::NodeProto &node : model.graph().node()) {
        if (node.op_type() == "Constant")
          continue;
        ops.insert(node.op_type());
        claimed =
            claimed && node.domain().empty() && supported.count(node.op_type());
      }
      if (!claimed || ops.empty()) {
        ++unclaimed;
        continue;
      }
      std::string key;
      for (const std::string &op : ops)
        key += (key.empty() ? "" : "+") + op;
      Verdict verdict = runTest(dir, std::move(model), scratch.str().str());
      Row &row = rows[key];
      const std::string test = suite + "/" + name;
      switch (verdict.outcome) {
      case Outcome::Passed:
        ++row.passed;
        break;
      case Outcome::Failed:
        ++row.failed;
        row.failures.push_back(test + ": " + verdict.why);
        break;
      case Outcome::Skipped:
        ++row.skipped;
        ++row.reasons[verdict.why];
        break;
      }
      if (verbose)
        llvm::outs() << (verdict.outcome == Outcome::Passed   ? "pass "
                         : verdict.outcome == Outcome::Failed ? "FAIL "
                                                              : "skip ")
                     << test << (verdict.why.empty() ? "" : ": ") << verdict.why
                     << "\n";
    }
  }
  (void)llvm::sys::fs::remove_directories(scratch);
  if (suitesFound == 0) {
    llvm::errs() << "gpipe-onnx-conformance: error: --suites names no suite "
                    "(expected subdirectories of DIR, comma-separated, such "
                    "as node,pytorch-converted)\n";
    return 2;
  }
  int passed = 0, failed = 0, skipped = 0;
  llvm::outs() << "| op | tests | passed | failed | skipped |\n"
               << "|---|---:|---:|---:|---:|\n";
  for (const auto &[key, row] : rows) {
    llvm::outs() << "| " << key << " | "
                 << row.passed + row.failed + row.skipped << " | " << row.passed
                 << " | " << row.failed << " | " << row.skipped << " |\n";
    passed += row.passed, failed += row.failed, skipped += row.skipped;
  }
  llvm::outs() << "\n"
               << passed + failed + skipped << " tests of ops gpipe "
               << "maps: " << passed << " passed, " << failed << " failed, "
               << skipped << " skipped; " << unclaimed
               << " tests use ops it does not map\n";
  for (const auto &[key, row] : rows) {
    for (const auto &[why, count] : row.reasons)
      llvm::outs() << "skipped " << key << " (" << count << "): " << why
                   << "\n";
    for (const std::string &failure : row.failures)
      llvm::outs() << "FAILED " << key << ": " << failure << "\n";
  }
  return failed ? 1 : 0;
}
