//===- OnnxImportTest.cpp - ONNX models through importer, compiler, runtime
//===//
//
// The fixtures of test/Import/Onnx/Inputs (made by scripts/onnx/
// make-fixtures.sh from PyTorch exports, with onnxruntime's outputs):
//   - the importer's parameters are the ONNX initializers bit for bit, in
//     gpipe's layouts (checked against the ONNX file's own tensors, decoded
//     here);
//   - the runtime loads them unchanged from the safetensors file;
//   - the forward pass of the imported MLP, CNN, GELU (tanh formula) MLP
//     and Transformer (attention, Erf GELU and a position table recognised
//     as gpipe ops), compiled at K = 1 and 2, and of a residual model at
//     K = 1 to 4, matches onnxruntime's output on the fixture's batch within
//     1e-4 relative, and the loss it adds is the cross-entropy of
//     onnxruntime's logits (computed here in double);
//   - the imported MLP and Transformer train at K = 2 and 4 from that loss:
//     forty SGD steps on the fixture's batch divide it by more than 4.
//
//===----------------------------------------------------------------------===//

#include "CompiledSupport.h"
#include "OnnxFixtures.h"

#include "gpipe/Import/OnnxImporter.h"
#include "gpipe/runtime/bundle/SafeTensors.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <tuple>

namespace rt = gpipe::runtime;
using namespace gpipe::testing::onnx_fixtures;

namespace {

bool sameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

/// How the importer lays out initializer `name`, read from the graph: Gemm's
/// B with transB transposed, Conv's W from [F, C, KH, KW] to [KH, KW, C, F],
/// any other as it is.
enum class Layout { Same, Transposed, ConvFilter };
Layout layoutOf(const onnx::GraphProto &graph, const std::string &name) {
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.input_size() < 2 || node.input(1) != name)
      continue;
    if (node.op_type() == "Conv")
      return Layout::ConvFilter;
    if (node.op_type() == "Gemm")
      for (const onnx::AttributeProto &attr : node.attribute())
        if (attr.name() == "transB" && attr.i() == 1)
          return Layout::Transposed;
  }
  return Layout::Same;
}

/// The ONNX index of gpipe element `i` of a parameter held as `shape`.
int64_t onnxIndex(Layout layout, const std::vector<int64_t> &shape, int64_t i) {
  switch (layout) {
  case Layout::Same:
    return i;
  case Layout::Transposed: // [K, N] of an [N, K] initializer
    return (i % shape[1]) * shape[0] + i / shape[1];
  case Layout::ConvFilter: {
    const int64_t kh = shape[0], kw = shape[1], c = shape[2], f = shape[3];
    const int64_t o = i % f, ci = (i / f) % c, x = (i / (f * c)) % kw,
                  y = i / (f * c * kw);
    return ((o * c + ci) * kh + y) * kw + x;
  }
  }
  return -1;
}

gpipe::OnnxImport importFixture(const std::string &model,
                                const std::string &weightsFile = "") {
  gpipe::OnnxImportOptions options;
  options.loss = "softmax-cross-entropy";
  options.weightsFile = weightsFile;
  gpipe::OnnxImport imported;
  std::string error =
      gpipe::importOnnx(readFile(fixture(model + ".onnx")), options, imported);
  EXPECT_EQ(error, "");
  return imported;
}

/// The initializers of a fused attention parameter, found by the fixture's
/// (PyTorch's) node names: `<scope>.qkv.weight` holds the weights of the
/// `/<scope>/q/MatMul`, `k/MatMul` and `v/MatMul` nodes side by side,
/// `<scope>.qkv.bias` the biases of their `Add`s. Empty for other names.
std::vector<std::string> fusedSources(const onnx::GraphProto &graph,
                                      const std::string &param) {
  const bool weight =
      param.size() > 11 && param.substr(param.size() - 11) == ".qkv.weight";
  const bool bias =
      param.size() > 9 && param.substr(param.size() - 9) == ".qkv.bias";
  if (!weight && !bias)
    return {};
  const std::string scope = param.substr(0, param.rfind(".qkv."));
  std::vector<std::string> sources;
  for (const char *projection : {"q", "k", "v"})
    for (const onnx::NodeProto &node : graph.node()) {
      std::string name = node.name().substr(1); // no leading '/'
      std::replace(name.begin(), name.end(), '/', '.');
      // A model without scopes has its fused parameters under "attention".
      const std::string prefix = scope == "attention" ? "" : scope + ".";
      if (name != prefix + projection + (weight ? ".MatMul" : ".Add"))
        continue;
      for (const std::string &input : node.input())
        for (const onnx::TensorProto &tensor : graph.initializer())
          if (tensor.name() == input)
            sources.push_back(input);
    }
  return sources;
}

class OnnxParameters : public ::testing::TestWithParam<const char *> {};

TEST_P(OnnxParameters, AreTheInitializersBitForBit) {
  const std::string model = GetParam();
  gpipe::OnnxImport imported = importFixture(model);
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(readFile(fixture(model + ".onnx"))));
  std::map<std::string, Floats> initializers;
  for (const onnx::TensorProto &tensor : proto.graph().initializer())
    if (tensor.data_type() == onnx::TensorProto::FLOAT) // not a bool mask
      initializers[tensor.name()] = decode(tensor);
  std::map<std::string, int> uses;
  for (const rt::NamedTensor &weight : imported.weights) {
    SCOPED_TRACE(weight.name);
    std::vector<std::string> sources = fusedSources(proto.graph(), weight.name);
    if (!sources.empty()) { // q | k | v, each block bit for bit
      ASSERT_EQ(sources.size(), 3u);
      const int64_t width = weight.shape.back() / 3;
      const int64_t rows = int64_t(weight.data.size()) / (3 * width);
      for (int64_t j = 0; j < 3; ++j) {
        const Floats &init = initializers.at(sources[size_t(j)]);
        ASSERT_EQ(int64_t(init.values.size()), rows * width);
        ++uses[sources[size_t(j)]];
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < width; ++c)
            ASSERT_TRUE(
                sameBits(weight.data[size_t(r * 3 * width + j * width + c)],
                         init.values[size_t(r * width + c)]))
                << sources[size_t(j)] << " [" << r << ", " << c << "]";
      }
      continue;
    }
    ASSERT_TRUE(initializers.count(weight.name));
    ++uses[weight.name];
    const Floats &init = initializers.at(weight.name);
    ASSERT_EQ(weight.data.size(), init.values.size());
    const Layout layout = layoutOf(proto.graph(), weight.name);
    for (size_t i = 0; i < weight.data.size(); ++i)
      ASSERT_TRUE(sameBits(
          weight.data[i],
          init.values[size_t(onnxIndex(layout, weight.shape, int64_t(i)))]))
          << "element " << i;
  }
  for (const auto &[name, init] : initializers)
    EXPECT_EQ(uses[name], 1)
        << "initializer " << name << " is in exactly one parameter";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OnnxParameters,
                         ::testing::Values("mlp", "cnn", "residual",
                                           "gelu-tanh", "encoder-attention",
                                           "transformer"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           std::string name = i.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

using ForwardParam = std::tuple<const char *, unsigned>;
class OnnxForward : public ::testing::TestWithParam<ForwardParam> {};

/// The imported fixture, compiled at K stages of M micro-batches, its
/// executor, and the fixture's batch (labels: class i % 10 for row i).
struct Imported {
  std::unique_ptr<rt::PipelineExecutor> executor;
  rt::Batch batch;
  int64_t rows = 0;
  std::vector<int32_t> labels;
};

Imported compileFixture(const std::string &model, unsigned k, unsigned m,
                        const rt::OptimizerConfig &optimizer = {}) {
  Imported out;
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      ("onnx-" + model + "-" + std::to_string(k) + "-" + std::to_string(m));
  std::filesystem::create_directories(dir);
  const std::string weights = (dir / "weights.safetensors").string();
  gpipe::OnnxImport imported = importFixture(model, weights);
  {
    std::ofstream file(weights, std::ios::binary);
    file << rt::encodeSafeTensors(imported.weights, {});
  }
  gpipe::testing::Compiled compiled =
      gpipe::testing::compile(imported.mlir, k, m, gpipe::RematPolicy::None);
  EXPECT_EQ(compiled.error, "");
  if (!compiled.error.empty())
    return out;
  rt::ExecutorConfig config;
  config.optimizer = optimizer;
  std::string error;
  out.executor = rt::PipelineExecutor::create(compiled.bundle, config, error);
  EXPECT_TRUE(out.executor) << error;
  const onnx::TensorProto input =
      readTensorProto(fixture(model + ".input_0.pb"));
  std::vector<int64_t> shape(input.dims().begin(), input.dims().end());
  out.rows = shape[0];
  if (input.data_type() == onnx::TensorProto::INT64) { // token ids
    out.batch[input.name()] = rt::HostTensor::ints(shape, decodeIds(input));
  } else {
    Floats x = decode(input);
    std::vector<float> values = x.values;
    if (shape.size() == 4) {
      values = channelsLast(x);
      shape = {shape[0], shape[2], shape[3], shape[1]};
    }
    out.batch[input.name()] = rt::HostTensor::floats(shape, values);
  }
  // The positions input the importer adds for a position table: 0 .. S-1.
  if (imported.mlir.find("gpipe.input \"positions\"") != std::string::npos) {
    std::vector<int32_t> positions;
    for (int64_t i = 0; i < shape[0] * shape[1]; ++i)
      positions.push_back(int32_t(i % shape[1]));
    out.batch["positions"] = rt::HostTensor::ints(shape, positions);
  }
  // Labels: class i % 10 for the i-th row of the output's last dimension.
  const onnx::TensorProto output =
      readTensorProto(fixture(model + ".output_0.pb"));
  std::vector<int64_t> labelShape(output.dims().begin(),
                                  output.dims().end() - 1);
  int64_t count = 1;
  for (int64_t d : labelShape)
    count *= d;
  for (int64_t r = 0; r < count; ++r)
    out.labels.push_back(int32_t(r % 10));
  out.batch["labels"] = rt::HostTensor::ints(labelShape, out.labels);
  return out;
}

/// The mean softmax cross-entropy of `logits` [rows, classes], in double.
double crossEntropy(const std::vector<float> &logits,
                    const std::vector<int32_t> &labels) {
  const size_t rows = labels.size(), classes = logits.size() / rows;
  double total = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float *row = &logits[r * classes];
    double top = *std::max_element(row, row + classes), sum = 0;
    for (size_t c = 0; c < classes; ++c)
      sum += std::exp(double(row[c]) - top);
    total += top + std::log(sum) - row[size_t(labels[r])];
  }
  return total / double(rows);
}

TEST_P(OnnxForward, MatchesOnnxRuntime) {
  auto [model, k] = GetParam();
  Imported run = compileFixture(model, k, 2);
  ASSERT_TRUE(run.executor);
  Floats want = readTensorFile(fixture(std::string(model) + ".output_0.pb"));
  rt::EvalResult result = run.executor->evaluate(run.batch, run.rows);
  ASSERT_TRUE(result.ok()) << result.error;
  ASSERT_EQ(result.prediction.f32.size(), want.values.size());
  double worst = 0;
  for (size_t i = 0; i < want.values.size(); ++i) {
    const double got = result.prediction.f32[i], ref = want.values[i];
    worst = std::max(worst, std::fabs(got - ref) / (std::fabs(ref) + 1e-3));
    ASSERT_NEAR(got, ref, 1e-4 * std::fabs(ref) + 1e-6) << "output " << i;
  }
  std::printf("%s K=%u: largest relative difference from onnxruntime %.2e\n",
              model, k, worst);
  // The loss the model adds is that of onnxruntime's logits.
  const double reference = crossEntropy(want.values, run.labels);
  EXPECT_NEAR(result.loss, reference, 1e-4 * reference);
}

class OnnxTraining : public ::testing::TestWithParam<const char *> {};

TEST_P(OnnxTraining, LearnsItsBatchAtK2AndK4) {
  const std::string model = GetParam();
  for (unsigned k : {2u, 4u}) {
    SCOPED_TRACE("K=" + std::to_string(k));
    rt::OptimizerConfig sgd;
    sgd.learningRate = 0.1f;
    Imported run = compileFixture(model, k, 2, sgd);
    ASSERT_TRUE(run.executor);
    // Training starts from the imported function (neither model has batch
    // norm, whose training forward would use batch statistics, nor dropout).
    Floats logits = readTensorFile(fixture(model + ".output_0.pb"));
    const double reference = crossEntropy(logits.values, run.labels);
    std::vector<double> losses;
    for (int step = 0; step < 40; ++step) {
      rt::StepResult result = run.executor->trainStep(run.batch);
      ASSERT_TRUE(result.ok()) << result.error;
      losses.push_back(result.loss);
    }
    EXPECT_NEAR(losses.front(), reference, 1e-4 * reference);
    EXPECT_LT(losses.back(), losses.front() / 4)
        << "first loss " << losses.front() << ", last " << losses.back();
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OnnxTraining,
                         ::testing::Values("mlp", "transformer"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param);
                         });

INSTANTIATE_TEST_SUITE_P(
    Fixtures, OnnxForward,
    ::testing::Combine(::testing::Values("mlp", "cnn", "gelu-tanh",
                                         "encoder-attention", "transformer"),
                       ::testing::Values(1u, 2u)),
    [](const ::testing::TestParamInfo<ForwardParam> &info) {
      std::string name = std::get<0>(info.param);
      std::replace(name.begin(), name.end(), '-', '_');
      return name + "_K" + std::to_string(std::get<1>(info.param));
    });

// The residual fixture adds fc1's output to fc2's two layers later: the
// value crosses stage boundaries at K = 3 and 4.
INSTANTIATE_TEST_SUITE_P(
    Residual, OnnxForward,
    ::testing::Combine(::testing::Values("residual"),
                       ::testing::Values(1u, 2u, 3u, 4u)),
    [](const ::testing::TestParamInfo<ForwardParam> &info) {
      return "K" + std::to_string(std::get<1>(info.param));
    });

} // namespace
