//===- OnnxFixtures.h - Reading the ONNX importer's test fixtures -*- C++ -*-===//
//
// The files scripts/onnx/make-fixtures.sh and make-model-fixtures.sh write
// beside each .onnx model: serialized TensorProtos of its input, its output
// and its labels, decoded here independently of the importer.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TEST_INTEGRATION_ONNXFIXTURES_H
#define GPIPE_TEST_INTEGRATION_ONNXFIXTURES_H

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gpipe::testing::onnx_fixtures {

inline std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

inline std::string fixture(const std::string &name) {
  return std::string(GPIPE_ONNX_FIXTURES_DIR) + "/" + name;
}

struct Floats {
  std::vector<int64_t> dims;
  std::vector<float> values;
};

/// A float TensorProto's values, from raw_data or float_data.
inline Floats decode(const onnx::TensorProto &tensor) {
  Floats out;
  out.dims.assign(tensor.dims().begin(), tensor.dims().end());
  if (!tensor.raw_data().empty()) {
    out.values.resize(tensor.raw_data().size() / 4);
    std::memcpy(out.values.data(), tensor.raw_data().data(),
                out.values.size() * 4);
  } else {
    out.values.assign(tensor.float_data().begin(), tensor.float_data().end());
  }
  return out;
}

inline onnx::TensorProto readTensorProto(const std::string &path) {
  onnx::TensorProto tensor;
  EXPECT_TRUE(tensor.ParseFromString(readFile(path))) << path;
  return tensor;
}

inline Floats readTensorFile(const std::string &path) {
  return decode(readTensorProto(path));
}

/// An int64 TensorProto's values (token ids), as gpipe's i32.
inline std::vector<int32_t> decodeIds(const onnx::TensorProto &tensor) {
  std::vector<int32_t> ids;
  if (!tensor.raw_data().empty()) {
    for (size_t i = 0; i + 8 <= tensor.raw_data().size(); i += 8) {
      int64_t v;
      std::memcpy(&v, tensor.raw_data().data() + i, 8);
      ids.push_back(int32_t(v));
    }
  } else {
    for (int64_t v : tensor.int64_data())
      ids.push_back(int32_t(v));
  }
  return ids;
}

/// NCHW values as NHWC.
inline std::vector<float> channelsLast(const Floats &t) {
  const int64_t n = t.dims[0], c = t.dims[1], h = t.dims[2], w = t.dims[3];
  std::vector<float> out(t.values.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          out[size_t(((b * h + y) * w + x) * c + ch)] =
              t.values[size_t(((b * c + ch) * h + y) * w + x)];
  return out;
}

} // namespace gpipe::testing::onnx_fixtures

#endif // GPIPE_TEST_INTEGRATION_ONNXFIXTURES_H
