//===- BundleChecksum.h - The checksum that seals a bundle file -*- C++ -*-===//
//
// A bundle file (format version 2) ends with the member
//   "checksum": "crc32:<8 lowercase hex digits>"
// as the last member of its top-level object. The digits are the CRC-32
// (IEEE 802.3, as zlib's crc32) of every byte of the file before the opening
// quote of the "checksum" key. Any flipped byte or truncation before it
// changes the sum; one inside it breaks the member's syntax. Header-only and
// dependency-free: the compiler's bundle emission seals with the same code
// the runtime verifies with.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_BUNDLECHECKSUM_H
#define GPIPE_RUNTIME_BUNDLECHECKSUM_H

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpipe::runtime {

/// The version of the bundle format this code writes and reads.
inline constexpr int kBundleFormatVersion = 2;

inline uint32_t crc32(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes)
    crc = table[(crc ^ byte) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

/// "crc32:" and the sum of `bytes` in 8 lowercase hex digits.
inline std::string checksumText(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  uint32_t sum = crc32(bytes);
  std::string text = "crc32:";
  for (int shift = 28; shift >= 0; shift -= 4)
    text += digits[(sum >> shift) & 0xF];
  return text;
}

/// Appends the checksum member to `json`, the text of one JSON object with
/// no checksum yet (pretty or compact; it must end in its closing brace,
/// whitespace aside). Returns the sealed text, ending in "}\n".
inline std::string sealBundleText(std::string_view json) {
  size_t close = json.find_last_of('}');
  if (close == std::string_view::npos)
    return std::string(json);
  size_t last = json.find_last_not_of(" \t\r\n", close == 0 ? 0 : close - 1);
  bool empty = last == std::string_view::npos || json[last] == '{';
  std::string sealed(json.substr(0, last == std::string_view::npos ? 0
                                                                   : last + 1));
  sealed += empty ? "\n  " : ",\n  ";
  std::string sum = checksumText(sealed);
  sealed += "\"checksum\": \"" + sum + "\"\n}\n";
  return sealed;
}

/// The bytes a sealed `text` sums: everything before the last `"checksum"`.
/// npos if there is no such key.
inline size_t checksummedLength(std::string_view text) {
  return text.rfind("\"checksum\"");
}

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_BUNDLECHECKSUM_H
