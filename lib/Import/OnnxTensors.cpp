//===- OnnxTensors.cpp - An ONNX tensor's values --------------------------===//
//
// Initializers and Constant nodes' tensors as the importer holds them:
// floats, or integers (int32, int64 and bool, the last for attention masks),
// from raw_data or the typed fields, with every size checked.
//
//===----------------------------------------------------------------------===//

#include "OnnxGraph.h"

#include <cstring>

using namespace gpipe;
using namespace gpipe::onnx_import;

/// More elements than any tensor the importer reads (16 GiB of floats).
std::string gpipe::onnx_import::readTensor(const onnx::TensorProto &tensor,
                                           Constant &out) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
    return "its data is in an external file, which the importer does not "
           "read";
  out.dims.assign(tensor.dims().begin(), tensor.dims().end());
  int64_t count = 1;
  for (int64_t dim : out.dims)
    if (dim < 0 || __builtin_mul_overflow(count, dim, &count) ||
        count > kMaxElements)
      return "its shape " + shapeText(out.dims) + " is " +
             (dim < 0 ? "negative" : "too large");
  const std::string &raw = tensor.raw_data();
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    out.isFloat = true;
    if (!raw.empty()) {
      if (int64_t(raw.size()) != count * 4)
        return "its raw data has " + std::to_string(raw.size()) +
               " bytes for " + std::to_string(count) + " floats";
      out.floats.resize(size_t(count));
      std::memcpy(out.floats.data(), raw.data(), raw.size());
    } else {
      out.floats.assign(tensor.float_data().begin(), tensor.float_data().end());
    }
    if (int64_t(out.floats.size()) != count)
      return "it has " + std::to_string(out.floats.size()) + " values for " +
             std::to_string(count) + " elements";
    return {};
  case onnx::TensorProto::BOOL: // attention masks: 0 or 1 per byte
    out.isFloat = false;
    if (!raw.empty()) {
      if (int64_t(raw.size()) != count)
        return "its raw data has " + std::to_string(raw.size()) +
               " bytes for " + std::to_string(count) + " booleans";
      for (char byte : raw)
        out.ints.push_back(byte != 0);
    } else {
      for (int32_t v : tensor.int32_data())
        out.ints.push_back(v != 0);
    }
    if (int64_t(out.ints.size()) != count)
      return "it has " + std::to_string(out.ints.size()) + " values for " +
             std::to_string(count) + " elements";
    return {};
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::INT32: {
    out.isFloat = false;
    const bool wide = tensor.data_type() == onnx::TensorProto::INT64;
    if (!raw.empty()) {
      const size_t size = wide ? 8 : 4;
      if (raw.size() != size_t(count) * size)
        return "its raw data has " + std::to_string(raw.size()) +
               " bytes for " + std::to_string(count) + " integers";
      for (int64_t i = 0; i < count; ++i) {
        int64_t v = 0;
        if (wide) {
          std::memcpy(&v, raw.data() + i * 8, 8);
        } else {
          int32_t narrow;
          std::memcpy(&narrow, raw.data() + i * 4, 4);
          v = narrow;
        }
        out.ints.push_back(v);
      }
    } else if (wide) {
      out.ints.assign(tensor.int64_data().begin(), tensor.int64_data().end());
    } else {
      out.ints.assign(tensor.int32_data().begin(), tensor.int32_data().end());
    }
    if (int64_t(out.ints.size()) != count)
      return "it has " + std::to_string(out.ints.size()) + " values for " +
             std::to_string(count) + " elements";
    return {};
  }
  default:
    return "its element type (" +
           onnx::TensorProto::DataType_Name(
               onnx::TensorProto::DataType(tensor.data_type())) +
           ") is not float, int32, int64 or bool";
  }
}
