//===- GPipeDialect.cpp - gpipe dialect registration ----------------------===//

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace gpipe;

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.cpp.inc"
#include "gpipe/Dialect/GPipe/IR/GPipeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "gpipe/Dialect/GPipe/IR/GPipeAttrs.cpp.inc"

LogicalResult
CostAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                 uint64_t flops, uint64_t paramBytes,
                 uint64_t activationBytes) {
  for (auto [name, value] :
       {std::pair{"flops", flops}, std::pair{"param_bytes", paramBytes},
        std::pair{"activation_bytes", activationBytes}})
    if (value > uint64_t(INT64_MAX))
      return emitError() << "expects '" << name
                         << "' to be a non-negative integer below 2^63, got "
                         << value << " (" << int64_t(value)
                         << " as a signed number)";
  return success();
}

void GPipeDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "gpipe/Dialect/GPipe/IR/GPipeAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "gpipe/Dialect/GPipe/IR/GPipeOps.cpp.inc"
      >();
}
