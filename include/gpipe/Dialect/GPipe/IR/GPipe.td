//===- GPipe.td - gpipe dialect umbrella --------------------*- tablegen -*-===//

#ifndef GPIPE_TD
#define GPIPE_TD

include "gpipe/Dialect/GPipe/IR/GPipeDialect.td"
include "gpipe/Dialect/GPipe/IR/GPipeAttrs.td"
include "gpipe/Dialect/GPipe/IR/GPipeOps.td"
include "gpipe/Dialect/GPipe/IR/GPipeBackwardOps.td"
include "gpipe/Dialect/GPipe/IR/GPipeElementwiseOps.td"

#endif // GPIPE_TD
