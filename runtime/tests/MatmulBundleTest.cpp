//===- MatmulBundleTest.cpp - The matmul op in a bundle and its checks ----===//
//
// The matmul op's attributes through writeBundle and parseBundle (written
// only when true, read as booleans), and each shape the load-time checks
// (validateBundle) refuse, with its exact message: a rank under 2, K that
// differs, batch dimensions that do not broadcast, a result of another
// shape or batching, and the batch out of the result's dimension 0
// (behind another dimension, contracted in a forward or in one operand
// alone, spanned by an operand that is not batched). The backward's
// contraction of the batch in both operands is accepted.
//
//===----------------------------------------------------------------------===//

#include "BundleReaderSupport.h"
#include "MatmulModelSupport.h"

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/verify/BundleValidation.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;
using namespace gpipe::runtime::testing::matmulmodel;
using Json = nlohmann::ordered_json;

namespace {

//===-- the attributes ----------------------------------------------------===//

// transpose_a / transpose_b are written only where set, and read back.
TEST(MatmulBundle, AttributesRoundTrip) {
  Bundle bundle = matmulModelBundle({3, 3}, true);
  bundle.stages[0].forward[kXw].transposeA = true; // not valid: not checked
  const std::string text = writeBundle(bundle);
  Json json = Json::parse(text);
  const Json &forward = json["stages"][0]["forward"];
  EXPECT_EQ(forward[kXw].dump(),
            R"({"op":"matmul","operands":[0,2],"results":[3],)"
            R"("transpose_a":true})");
  EXPECT_EQ(forward[kHht].dump(),
            R"({"op":"matmul","operands":[3,3],"results":[4],)"
            R"("transpose_b":true})");
  EXPECT_EQ(forward[kSh].dump(),
            R"({"op":"matmul","operands":[4,3],"results":[5]})");

  StatusOr<Bundle> read = parseBundle(text, "matmul.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  const StageProgram &before = bundle.stages[0], &after = read->stages[0];
  for (std::vector<Op> StageProgram::*ops :
       {&StageProgram::forward, &StageProgram::recompute,
        &StageProgram::backward}) {
    ASSERT_EQ((after.*ops).size(), (before.*ops).size());
    for (size_t i = 0; i < (before.*ops).size(); ++i) {
      EXPECT_EQ((after.*ops)[i].kind, (before.*ops)[i].kind) << i;
      EXPECT_EQ((after.*ops)[i].transposeA, (before.*ops)[i].transposeA) << i;
      EXPECT_EQ((after.*ops)[i].transposeB, (before.*ops)[i].transposeB) << i;
    }
  }
  // Without transposes no attribute key is written: such a bundle has the
  // bytes of a writer that knows no matmul attributes.
  Bundle plain = matmulModelBundle({6}, false);
  for (StageProgram &stage : plain.stages)
    for (std::vector<Op> *ops :
         {&stage.forward, &stage.recompute, &stage.backward})
      for (Op &op : *ops)
        op.transposeA = op.transposeB = false;
  EXPECT_EQ(writeBundle(plain).find("transpose"), std::string::npos);
}

/// parseBundle's message for the model's text after `edit`.
std::string readError(const std::function<void(Json &)> &edit) {
  Json json = Json::parse(writeBundle(matmulModelBundle({3, 3}, false)));
  edit(json["stages"][0]["forward"][kXw]);
  StatusOr<Bundle> read = bundlereader::parseJson(json);
  EXPECT_FALSE(read.ok());
  return read.ok() ? std::string() : read.status().message();
}

TEST(MatmulBundle, AttributesMustBeBooleansOfMatmul) {
  EXPECT_EQ(readError([](Json &op) { op["transpose_a"] = 1; }),
            "'m.bundle.json': stages[0].forward[1]: expected a boolean "
            "'transpose_a', found a number");
  EXPECT_EQ(readError([](Json &op) { op["transpose"] = true; }),
            "'m.bundle.json': stages[0].forward[1]: unknown key 'transpose' "
            "for op 'matmul'; expected one of op, operands, results, fuse, "
            "transpose_a, transpose_b");
  EXPECT_EQ(readError([](Json &op) {
              op["op"] = "add";
              op["transpose_b"] = false;
            }),
            "'m.bundle.json': stages[0].forward[1]: unknown key 'transpose_b' "
            "for op 'add'; expected one of op, operands, results, fuse");
  // An explicit false reads as absent.
  Json json = Json::parse(writeBundle(matmulModelBundle({3, 3}, false)));
  json["stages"][0]["forward"][kXw]["transpose_a"] = false;
  json["stages"][0]["forward"][kHht]["transpose_b"] = false;
  StatusOr<Bundle> read = bundlereader::parseJson(json);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_FALSE(read->stages[0].forward[kXw].transposeA);
  EXPECT_FALSE(read->stages[0].forward[kHht].transposeB);
}

//===-- the load-time checks ----------------------------------------------===//

/// validateBundle's message for the model (with the head) after `edit`.
std::string errorAfter(const std::function<void(Bundle &)> &edit) {
  Bundle bundle = matmulModelBundle({3, 3}, true);
  EXPECT_EQ(validateBundle(bundle), "");
  edit(bundle);
  return validateBundle(bundle);
}

/// Gives parameter `name` (and the value of its param op) `shape`.
void reshapeParam(Bundle &bundle, const char *name,
                  std::vector<int64_t> shape) {
  for (ParamSpec &param : bundle.params)
    if (param.name == name)
      param.shape = shape;
  StageProgram &stage = bundle.stages[0];
  for (const Op &op : stage.forward)
    if (op.kind == OpKind::Param && op.name == name)
      stage.values[op.results[0]].shape = shape;
}

/// The value of forward op `index`'s result.
ValueSpec &resultOf(Bundle &bundle, size_t index) {
  StageProgram &stage = bundle.stages[0];
  return stage.values[stage.forward[index].results[0]];
}

TEST(MatmulBundle, RefusesRanksUnderTwo) {
  EXPECT_EQ(errorAfter([](Bundle &b) { reshapeParam(b, "w", {15}); }),
            "stage 0: forward op 1 (matmul): expects b of rank >= 2 ([..., "
            "rows, cols]), got shape [15]");
}

TEST(MatmulBundle, RefusesContractedSizesThatDiffer) {
  EXPECT_EQ(
      errorAfter([](Bundle &b) { b.stages[0].forward[kXw].transposeB = true; }),
      "stage 0: forward op 1 (matmul): expects op(a) [..., M, K] and "
      "op(b) [..., K, N] of one K, got op(a) [6, 4, 5] (K = 5) and "
      "op(b) [1, 3, 5] (K = 3)");
}

TEST(MatmulBundle, RefusesBatchDimensionsThatDoNotBroadcast) {
  EXPECT_EQ(errorAfter([](Bundle &b) {
              reshapeParam(b, "w", {2, 5, 3});
            }),
            "stage 0: forward op 1 (matmul): expects batch dimensions that "
            "broadcast (equal, or 1), got a's [6] and b's [2]: 6 against 2");
}

TEST(MatmulBundle, RefusesAResultOfAnotherShapeOrBatching) {
  EXPECT_EQ(errorAfter([](Bundle &b) {
              resultOf(b, kXw).shape = {6, 4, 4};
            }),
            "stage 0: forward op 1 (matmul): expects the result of shape [6, "
            "4, 3] (a [6, 4, 5], b [1, 5, 3]), got [6, 4, 4]");
  EXPECT_EQ(errorAfter([](Bundle &b) {
              b.stages[0].forward[kHht].transposeB = false;
              b.stages[0].forward[kHht].transposeA = true;
            }),
            "stage 0: forward op 2 (matmul): expects the result of shape [6, "
            "3, 3] (a [6, 4, 3] with transpose_a, b [6, 4, 3]), got [6, 4, "
            "4]");
  EXPECT_EQ(errorAfter([](Bundle &b) { resultOf(b, kXw).batched = false; }),
            "stage 0: forward op 1 (matmul): expects the result to be "
            "batched");
}

TEST(MatmulBundle, RefusesTheBatchOutOfTheResultsFirstDimension) {
  // Behind a batch dimension of b's.
  EXPECT_EQ(errorAfter([](Bundle &b) {
              reshapeParam(b, "w", {2, 6, 5, 3});
              resultOf(b, kXw) = {{2, 6, 4, 3}, ElementType::F32, false};
            }),
            "stage 0: forward op 1 (matmul): expects the batch (dimension 0 "
            "of a) in the result's dimension 0, got it in dimension 1 (a [6, "
            "4, 5], b [2, 6, 5, 3])");
  // Contracted in a alone: b's rows are not the batch's.
  EXPECT_EQ(errorAfter([](Bundle &b) {
              reshapeParam(b, "v", {6, 2});
              b.stages[0].forward[kHeadMatmul].transposeA = true;
              resultOf(b, kHeadMatmul) = {{12, 2}, ElementType::F32, false};
            }),
            "stage 0: forward op 6 (matmul): expects the batch (dimension 0 "
            "of a) in the result's dimension 0, got it contracted (a [6, 12] "
            "with transpose_a, b [6, 2])");
  // Spanned by a parameter: a micro-batch would read all of it.
  EXPECT_EQ(errorAfter([](Bundle &b) {
              reshapeParam(b, "w", {6, 5, 3});
            }),
            "stage 0: forward op 1 (matmul): expects b, which is not batched, "
            "of size 1 in the result's batch dimension 0 (or without it), got "
            "shape [6, 5, 3]");
}

// A forward may not contract the batch; the backward's dv = f^T dp does
// (the model validates), into an unbatched result.
TEST(MatmulBundle, OnlyABackwardContractsTheBatch) {
  EXPECT_EQ(errorAfter([](Bundle &b) {
              StageProgram &stage = b.stages[0];
              stage.values.push_back({{12, 12}, ElementType::F32, false});
              const int f = stage.forward[kHeadMatmul].operands[0];
              stage.forward.insert(
                  stage.forward.begin() + kHeadMatmul + 1,
                  matmulOp(f, f, int(stage.values.size() - 1), true, false));
            }),
            "stage 0: forward op 7 (matmul): expects the batch in the "
            "result's dimension 0, got it contracted in both a and b (only a "
            "backward may contract it: a parameter's gradient)");
  EXPECT_EQ(validateBundle(matmulModelBundle({2, 4}, true)), "");
}

} // namespace
