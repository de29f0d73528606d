//===- GeneratedTypesBundleTest.cpp - Kernels' element types in a bundle --===//
//
// `code.kernels[k].types`: the writer (only where some memref is not f32,
// so that other bundles keep their bytes) and the reader (a round trip;
// each malformed list named with what was expected and found), the checks
// of an in-memory bundle and of the kernel ops' operand and result types
// against the kernel's, and a model that computes a mask as an i32 value by
// one kernel and reads it with an f32 value by another, evaluated and
// trained on the CPU backend and the host emulation against the same model
// computed here.
//
//===----------------------------------------------------------------------===//

#include "BundleReaderSupport.h"
#include "GeneratedKernelsSupport.h"

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/bundle/Initializers.h"
#include "gpipe/runtime/exec/Engine.h"
#include "gpipe/runtime/verify/BundleValidation.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

using Json = nlohmann::ordered_json;
constexpr ElementType F = ElementType::F32, I = ElementType::I32;

/// The mask model's text after `edit`, read back: its error ("" if none).
std::string readError(const std::function<void(Json &)> &edit) {
  return bundlereader::editedReadError(maskModelBundle(), edit);
}

/// The error of the mask model with kernel `kernel`'s types set to `types`
/// (JSON text), read back.
std::string withTypes(int kernel, const char *types) {
  return readError([&](Json &j) {
    j["code"]["kernels"][kernel]["types"] = Json::parse(types);
  });
}

using bundlereader::mentions;

TEST(GeneratedTypesBundle, WriterRoundTripsTheTypes) {
  const Bundle bundle = maskModelBundle();
  EXPECT_EQ(validateBundle(bundle), "");
  const std::string text = writeBundle(bundle);
  StatusOr<Bundle> read = parseBundle(text, "mask.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  bundlereader::expectEqual(bundle, *read);
  EXPECT_EQ(read->code.kernels[kGreater].types,
            (std::vector<ElementType>{F, I}));
  EXPECT_EQ(read->code.kernels[kWhere].types,
            (std::vector<ElementType>{I, F, F}));
  EXPECT_EQ(read->code.kernels[kCastF32].types,
            (std::vector<ElementType>{I, F}));
  EXPECT_TRUE(read->code.kernels[kAddRelu].types.empty());
  EXPECT_EQ(writeBundle(*read), text);
  // The key last, after outputDims; none on an all-f32 kernel.
  const Json json = Json::parse(text);
  EXPECT_EQ(json["code"]["kernels"][kWhere].dump(),
            R"({"symbol":"gpipe_kernel_11_test","inputs":2,)"
            R"("ops":"where(in0,in1,0)->out","rank":1,)"
            R"("inputDims":[[0],[0]],"outputDims":[0],)"
            R"("types":["i32","f32","f32"]})");
  EXPECT_FALSE(json["code"]["kernels"][kAddRelu].contains("types"));
  EXPECT_FALSE(json["code"]["kernels"][kSlice].contains("types"));
  EXPECT_FALSE(mentions(writeBundle(kernelModelBundle()), "\"types\""));
  EXPECT_FALSE(mentions(writeBundle(sliceModelBundle()), "\"types\""));
}

TEST(GeneratedTypesBundle, WriterPutsTheTypesAfterTheExtents) {
  Bundle bundle = maskModelBundle();
  bundle.code.kernels[kSliceGrad].types = {I, I};
  const std::string text = writeBundle(bundle);
  EXPECT_EQ(Json::parse(text)["code"]["kernels"][kSliceGrad].dump(),
            R"({"symbol":"gpipe_kernel_8_test","inputs":1,)"
            R"("ops":"slice_grad[dim=1,start=1,step=2](in0)->out","rank":2,)"
            R"("inputDims":[[0,1]],"outputDims":[0,1],)"
            R"("extents":[[-1,-1],[-1,6]],"types":["i32","i32"]})");
  StatusOr<Bundle> read = parseBundle(text, "mask.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  bundlereader::expectEqual(bundle, *read);
}

// Types all f32, spelled out (as the compiler may write them), read as such;
// the writer leaves them out, as for a kernel without them.
TEST(GeneratedTypesBundle, AllF32IsWrittenAsNoTypes) {
  EXPECT_EQ(withTypes(kAddRelu, R"(["f32", "f32", "f32"])"), "");
  Json json = Json::parse(writeBundle(maskModelBundle()));
  json["code"]["kernels"][kAddRelu]["types"] =
      Json::parse(R"(["f32", "f32", "f32"])");
  StatusOr<Bundle> read = bundlereader::parseJson(json);
  ASSERT_TRUE(read.ok()) << read.status().message();
  const GeneratedKernelSpec &spec = read->code.kernels[kAddRelu];
  EXPECT_EQ(spec.types, (std::vector<ElementType>{F, F, F}));
  for (size_t m = 0; m < 3; ++m)
    EXPECT_EQ(spec.typeOf(m), F) << m;
  EXPECT_FALSE(
      Json::parse(writeBundle(*read))["code"]["kernels"][kAddRelu].contains(
          "types"));
  // typeOf without types: every memref f32.
  EXPECT_EQ(maskModelBundle().code.kernels[kSlice].typeOf(1), F);
  EXPECT_EQ(maskModelBundle().code.kernels[kWhere].typeOf(0), I);
  EXPECT_EQ(maskModelBundle().code.kernels[kWhere].typeOf(2), F);
}

TEST(GeneratedTypesBundle, ReaderCountsTheTypes) {
  EXPECT_PRED2(mentions, withTypes(kWhere, R"(["i32", "f32"])"),
               "code.kernels[11]: expected 'types' with 3 entries (one per "
               "input, then the output), found 2");
  EXPECT_PRED2(mentions, withTypes(kGreater, R"(["f32", "i32", "i32"])"),
               "code.kernels[10]: expected 'types' with 2 entries (one per "
               "input, then the output), found 3");
  // Empty is not "none": that is the key's absence.
  EXPECT_PRED2(mentions, withTypes(kGreater, "[]"),
               "code.kernels[10]: expected 'types' with 2 entries (one per "
               "input, then the output), found 0");
  EXPECT_PRED2(mentions, withTypes(kGreater, R"("i32")"),
               "code.kernels[10]: expected an array 'types', found a string");
}

TEST(GeneratedTypesBundle, ReaderChecksTheNames) {
  EXPECT_PRED2(mentions, withTypes(kWhere, R"(["i32", "i1", "f32"])"),
               "code.kernels[11]: expected 'types[1]' as \"f32\" or \"i32\", "
               "found \"i1\"");
  EXPECT_PRED2(mentions, withTypes(kWhere, R"(["i32", "f32", "F32"])"),
               "code.kernels[11]: expected 'types[2]' as \"f32\" or \"i32\", "
               "found \"F32\"");
  EXPECT_PRED2(mentions, withTypes(kWhere, R"([32, "f32", "f32"])"),
               "code.kernels[11]: expected 'types[0]' as \"f32\" or \"i32\", "
               "found a number");
  EXPECT_PRED2(mentions, withTypes(kWhere, R"(["i32", null, "f32"])"),
               "code.kernels[11]: expected 'types[1]' as \"f32\" or \"i32\", "
               "found null");
  EXPECT_PRED2(mentions, withTypes(kWhere, R"(["i32", ["f32"], "f32"])"),
               "code.kernels[11]: expected 'types[1]' as \"f32\" or \"i32\", "
               "found an array");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["kernels"][kWhere]["typez"] = Json::array();
               }),
               "code.kernels[11]: unknown key 'typez'; expected one of symbol, "
               "inputs, ops, rank, inputDims, outputDims, extents, types, "
               "indexBounds");
}

TEST(GeneratedTypesBundle, ValidationCountsTheTypes) {
  Bundle bundle = maskModelBundle();
  bundle.code.kernels[kGreater].types = {I};
  EXPECT_EQ(validateBundle(bundle),
            "generated kernel 10 ('gpipe_kernel_10_test'): expected 'types' "
            "with 2 entries (one per input, then the output), found 1");
}

/// validateBundle of the mask model after `edit`.
std::string validationError(const std::function<void(Bundle &)> &edit) {
  Bundle bundle = maskModelBundle();
  edit(bundle);
  return validateBundle(bundle);
}

TEST(GeneratedTypesBundle, ValidationMatchesTheValuesTypes) {
  // where(m, h): the kernel's input 1 declared i32, h is f32.
  EXPECT_EQ(validationError([](Bundle &b) {
              b.code.kernels[kWhere].types = {I, I, F};
            }),
            "stage 0: forward op 3 (kernel): runs kernel 11 "
            "(where(in0,in1,0)->out): expects operand 1 of type i32 (the "
            "kernel's 'types[1]'), got f32");
  // The operands swapped: the mask where the f32 one goes.
  EXPECT_EQ(validationError([](Bundle &b) {
              b.stages[0].forward[3].operands = {3, 4};
            }),
            "stage 0: forward op 3 (kernel): runs kernel 11 "
            "(where(in0,in1,0)->out): expects operand 0 of type i32 (the "
            "kernel's 'types[0]'), got f32");
  // The comparison's result m is i32; a kernel that writes f32 does not do.
  EXPECT_EQ(validationError([](Bundle &b) {
              b.code.kernels[kGreater].types = {F, F};
            }),
            "stage 0: forward op 2 (kernel): runs kernel 10 (gt(in0,0)->out): "
            "expects result 0 of type f32 (the kernel's 'types[1]'), got i32");
  EXPECT_EQ(validationError(
                [](Bundle &b) { b.code.kernels[kGreater].types.clear(); }),
            "stage 0: forward op 2 (kernel): runs kernel 10 (gt(in0,0)->out): "
            "expects result 0 of type f32 (the kernel has no 'types': all "
            "f32), got i32");
  // In the backward, the gradient where the mask goes.
  EXPECT_EQ(validationError([](Bundle &b) {
              b.stages[0].backward[1].operands = {7, 4};
            }),
            "stage 0: backward op 1 (kernel): runs kernel 11 "
            "(where(in0,in1,0)->out): expects operand 0 of type i32 (the "
            "kernel's 'types[0]'), got f32");
}

// Refused where the bundle is loaded, before anything runs.
TEST(GeneratedTypesBundle, AnEngineRefusesMismatchedTypes) {
  Bundle bundle = maskModelBundle();
  bundle.code.kernels[kWhere].types = {F, F, F};
  EngineOptions options;
  options.device = DeviceKind::Cpu;
  StatusOr<std::unique_ptr<Engine>> engine = createEngine(bundle, options);
  ASSERT_FALSE(engine.ok());
  EXPECT_PRED2(mentions, engine.status().message(),
               "runs kernel 11 (where(in0,in1,0)->out): expects operand 0 of "
               "type f32 (the kernel's 'types[0]'), got i32");
}

constexpr int64_t kRows = 8, kWidth = 6;

Batch maskBatch() {
  std::vector<float> x(kRows * kWidth);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(std::sin(0.9 * double(i) + 0.3) * 1.5);
  std::vector<int32_t> labels(kRows);
  for (int64_t r = 0; r < kRows; ++r)
    labels[r] = int32_t((r * 5 + 2) % kWidth);
  return {{"x", HostTensor::floats({kRows, kWidth}, x)},
          {"labels", HostTensor::ints({kRows}, labels)}};
}

/// The mask model in double: h, the logits r, the loss and w's gradient.
struct Reference {
  std::vector<double> h, r;
  double loss = 0;
  std::vector<double> dw;
};

Reference reference(const Batch &batch, const std::vector<float> &w) {
  const std::vector<float> &x = batch.at("x").f32;
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  Reference out;
  out.h.assign(kRows * kWidth, 0.0);
  out.r.assign(kRows * kWidth, 0.0);
  out.dw.assign(kWidth * kWidth, 0.0);
  for (int64_t row = 0; row < kRows; ++row) {
    double *h = &out.h[row * kWidth], *r = &out.r[row * kWidth];
    double top = -INFINITY, sum = 0;
    for (int64_t j = 0; j < kWidth; ++j) {
      for (int64_t i = 0; i < kWidth; ++i)
        h[j] += double(x[row * kWidth + i]) * w[i * kWidth + j];
      r[j] = h[j] > 0 ? h[j] : 0.0; // kernels 10 and 11
      top = std::max(top, r[j]);
    }
    for (int64_t j = 0; j < kWidth; ++j)
      sum += std::exp(r[j] - top);
    out.loss += (top + std::log(sum) - r[labels[row]]) / double(kRows);
    double dh[kWidth];
    for (int64_t j = 0; j < kWidth; ++j) {
      const double dr =
          (std::exp(r[j] - top) / sum - (j == labels[row] ? 1.0 : 0.0)) /
          double(kRows);
      dh[j] = h[j] > 0 ? dr : 0.0; // kernel 11 in the backward
    }
    for (int64_t i = 0; i < kWidth; ++i)
      for (int64_t j = 0; j < kWidth; ++j)
        out.dw[i * kWidth + j] += double(x[row * kWidth + i]) * dh[j];
  }
  return out;
}

class GeneratedTypesModel : public ::testing::TestWithParam<DeviceKind> {};

// The mask is an i32 value (words 0 and 1) that the forward writes and its
// recompute writes again, and that the forward and the backward read; the
// non-finite guard is on, and never sees it.
TEST_P(GeneratedTypesModel, TrainsAsComputedHere) {
  for (const std::vector<int64_t> &rows :
       std::vector<std::vector<int64_t>>{{8}, {3, 5}}) {
    SCOPED_TRACE(::testing::Message() << rows.size() << " micro-batches");
    EngineOptions options;
    options.device = GetParam();
    options.seed = 11;
    options.optimizer.checkFinite = true;
    options.cpuThreading.threadsPerDevice = 3;
    std::vector<float> w(kWidth * kWidth);
    initializeParameter(InitKind::GlorotUniform, 1.0, {kWidth, kWidth},
                        options.seed, "w", w.data());
    StatusOr<std::unique_ptr<Engine>> engine =
        createEngine(maskModelBundle(rows), options);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    const Batch batch = maskBatch();
    const Reference expected = reference(batch, w);
    // Both signs, none so near 0 that float and double could differ.
    int64_t positive = 0;
    for (double h : expected.h) {
      ASSERT_GT(std::fabs(h), 1e-4);
      positive += h > 0;
    }
    ASSERT_GT(positive, 8);
    ASSERT_LT(positive, kRows * kWidth - 8);

    EvalResult eval = (*engine)->evaluate(batch, kRows);
    ASSERT_TRUE(eval.ok()) << eval.error;
    EXPECT_NEAR(eval.loss, expected.loss, 1e-5);
    ASSERT_EQ(eval.prediction.f32.size(), expected.r.size());
    for (size_t i = 0; i < expected.r.size(); ++i) {
      if (expected.h[i] > 0) {
        EXPECT_NEAR(eval.prediction.f32[i], expected.r[i], 1e-5) << i;
      } else {
        EXPECT_EQ(eval.prediction.f32[i], 0.0f) << i;
      }
    }

    StepResult step = (*engine)->trainStep(batch);
    ASSERT_TRUE(step.ok()) << step.error;
    EXPECT_NEAR(step.loss, expected.loss, 1e-5);
    std::vector<float> dw;
    ASSERT_TRUE((*engine)->gradient("w", dw).ok());
    ASSERT_EQ(dw.size(), expected.dw.size());
    double largest = 0;
    for (size_t i = 0; i < dw.size(); ++i) {
      EXPECT_NEAR(dw[i], expected.dw[i], 1e-6) << "dw[" << i << "]";
      largest = std::max(largest, std::fabs(expected.dw[i]));
    }
    EXPECT_GT(largest, 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, GeneratedTypesModel,
                         ::testing::Values(DeviceKind::Cpu,
                                           DeviceKind::HostEmulation),
                         [](const ::testing::TestParamInfo<DeviceKind> &info) {
                           return info.param == DeviceKind::Cpu
                                      ? "Cpu"
                                      : "HostEmulation";
                         });

} // namespace
