//===- ResNetBuilderTest.cpp - Tests of the ResNet text builder -----------===//
//
// The generated text parses and verifies for several depths, widths and
// image sizes; its trainable parameters add up to countResNetParameters;
// python-free-examples/resnet/resnet.mlir is exactly resnet_model's default
// output; and the compiled ResNet-8 at K = 4 carries a block's input (its
// skip connection) across a stage boundary.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Models/ResNetBuilder.h"
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

#include <string>

using namespace mlir;
using namespace gpipe;

namespace {

using ResNetBuilderTest = gpipe::testing::ModelTextTest;

/// Parameter scalars of `module`'s model: trainable, and running statistics
/// (the batch norms' third and fourth operands).
std::pair<uint64_t, uint64_t> countParams(ModuleOp module) {
  uint64_t trainable = 0, running = 0;
  llvm::DenseSet<Value> statistics;
  module.walk([&](BatchNormOp norm) {
    statistics.insert(norm.getRunningMean());
    statistics.insert(norm.getRunningVar());
  });
  module.walk([&](ParamOp param) {
    uint64_t n = cast<RankedTensorType>(param.getType()).getNumElements();
    (statistics.contains(param.getResult()) ? running : trainable) += n;
  });
  return {trainable, running};
}

TEST_F(ResNetBuilderTest, SizesParseVerifyAndCountTheirParameters) {
  for (auto [blocks, width, h, w, c] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{1, 16, 28, 28,
                                                                1},
        {2, 8, 32, 32, 3},
        {3, 4, 9, 5, 2}}) {
    ResNetConfig config;
    config.blocksPerGroup = blocks, config.width = width, config.batch = 4;
    config.height = h, config.imageWidth = w, config.channels = c;
    SCOPED_TRACE("ResNet-" + std::to_string(resnetDepth(config)) + " width " +
                 std::to_string(width));
    ASSERT_EQ(validateResNetConfig(config), "");
    OwningOpRef<ModuleOp> module = parse(buildResNetModel(config));
    ASSERT_TRUE(module);
    auto model = *module->getOps<ModelOp>().begin();
    EXPECT_EQ(int64_t(llvm::range_size(model.getBody().getOps<LayerOp>())),
              numResNetLayers(config));
    auto [trainable, running] = countParams(*module);
    EXPECT_EQ(trainable, countResNetParameters(config));
    // Each conv's batch norm keeps a mean and a variance per channel; the
    // convs' filters: the stem, two per block, one shortcut per group > 1.
    uint64_t filters = width + 2 * blocks * (width + 2 * width + 4 * width) +
                       2 * width + 4 * width;
    EXPECT_EQ(running, 2 * filters);
  }
}

TEST_F(ResNetBuilderTest, TheExampleIsTheDefaultOutput) {
  const std::string path =
      std::string(GPIPE_EXAMPLES_DIR) + "/resnet/resnet.mlir";
  auto file = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(file) << path;
  ResNetConfig config;
  std::string header = "// ResNet-8 (" +
                       std::to_string(countResNetParameters(config)) +
                       " trainable parameters), written by resnet_model.\n";
  EXPECT_EQ((*file)->getBuffer().str(), header + buildResNetModel(config))
      << "regenerate it: build/bin/resnet_model -o " << path;
}

// K = 4 cuts ResNet-8's nine layers inside blocks: some stage receives a
// block's input for its shortcut besides the previous layer's output.
TEST_F(ResNetBuilderTest, SkipConnectionsCrossStageBoundaries) {
  ResNetConfig config;
  config.batch = 8;
  OwningOpRef<ModuleOp> module = parse(buildResNetModel(config));
  ASSERT_TRUE(module);
  CompilePipelineOptions options;
  options.numStages = 4;
  options.numMicrobatches = 2;
  PassManager pm(&context);
  buildCompilePipeline(pm, options);
  ASSERT_TRUE(succeeded(pm.run(*module)));
  int stages = 0, crossing = 0;
  module->walk([&](StageOp stage) {
    ++stages;
    // Inputs from the previous stage, not the model's gpipe.inputs.
    int channels = 0;
    for (Value input : stage.getInputs())
      channels += input.getDefiningOp<InputOp>() == nullptr;
    crossing += channels > 1;
  });
  EXPECT_EQ(stages, 4);
  EXPECT_GE(crossing, 1) << "no stage receives a skip connection";
}

TEST(ResNetConfigTest, RejectsInvalidSizes) {
  auto error = [](auto change) {
    ResNetConfig config;
    change(config);
    return validateResNetConfig(config);
  };
  EXPECT_EQ(error([](ResNetConfig &c) { c.blocksPerGroup = 0; }),
            "expects a positive number of blocks per group, got 0");
  EXPECT_EQ(error([](ResNetConfig &c) { c.height = 3; }),
            "expects an image of at least 4 x 4 pixels (two halvings), got 3 "
            "x 28");
  EXPECT_EQ(error([](ResNetConfig &c) { c.momentum = 2; }),
            "expects a batch-norm momentum in [0, 1], got 2.000000");
  EXPECT_EQ(error([](ResNetConfig &c) { c.name = "1net"; }),
            "expects a model name of letters, digits, '_', '.' and '$' "
            "starting with a letter or '_', got '1net'");
}

} // namespace
