//===- SyntheticBatch.cpp - A bundle's inputs without a data set ----------===//

#include "gpipe/runtime/data/SyntheticBatch.h"

#include <algorithm>

using namespace gpipe::runtime;

std::map<std::string, int64_t>
gpipe::runtime::inputValueLimits(const Bundle &bundle) {
  std::map<std::string, int64_t> limits;
  for (const StageProgram &program : bundle.stages)
    for (const Op &op : program.forward) {
      int operand;
      int64_t limit;
      if (op.kind == OpKind::Embedding) {
        operand = op.operands[0];
        limit = program.values[op.operands[1]].shape[0];
      } else if (op.kind == OpKind::SoftmaxCrossEntropy) {
        operand = op.operands[1];
        limit = program.values[op.operands[0]].shape.back();
      } else {
        continue;
      }
      for (const StageInput &input : program.inputs)
        if (input.value == operand && !input.fromChannel) {
          auto [at, fresh] = limits.emplace(input.inputName, limit);
          if (!fresh)
            at->second = std::min(at->second, limit);
        }
    }
  return limits;
}

Batch gpipe::runtime::syntheticBatch(const Bundle &bundle, uint64_t seed) {
  uint64_t state = seed * 2862933555777941757ull + 3;
  auto next = [&] { // a 64-bit LCG's high bits: fixed across platforms
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 33);
  };
  std::map<std::string, int64_t> limits = inputValueLimits(bundle);
  Batch batch;
  for (const ModelInputSpec &input : bundle.inputs) {
    int64_t n = 1;
    for (int64_t d : input.shape)
      n *= d;
    if (input.type == ElementType::F32) {
      std::vector<float> values(static_cast<size_t>(n));
      for (float &v : values)
        v = float(next() % 1000001) / 1000000.0f;
      batch[input.name] = HostTensor::floats(input.shape, values);
      continue;
    }
    auto limit = limits.find(input.name);
    std::vector<int32_t> values(static_cast<size_t>(n), 0);
    if (limit != limits.end() && limit->second > 0)
      for (int32_t &v : values)
        v = int32_t(next() % uint32_t(limit->second));
    batch[input.name] = HostTensor::ints(input.shape, values);
  }
  return batch;
}
