//===- OnnxTestCase.cpp - One of ONNX's own tests, run by gpipe -----------===//

#include "gpipe/Import/OnnxTestCase.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/Executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

using namespace gpipe;
using namespace gpipe::onnx_conformance;
namespace rt = gpipe::runtime;

namespace {
constexpr double kAbsolute = 1e-7, kRelative = 1e-3;

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
      // Shapes, axes and bounds: constants in a model (folded from shapes).
      {"Reshape", {1}},
      {"Expand", {1}},
      {"Slice", {1, 2, 3, 4}},
      {"Squeeze", {1}},
      {"Unsqueeze", {1}},
      {"Split", {1}},
      {"ReduceSum", {1}},
      {"Clip", {1, 2}},
      {"Tile", {1}},
      {"Trilu", {1}},
      {"CumSum", {1}},
  };
  return positions;
}

/// A test tensor: float, or int32/int64 read as int32; "" or why not.
std::string decode(const onnx::TensorProto &t, TestTensor &out) {
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
std::vector<float> channelsLast(const TestTensor &t) {
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

/// NCL values as [N, 1, L, C] (a 1-D signal as gpipe's image).
TestTensor asImage(const TestTensor &t) {
  TestTensor image = t;
  if (t.dims.size() == 3)
    image.dims = {t.dims[0], t.dims[1], 1, t.dims[2]};
  return image;
}

/// The test's tensor `t` for model input `spec`: images (declared with rank
/// 4, given NCHW or NCL) channels-last.
rt::HostTensor toInput(const TestTensor &t, const rt::ModelInputSpec &spec) {
  if (!t.isFloat)
    return rt::HostTensor::ints(t.dims, t.i32);
  if (spec.shape.size() == 4 && t.dims.size() != 4)
    return rt::HostTensor::floats(spec.shape, channelsLast(asImage(t)));
  if (spec.shape.size() == 4)
    return rt::HostTensor::floats(spec.shape, channelsLast(t));
  return rt::HostTensor::floats(t.dims, t.f32);
}
} // namespace

std::string onnx_conformance::readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

Verdict onnx_conformance::prepareTest(const std::string &dir,
                                      onnx::ModelProto &model,
                                      PreparedTest &test) {
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
    TestTensor t;
    std::string why = decode(tensor, t);
    if (!why.empty())
      return {Outcome::Skipped, "input '" + fed[i] + "' has " + why};
    if (t.dims.empty())
      return {Outcome::Skipped,
              "input '" + fed[i] + "' is a scalar (no batch dimension)"};
    if (test.rows < 0)
      test.rows = t.dims[0];
    test.given[fed[i]] = std::move(t);
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
  for (const onnx::NodeProto &node : graph.node())
    test.lossOutput =
        test.lossOutput || node.op_type() == "SoftmaxCrossEntropyLoss";
  return {};
}

Verdict onnx_conformance::readExpected(const std::string &dir,
                                       TestTensor &want) {
  onnx::TensorProto output;
  if (!output.ParseFromString(readFile(dir + "/test_data_set_0/output_0.pb")) ||
      !decode(output, want).empty() || !want.isFloat)
    return {Outcome::Skipped, "output_0.pb is not a float tensor"};
  return {};
}

std::string onnx_conformance::runForward(const std::string &json, unsigned k,
                                         const PreparedTest &test,
                                         const TestTensor &want) {
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
    auto given = test.given.find(input.name);
    if (given != test.given.end()) {
      full[input.name] = toInput(given->second, input);
      continue;
    }
    int64_t n = 1; // the added loss's target: zeros
    for (int64_t d : input.shape)
      n *= d;
    full[input.name] =
        rt::HostTensor::floats(input.shape, std::vector<float>(size_t(n)));
  }
  rt::EvalResult result = executor->evaluate(full, test.rows);
  if (!result.ok())
    return result.error;
  std::vector<float> got = test.lossOutput
                               ? std::vector<float>{float(result.loss)}
                               : result.prediction.f32;
  std::vector<float> expected = want.f32;
  if (test.outputChannelsLast && !test.lossOutput && want.dims.size() >= 3)
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
