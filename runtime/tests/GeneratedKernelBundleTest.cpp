//===- GeneratedKernelBundleTest.cpp - Kernel ops and code in a bundle ----===//
//
// The `code` section and the `kernel` op through the reader (each malformed
// field named, with what was expected and found), the writer (a round trip,
// byte for byte), and validateBundle (kernel indices, operand counts, types
// and element counts, the recompute's kernel).
//
//===----------------------------------------------------------------------===//

#include "BundleReaderSupport.h"
#include "GeneratedKernelsSupport.h"

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/verify/BundleValidation.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

using Json = nlohmann::ordered_json;

/// The model bundle's text after `edit`, read back: its error ("" if none).
std::string readError(const std::function<void(Json &)> &edit) {
  Json json = Json::parse(writeBundle(kernelModelBundle()));
  edit(json);
  StatusOr<Bundle> read = bundlereader::parseJson(json);
  return read.ok() ? std::string() : read.status().message();
}

/// Whether `error` contains `part`, for EXPECT_PRED2's message.
bool mentions(const std::string &error, const std::string &part) {
  return error.find(part) != std::string::npos;
}

TEST(GeneratedKernelBundle, WriterRoundTripsTheCode) {
  const Bundle bundle = kernelModelBundle();
  EXPECT_EQ(validateBundle(bundle), "");
  const std::string text = writeBundle(bundle);
  StatusOr<Bundle> read = parseBundle(text, "kernels.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  bundlereader::expectEqual(bundle, *read);
  EXPECT_EQ(read->stages[0].forward[2].kernel, 0);
  EXPECT_EQ(read->stages[0].backward[1].kernel, 2);
  EXPECT_EQ(writeBundle(*read), text);
  // The op as the contract writes it.
  EXPECT_PRED2(mentions, text,
               R"({"op": "kernel", "kernel": 0, "operands": [3, 0], )"
               R"("results": [4]})");
}

TEST(GeneratedKernelBundle, ABundleWithoutCodeHasNoCodeKey) {
  Bundle bundle = kernelModelBundle();
  bundle.code = GeneratedCode();
  EXPECT_FALSE(mentions(writeBundle(bundle), "\"code\""));
}

TEST(GeneratedKernelBundle, ReaderNamesDamagedBase64) {
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["cpu"][0]["elf"] = "f0VMRg!C";
               }),
               "code.cpu[0]: the x86-64 code artifact ('elf') is not valid "
               "base64: unexpected character '!' at offset 6");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["cpu"][0]["elf"] = "f0VMRgI";
               }),
               "not valid base64: expected a multiple of 4 characters");
  EXPECT_PRED2(mentions,
               readError([](Json &j) { j["code"]["cpu"][0]["elf"] = ""; }),
               "code.cpu[0]: the x86-64 code artifact ('elf') is empty");
}

TEST(GeneratedKernelBundle, ReaderNamesAnUnknownIsa) {
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["cpu"][0]["isa"] = "aarch64";
               }),
               "code.cpu[0]: unknown isa 'aarch64'; expected one of x86-64, "
               "x86-64-v3, x86-64-v4");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["cpu"].push_back(j["code"]["cpu"][0]);
               }),
               "code.cpu[1]: a second code variant for x86-64 (also "
               "code.cpu[0])");
}

TEST(GeneratedKernelBundle, ReaderNamesMissingAndMalformedFields) {
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["kernels"][0].erase("symbol");
               }),
               "code.kernels[0]: missing key 'symbol'");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["kernels"][1]["inputs"] = "three";
               }),
               "code.kernels[1]: expected a non-negative integer 'inputs', "
               "found a string");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["kernels"][1]["inputs"] = 17;
               }),
               "code.kernels[1]: expected 'inputs' from 1 to 16, found 17");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["kernels"][0]["symbol"] = "../evil.so";
               }),
               "code.kernels[0]: expected a C identifier 'symbol'");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["kernels"][2]["symbol"] = "gpipe_kernel_0_test";
               }),
               "code.kernels[2]: kernel 'gpipe_kernel_0_test' is declared "
               "twice (also code.kernels[0])");
  EXPECT_PRED2(mentions,
               readError([](Json &j) { j["code"]["cpu"] = Json::array(); }),
               "code: expected a CPU code variant ('cpu') for the 3 "
               "generated kernels, found none");
  EXPECT_PRED2(mentions, readError([](Json &j) { j["code"]["cuda"] = 1; }),
               "code: unknown key 'cuda'; expected one of kernels, cpu");
  EXPECT_PRED2(mentions, readError([](Json &j) { j["code"]["kernels"] = 3; }),
               "code: expected an array 'kernels', found a number");
}

TEST(GeneratedKernelBundle, ReaderChecksTheKernelOps) {
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][2]["kernel"] = 7;
               }),
               "stages[0].forward[2]: kernel 7 out of range: the bundle has 3 "
               "generated kernels");
  EXPECT_PRED2(mentions, readError([](Json &j) { j.erase("code"); }),
               "stages[0].forward[2]: kernel 0 out of range: the bundle has 0 "
               "generated kernels (no 'code' section)");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["backward"][1]["operands"] = {6, 4, 3};
               }),
               "stages[0].backward[1]: kernel 2 (relu_grad(in0,in1)->out) "
               "takes 2 inputs, found 3 operands");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][2].erase("kernel");
               }),
               "stages[0].forward[2]: missing key 'kernel'");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][2]["kernel"] = -1;
               }),
               "expected a non-negative integer 'kernel', found -1");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][1]["kernel"] = 0;
               }),
               "unknown key 'kernel' for op 'dense'");
}

/// validateBundle of the model after `edit`.
std::string validationError(const std::function<void(StageProgram &)> &edit) {
  Bundle bundle = kernelModelBundle();
  edit(bundle.stages[0]);
  return validateBundle(bundle);
}

TEST(GeneratedKernelBundle, ValidationChecksIndexAndOperands) {
  EXPECT_EQ(validationError([](StageProgram &s) { s.forward[2].kernel = 5; }),
            "stage 0: forward op 2 (kernel): runs kernel 5, but the bundle "
            "has 3 generated kernels");
  EXPECT_EQ(validationError(
                [](StageProgram &s) { s.forward[2].operands.push_back(0); }),
            "stage 0: forward op 2 (kernel): runs kernel 0 (add(in0,in1)->t0; "
            "relu(t0)->out), which takes 2 inputs, with 3 operands");
}

TEST(GeneratedKernelBundle, ValidationChecksTypesAndElementCounts) {
  EXPECT_EQ(validationError([](StageProgram &s) {
              s.forward[2].operands[1] = 2; // w [6, 6], not x [8, 6]
            }),
            "stage 0: forward op 2 (kernel): runs kernel 0 (add(in0,in1)->t0; "
            "relu(t0)->out) element-wise: expects operand 1 with 48 elements "
            "(the result's [8, 6]), got 36 ([6, 6])");
  EXPECT_EQ(validationError([](StageProgram &s) {
              s.forward[2].operands[1] = 1; // the labels
            }),
            "stage 0: forward op 2 (kernel): expects operand 1 of type f32, "
            "got i32");
}

// Equal counts at the full batch, but a micro-batch runs a batched value's
// share of rows only.
TEST(GeneratedKernelBundle, ValidationMatchesBatchedOperands) {
  Bundle bundle = kernelModelBundle();
  bundle.params.push_back({"v", {8, 6}, InitKind::Zeros, 1.0, 0});
  StageProgram &s = bundle.stages[0];
  s.values.push_back({{8, 6}, ElementType::F32, false});
  Op param;
  param.kind = OpKind::Param;
  param.name = "v";
  param.results = {9};
  s.forward.insert(s.forward.begin(), param);
  s.forward[3].operands = {3, 9};
  EXPECT_EQ(validateBundle(bundle),
            "stage 0: forward op 3 (kernel): runs kernel 0 (add(in0,in1)->t0; "
            "relu(t0)->out) element-wise: expects operand 1 to be batched, as "
            "the result is");
}

TEST(GeneratedKernelBundle, ValidationChecksTheRecomputesKernel) {
  EXPECT_EQ(
      validationError([](StageProgram &s) { s.recompute[2].kernel = 2; }),
      "stage 0: recompute op 2 (kernel): redefines value 4 with kernel 2, "
      "which the forward defines with kernel 0");
}

TEST(GeneratedKernelBundle, ValidationChecksTheCodeSection) {
  Bundle bundle = kernelModelBundle();
  bundle.code.cpu.clear();
  EXPECT_EQ(validateBundle(bundle), "the bundle has 3 generated kernels but "
                                    "no CPU code variant to run them");
  bundle = kernelModelBundle();
  bundle.code.kernels[1].inputs = 0;
  EXPECT_EQ(validateBundle(bundle),
            "generated kernel 1 ('gpipe_kernel_1_test') takes 0 inputs; "
            "expected 1 to 16");
}

} // namespace
