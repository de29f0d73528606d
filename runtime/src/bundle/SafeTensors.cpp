//===- SafeTensors.cpp - f32 tensors in the safetensors format ------------===//

#include "gpipe/runtime/bundle/SafeTensors.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cstring>

using namespace gpipe::runtime;
using Json = nlohmann::json;

namespace {

constexpr const char *kCrcPrefix = "crc32/";

std::string crcOf(const std::vector<float> &data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed large tensors in pieces.
  const auto *bytes = reinterpret_cast<const Bytef *>(data.data());
  size_t left = data.size() * sizeof(float);
  while (left > 0) {
    uInt piece = uInt(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, bytes, piece);
    bytes += piece;
    left -= piece;
  }
  char text[16];
  std::snprintf(text, sizeof text, "%08lx", crc & 0xffffffffUL);
  return text;
}

Status invalid(const std::string &source, const std::string &what) {
  return Status(StatusCode::InvalidArgument,
                "'" + source + "': not a valid safetensors file: " + what);
}

} // namespace

std::string gpipe::runtime::encodeSafeTensors(
    const std::vector<NamedTensor> &tensors,
    const std::map<std::string, std::string> &metadata) {
  Json header = Json::object();
  Json meta = Json::object();
  for (const auto &[key, value] : metadata)
    meta[key] = value;
  uint64_t offset = 0;
  for (const NamedTensor &tensor : tensors) {
    uint64_t bytes = tensor.data.size() * sizeof(float);
    header[tensor.name] = {{"dtype", "F32"},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + bytes}}};
    meta[kCrcPrefix + tensor.name] = crcOf(tensor.data);
    offset += bytes;
  }
  header["__metadata__"] = meta;
  std::string text = header.dump();
  // The data starts 8-byte aligned, as the format recommends.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t length = text.size();
  for (int i = 0; i < 8; ++i)
    out[i] = char((length >> (8 * i)) & 0xff);
  out += text;
  for (const NamedTensor &tensor : tensors)
    out.append(reinterpret_cast<const char *>(tensor.data.data()),
               tensor.data.size() * sizeof(float));
  return out;
}

StatusOr<std::vector<NamedTensor>> gpipe::runtime::decodeSafeTensors(
    std::string_view bytes, const std::string &source,
    std::map<std::string, std::string> *metadata) {
  if (bytes.size() < 8)
    return invalid(source, "expected an 8-byte header length, found " +
                               std::to_string(bytes.size()) + " bytes");
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  if (length > bytes.size() - 8)
    return invalid(source, "the header claims " + std::to_string(length) +
                               " bytes, the file has " +
                               std::to_string(bytes.size() - 8) + " after it");
  Json header = Json::parse(bytes.substr(8, length), nullptr,
                            /*allow_exceptions=*/false);
  if (!header.is_object())
    return invalid(source, "the header is not a JSON object");
  const std::string_view data = bytes.substr(8 + length);
  std::map<std::string, std::string> meta;
  if (header.contains("__metadata__")) {
    const Json &m = header["__metadata__"];
    if (!m.is_object())
      return invalid(source, "__metadata__ is not an object");
    for (const auto &[key, value] : m.items()) {
      if (!value.is_string())
        return invalid(source, "__metadata__ '" + key + "' is not a string");
      meta[key] = value.get<std::string>();
    }
  }
  std::vector<NamedTensor> tensors;
  for (const auto &[name, entry] : header.items()) {
    if (name == "__metadata__")
      continue;
    if (!entry.is_object() || !entry.contains("dtype") ||
        !entry.contains("shape") || !entry.contains("data_offsets"))
      return invalid(source, "tensor '" + name +
                                 "' lacks dtype, shape or data_offsets");
    if (entry["dtype"] != "F32")
      return invalid(source, "tensor '" + name + "' is " +
                                 entry["dtype"].dump() + ", expected \"F32\"");
    const Json &offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 ||
        !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      return invalid(source,
                     "tensor '" + name + "': data_offsets must be two offsets");
    uint64_t begin = offsets[0].get<uint64_t>();
    uint64_t end = offsets[1].get<uint64_t>();
    if (begin > end || end > data.size())
      return invalid(source, "tensor '" + name + "' spans bytes " +
                                 std::to_string(begin) + " to " +
                                 std::to_string(end) + " of " +
                                 std::to_string(data.size()));
    NamedTensor tensor;
    tensor.name = name;
    uint64_t elements = 1;
    if (!entry["shape"].is_array())
      return invalid(source, "tensor '" + name + "': shape is not an array");
    for (const Json &dim : entry["shape"]) {
      if (!dim.is_number_unsigned() || dim.get<uint64_t>() > (1ull << 40))
        return invalid(source, "tensor '" + name + "' has a bad dimension " +
                                   dim.dump());
      tensor.shape.push_back(dim.get<int64_t>());
      if (__builtin_mul_overflow(elements, dim.get<uint64_t>(), &elements))
        return invalid(source, "tensor '" + name + "' is too large");
    }
    if (elements * sizeof(float) != end - begin)
      return invalid(source, "tensor '" + name + "' has " +
                                 std::to_string(elements) + " elements but " +
                                 std::to_string(end - begin) + " bytes");
    tensor.data.resize(elements);
    std::memcpy(tensor.data.data(), data.data() + begin, end - begin);
    // Files written by other tools (pretrained weights) carry no CRCs.
    auto crc = meta.find(kCrcPrefix + name);
    if (crc != meta.end() && crc->second != crcOf(tensor.data))
      return Status(StatusCode::InvalidArgument,
                    "'" + source + "': tensor '" + name +
                        "' fails its checksum (stored " + crc->second +
                        ", computed " + crcOf(tensor.data) +
                        "): the file is corrupted");
    tensors.push_back(std::move(tensor));
  }
  if (metadata) {
    metadata->clear();
    for (const auto &[key, value] : meta)
      if (key.rfind(kCrcPrefix, 0) != 0)
        (*metadata)[key] = value;
  }
  return tensors;
}
