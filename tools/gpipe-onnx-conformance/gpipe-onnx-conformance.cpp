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
// ONNX backend tests' tolerance (|got - want| <= 1e-7 + 1e-3 |want|).
//
// Prints, per op type (or combination), the tests run, passed, failed and
// skipped, with the reason of each skip (the importer's error: the
// attribute, dtype or shape gpipe does not support). Exits 1 when any test
// failed, 2 on bad usage.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Import/OnnxImporter.h"
#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/bundle/SafeTensors.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace cl = llvm::cl;
namespace rt = gpipe::runtime;

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

constexpr double kAbsolute = 1e-7, kRelative = 1e-3;
const char *kTarget = "conformance_target";

std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

/// The operand positions where each op wants a constant (a parameter or an
/// attribute-like input): bound to the test's tensors as initializers.
const std::map<std::string, std::set<int>> &constantPositions() {
  static const std::map<std::string, std::set<int>> positions = {
      {"Gemm", {1, 2}},
      {"MatMul", {1}},
      {"Conv", {1, 2}},
      {"BatchNormalization", {1, 2, 3, 4}},
      {"LayerNormalization", {1, 2}},
      {"Gather", {0}},
      {"Dropout", {1, 2}},
      {"SoftmaxCrossEntropyLoss", {2}},
  };
  return positions;
}

struct Floats {
  std::vector<int64_t> dims;
  std::vector<float> f32;
  std::vector<int32_t> i32;
  bool isFloat = true;
};

/// A test tensor: float, or int32/int64 read as int32; "" or why not.
std::string decode(const onnx::TensorProto &t, Floats &out) {
  out.dims.assign(t.dims().begin(), t.dims().end());
  int64_t count = 1;
  for (int64_t d : out.dims)
    count *= d;
  const std::string &raw = t.raw_data();
  if (t.data_type() == onnx::TensorProto::FLOAT) {
    out.f32.resize(size_t(count));
    if (!raw.empty() && int64_t(raw.size()) == count * 4)
      std::memcpy(out.f32.data(), raw.data(), raw.size());
    else if (t.float_data_size() == count)
      std::copy(t.float_data().begin(), t.float_data().end(), out.f32.begin());
    else
      return "a float tensor of unexpected size";
    return {};
  }
  if (t.data_type() == onnx::TensorProto::INT64 ||
      t.data_type() == onnx::TensorProto::INT32) {
    out.isFloat = false;
    const bool wide = t.data_type() == onnx::TensorProto::INT64;
    for (int64_t i = 0; i < count; ++i) {
      int64_t v = 0;
      if (!raw.empty()) {
        if (wide)
          std::memcpy(&v, raw.data() + i * 8, 8);
        else {
          int32_t n;
          std::memcpy(&n, raw.data() + i * 4, 4);
          v = n;
        }
      } else {
        v = wide ? t.int64_data(int(i)) : t.int32_data(int(i));
      }
      out.i32.push_back(int32_t(v));
    }
    return {};
  }
  return "element type " + onnx::TensorProto::DataType_Name(
                               onnx::TensorProto::DataType(t.data_type()));
}

/// NCHW values as NHWC.
std::vector<float> channelsLast(const Floats &t) {
  const int64_t n = t.dims[0], c = t.dims[1], h = t.dims[2], w = t.dims[3];
  std::vector<float> out(t.f32.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          out[size_t(((b * h + y) * w + x) * c + ch)] =
              t.f32[size_t(((b * c + ch) * h + y) * w + x)];
  return out;
}

enum class Outcome { Passed, Failed, Skipped };
struct Verdict {
  Outcome outcome = Outcome::Passed;
  std::string why;
};

/// NCL values as [N, 1, L, C] (a 1-D signal as gpipe's image).
Floats asImage(const Floats &t) {
  Floats image = t;
  if (t.dims.size() == 3)
    image.dims = {t.dims[0], t.dims[1], 1, t.dims[2]};
  return image;
}

/// The test's tensor `t` for model input `spec`: images (declared with rank
/// 4, given NCHW or NCL) channels-last.
rt::HostTensor toInput(const Floats &t, const rt::ModelInputSpec &spec) {
  if (!t.isFloat)
    return rt::HostTensor::ints(t.dims, t.i32);
  if (spec.shape.size() == 4 && t.dims.size() != 4)
    return rt::HostTensor::floats(spec.shape, channelsLast(asImage(t)));
  if (spec.shape.size() == 4)
    return rt::HostTensor::floats(spec.shape, channelsLast(t));
  return rt::HostTensor::floats(t.dims, t.f32);
}

/// One forward at K stages; "" or how it differs from `want`.
std::string runAt(const std::string &mlir, unsigned k,
                  const std::map<std::string, Floats> &inputs, int64_t rows,
                  bool lossOutput, const Floats &want) {
  gpipe::CompilePipelineOptions options;
  options.numStages = k;
  options.numMicrobatches = 1;
  options.remat = gpipe::RematPolicy::None;
  std::string json, diagnostics;
  if (mlir::failed(
          gpipe::compileSourceToBundle(mlir, options, json, diagnostics)))
    return "the imported model does not compile at K=" + std::to_string(k) +
           ": " + diagnostics.substr(0, diagnostics.find('\n'));
  rt::StatusOr<rt::Bundle> bundle = rt::parseBundle(json, "conformance");
  if (!bundle.ok())
    return bundle.status().message();
  rt::ExecutorConfig config;
  std::string error;
  auto executor = rt::PipelineExecutor::create(*bundle, config, error);
  if (!executor)
    return error;
  rt::Batch full;
  for (const rt::ModelInputSpec &input : bundle->inputs) {
    auto given = inputs.find(input.name);
    if (given != inputs.end()) {
      full[input.name] = toInput(given->second, input);
      continue;
    }
    int64_t n = 1; // the added loss's target: zeros
    for (int64_t d : input.shape)
      n *= d;
    full[input.name] =
        rt::HostTensor::floats(input.shape, std::vector<float>(size_t(n)));
  }
  rt::EvalResult result = executor->evaluate(full, rows);
  if (!result.ok())
    return result.error;
  std::vector<float> got = lossOutput ? std::vector<float>{float(result.loss)}
                                      : result.prediction.f32;
  std::vector<float> expected = want.f32;
  if (result.prediction.shape.size() == 4 && !lossOutput &&
      want.dims.size() >= 3)
    expected = channelsLast(asImage(want));
  if (got.size() != expected.size())
    return "the output has " + std::to_string(got.size()) +
           " elements, the test's " + std::to_string(expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(double(got[i]) - expected[i]) <=
          kAbsolute + kRelative * std::fabs(expected[i])))
      return "K=" + std::to_string(k) + ": element " + std::to_string(i) +
             " is " + std::to_string(got[i]) + ", expected " +
             std::to_string(expected[i]);
  return {};
}

Verdict runTest(const std::string &dir, onnx::ModelProto model,
                const std::string &scratch) {
  const std::string data = dir + "/test_data_set_0/";
  std::set<std::string> initializers;
  for (const auto &init : model.graph().initializer())
    initializers.insert(init.name());
  // Graph inputs fed by the test, in order, and those that become
  // initializers.
  std::vector<std::string> fed;
  for (const auto &input : model.graph().input())
    if (!initializers.count(input.name()))
      fed.push_back(input.name());
  std::set<std::string> bind;
  for (const onnx::NodeProto &node : model.graph().node()) {
    auto it = constantPositions().find(node.op_type());
    if (it == constantPositions().end())
      continue;
    for (int p : it->second)
      if (p < node.input_size() &&
          std::count(fed.begin(), fed.end(), node.input(p)))
        bind.insert(node.input(p));
  }
  std::map<std::string, Floats> given;
  int64_t rows = -1;
  onnx::GraphProto &graph = *model.mutable_graph();
  for (size_t i = 0; i < fed.size(); ++i) {
    onnx::TensorProto tensor;
    if (!tensor.ParseFromString(
            readFile(data + "input_" + std::to_string(i) + ".pb")))
      return {Outcome::Failed, "cannot read input_" + std::to_string(i)};
    if (bind.count(fed[i])) {
      tensor.set_name(fed[i]);
      *graph.add_initializer() = tensor;
      continue;
    }
    Floats t;
    std::string why = decode(tensor, t);
    if (!why.empty())
      return {Outcome::Skipped, "input '" + fed[i] + "' has " + why};
    if (t.dims.empty())
      return {Outcome::Skipped,
              "input '" + fed[i] + "' is a scalar (no batch dimension)"};
    if (rows < 0)
      rows = t.dims[0];
    given[fed[i]] = std::move(t);
  }
  // Bound inputs are initializers now, no longer graph inputs.
  auto *inputs = graph.mutable_input();
  for (int i = inputs->size() - 1; i >= 0; --i)
    if (bind.count(inputs->Get(i).name()))
      inputs->DeleteSubrange(i, 1);
  // The test's output_0.pb is compared: further outputs (a layer norm's
  // statistics, a max pool's indices) are dropped, and the importer then
  // checks that nothing else needs them.
  while (graph.output_size() > 1)
    graph.mutable_output()->RemoveLast();
  bool lossOutput = false;
  for (const onnx::NodeProto &node : graph.node())
    lossOutput = lossOutput || node.op_type() == "SoftmaxCrossEntropyLoss";
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
  onnx::TensorProto output;
  Floats want;
  if (!output.ParseFromString(readFile(data + "output_0.pb")) ||
      !decode(output, want).empty() || !want.isFloat)
    return {Outcome::Skipped, "output_0.pb is not a float tensor"};
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
    std::string diff = runAt(imported.mlir, k, given, rows, lossOutput, want);
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
