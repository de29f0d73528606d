//===- OpTableTest.cpp - The bundle op table against the gpipe dialect ----===//
//
// The op table (runtime/include/gpipe/runtime/bundle/Ops.def) and the dialect must
// name the same ops: every table row but add_grads and kernel is a
// registered gpipe op, and every registered gpipe op that is not structural
// (model, stages, schedules, transfers) has a row, or else is computed by
// generated kernels (GPipeElementwiseOps.td) and has a scalar body there
// (KernelToLinalg.h). An op added to the dialect without a bundle form fails
// here rather than at emission.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Conversion/KernelToLinalg.h"
#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/runtime/bundle/OpTable.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace gpipe;

namespace {

TEST(OpTable, EveryRowIsADialectOp) {
  mlir::MLIRContext context;
  context.loadDialect<GPipeDialect>();
  for (const runtime::OpInfo &info : runtime::kOpTable) {
    if (info.kind == runtime::OpKind::AddGrads ||
        info.kind == runtime::OpKind::Kernel)
      continue; // a gpipe.add in a backward program; generated code
    std::string name = std::string("gpipe.") + info.name;
    EXPECT_TRUE(
        mlir::RegisteredOperationName::lookup(name, &context).has_value())
        << name << " is in Ops.def but not in the dialect";
  }
}

TEST(OpTable, EveryComputeOpOfTheDialectHasARow) {
  mlir::MLIRContext context;
  context.loadDialect<GPipeDialect>();
  const std::set<std::string> structural = {"model",
                                            "input",
                                            "layer",
                                            "stage",
                                            "stage_backward",
                                            "param_ref",
                                            "yield",
                                            "return",
                                            "send",
                                            "recv",
                                            "schedule",
                                            "program",
                                            "load_input",
                                            "forward",
                                            "backward",
                                            "backward_weights",
                                            "send_activation",
                                            "recv_activation",
                                            "send_gradient",
                                            "recv_gradient",
                                            "wait_send_activation",
                                            "wait_send_gradient",
                                            "optimizer_step"};
  int computeOps = 0;
  for (mlir::RegisteredOperationName op :
       context.getRegisteredOperations()) {
    if (op.getDialectNamespace() != "gpipe")
      continue;
    std::string name = op.stripDialect().str();
    if (structural.count(name))
      continue;
    if (op.hasTrait<traits::GeneratedKernel>()) {
      EXPECT_TRUE(isKernelOp(name) && !hasLibraryKernel(name))
          << "gpipe." << name << " has no body in generated kernels";
      EXPECT_FALSE(runtime::opKindNamed(name).has_value())
          << "gpipe." << name << " is generated, yet has a row in Ops.def";
      continue;
    }
    ++computeOps;
    EXPECT_TRUE(runtime::opKindNamed(name).has_value())
        << "gpipe." << name << " has no row in Ops.def";
  }
  // All rows but add_grads and kernel.
  EXPECT_EQ(computeOps, int(runtime::kNumOpKinds) - 2);
}

TEST(OpTable, RowsSitAtTheirKinds) {
  for (size_t i = 0; i < runtime::kNumOpKinds; ++i) {
    const runtime::OpInfo &info = runtime::kOpTable[i];
    EXPECT_EQ(runtime::opKindNamed(info.name), info.kind);
    if (info.stateOperand >= 0) {
      EXPECT_TRUE(info.has(runtime::GradientOp)) << info.name;
      EXPECT_FALSE(runtime::opInfo(info.producer).has(runtime::GradientOp))
          << info.name;
      EXPECT_LT(unsigned(info.stateOperand), info.minOperands) << info.name;
    }
  }
}

} // namespace
