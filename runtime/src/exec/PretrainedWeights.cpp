//===- PretrainedWeights.cpp - Values of pretrained parameters ------------===//

#include "exec/PretrainedWeights.h"

#include "gpipe/runtime/base/FileRead.h"

using namespace gpipe::runtime;
using namespace gpipe::runtime::device::detail;

namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

} // namespace

std::string PretrainedWeights::load(const std::string &forParam) {
  std::string reason;
  StatusOr<std::string> bytes =
      readRegularFile(path, kMaxWeightsFileBytes, "a weights file", &reason);
  if (!bytes.ok())
    return "cannot read the weights file '" + path +
           "' of pretrained parameter '" + forParam + "': " + reason;
  StatusOr<std::vector<NamedTensor>> decoded = decodeSafeTensors(*bytes, path);
  if (!decoded.ok())
    return decoded.status().message();
  for (NamedTensor &tensor : *decoded) {
    std::string name = tensor.name;
    tensors[name] = std::move(tensor);
  }
  loaded = true;
  return {};
}

std::string PretrainedWeights::copy(const ParamSpec &spec,
                                    std::vector<float> &out) {
  std::string error = take(spec, out);
  if (error.empty())
    tensors[spec.name] = NamedTensor{spec.name, spec.shape, out};
  return error;
}

std::string PretrainedWeights::take(const ParamSpec &spec,
                                    std::vector<float> &out) {
  if (!loaded) {
    std::string error = load(spec.name);
    if (!error.empty())
      return error;
  }
  auto it = tensors.find(spec.name);
  if (it == tensors.end())
    return "the weights file '" + path + "' has no tensor '" + spec.name +
           "' (pretrained parameter of shape " + shapeText(spec.shape) + ")";
  if (it->second.shape != spec.shape)
    return "the weights file '" + path + "' gives tensor '" + spec.name +
           "' the shape " + shapeText(it->second.shape) +
           ", but the model's parameter has " + shapeText(spec.shape);
  // Parameter names are unique: each tensor is taken at most once.
  out = std::move(it->second.data);
  tensors.erase(it);
  return {};
}
