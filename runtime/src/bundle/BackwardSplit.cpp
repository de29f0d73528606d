//===- BackwardSplit.cpp - A stage's backward as B, then W ----------------===//

#include "gpipe/runtime/bundle/BackwardSplit.h"

#include <vector>

using namespace gpipe::runtime;

bool gpipe::runtime::separatesWeightGradients(OpKind kind) {
  return kind == OpKind::DenseGrad || kind == OpKind::LayerNormGrad ||
         kind == OpKind::Conv2dGrad;
}

void gpipe::runtime::splitBackward(StageProgram &stage) {
  const std::vector<Op> &ops = stage.backward;
  // Walk back from the input gradients: an op is in B when B needs one of
  // its results (for a separable op, its input gradient, result 0).
  std::vector<char> needed(stage.values.size(), 0), inB(ops.size(), 0);
  for (int id : stage.inputGrads)
    needed[id] = 1;
  for (size_t k = ops.size(); k-- > 0;) {
    const Op &op = ops[k];
    bool wanted = false;
    for (size_t r = 0; r < op.results.size(); ++r) {
      int id = op.results[r];
      bool counts = !separatesWeightGradients(op.kind) || r == 0;
      wanted |= counts && id >= 0 && needed[id];
    }
    if (!wanted)
      continue;
    inB[k] = 1;
    for (int id : op.operands)
      needed[id] = 1;
  }
  std::vector<Op> input, weights;
  for (size_t k = 0; k < ops.size(); ++k) {
    const Op &op = ops[k];
    if (!inB[k]) {
      weights.push_back(op);
      continue;
    }
    if (!separatesWeightGradients(op.kind)) {
      input.push_back(op);
      continue;
    }
    Op dx = op, params = op;
    for (size_t r = 1; r < dx.results.size(); ++r)
      dx.results[r] = -1;
    params.results[0] = -1;
    input.push_back(dx);
    weights.push_back(params);
  }
  stage.weightsFrom = input.size();
  input.insert(input.end(), weights.begin(), weights.end());
  stage.backward = std::move(input);
}
