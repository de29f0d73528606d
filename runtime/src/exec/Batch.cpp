//===- Batch.cpp - A batch against the model's inputs; host tensors -------===//

#include "gpipe/runtime/exec/Batch.h"

#include "verify/ValidationText.h"

#include <algorithm>

using namespace gpipe::runtime;
using namespace gpipe::runtime::detail;

std::string gpipe::runtime::checkBatch(
    const Bundle &bundle, const Batch &batch, int64_t rows,
    const std::function<bool(const std::string &)> &used) {
  for (const ModelInputSpec &spec : bundle.inputs) {
    std::vector<int64_t> shape = spec.shape;
    shape[0] = rows;
    auto it = batch.find(spec.name);
    if (it == batch.end() && used && !used(spec.name))
      continue; // another process reads it
    if (it == batch.end())
      return "missing model input '" + spec.name + "' (expected " +
             typeName(spec.type) + " " + shapeString(shape) + ")";
    const HostTensor &tensor = it->second;
    if (tensor.type != spec.type)
      return "model input '" + spec.name + "': expected " +
             typeName(spec.type) + " elements, got " + typeName(tensor.type);
    if (tensor.shape != shape)
      return "model input '" + spec.name + "': expected shape " +
             shapeString(shape) + ", got " + shapeString(tensor.shape);
    size_t size =
        spec.type == ElementType::F32 ? tensor.f32.size() : tensor.i32.size();
    if (int64_t(size) != product(shape))
      return "model input '" + spec.name + "': shape " + shapeString(shape) +
             " needs " + std::to_string(product(shape)) + " elements, got " +
             std::to_string(size);
  }
  for (const auto &entry : batch) {
    const std::string &name = entry.first;
    bool known = std::any_of(
        bundle.inputs.begin(), bundle.inputs.end(),
        [&](const ModelInputSpec &spec) { return spec.name == name; });
    if (!known) {
      std::string names;
      for (const ModelInputSpec &spec : bundle.inputs)
        names += (names.empty() ? "'" : ", '") + spec.name + "'";
      return "unexpected model input '" + name + "' (the model reads " + names +
             ")";
    }
  }
  return {};
}

HostTensor HostTensor::floats(std::vector<int64_t> shape,
                              std::vector<float> data) {
  HostTensor tensor;
  tensor.type = ElementType::F32;
  tensor.shape = std::move(shape);
  tensor.f32 = std::move(data);
  return tensor;
}

HostTensor HostTensor::ints(std::vector<int64_t> shape,
                            std::vector<int32_t> data) {
  HostTensor tensor;
  tensor.type = ElementType::I32;
  tensor.shape = std::move(shape);
  tensor.i32 = std::move(data);
  return tensor;
}

int64_t HostTensor::numElements() const { return product(shape); }
