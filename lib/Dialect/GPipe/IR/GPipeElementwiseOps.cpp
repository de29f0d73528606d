//===- GPipeElementwiseOps.cpp - The general element-wise ops' checks -----===//

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

#include <cmath>
#include <cstdio>
#include <string>

using namespace mlir;
using namespace gpipe;

/// `v` as the shortest text that reads back the same (%g).
static std::string shortText(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

LogicalResult ClipOp::verify() {
  double low = getMin().convertToDouble(), high = getMax().convertToDouble();
  if (!std::isfinite(low) || !std::isfinite(high))
    return emitOpError() << "expects finite bounds, got min " << shortText(low)
                         << " and max " << shortText(high);
  if (low > high)
    return emitOpError() << "expects min <= max, got min " << shortText(low)
                         << " and max " << shortText(high);
  return success();
}
