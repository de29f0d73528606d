//===- PretrainedParamsTest.cpp - Parameters with values from a file ------===//
//
// A Pretrained parameter takes the tensor of its name in the bundle's weights
// file (safetensors), bit for bit, when the executor is created; the others
// keep their initializers. Checked: the values (NaN payloads, -0 and
// subnormals included), each error's exact text, that the file is read only
// when this process holds a pretrained parameter, validation, and the
// bundle's "weights" through the JSON writer and reader (a relative path is
// relative to the bundle file's directory), and a C API session created from
// such a bundle file.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/verify/BundleValidation.h"
#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/bundle/SafeTensors.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/runtime/transport/Transport.h"
#include "gpipe/runtime/gpipe_runtime.h"

#include "TempDir.h"
#include "TestBundles.h"
#include "TestModels.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;

namespace {

constexpr int64_t kRows = 8;

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

int64_t elementsOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t dim : shape)
    n *= dim;
  return n;
}

/// Values whose bits a conversion anywhere would change: a NaN payload,
/// -0, a subnormal, then distinct ordinary numbers.
std::vector<float> distinctValues(int64_t n, uint32_t salt) {
  static const uint32_t special[] = {0x7fc01234u, 0x80000000u, 0x00000001u};
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = i < 3 ? special[i] : 0x3e000000u + salt * 4096u + i * 7u;
    std::memcpy(&values[i], &bits, 4);
  }
  return values;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The MLP on two stages with l1.w (stage 0) and l4.w (stage 1) pretrained
/// from `weights`.
Bundle pretrainedMlp(const std::string &weights) {
  Bundle bundle =
      buildBundle(mlpGraph(kRows), mlpSplit(2), 2, RematPolicy::Full);
  for (ParamSpec &spec : bundle.params)
    if (spec.name == "l1.w" || spec.name == "l4.w")
      spec.init = InitKind::Pretrained;
  bundle.weights = weights;
  return bundle;
}

const ParamSpec &specOf(const Bundle &bundle, const std::string &name) {
  for (const ParamSpec &spec : bundle.params)
    if (spec.name == name)
      return spec;
  ADD_FAILURE() << "no parameter " << name;
  return bundle.params.front();
}

/// The file's tensors for the pretrained parameters of `bundle` (and one the
/// model does not have, which is ignored).
std::vector<NamedTensor> tensorsFor(const Bundle &bundle) {
  std::vector<NamedTensor> tensors;
  uint32_t salt = 1;
  for (const ParamSpec &spec : bundle.params)
    if (spec.init == InitKind::Pretrained)
      tensors.push_back({spec.name, spec.shape,
                         distinctValues(elementsOf(spec.shape), salt++)});
  tensors.push_back({"unused", {2}, {1.0f, 2.0f}});
  return tensors;
}

std::unique_ptr<DeviceExecutor> create(Bundle bundle, std::string &error,
                                       DeviceExecutorConfig config = {}) {
  unsigned devices = bundle.numDevices();
  return DeviceExecutor::create(
      std::move(bundle), std::make_unique<CpuBackend>(devices), config, error);
}

/// The in-process transport, claiming that this process runs only device
/// `runs` (as one rank of an MPI job would).
class OneDeviceTransport final : public Transport {
public:
  OneDeviceTransport(std::unique_ptr<Transport> inner, unsigned runs)
      : inner(std::move(inner)), runs(runs) {}
  std::string describe() const override { return inner->describe(); }
  std::string send(StreamId stream, const TransferKey &key, const void *source,
                   int64_t bytes) override {
    return inner->send(stream, key, source, bytes);
  }
  std::string recv(StreamId stream, const TransferKey &key, void *destination,
                   int64_t bytes) override {
    return inner->recv(stream, key, destination, bytes);
  }
  int64_t stagingBytes(unsigned device) const override {
    return inner->stagingBytes(device);
  }
  int64_t bytesSent() const override { return inner->bytesSent(); }
  bool runsDevice(unsigned device) const override { return device == runs; }

private:
  std::unique_ptr<Transport> inner;
  unsigned runs;
};

TEST(PretrainedParams, TakeTheFilesValuesBitForBit) {
  TempDir dir("gpipe-pretrained");
  std::string path = dir.path + "/mlp.safetensors";
  Bundle bundle = pretrainedMlp(path);
  std::vector<NamedTensor> tensors = tensorsFor(bundle);
  writeFile(path, encodeSafeTensors(tensors, {}));
  std::string error;
  DeviceExecutorConfig config;
  config.seed = 17;
  auto executor = create(bundle, error, config);
  ASSERT_TRUE(executor) << error;
  for (const NamedTensor &tensor : tensors) {
    if (tensor.name == "unused")
      continue;
    std::vector<float> values;
    ASSERT_EQ(executor->parameter(tensor.name, values), "");
    EXPECT_TRUE(sameBits(values, tensor.data)) << tensor.name;
  }
  // The other parameters keep their initializers.
  const ParamSpec &bias = specOf(bundle, "l1.b");
  std::vector<float> expected(elementsOf(bias.shape)), values;
  initializeParameter(bias.init, bias.scale, bias.shape, config.seed, bias.name,
                      expected.data());
  ASSERT_EQ(executor->parameter("l1.b", values), "");
  EXPECT_TRUE(sameBits(values, expected));
}

TEST(PretrainedParams, UnreadableFile) {
  TempDir dir("gpipe-pretrained");
  std::string path = dir.path + "/missing.safetensors";
  std::string error;
  EXPECT_FALSE(create(pretrainedMlp(path), error));
  EXPECT_EQ(error, "cannot read the weights file '" + path +
                       "' of pretrained parameter 'l1.w': No such file or "
                       "directory");
}

TEST(PretrainedParams, MissingTensor) {
  TempDir dir("gpipe-pretrained");
  std::string path = dir.path + "/partial.safetensors";
  Bundle bundle = pretrainedMlp(path);
  std::vector<NamedTensor> tensors = tensorsFor(bundle);
  tensors.erase(tensors.begin() + 1); // l4.w
  writeFile(path, encodeSafeTensors(tensors, {}));
  std::string error;
  EXPECT_FALSE(create(bundle, error));
  EXPECT_EQ(error, "the weights file '" + path +
                       "' has no tensor 'l4.w' (pretrained parameter of shape "
                       "[8, 5])");
}

TEST(PretrainedParams, ShapeMismatch) {
  TempDir dir("gpipe-pretrained");
  std::string path = dir.path + "/transposed.safetensors";
  Bundle bundle = pretrainedMlp(path);
  std::vector<NamedTensor> tensors = tensorsFor(bundle);
  ASSERT_EQ(tensors[0].name, "l1.w");
  tensors[0].shape = {16, 12}; // the same elements, transposed
  writeFile(path, encodeSafeTensors(tensors, {}));
  std::string error;
  EXPECT_FALSE(create(bundle, error));
  EXPECT_EQ(error, "the weights file '" + path +
                       "' gives tensor 'l1.w' the shape [16, 12], but the "
                       "model's parameter has [12, 16]");
}

// The codec's errors come through as they are.
TEST(PretrainedParams, CorruptFile) {
  TempDir dir("gpipe-pretrained");
  std::string path = dir.path + "/corrupt.safetensors";
  Bundle bundle = pretrainedMlp(path);
  std::string bytes = encodeSafeTensors(tensorsFor(bundle), {});
  bytes[bytes.size() - 1] ^= 0x10; // in the last tensor, "unused"
  writeFile(path, bytes);
  std::string error;
  EXPECT_FALSE(create(bundle, error));
  EXPECT_EQ(
      error.rfind("'" + path + "': tensor 'unused' fails its checksum", 0), 0u)
      << error;
  writeFile(path, "not safetensors");
  EXPECT_FALSE(create(bundle, error));
  EXPECT_EQ(error.rfind("'" + path + "': not a valid safetensors file: ", 0),
            0u)
      << error;
}

// A bundle with a pretrained parameter must name the file.
TEST(PretrainedParams, NeedAWeightsFile) {
  Bundle bundle = pretrainedMlp("");
  EXPECT_EQ(validateBundle(bundle), "parameter 'l1.w' is pretrained, but the "
                                    "bundle names no weights file ('weights')");
  std::string error;
  EXPECT_FALSE(create(bundle, error));
  EXPECT_EQ(error, validateBundle(bundle));
}

// The file is read only for pretrained parameters this process holds.
TEST(PretrainedParams, ReadOnlyWhenNeeded) {
  TempDir temp("gpipe-pretrained");
  const std::string &dir = temp.path;
  std::string error;
  Bundle none = buildBundle(mlpGraph(kRows), mlpSplit(2), 2, RematPolicy::Full);
  none.weights = dir + "/missing.safetensors";
  EXPECT_TRUE(create(none, error)) << error;

  // Only l4.w (stage 1) is pretrained; this process runs device 0.
  Bundle bundle = pretrainedMlp(dir + "/missing.safetensors");
  for (ParamSpec &spec : bundle.params)
    if (spec.name == "l1.w")
      spec.init = InitKind::GlorotUniform;
  DeviceExecutorConfig config;
  config.transport = [](DeviceBackend &backend,
                        std::unique_ptr<Transport> &transport) {
    transport = std::make_unique<OneDeviceTransport>(
        createInProcessTransport(backend), 0);
    return std::string();
  };
  EXPECT_TRUE(create(bundle, error, config)) << error;
  config.transport = [](DeviceBackend &backend,
                        std::unique_ptr<Transport> &transport) {
    transport = std::make_unique<OneDeviceTransport>(
        createInProcessTransport(backend), 1);
    return std::string();
  };
  EXPECT_FALSE(create(bundle, error, config));
  EXPECT_EQ(error.rfind("cannot read the weights file '" + dir +
                            "/missing.safetensors' of pretrained parameter "
                            "'l4.w': ",
                        0),
            0u)
      << error;
}

// "weights" survives the JSON; loadBundle resolves a relative path against
// the bundle file's directory and keeps an absolute one.
TEST(PretrainedParams, BundleFileNamesTheWeights) {
  TempDir temp("gpipe-pretrained");
  const std::string &dir = temp.path;
  ASSERT_EQ(::mkdir((dir + "/w").c_str(), 0700), 0);
  Bundle bundle = pretrainedMlp("w/mlp.safetensors");
  std::vector<NamedTensor> tensors = tensorsFor(bundle);
  writeFile(dir + "/w/mlp.safetensors", encodeSafeTensors(tensors, {}));
  std::string text = writeBundle(bundle);
  EXPECT_NE(text.find("\"weights\": \"w/mlp.safetensors\""), std::string::npos);
  EXPECT_NE(text.find("\"init\": \"pretrained\""), std::string::npos);
  StatusOr<Bundle> parsed = parseBundle(text, "m.bundle.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->weights, "w/mlp.safetensors");
  EXPECT_EQ(specOf(*parsed, "l1.w").init, InitKind::Pretrained);

  writeFile(dir + "/m.bundle.json", text);
  StatusOr<Bundle> loaded = loadBundle(dir + "/m.bundle.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->weights, dir + "/w/mlp.safetensors");
  // The executor finds the file from any working directory.
  std::string error;
  auto executor = create(*loaded, error);
  ASSERT_TRUE(executor) << error;
  std::vector<float> values;
  ASSERT_EQ(executor->parameter("l1.w", values), "");
  EXPECT_TRUE(sameBits(values, tensors[0].data));

  bundle.weights = "/elsewhere/mlp.safetensors";
  writeFile(dir + "/m.bundle.json", writeBundle(bundle));
  loaded = loadBundle(dir + "/m.bundle.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->weights, "/elsewhere/mlp.safetensors");

  // Without pretrained parameters nothing changes: no "weights" key.
  Bundle plain =
      buildBundle(mlpGraph(kRows), mlpSplit(2), 2, RematPolicy::Full);
  EXPECT_EQ(writeBundle(plain).find("\"weights\""), std::string::npos);
}

// The CPU executor (PipelineExecutor) creates its device executor the same
// way.
TEST(PretrainedParams, PipelineExecutor) {
  TempDir dir("gpipe-pretrained");
  std::string path = dir.path + "/mlp.safetensors";
  Bundle bundle = pretrainedMlp(path);
  std::vector<NamedTensor> tensors = tensorsFor(bundle);
  writeFile(path, encodeSafeTensors(tensors, {}));
  std::string error;
  auto executor = PipelineExecutor::create(bundle, ExecutorConfig(), error);
  ASSERT_TRUE(executor) << error;
  const std::vector<float> *values = executor->parameter("l4.w");
  ASSERT_TRUE(values);
  EXPECT_TRUE(sameBits(*values, tensors[1].data));
}

// An application embedding the C API gets the same values from a bundle file
// whose weights sit beside it, and a clear error when the file is gone.
TEST(PretrainedParams, CApiSessionFromABundleFile) {
  TempDir temp("gpipe-pretrained");
  const std::string &dir = temp.path;
  Bundle bundle = pretrainedMlp("mlp.safetensors");
  std::vector<NamedTensor> tensors = tensorsFor(bundle);
  writeFile(dir + "/mlp.safetensors", encodeSafeTensors(tensors, {}));
  const std::string bundlePath = dir + "/mlp.bundle.json";
  writeFile(bundlePath, writeBundle(bundle));
  gpipe_session_t *session = nullptr;
  ASSERT_EQ(
      gpipe_session_create_from_file(bundlePath.c_str(), nullptr, &session),
      GPIPE_OK)
      << gpipe_last_error();
  for (size_t t = 0; t < 2; ++t) {
    std::vector<float> values(tensors[t].data.size());
    ASSERT_EQ(gpipe_session_get_parameter(session, tensors[t].name.c_str(),
                                          values.size(), values.data()),
              GPIPE_OK)
        << gpipe_last_error();
    EXPECT_TRUE(sameBits(values, tensors[t].data)) << tensors[t].name;
  }
  gpipe_session_destroy(session);

  ASSERT_EQ(std::remove((dir + "/mlp.safetensors").c_str()), 0);
  session = nullptr;
  EXPECT_NE(
      gpipe_session_create_from_file(bundlePath.c_str(), nullptr, &session),
      GPIPE_OK);
  EXPECT_EQ(session, nullptr);
  EXPECT_NE(std::string(gpipe_last_error())
                .find("cannot read the weights file '" + dir +
                      "/mlp.safetensors' of pretrained parameter 'l1.w'"),
            std::string::npos)
      << gpipe_last_error();
}

} // namespace
