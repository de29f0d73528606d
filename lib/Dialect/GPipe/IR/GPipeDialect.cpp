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
