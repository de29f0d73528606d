//===- LayerSequence.cpp - A model seen as a sequence of layers -----------===//

#include "gpipe/Analysis/LayerSequence.h"
#include "gpipe/Analysis/CostModel.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace gpipe;

uint64_t gpipe::layerParamBytes(LayerOp layer) {
  uint64_t bytes = 0;
  layer.walk([&](ParamOp param) { bytes += tensorBytes(param.getType()); });
  return bytes;
}

FailureOr<LayerSequence> gpipe::buildLayerSequence(ModelOp model) {
  LayerSequence sequence;
  Block &body = model.getBody().front();
  llvm::DenseMap<Operation *, unsigned> position;
  for (LayerOp layer : body.getOps<LayerOp>()) {
    CostAttr cost = getCost(layer);
    if (!cost)
      return layer.emitOpError()
             << "has no cost; run gpipe-estimate-cost or write one";
    position[layer] = sequence.layers.size();
    sequence.layers.push_back(layer);
    sequence.costs.push_back(LayerCost{layer.getName().str(), cost.getFlops(),
                                       cost.getParamBytes(),
                                       cost.getActivationBytes()});
  }

  // A layer result used up to layer `last` crosses every cut in
  // (producer, last]; accumulate with a difference array.
  unsigned numLayers = sequence.layers.size();
  std::vector<int64_t> delta(numLayers + 2, 0);
  sequence.joined.assign(numLayers + 1, "");
  for (auto [index, layer] : llvm::enumerate(sequence.layers)) {
    for (Value result : layer.getResults()) {
      unsigned last = index;
      for (Operation *user : result.getUsers()) {
        Operation *owner = body.findAncestorOpInBlock(*user);
        auto it = position.find(owner);
        if (it != position.end())
          last = std::max(last, it->second);
      }
      if (last == index)
        continue;
      // Stages exchange floats only (what has a gradient to send back).
      auto type = cast<RankedTensorType>(result.getType());
      if (!isa<FloatType>(type.getElementType())) {
        std::string why;
        llvm::raw_string_ostream os(why);
        os << "layer '" << layer.getName() << "' result #"
           << cast<OpResult>(result).getResultNumber() << " " << type
           << " is read by layer '" << sequence.layers[last].getName() << "'";
        for (unsigned cut = index + 1; cut <= last; ++cut)
          if (sequence.joined[cut].empty())
            sequence.joined[cut] = why;
      }
      int64_t bytes = tensorBytes(result.getType());
      delta[index + 1] += bytes;
      delta[last + 1] -= bytes;
    }
  }
  sequence.cutBytes.assign(numLayers + 1, 0);
  int64_t running = 0;
  for (unsigned cut = 0; cut <= numLayers; ++cut) {
    running += delta[cut];
    sequence.cutBytes[cut] = running;
  }
  return sequence;
}
