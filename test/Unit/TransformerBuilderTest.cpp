//===- TransformerBuilderTest.cpp - Tests of the Transformer text builder -===//
//
// The generated text is parsed and verified with the gpipe dialect; with the
// example's configuration its parsed model is compared, op by op, with the
// hand-written python-free-examples/transformer/transformer.mlir (inputs,
// layer names, parameter names, initializers and types, every op's name,
// operand and result types and attributes, and where each operand comes
// from). Parameter counts are checked against the parsed parameter types.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Models/TransformerBuilder.h"
#include "ModelTextTest.h"
#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace mlir;
using namespace gpipe;

namespace {

std::string str(Type type) {
  std::string text;
  llvm::raw_string_ostream(text) << type;
  return text;
}

std::string str(Attribute attr) {
  std::string text;
  llvm::raw_string_ostream(text) << attr;
  return text;
}

/// Everything about a model but SSA names and locations, as comparable rows.
struct ModelSummary {
  std::string name;
  int64_t batch = 0;
  std::vector<std::string> inputs; ///< "name : type"
  std::vector<std::string> layers; ///< layer names, in order
  std::vector<std::string> params; ///< "layer/param init scale : type"
  std::vector<std::string> ops;    ///< "layer/op (operands) -> results {attrs}"
  uint64_t paramScalars = 0;
};

/// Where a value comes from: a model input, a result of an earlier layer or
/// an op of the same layer (by position).
std::string origin(Value value, LayerOp layer,
                   const std::map<Operation *, unsigned> &position) {
  Operation *def = value.getDefiningOp();
  if (auto input = dyn_cast_or_null<InputOp>(def))
    return "input " + input.getName().str();
  if (auto producer = dyn_cast_or_null<LayerOp>(def))
    return "layer " + producer.getName().str() + "#" +
           std::to_string(cast<OpResult>(value).getResultNumber());
  if (def && def->getParentOp() == layer.getOperation())
    return "op " + std::to_string(position.at(def));
  return "elsewhere";
}

ModelSummary summarize(ModuleOp module) {
  ModelSummary summary;
  auto models = llvm::to_vector(module.getOps<ModelOp>());
  EXPECT_EQ(models.size(), 1u);
  if (models.empty())
    return summary;
  ModelOp model = models.front();
  summary.name = model.getSymName().str();
  summary.batch = model.getBatch();
  for (Operation &op : model.getBody().front()) {
    if (auto input = dyn_cast<InputOp>(op)) {
      summary.inputs.push_back(input.getName().str() + " : " +
                               str(input.getType()));
      continue;
    }
    auto layer = dyn_cast<LayerOp>(op);
    if (!layer)
      continue;
    std::string name = layer.getName().str();
    summary.layers.push_back(name);
    for (Type type : layer.getResultTypes())
      summary.layers.back() += " -> " + str(type);
    std::map<Operation *, unsigned> position;
    for (Operation &inner : layer.getBody().front()) {
      position[&inner] = position.size();
      if (auto param = dyn_cast<ParamOp>(inner)) {
        auto type = cast<RankedTensorType>(param.getType());
        summary.paramScalars += type.getNumElements();
        summary.params.push_back(
            name + "/" + param.getName().str() + " " +
            str(param.getInitAttr()) + " " +
            (param.getScaleAttr() ? str(param.getScaleAttr()) : "-") + " : " +
            str(type));
        continue;
      }
      std::string row =
          name + "/" + inner.getName().getStringRef().str() + " (";
      for (Value operand : inner.getOperands())
        row += origin(operand, layer, position) + " " + str(operand.getType()) +
               ", ";
      row += ") ->";
      for (Type type : inner.getResultTypes())
        row += " " + str(type);
      row += " " + str(inner.getAttrDictionary());
      summary.ops.push_back(row);
    }
  }
  return summary;
}

/// Compares row lists and reports only the first difference.
void expectSameRows(const std::vector<std::string> &got,
                    const std::vector<std::string> &want, const char *what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    if (got[i] != want[i]) {
      ADD_FAILURE() << what << " #" << i << " differs:\n  generated: " << got[i]
                    << "\n  expected:  " << want[i];
      return;
    }
}

using TransformerBuilderTest = gpipe::testing::ModelTextTest;

TEST_F(TransformerBuilderTest, MatchesTheHandWrittenExample) {
  std::string path =
      std::string(GPIPE_EXAMPLES_DIR) + "/transformer/transformer.mlir";
  auto file = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(bool(file)) << "cannot read " << path;
  OwningOpRef<ModuleOp> expected = parse((*file)->getBuffer());
  ASSERT_TRUE(expected);

  TransformerConfig config; // the defaults are the example's
  ASSERT_EQ(validateTransformerConfig(config), "");
  OwningOpRef<ModuleOp> generated = parse(buildTransformerModel(config));
  ASSERT_TRUE(generated);

  ModelSummary want = summarize(*expected), got = summarize(*generated);
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.batch, want.batch);
  expectSameRows(got.inputs, want.inputs, "input");
  expectSameRows(got.layers, want.layers, "layer");
  expectSameRows(got.params, want.params, "param");
  expectSameRows(got.ops, want.ops, "op");
  EXPECT_EQ(got.paramScalars, want.paramScalars);
  EXPECT_EQ(countTransformerParameters(config), want.paramScalars);
  EXPECT_EQ(numTransformerLayers(config), int64_t(want.layers.size()));
  // The comparison is not vacuous.
  EXPECT_EQ(want.layers.size(), 11u);
  EXPECT_EQ(want.params.size(), 2u + 4 * (4 + 6) + 3);
  EXPECT_EQ(want.ops.size(), 4u + 4 * (5 + 7) + 3 + 2); // yields included
}

TEST_F(TransformerBuilderTest, OtherSizesParseAndVerify) {
  std::vector<TransformerConfig> configs(4);
  configs[0].blocks = 0; // embed, head and loss only
  configs[1].blocks = 1;
  configs[1].dropout = 0.0;
  configs[2] = {"wide", 3, 256, 8, 1024, 128, 16, 96, 0.25};
  configs[3] = {"odd", 5, 12, 3, 7, 5, 3, 11, 0.5};
  for (const TransformerConfig &config : configs) {
    SCOPED_TRACE(config.name + " with " + std::to_string(config.blocks) +
                 " blocks");
    ASSERT_EQ(validateTransformerConfig(config), "");
    OwningOpRef<ModuleOp> module = parse(buildTransformerModel(config));
    ASSERT_TRUE(module);
    ModelSummary summary = summarize(*module);
    EXPECT_EQ(summary.name, config.name);
    EXPECT_EQ(summary.batch, config.batch);
    EXPECT_EQ(int64_t(summary.layers.size()), numTransformerLayers(config));
    EXPECT_EQ(summary.paramScalars, countTransformerParameters(config));
    EXPECT_EQ(summary.layers.back(), "loss -> tensor<f32>");
    if (config.blocks > 0) {
      EXPECT_EQ(summary.layers[2 * config.blocks],
                "block" + std::to_string(config.blocks - 1) + ".mlp -> " +
                    "tensor<" + std::to_string(config.batch) + "x" +
                    std::to_string(config.seq) + "x" +
                    std::to_string(config.width) + "xf32>");
    }
  }
}

TEST_F(TransformerBuilderTest, CompilesIntoOneStagePerLayer) {
  TransformerConfig config;
  config.blocks = 2;
  OwningOpRef<ModuleOp> module = parse(buildTransformerModel(config));
  ASSERT_TRUE(module);
  CompilePipelineOptions options;
  options.numStages = unsigned(numTransformerLayers(config));
  options.numMicrobatches = 4;
  PassManager pm(&context);
  buildCompilePipeline(pm, options);
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    llvm::raw_string_ostream(diagnostics) << diag << "\n";
    return success();
  });
  EXPECT_TRUE(succeeded(pm.run(*module))) << diagnostics;
  auto schedules = llvm::to_vector(module->getOps<ScheduleOp>());
  ASSERT_EQ(schedules.size(), 1u);
  EXPECT_EQ(llvm::range_size(schedules.front().getBody().getOps<ProgramOp>()),
            size_t(numTransformerLayers(config)));
}

TEST(TransformerConfigTest, RejectsInvalidSizes) {
  auto error = [](auto change) {
    TransformerConfig config;
    change(config);
    return validateTransformerConfig(config);
  };
  EXPECT_EQ(error([](TransformerConfig &c) { c.heads = 5; }),
            "expects the number of heads to divide the width 64, got 5 heads");
  EXPECT_EQ(error([](TransformerConfig &c) { c.blocks = -1; }),
            "expects a non-negative number of blocks, got -1");
  EXPECT_EQ(error([](TransformerConfig &c) { c.width = 0; }),
            "expects a positive width, got 0");
  EXPECT_EQ(error([](TransformerConfig &c) { c.vocab = -3; }),
            "expects a positive vocabulary, got -3");
  EXPECT_EQ(error([](TransformerConfig &c) { c.dropout = 1.0; }),
            "expects a dropout rate in [0, 1), got 1.000000");
  EXPECT_EQ(error([](TransformerConfig &c) { c.name = "9lives"; }),
            "expects a model name of letters, digits, '_', '.' and '$' "
            "starting with a letter or '_', got '9lives'");
}

} // namespace
