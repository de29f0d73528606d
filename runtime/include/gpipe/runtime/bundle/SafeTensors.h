//===- SafeTensors.h - f32 tensors in the safetensors format ----*- C++ -*-===//
//
// The checkpoint's tensor file and the pretrained weights file: the
// safetensors layout (an 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and data_offsets, then the raw data),
// readable by the safetensors libraries of other frameworks. Only F32
// tensors. Each tensor's CRC-32 is stored in the header's __metadata__ under
// "crc32/<name>" and verified on decoding, so a flipped byte is reported with
// the tensor it hit; a tensor without one (a file from another tool) is
// decoded unchecked.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SAFETENSORS_H
#define GPIPE_RUNTIME_SAFETENSORS_H

#include "gpipe/runtime/base/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpipe::runtime {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data; ///< row-major, product(shape) values
};

/// The file's bytes: `tensors` in order, with `metadata` (string values)
/// and the CRCs in __metadata__.
std::string
encodeSafeTensors(const std::vector<NamedTensor> &tensors,
                  const std::map<std::string, std::string> &metadata);

/// Parses `bytes`; every offset, size, dtype and CRC present is checked, and
/// errors name `source` and the tensor. `metadata` (may be null) gets
/// __metadata__ without the CRCs.
StatusOr<std::vector<NamedTensor>>
decodeSafeTensors(std::string_view bytes, const std::string &source,
                  std::map<std::string, std::string> *metadata = nullptr);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_SAFETENSORS_H
