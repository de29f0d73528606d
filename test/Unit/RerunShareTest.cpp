//===- RerunShareTest.cpp - What a selective recompute reruns, priced -----===//
//
// gpipe-tune prices a selective recompute as the share of its stage
// forward's FLOPs that it reruns (rerunFlopShare). On a Transformer every op
// but the attentions and the denses is rerun (the gradients reach each
// through the residual stream), so the share is the other ops' FLOPs over
// all of them, summed here by op kind from the compiled forward's costs.
//
//===----------------------------------------------------------------------===//

#include "ModelTextTest.h"
#include "gpipe/Analysis/CostModel.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Dialect/GPipe/Transforms/RecomputeCopies.h"
#include "gpipe/Models/TransformerBuilder.h"

#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace gpipe;

namespace {

class RerunShareTest : public gpipe::testing::ModelTextTest {
protected:
  /// The Transformer of 2 blocks as one stage, compiled under `remat`.
  OwningOpRef<ModuleOp> compile(RematPolicy remat) {
    TransformerConfig config;
    config.blocks = 2;
    OwningOpRef<ModuleOp> module = parse(buildTransformerModel(config));
    if (!module)
      return module;
    CompilePipelineOptions options;
    options.numStages = 1;
    options.numMicrobatches = 2;
    options.remat = remat;
    PassManager pm(&context);
    buildCompilePipeline(pm, options);
    EXPECT_TRUE(succeeded(pm.run(*module)));
    return module;
  }

  double share(ModuleOp module) {
    ModelOp model = *module.getOps<ModelOp>().begin();
    StageOp stage = *model.getBody().front().getOps<StageOp>().begin();
    StageBackwardOp backward =
        *model.getBody().front().getOps<StageBackwardOp>().begin();
    return rerunFlopShare(stage, backward);
  }
};

TEST_F(RerunShareTest, SelectiveRerunsAllButTheProducts) {
  OwningOpRef<ModuleOp> module = compile(RematPolicy::Selective);
  ASSERT_TRUE(module);
  uint64_t products = 0, total = 0;
  module->walk([&](Operation *op) {
    if (!op->getParentOfType<LayerOp>() || !op->getParentOfType<StageOp>() ||
        isa<ParamOp>(op) || op->hasTrait<OpTrait::IsTerminator>())
      return;
    CostAttr cost = getCost(op);
    ASSERT_TRUE(cost) << op->getName().getStringRef().str();
    total += cost.getFlops();
    if (isa<DenseOp, AttentionOp>(op))
      products += cost.getFlops();
  });
  ASSERT_GT(products, 0u);
  ASSERT_GT(total, products);
  EXPECT_DOUBLE_EQ(share(*module), double(total - products) / double(total));
  // A few percent: the products are nearly all of the FLOPs.
  EXPECT_LT(share(*module), 0.1);
}

TEST_F(RerunShareTest, FullRerunsTheProductsToo) {
  OwningOpRef<ModuleOp> module = compile(RematPolicy::Full);
  ASSERT_TRUE(module);
  // Full reruns every op the gradients read again, products included; only
  // a few cheap ops drop out (the loss, the last GELU's successors).
  EXPECT_GT(share(*module), 0.9);
  EXPECT_LE(share(*module), 1.0);
}

} // namespace
