//===- DeviceGating.cpp - The step's decision from the gradient sums ------===//
//
// The host's arithmetic (DeviceGradients.cpp) exactly: each parameter's
// parts added in order, the parameters in the bundle's order, in double.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/DeviceGating.h"

#include <cmath>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

StepGate gpipe::runtime::device::decideStep(const GateRequest &request) {
  StepGate gate;
  double total = 0;
  for (const double *parts : request.parts) {
    double sum = 0;
    for (int64_t r = 0; r < request.partsPerParameter; ++r)
      sum += parts[r];
    total += sum;
  }
  gate.sumOfSquares = total;
  gate.scale = clipScale(std::sqrt(total), request.clipGradNorm);
  if (request.checkFinite) {
    // Squares are never negative: the total is finite exactly when every
    // parameter's sum is.
    bool finite = std::isfinite(total);
    for (int64_t m = 0; m < request.numLosses; ++m)
      finite = finite && std::isfinite(request.losses[m]);
    gate.apply = finite ? 1 : 0;
  }
  return gate;
}
