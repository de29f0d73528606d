//===- OnnxModelsTest.cpp - Real models from the PyTorch ecosystem --------===//
//
// The fixtures of test/Import/Onnx/Inputs/models (scripts/onnx/
// make-model-fixtures.sh: tiny Hugging Face and torchvision models built from
// their configs, exported by PyTorch's TorchScript exporter at opset 17 with
// their shape arithmetic and mask builders left in): each imports, its
// layers grouped by the importer's default (down to the numbered blocks),
// compiles at K = 1, 2 and 4, and
//   - its forward matches PyTorch's logits (relative error <= 1e-4 of the
//     largest logit);
//   - it trains the parameters PyTorch trains (the frozen ones are the
//     exporter's constants and buffers);
//   - its 10 Adam steps on the fixture's batch give PyTorch's losses within
//     1e-3 relative (not for batch-norm models: PyTorch trained them with
//     running statistics, gpipe trains with the batch's), GPT-2's and
//     Llama's with their input and output embeddings tied, the copies on
//     different devices at K = 2 and 4 equal after every step;
//   - K = 2 and 4 end those steps with the parameters of K = 1, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "CompiledSupport.h"
#include "OnnxFixtures.h"

#include "gpipe/Import/OnnxImporter.h"
#include "gpipe/runtime/bundle/SafeTensors.h"

#include "llvm/Support/JSON.h"

#include <cmath>
#include <filesystem>

namespace rt = gpipe::runtime;
using namespace gpipe::testing::onnx_fixtures;

namespace {

struct ModelCase {
  const char *name;
  /// Has batch norm: trained at M = 1, so that each step's statistics are
  /// over the whole batch, as PyTorch's.
  bool batchNorm;
  /// The exporter's file: ".onnx" (TorchScript, opset 17) or ".dynamo.onnx"
  /// (dynamo, opset 20).
  const char *exported = ".onnx";
};

/// The tied copies the importer declared: (copy, the parameter it copies).
std::vector<std::pair<std::string, std::string>>
tiedCopies(const std::string &mlir) {
  std::vector<std::pair<std::string, std::string>> copies;
  for (size_t at = mlir.find(" tied \""); at != std::string::npos;
       at = mlir.find(" tied \"", at + 1)) {
    size_t nameEnd = mlir.rfind("\" pretrained", at);
    size_t nameStart = mlir.rfind("gpipe.param \"", nameEnd) + 13;
    size_t rootStart = at + 7;
    copies.emplace_back(mlir.substr(nameStart, nameEnd - nameStart),
                        mlir.substr(rootStart,
                                    mlir.find('"', rootStart) - rootStart));
  }
  return copies;
}

std::string modelFile(const ModelCase &model, const std::string &suffix) {
  return fixture("models/" + std::string(model.name) + suffix);
}

struct Imported {
  gpipe::OnnxImport import;
  std::unique_ptr<rt::PipelineExecutor> executor;
  rt::Batch batch;
  int64_t rows = 0;
};

Imported compileModel(const ModelCase &model, unsigned k, unsigned m,
                      const rt::OptimizerConfig &optimizer = {}) {
  Imported out;
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      ("onnx-model-" + std::string(model.name) + model.exported + "-" +
       std::to_string(k));
  std::filesystem::create_directories(dir);
  const std::string weights = (dir / "weights.safetensors").string();
  gpipe::OnnxImportOptions options;
  options.loss = "softmax-cross-entropy";
  options.weightsFile = weights;
  std::string error = gpipe::importOnnx(readFile(modelFile(model, model.exported)),
                                        options, out.import);
  EXPECT_EQ(error, "");
  if (!error.empty())
    return out;
  {
    std::ofstream file(weights, std::ios::binary);
    file << rt::encodeSafeTensors(out.import.weights, {});
  }
  gpipe::testing::Compiled compiled = gpipe::testing::compile(
      out.import.mlir, k, m, gpipe::RematPolicy::None);
  EXPECT_EQ(compiled.error, "");
  if (!compiled.error.empty())
    return out;
  rt::ExecutorConfig config;
  config.optimizer = optimizer;
  out.executor = rt::PipelineExecutor::create(compiled.bundle, config, error);
  EXPECT_TRUE(out.executor) << error;
  const onnx::TensorProto input = readTensorProto(modelFile(model, ".input_0.pb"));
  std::vector<int64_t> shape(input.dims().begin(), input.dims().end());
  out.rows = shape[0];
  if (input.data_type() == onnx::TensorProto::INT64) {
    out.batch[input.name()] = rt::HostTensor::ints(shape, decodeIds(input));
  } else {
    Floats x = decode(input);
    std::vector<float> values = x.values;
    if (shape.size() == 4) { // images: NCHW fed as NHWC
      values = channelsLast(x);
      shape = {shape[0], shape[2], shape[3], shape[1]};
    }
    out.batch[input.name()] = rt::HostTensor::floats(shape, values);
  }
  const onnx::TensorProto labels =
      readTensorProto(modelFile(model, ".labels.pb"));
  out.batch["labels"] = rt::HostTensor::ints(
      std::vector<int64_t>(labels.dims().begin(), labels.dims().end()),
      decodeIds(labels));
  return out;
}

llvm::json::Object readLosses(const ModelCase &model) {
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse(readFile(modelFile(model, ".losses.json")));
  EXPECT_TRUE(bool(parsed));
  if (!parsed || !parsed->getAsObject()) {
    llvm::consumeError(parsed.takeError());
    return {};
  }
  return *parsed->getAsObject();
}

class OnnxModels : public ::testing::TestWithParam<ModelCase> {};

TEST_P(OnnxModels, MatchesPyTorchsForwardAtK1To4) {
  const ModelCase model = GetParam();
  const Floats want = readTensorFile(modelFile(model, ".output_0.pb"));
  double largest = 0;
  for (float v : want.values)
    largest = std::max(largest, std::fabs(double(v)));
  for (unsigned k : {1u, 2u, 4u}) {
    SCOPED_TRACE("K=" + std::to_string(k));
    Imported run = compileModel(model, k, 2);
    ASSERT_TRUE(run.executor);
    rt::EvalResult result = run.executor->evaluate(run.batch, run.rows);
    ASSERT_TRUE(result.ok()) << result.error;
    ASSERT_EQ(result.prediction.f32.size(), want.values.size());
    double worst = 0;
    for (size_t i = 0; i < want.values.size(); ++i)
      worst = std::max(worst, std::fabs(double(result.prediction.f32[i]) -
                                        double(want.values[i])));
    std::printf("%s K=%u: largest difference from PyTorch %.2e (largest "
                "logit %.3g)\n",
                model.name, k, worst, largest);
    EXPECT_LE(worst, 1e-4 * largest);
  }
}

TEST_P(OnnxModels, TrainsTheParametersPyTorchTrains) {
  const ModelCase model = GetParam();
  gpipe::OnnxImportOptions options;
  options.loss = "softmax-cross-entropy";
  options.weightsFile = "unused.safetensors";
  gpipe::OnnxImport imported;
  ASSERT_EQ(gpipe::importOnnx(readFile(modelFile(model, model.exported)), options,
                              imported),
            "");
  // Batch norm's running statistics are its own state (PyTorch's buffers,
  // gpipe's parameters that batch_norm updates itself), neither trained nor
  // constant.
  auto isStatistic = [](const std::string &name) {
    return name.size() > 12 &&
           (name.compare(name.size() - 12, 12, "running_mean") == 0 ||
            name.compare(name.size() - 11, 11, "running_var") == 0);
  };
  std::set<std::string> trained;
  for (const rt::NamedTensor &weight : imported.weights)
    if (imported.mlir.find("gpipe.param \"" + weight.name +
                           "\" pretrained :") != std::string::npos &&
        !isStatistic(weight.name))
      trained.insert(weight.name);
  llvm::json::Object losses = readLosses(model);
  std::set<std::string> want;
  // The dynamo exporter names a tied parameter after another of its uses.
  const bool dynamo = std::string(model.exported) != ".onnx";
  if (const llvm::json::Array *names =
          losses.getArray(dynamo ? "trainable_dynamo" : "trainable"))
    for (const llvm::json::Value &name : *names)
      want.insert(name.getAsString()->str());
  EXPECT_EQ(trained, want);
}

TEST_P(OnnxModels, TrainsAsPyTorchAndAlikeAtK1To4) {
  const ModelCase model = GetParam();
  llvm::json::Object reference = readLosses(model);
  rt::OptimizerConfig adam;
  adam.kind = rt::OptimizerKind::Adam;
  adam.learningRate = float(*reference.getNumber("lr"));
  adam.beta1 = float(*reference.getNumber("beta1"));
  adam.beta2 = float(*reference.getNumber("beta2"));
  adam.epsilon = float(*reference.getNumber("eps"));
  std::vector<double> want, want64;
  for (const llvm::json::Value &loss : *reference.getArray("losses"))
    want.push_back(*loss.getAsNumber());
  for (const llvm::json::Value &loss : *reference.getArray("losses_f64"))
    want64.push_back(*loss.getAsNumber());
  // The steps over which PyTorch's float32 losses agree with its float64
  // ones (to 1e-4): past them float32 rounding alone decides the loss (batch
  // statistics over a few values in MobileNetV2), and no float32 run can
  // match PyTorch's.
  size_t conditioned = 0;
  while (conditioned < want.size() && conditioned < want64.size() &&
         std::fabs(want[conditioned] - want64[conditioned]) <=
             1e-4 * want64[conditioned])
    ++conditioned;
  ASSERT_GE(conditioned, 1u);
  std::printf("%s%s: %zu of %zu steps compared with PyTorch\n", model.name,
              model.exported, conditioned, want.size());
  std::map<std::string, std::vector<float>> atK1;
  for (unsigned k : {1u, 2u, 4u}) {
    SCOPED_TRACE("K=" + std::to_string(k));
    Imported run = compileModel(model, k, model.batchNorm ? 1 : 2, adam);
    ASSERT_TRUE(run.executor);
    for (size_t step = 0; step < want.size(); ++step) {
      rt::StepResult result = run.executor->trainStep(run.batch);
      ASSERT_TRUE(result.ok()) << result.error;
      if (step < conditioned)
        EXPECT_NEAR(result.loss, want[step], 1e-3 * want[step])
            << "step " << step + 1;
    }
    // A tied parameter's copies took the same updates.
    for (const auto &[copy, root] : tiedCopies(run.import.mlir)) {
      const std::vector<float> *a = run.executor->parameter(copy),
                               *b = run.executor->parameter(root);
      ASSERT_TRUE(a && b) << copy;
      EXPECT_EQ(std::memcmp(a->data(), b->data(), a->size() * 4), 0)
          << copy << " differs from " << root;
    }
    for (const rt::NamedTensor &weight : run.import.weights) {
      const std::vector<float> *values = run.executor->parameter(weight.name);
      ASSERT_TRUE(values) << weight.name;
      if (k == 1) {
        atK1[weight.name] = *values;
        continue;
      }
      ASSERT_EQ(values->size(), atK1[weight.name].size());
      EXPECT_EQ(std::memcmp(values->data(), atK1[weight.name].data(),
                            values->size() * 4),
                0)
          << weight.name << " differs from K=1's";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, OnnxModels,
    ::testing::Values(ModelCase{"vit", false}, ModelCase{"bert", false},
                      ModelCase{"mobilenet_v2", true},
                      ModelCase{"resnet18", true},
                      ModelCase{"gpt2", false},
                      ModelCase{"llama", false},
                      ModelCase{"transformer_encoder", false},
                      ModelCase{"vit", false, ".dynamo.onnx"},
                      ModelCase{"bert", false, ".dynamo.onnx"},
                      ModelCase{"mobilenet_v2", true, ".dynamo.onnx"},
                      ModelCase{"resnet18", true, ".dynamo.onnx"},
                      ModelCase{"gpt2", false, ".dynamo.onnx"},
                      ModelCase{"llama", false, ".dynamo.onnx"},
                      ModelCase{"transformer_encoder", false, ".dynamo.onnx"}),
    [](const ::testing::TestParamInfo<ModelCase> &info) {
      return std::string(info.param.name) +
             (std::string(info.param.exported) == ".onnx" ? "" : "_dynamo");
    });

} // namespace
