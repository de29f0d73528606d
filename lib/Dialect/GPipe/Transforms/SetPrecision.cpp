//===- SetPrecision.cpp - Record the precision of a model's products ------===//

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/runtime/bundle/Precision.h"

#include "mlir/IR/BuiltinAttributes.h"

namespace gpipe {
#define GEN_PASS_DEF_SETPRECISIONPASS
#include "gpipe/Dialect/GPipe/Transforms/Passes.h.inc"
} // namespace gpipe

using namespace mlir;
using namespace gpipe;

namespace {
struct SetPrecisionPass
    : public gpipe::impl::SetPrecisionPassBase<SetPrecisionPass> {
  using SetPrecisionPassBase::SetPrecisionPassBase;
  void runOnOperation() override {
    if (!runtime::parsePrecision(precision.getValue())) {
      getOperation().emitError()
          << "gpipe-set-precision expects precision f32, tf32 or bf16, got '"
          << precision.getValue() << "'";
      return signalPassFailure();
    }
    auto name = StringAttr::get(&getContext(), precision.getValue());
    getOperation().walk(
        [&](ModelOp model) { model->setAttr(ModelOp::kPrecisionAttrName, name); });
  }
};
} // namespace
