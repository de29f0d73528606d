//===- GeneratedExtentsBundleTest.cpp - Kernels' extents in a bundle ------===//
//
// `code.kernels[k].extents`: the writer (only where a kernel has them, so
// that other bundles keep their bytes) and the reader (a round trip; each
// malformed list named with what was expected and found), the checks of an
// in-memory bundle and of the kernel ops' operands against the memrefs' own
// sizes, and a model that slices by a kernel and takes the slice's gradient
// by another, trained on the CPU backend and the host emulation against
// the same model computed here.
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

/// The slice model's text after `edit`, read back: its error ("" if none).
std::string readError(const std::function<void(Json &)> &edit) {
  return bundlereader::editedReadError(sliceModelBundle(), edit);
}

/// The error of the slice model with kernel `kernel`'s extents set to
/// `extents` (JSON text), read back.
std::string withExtents(int kernel, const char *extents) {
  return readError([&](Json &j) {
    j["code"]["kernels"][kernel]["extents"] = Json::parse(extents);
  });
}

using bundlereader::mentions;

TEST(GeneratedExtentsBundle, WriterRoundTripsTheExtents) {
  const Bundle bundle = sliceModelBundle();
  EXPECT_EQ(validateBundle(bundle), "");
  const std::string text = writeBundle(bundle);
  StatusOr<Bundle> read = parseBundle(text, "slice.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  bundlereader::expectEqual(bundle, *read);
  EXPECT_EQ(read->code.kernels[kSliceGrad].extents,
            (std::vector<std::vector<int64_t>>{{-1, -1}, {-1, 6}}));
  EXPECT_EQ(read->code.kernels[kConcat].extents,
            (std::vector<std::vector<int64_t>>{{-1, 2}, {-1, 4}, {-1, -1}}));
  EXPECT_TRUE(read->code.kernels[kBroadcastAdd].extents.empty());
  EXPECT_EQ(writeBundle(*read), text);
  // The key last, after outputDims; none on a kernel without extents.
  const Json json = Json::parse(text);
  EXPECT_EQ(json["code"]["kernels"][kSliceGrad].dump(),
            R"({"symbol":"gpipe_kernel_8_test","inputs":1,)"
            R"("ops":"slice_grad[dim=1,start=1,step=2](in0)->out","rank":2,)"
            R"("inputDims":[[0,1]],"outputDims":[0,1],)"
            R"("extents":[[-1,-1],[-1,6]]})");
  EXPECT_FALSE(json["code"]["kernels"][kBroadcastAdd].contains("extents"));
  EXPECT_FALSE(mentions(writeBundle(kernelModelBundle()), "extents"));
}

TEST(GeneratedExtentsBundle, ReaderTakesExtentsWhereTheyMayBe) {
  EXPECT_EQ(readError([](Json &) {}), "");
  // All -1: the space's sizes, written as such.
  EXPECT_EQ(withExtents(kBroadcastAdd, "[[-1, -1], [-1], [-1, -1]]"), "");
  // On a transposed input's dimension 1 (its own first).
  EXPECT_EQ(readError([](Json &j) {
              j["code"]["kernels"][kBroadcastAdd]["inputDims"] =
                  Json::parse("[[1, 0], [1]]");
              j["code"]["kernels"][kBroadcastAdd]["extents"] =
                  Json::parse("[[4, -1], [-1], [-1, -1]]");
            }),
            "");
}

TEST(GeneratedExtentsBundle, ReaderCountsTheLists) {
  EXPECT_PRED2(mentions, withExtents(kConcat, "[[-1, 2], [-1, 4]]"),
               "code.kernels[9]: expected 'extents' with 3 lists (one per "
               "input, then the output), found 2");
  // Empty is not "none": that is the key's absence.
  EXPECT_PRED2(mentions, withExtents(kSlice, "[]"),
               "code.kernels[7]: expected 'extents' with 2 lists (one per "
               "input, then the output), found 0");
  EXPECT_PRED2(mentions,
               withExtents(kConcat, "[[-1, 2], [-1, 4, 1], [-1, -1]]"),
               "code.kernels[9]: expected 'extents[1]' with 2 entries (one "
               "per dimension of 'inputDims[1]'), found 3");
  EXPECT_PRED2(mentions, withExtents(kConcat, "[[-1, 2], [-1, 4], [-1]]"),
               "code.kernels[9]: expected 'extents[2]' with 2 entries (one "
               "per dimension of 'outputDims'), found 1");
  EXPECT_PRED2(mentions, withExtents(kRowSumAdd, "[[-1, -1], [], [-1]]"),
               "code.kernels[6]: expected 'extents[1]' with 1 entry (one per "
               "dimension of 'inputDims[1]'), found 0");
}

TEST(GeneratedExtentsBundle, ReaderChecksTheSizes) {
  EXPECT_PRED2(mentions, withExtents(kSlice, "[[-1, 0], [-1, -1]]"),
               "code.kernels[7]: expected 'extents[0][1]' as -1 or a size >= "
               "1, found 0");
  EXPECT_PRED2(mentions, withExtents(kSlice, "[[-1, 6], [-1, -2]]"),
               "code.kernels[7]: expected 'extents[1][1]' as -1 or a size >= "
               "1, found -2");
  EXPECT_PRED2(mentions, withExtents(kSlice, R"([[-1, "6"], [-1, -1]])"),
               "code.kernels[7].extents[0][1]: expected a size (an integer), "
               "found a string");
  EXPECT_PRED2(mentions, withExtents(kSlice, "[[-1, 6.5], [-1, -1]]"),
               "code.kernels[7].extents[0][1]: expected a size (an integer), "
               "found the non-integer number 6.5");
  EXPECT_PRED2(mentions, withExtents(kSlice, "[[-1, 6], 3]"),
               "code.kernels[7]: expected an array 'extents[1]', found a "
               "number");
  EXPECT_PRED2(mentions, withExtents(kSlice, "{}"),
               "code.kernels[7]: expected an array 'extents', found an "
               "object");
}

TEST(GeneratedExtentsBundle, ReaderRefusesAFixedDimensionZero) {
  EXPECT_PRED2(mentions, withExtents(kSlice, "[[8, 6], [-1, -1]]"),
               "code.kernels[7]: expected -1 for 'extents[0][0]': it is "
               "iteration dimension 0, which scales with the micro-batch");
  EXPECT_PRED2(mentions, withExtents(kSliceGrad, "[[-1, -1], [8, 6]]"),
               "code.kernels[8]: expected -1 for 'extents[1][0]': it is "
               "iteration dimension 0, which scales with the micro-batch");
  // Dimension 0 where a transposed input has it second.
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["kernels"][kBroadcastAdd]["inputDims"] =
                     Json::parse("[[1, 0], [1]]");
                 j["code"]["kernels"][kBroadcastAdd]["extents"] =
                     Json::parse("[[-1, 8], [-1], [-1, -1]]");
               }),
               "code.kernels[3]: expected -1 for 'extents[0][1]': it is "
               "iteration dimension 0, which scales with the micro-batch");
}

TEST(GeneratedExtentsBundle, ReaderRefusesAReducingKernelsFixedOutput) {
  // The column sum reduces dimension 0 to an output of dimension 1.
  EXPECT_PRED2(mentions, withExtents(kColumnSum, "[[-1, -1], [4]]"),
               "code.kernels[5]: expected only -1 in 'extents[1]' (the "
               "output's) of a kernel that reduces ('outputDims' [1] of rank "
               "2), found [4]");
  // Its input may have one.
  EXPECT_EQ(withExtents(kColumnSum, "[[-1, 4], [-1]]"), "");
}

TEST(GeneratedExtentsBundle, ValidationChecksTheExtents) {
  Bundle bundle = sliceModelBundle();
  bundle.code.kernels[kSliceGrad].extents = {{-1, -1}};
  EXPECT_EQ(validateBundle(bundle),
            "generated kernel 8 ('gpipe_kernel_8_test'): expected 'extents' "
            "with 2 lists (one per input, then the output), found 1");
  bundle = sliceModelBundle();
  bundle.code.kernels[kSlice].extents = {{6, -1}, {-1, -1}};
  EXPECT_EQ(validateBundle(bundle),
            "generated kernel 7 ('gpipe_kernel_7_test'): expected -1 for "
            "'extents[0][0]': it is iteration dimension 0, which scales with "
            "the micro-batch");
}

/// validateBundle of the slice model after `edit`.
std::string validationError(const std::function<void(Bundle &)> &edit) {
  Bundle bundle = sliceModelBundle();
  edit(bundle);
  return validateBundle(bundle);
}

TEST(GeneratedExtentsBundle, ValidationCountsTheOwnSizes) {
  // The slice reads h [8, 6]: 48 elements, not the space's 24.
  EXPECT_EQ(validationError([](Bundle &b) {
              b.code.kernels[kSlice].extents = {{-1, 5}, {-1, -1}};
            }),
            "stage 0: forward op 2 (kernel): runs kernel 7 "
            "(slice[dim=1,start=1,step=2](in0)->out) over batched space [8, "
            "3]: expects operand 0 with 40 elements (the sizes at dims [0, "
            "1], extents [-1, 5]), got 48 ([8, 6])");
  EXPECT_EQ(validationError(
                [](Bundle &b) { b.code.kernels[kSlice].extents.clear(); }),
            "stage 0: forward op 2 (kernel): runs kernel 7 "
            "(slice[dim=1,start=1,step=2](in0)->out) over batched space [8, "
            "3]: expects operand 0 with 24 elements (the sizes at dims [0, "
            "1]), got 48 ([8, 6])");
  // The gradient's result is dh [8, 6].
  EXPECT_EQ(validationError([](Bundle &b) {
              b.code.kernels[kSliceGrad].extents = {{-1, -1}, {-1, 7}};
            }),
            "stage 0: backward op 1 (kernel): runs kernel 8 "
            "(slice_grad[dim=1,start=1,step=2](in0)->out) over batched space "
            "[8, 3]: expects result 0 with 56 elements (the sizes at dims [0, "
            "1], extents [-1, 7]), got 48 ([8, 6])");
  // A result of the space's size does not do.
  EXPECT_EQ(validationError([](Bundle &b) {
              StageProgram &s = b.stages[0];
              s.values.push_back({{8, 3}, ElementType::F32, true});
              s.backward[1].results = {int(s.values.size()) - 1};
            }),
            "stage 0: backward op 1 (kernel): runs kernel 8 "
            "(slice_grad[dim=1,start=1,step=2](in0)->out) over batched space "
            "[8, 3]: expects result 0 with 48 elements (the sizes at dims [0, "
            "1], extents [-1, 6]), got 24 ([8, 3])");
}

constexpr int64_t kRows = 8, kWidth = 6, kClasses = 3;

Batch sliceBatch() {
  std::vector<float> x(kRows * kWidth);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(std::sin(0.7 * double(i)) * 1.5);
  std::vector<int32_t> labels(kRows);
  for (int64_t r = 0; r < kRows; ++r)
    labels[r] = int32_t((r * 2 + 1) % kClasses);
  return {{"x", HostTensor::floats({kRows, kWidth}, x)},
          {"labels", HostTensor::ints({kRows}, labels)}};
}

/// The slice model's loss and w's gradient, in double.
struct Reference {
  double loss = 0;
  std::vector<double> dw;
};

Reference reference(const Batch &batch, const std::vector<float> &w) {
  const std::vector<float> &x = batch.at("x").f32;
  const std::vector<int32_t> &labels = batch.at("labels").i32;
  Reference out;
  out.dw.assign(kWidth * kWidth, 0.0);
  for (int64_t r = 0; r < kRows; ++r) {
    double h[kWidth], s[kClasses], top = -INFINITY, sum = 0;
    for (int64_t j = 0; j < kWidth; ++j) {
      h[j] = 0;
      for (int64_t i = 0; i < kWidth; ++i)
        h[j] += double(x[r * kWidth + i]) * w[i * kWidth + j];
    }
    for (int64_t c = 0; c < kClasses; ++c) {
      s[c] = h[1 + 2 * c]; // kernel 7
      top = std::max(top, s[c]);
    }
    for (double v : s)
      sum += std::exp(v - top);
    out.loss += (top + std::log(sum) - s[labels[r]]) / double(kRows);
    double dh[kWidth] = {}; // kernel 8: 0 at columns 0, 2, 4
    for (int64_t c = 0; c < kClasses; ++c)
      dh[1 + 2 * c] =
          (std::exp(s[c] - top) / sum - (c == labels[r] ? 1.0 : 0.0)) /
          double(kRows);
    for (int64_t i = 0; i < kWidth; ++i)
      for (int64_t j = 0; j < kWidth; ++j)
        out.dw[i * kWidth + j] += double(x[r * kWidth + i]) * dh[j];
  }
  return out;
}

class GeneratedExtentsModel : public ::testing::TestWithParam<DeviceKind> {};

// The kernel ops' calls carry the extents (their buffers are checked
// against them as each op is issued), over micro-batches of several sizes.
TEST_P(GeneratedExtentsModel, TrainsAsComputedHere) {
  for (const std::vector<int64_t> &rows :
       std::vector<std::vector<int64_t>>{{8}, {3, 5}, {1, 2, 2, 3}}) {
    SCOPED_TRACE(::testing::Message() << rows.size() << " micro-batches");
    EngineOptions options;
    options.device = GetParam();
    options.seed = 7;
    options.cpuThreading.threadsPerDevice = 3;
    std::vector<float> w(kWidth * kWidth);
    initializeParameter(InitKind::GlorotUniform, 1.0, {kWidth, kWidth},
                        options.seed, "w", w.data());
    StatusOr<std::unique_ptr<Engine>> engine =
        createEngine(sliceModelBundle(rows), options);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    const Batch batch = sliceBatch();
    const Reference expected = reference(batch, w);

    EvalResult eval = (*engine)->evaluate(batch, kRows);
    ASSERT_TRUE(eval.ok()) << eval.error;
    EXPECT_NEAR(eval.loss, expected.loss, 1e-5);

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
      // Columns 0, 2 and 4 of h are sliced away: no gradient reaches w's.
      if (i % kWidth % 2 == 0) {
        EXPECT_EQ(dw[i], 0.0f) << "dw[" << i << "]";
      }
    }
    EXPECT_GT(largest, 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, GeneratedExtentsModel,
                         ::testing::Values(DeviceKind::Cpu,
                                           DeviceKind::HostEmulation),
                         [](const ::testing::TestParamInfo<DeviceKind> &info) {
                           return info.param == DeviceKind::Cpu
                                      ? "Cpu"
                                      : "HostEmulation";
                         });

} // namespace
