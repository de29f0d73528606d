//===- GeneratedKernelBundleTest.cpp - Kernel ops and code in a bundle ----===//
//
// The `code` section and the `kernel` op through the reader (each malformed
// field named, with what was expected and found: ranks, dimensions,
// iteration spaces), the writer (a round trip, byte for byte), and
// validateBundle (kernel indices, operand counts, types, element counts
// against the space, batching, the recompute's kernel).
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
std::string readError(const std::function<void(Json &)> &edit,
                      const Bundle &bundle = kernelModelBundle()) {
  return bundlereader::editedReadError(bundle, edit);
}

using bundlereader::mentions;

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
  // The op and the kernel as the contract writes them, keys in order.
  const Json json = Json::parse(text);
  EXPECT_EQ(json["stages"][0]["forward"][2].dump(),
            R"({"op":"kernel","kernel":0,"space":[48],"batched":true,)"
            R"("operands":[3,0],"results":[4]})");
  EXPECT_EQ(json["code"]["kernels"][5].dump(),
            R"({"symbol":"gpipe_kernel_5_test","inputs":1,)"
            R"("ops":"reduce_sum[dims=0](in0)->out","rank":2,)"
            R"("inputDims":[[0,1]],"outputDims":[1]})");
}

TEST(GeneratedKernelBundle, WriterRoundTripsBroadcastsAndReductions) {
  const Bundle bundle = biasModelBundle();
  EXPECT_EQ(validateBundle(bundle), "");
  const std::string text = writeBundle(bundle);
  StatusOr<Bundle> read = parseBundle(text, "bias.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  bundlereader::expectEqual(bundle, *read);
  EXPECT_EQ(read->stages[0].forward[3].space, (std::vector<int64_t>{8, 6}));
  EXPECT_TRUE(read->stages[0].forward[3].spaceBatched);
  EXPECT_EQ(read->code.kernels[3].inputDims,
            (std::vector<std::vector<unsigned>>{{0, 1}, {1}}));
  EXPECT_FALSE(read->code.kernels[3].reduces());
  EXPECT_TRUE(read->code.kernels[5].reduces());
  EXPECT_EQ(writeBundle(*read), text);
  EXPECT_EQ(Json::parse(text)["stages"][0]["backward"][2].dump(),
            R"({"op":"kernel","kernel":5,"space":[8,6],"batched":true,)"
            R"("operands":[9],"results":[10]})");
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
               "code: expected a CPU code variant ('cpu') for the 7 "
               "generated kernels, found none");
  EXPECT_PRED2(mentions, readError([](Json &j) { j["code"]["rocm"] = 1; }),
               "code: unknown key 'rocm'; expected one of kernels, cpu, cuda");
  EXPECT_PRED2(mentions, readError([](Json &j) { j["code"]["kernels"] = 3; }),
               "code: expected an array 'kernels', found a number");
}

/// A PTX module with an `.entry` per kernel of `code`, as the compiler's
/// --gpipe-ptx writes it (the reader checks the entries, not the code).
CudaCode ptxFor(const GeneratedCode &code) {
  std::string ptx = "//\n// Generated by LLVM NVPTX Back-End\n//\n\n"
                    ".version 8.0\n.target sm_90\n.address_size 64\n\n";
  for (const GeneratedKernelSpec &kernel : code.kernels)
    ptx += "\t// .globl\t" + kernel.symbol + "\n.visible .entry " +
           kernel.symbol + "(\n\t.param .u64 " + kernel.symbol +
           "_param_0\n)\n{\n\tret;\n}\n\n";
  return CudaCode{"sm_90", ptx};
}

Bundle withCuda(Bundle bundle) {
  bundle.code.cuda = ptxFor(bundle.code);
  return bundle;
}

TEST(GeneratedKernelBundle, WriterRoundTripsTheCudaCode) {
  const Bundle bundle = withCuda(biasModelBundle());
  EXPECT_EQ(validateBundle(bundle), "");
  const std::string text = writeBundle(bundle);
  StatusOr<Bundle> read = parseBundle(text, "bias-ptx.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  bundlereader::expectEqual(bundle, *read);
  ASSERT_TRUE(read->code.cuda.has_value());
  EXPECT_EQ(read->code.cuda->arch, "sm_90");
  EXPECT_EQ(read->code.cuda->ptx, bundle.code.cuda->ptx);
  EXPECT_EQ(writeBundle(*read), text);
  // Keys in order: kernels, cpu, cuda {arch, ptx}.
  const Json json = Json::parse(text);
  std::vector<std::string> keys;
  for (auto it = json["code"].begin(); it != json["code"].end(); ++it)
    keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"kernels", "cpu", "cuda"}));
  EXPECT_EQ(json["code"]["cuda"]["arch"], "sm_90");
  // Without it, no key (and the reader leaves it absent).
  StatusOr<Bundle> plain =
      parseBundle(writeBundle(biasModelBundle()), "bias.json");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_FALSE(plain->code.cuda.has_value());
  EXPECT_FALSE(mentions(writeBundle(biasModelBundle()), "\"cuda\""));
}

TEST(GeneratedKernelBundle, ReaderChecksTheCudaCode) {
  const Bundle bundle = withCuda(kernelModelBundle());
  EXPECT_EQ(readError([](Json &) {}, bundle), "");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["cuda"]["arch"] = "compute_90";
               }, bundle),
               "code.cuda: expected 'arch' as sm_ and digits (\"sm_90\"), "
               "found 'compute_90'");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["cuda"]["arch"] = "sm_";
               }, bundle),
               "code.cuda: expected 'arch' as sm_ and digits");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["cuda"]["ptx"] = "";
               }, bundle),
               "code.cuda: expected the kernels' PTX text ('ptx'), found an "
               "empty string");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["cuda"].erase("ptx");
               }, bundle),
               "code.cuda: missing key 'ptx'");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["cuda"]["ptx"] = 7;
               }, bundle),
               "code.cuda: expected a string 'ptx', found a number");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["cuda"]["cubin"] = "";
               }, bundle),
               "code.cuda: unknown key 'cubin'; expected one of arch, ptx");
  EXPECT_PRED2(mentions, readError([](Json &j) { j["code"]["cuda"] = "ptx"; },
                                   bundle),
               "code.cuda: expected an object, found a string");
  // Every kernel's entry, by its whole name.
  Bundle missing = bundle;
  missing.code.cuda->ptx = ptxFor(kernelModelBundle().code).ptx;
  const std::string symbol = missing.code.kernels[3].symbol;
  size_t at = missing.code.cuda->ptx.find(".entry " + symbol + "(");
  ASSERT_NE(at, std::string::npos);
  missing.code.cuda->ptx.replace(at, 7 + symbol.size(),
                                 ".entry " + symbol + "_other");
  EXPECT_PRED2(mentions, readError([](Json &) {}, missing),
               "code.cuda: expected 'ptx' with an '.entry " + symbol +
                   "' for kernel 3 (" + missing.code.kernels[3].ops +
                   "), found none");
  EXPECT_EQ(validateBundle(missing).rfind(
                "the generated kernels' CUDA code: expected 'ptx' with an "
                "'.entry " + symbol + "' for kernel 3",
                0),
            0u)
      << validateBundle(missing);
}

TEST(GeneratedKernelBundle, PtxEntriesAreWholeNames) {
  EXPECT_TRUE(ptxHasEntry(".visible .entry k_1(\n", "k_1"));
  EXPECT_TRUE(ptxHasEntry(".entry\tk_1 (", "k_1"));
  EXPECT_FALSE(ptxHasEntry(".visible .entry k_10(", "k_1"));
  EXPECT_FALSE(ptxHasEntry(".visible .func k_1(", "k_1"));
  EXPECT_FALSE(ptxHasEntry("// .globl k_1\n", "k_1"));
  EXPECT_FALSE(ptxHasEntry(".entryk_1(", "k_1"));
  EXPECT_TRUE(isCudaArch("sm_90"));
  EXPECT_TRUE(isCudaArch("sm_100"));
  EXPECT_FALSE(isCudaArch("sm_90a"));
  EXPECT_FALSE(isCudaArch("SM_90"));
  EXPECT_FALSE(isCudaArch(""));
}

TEST(GeneratedKernelBundle, ReaderChecksTheKernelOps) {
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][2]["kernel"] = 9;
               }),
               "stages[0].forward[2]: kernel 9 out of range: the bundle has 7 "
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

TEST(GeneratedKernelBundle, ReaderChecksRanks) {
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["kernels"][0].erase("rank");
               }),
               "code.kernels[0]: missing key 'rank'");
  EXPECT_PRED2(mentions,
               readError([](Json &j) { j["code"]["kernels"][3]["rank"] = 7; }),
               "code.kernels[3]: expected 'rank' from 1 to 6, found 7");
  EXPECT_PRED2(mentions,
               readError([](Json &j) { j["code"]["kernels"][3]["rank"] = 0; }),
               "code.kernels[3]: expected 'rank' from 1 to 6, found 0");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["kernels"][3]["rank"] = "two";
               }),
               "code.kernels[3]: expected a non-negative integer 'rank', "
               "found a string");
  // A smaller rank puts the dimensions out of range.
  EXPECT_PRED2(mentions,
               readError([](Json &j) { j["code"]["kernels"][3]["rank"] = 1; }),
               "code.kernels[3]: expected 'inputDims[0]' as dimensions in [0, "
               "1), found [0, 1]");
  EXPECT_PRED2(mentions,
               readError([](Json &j) { j["code"]["kernels"][3]["shape"] = 1; }),
               "code.kernels[3]: unknown key 'shape'; expected one of symbol, "
               "inputs, ops, rank, inputDims, outputDims");
}

TEST(GeneratedKernelBundle, ReaderChecksDimensions) {
  auto withDims = [](Json inputDims, Json outputDims) {
    return readError([&](Json &j) {
      j["code"]["kernels"][3]["inputDims"] = inputDims;
      j["code"]["kernels"][3]["outputDims"] = outputDims;
    });
  };
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["kernels"][3].erase("inputDims");
               }),
               "code.kernels[3]: missing key 'inputDims'");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["kernels"][3].erase("outputDims");
               }),
               "code.kernels[3]: missing key 'outputDims'");
  EXPECT_PRED2(mentions, withDims(Json::parse("[[0, 1]]"), {0, 1}),
               "code.kernels[3]: expected 'inputDims' with 2 entries (one per "
               "input), found 1");
  // An input's dimensions in its own order: a transposed input's are not
  // ascending, but each is distinct and in range.
  EXPECT_TRUE(readError([](Json &j) {
                j["code"]["kernels"][3]["inputDims"] = Json::parse("[[1, 0], [1]]");
              }).empty());
  EXPECT_PRED2(mentions, withDims(Json::parse("[[0, 1], [1, 1]]"), {0, 1}),
               "code.kernels[3]: expected 'inputDims[1]' as distinct "
               "dimensions in [0, 2), found [1, 1]");
  EXPECT_PRED2(mentions, withDims(Json::parse("[[0, 2], [1]]"), {0, 1}),
               "code.kernels[3]: expected 'inputDims[0]' as dimensions in [0, "
               "2), found [0, 2]");
  EXPECT_PRED2(mentions, withDims(Json::parse("[[0, 1], [-1]]"), {0, 1}),
               "code.kernels[3]: expected 'inputDims[1]' as dimensions in "
               "[0, 2), found [-1]");
  EXPECT_PRED2(mentions, withDims(Json::parse(R"([[0, "a"], [1]])"), {0, 1}),
               "code.kernels[3].inputDims[0][1]: expected a dimension (an "
               "integer), found a string");
  EXPECT_PRED2(mentions, withDims(Json::parse("[[0, 1], 1]"), {0, 1}),
               "code.kernels[3]: expected an array 'inputDims[1]', found a "
               "number");
  EXPECT_PRED2(mentions, withDims(Json::parse("[[0, 1], [1]]"), {1, 0}),
               "code.kernels[3]: expected 'outputDims' as strictly ascending "
               "dimensions in [0, 2), found [1, 0]");
  EXPECT_PRED2(mentions, withDims(Json::parse("[[0, 1], [1]]"), {0, 2}),
               "code.kernels[3]: expected 'outputDims' as dimensions in [0, "
               "2), found [0, 2]");
  EXPECT_PRED2(mentions, withDims(Json::parse("[[0, 1], [1]]"), 5),
               "code.kernels[3]: expected an array 'outputDims', found a "
               "number");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["code"]["kernels"][3]["inputDims"] = "all";
               }),
               "code.kernels[3]: expected an array 'inputDims', found a "
               "string");
  // Dimension 0 reduced (the output lacks it), and no input has it.
  EXPECT_PRED2(mentions, withDims(Json::parse("[[1], [1]]"), {1}),
               "code.kernels[3]: dimension 0 is reduced ('outputDims' [1] "
               "lacks it) but no input has it; expected each reduced "
               "dimension in some 'inputDims'");
  // A reduction to a scalar, and an input with no dimension, are fine.
  EXPECT_EQ(withDims(Json::parse("[[0, 1], []]"), Json::array()), "");
}

TEST(GeneratedKernelBundle, ReaderChecksTheSpace) {
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][2].erase("space");
               }),
               "stages[0].forward[2]: missing key 'space'");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][2].erase("batched");
               }),
               "stages[0].forward[2]: missing key 'batched'");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][2]["batched"] = 1;
               }),
               "stages[0].forward[2]: expected a boolean 'batched', found a "
               "number");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][2]["space"] = {8, 6};
               }),
               "stages[0].forward[2]: kernel 0 (add(in0,in1)->t0; "
               "relu(t0)->out) has rank 1: expected 'space' with 1 size, "
               "found [8, 6]");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][2]["space"] = Json::array();
               }),
               "has rank 1: expected 'space' with 1 size, found []");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][2]["space"] = {0};
               }),
               "stages[0].forward[2]: expected 'space' sizes >= 1, found [0]");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][2]["space"] = {4.5};
               }),
               "stages[0].forward[2].space[0]: expected an integer, found the "
               "non-integer number 4.5");
  EXPECT_PRED2(mentions, readError([](Json &j) {
                 j["stages"][0]["forward"][1]["space"] = {48};
               }),
               "unknown key 'space' for op 'dense'");
}

/// validateBundle of the model after `edit`.
std::string validationError(const std::function<void(StageProgram &)> &edit) {
  Bundle bundle = kernelModelBundle();
  edit(bundle.stages[0]);
  return validateBundle(bundle);
}

TEST(GeneratedKernelBundle, ValidationChecksIndexAndOperands) {
  EXPECT_EQ(validationError([](StageProgram &s) { s.forward[2].kernel = 9; }),
            "stage 0: forward op 2 (kernel): runs kernel 9, but the bundle "
            "has 7 generated kernels");
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
            "relu(t0)->out) over batched space [48]: expects operand 1 with 48 "
            "elements (the sizes at dims [0]), got 36 ([6, 6])");
  EXPECT_EQ(validationError([](StageProgram &s) {
              s.forward[2].operands[1] = 1; // the labels
            }),
            "stage 0: forward op 2 (kernel): runs kernel 0 (add(in0,in1)->t0; "
            "relu(t0)->out): expects operand 1 of type f32 (the kernel has no "
            "'types': all f32), got i32");
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
            "relu(t0)->out) over batched space [48]: expects operand 1 to be "
            "batched (dims [0]), got a value that is not");
}

/// validateBundle of the bias model after `edit`.
std::string
biasValidationError(const std::function<void(StageProgram &)> &edit) {
  Bundle bundle = biasModelBundle();
  edit(bundle.stages[0]);
  return validateBundle(bundle);
}

TEST(GeneratedKernelBundle, ValidationChecksTheSpace) {
  EXPECT_EQ(validationError([](StageProgram &s) {
              s.forward[2].space = {8, 6};
            }),
            "stage 0: forward op 2 (kernel): runs kernel 0 (add(in0,in1)->t0; "
            "relu(t0)->out) of rank 1 over a space of 2 sizes [8, 6]");
  EXPECT_EQ(validationError([](StageProgram &s) { s.forward[2].space = {0}; }),
            "stage 0: forward op 2 (kernel): runs kernel 0 (add(in0,in1)->t0; "
            "relu(t0)->out) over space [0]: expected every size >= 1");
  // The batch does not divide a batched space.
  EXPECT_EQ(validationError([](StageProgram &s) { s.forward[2].space = {12}; }),
            "stage 0: forward op 2 (kernel): runs kernel 0 (add(in0,in1)->t0; "
            "relu(t0)->out) over batched space [12]: expects space[0] = 12 to "
            "be a multiple of the batch 8");
}

TEST(GeneratedKernelBundle, ValidationChecksElementCountsAgainstTheSpace) {
  // The result [8, 6] over a space of [8, 5].
  EXPECT_EQ(biasValidationError([](StageProgram &s) {
              s.forward[3].space = {8, 5};
            }),
            "stage 0: forward op 3 (kernel): runs kernel 3 (add(in0,in1)->out) "
            "over batched space [8, 5]: expects result 0 with 40 elements (the "
            "sizes at dims [0, 1]), got 48 ([8, 6])");
  // The broadcast operand has dimension 1 only.
  EXPECT_EQ(biasValidationError([](StageProgram &s) {
              s.forward[3].operands[1] = 0; // x [8, 6], not b [6]
            }),
            "stage 0: forward op 3 (kernel): runs kernel 3 (add(in0,in1)->out) "
            "over batched space [8, 6]: expects operand 1 with 6 elements (the "
            "sizes at dims [1]), got 48 ([8, 6])");
  // The column sum's result has the columns.
  EXPECT_EQ(biasValidationError([](StageProgram &s) {
              s.backward[2].space = {6, 8};
              s.backward[2].spaceBatched = false;
            }),
            "stage 0: backward op 2 (kernel): runs kernel 5 "
            "(reduce_sum[dims=0](in0)->out) over space [6, 8]: expects result "
            "0 with 8 elements (the sizes at dims [1]), got 6 ([6])");
}

TEST(GeneratedKernelBundle, ValidationChecksBatching) {
  // Unbatched, the space's dimension 0 is not the batch: no operand may be
  // batched.
  EXPECT_EQ(biasValidationError(
                [](StageProgram &s) { s.backward[2].spaceBatched = false; }),
            "stage 0: backward op 2 (kernel): runs kernel 5 "
            "(reduce_sum[dims=0](in0)->out) over space [8, 6]: expects "
            "operand 0 not to be batched (dims [0, 1]), got a value that is");
  // A row sum keeps dimension 0, the batch: its result is batched.
  EXPECT_EQ(biasValidationError([](StageProgram &s) {
              s.values.push_back({{8}, ElementType::F32, false});
              s.backward[2].kernel = kRowSum;
              s.backward[2].results = {int(s.values.size()) - 1};
              s.backward.erase(s.backward.begin() + 3); // accumulate b
            }),
            "stage 0: backward op 2 (kernel): runs kernel 4 "
            "(reduce_sum[dims=1](in0)->out) over batched space [8, 6]: "
            "expects result 0 to be batched (dims [0]), got a value that is "
            "not");
}

// With a batch of 1 any value may be batched or not: the sizes alone match.
TEST(GeneratedKernelBundle, ValidationIgnoresBatchingAtABatchOfOne) {
  Bundle bundle = biasModelBundle({1});
  EXPECT_NE(validateBundle(bundle), ""); // shapes are still those of 8 rows
  bundle.batch = 1;
  bundle.inputs = {{"x", {1, 6}, ElementType::F32},
                   {"labels", {1}, ElementType::I32}};
  StageProgram &s = bundle.stages[0];
  for (ValueSpec &value : s.values)
    if (value.batched)
      value.shape[0] = 1;
  for (std::vector<Op> *ops : {&s.forward, &s.recompute, &s.backward})
    for (Op &op : *ops)
      if (op.kind == OpKind::Kernel)
        op.space[0] = op.space.size() == 1 ? 6 : 1;
  placeBundle(bundle);
  EXPECT_EQ(validateBundle(bundle), "");
  s.forward[3].spaceBatched = false;
  EXPECT_EQ(validateBundle(bundle), "");
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
  EXPECT_EQ(validateBundle(bundle), "the bundle has 7 generated kernels but "
                                    "no CPU code variant to run them");
  bundle = kernelModelBundle();
  bundle.code.kernels[1].inputs = 0;
  EXPECT_EQ(validateBundle(bundle),
            "generated kernel 1 ('gpipe_kernel_1_test') takes 0 inputs; "
            "expected 1 to 16");
  bundle = kernelModelBundle();
  bundle.code.kernels[3].rank = 7;
  EXPECT_EQ(validateBundle(bundle),
            "generated kernel 3 ('gpipe_kernel_3_test'): expected 'rank' from "
            "1 to 6, found 7");
  bundle = kernelModelBundle();
  bundle.code.kernels[3].inputDims[1] = {2};
  EXPECT_EQ(validateBundle(bundle),
            "generated kernel 3 ('gpipe_kernel_3_test'): expected "
            "'inputDims[1]' as distinct dimensions in [0, 2), found [2]");
  bundle = kernelModelBundle();
  bundle.code.kernels[5].inputDims = {{1}};
  EXPECT_EQ(validateBundle(bundle),
            "generated kernel 5 ('gpipe_kernel_5_test'): dimension 0 is "
            "reduced ('outputDims' [1] lacks it) but no input has it; expected "
            "each reduced dimension in some 'inputDims'");
  bundle = kernelModelBundle();
  bundle.code.kernels[4].outputDims = {0, 0};
  EXPECT_EQ(validateBundle(bundle),
            "generated kernel 4 ('gpipe_kernel_4_test'): expected "
            "'outputDims' as strictly ascending dimensions in [0, 2), found "
            "[0, 0]");
}

} // namespace
