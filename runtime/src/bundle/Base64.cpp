//===- Base64.cpp - The base64 of a bundle's generated code ---------------===//

#include "gpipe/runtime/bundle/Base64.h"

#include <cstdint>

using namespace gpipe::runtime;

static const char kAlphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string gpipe::runtime::encodeBase64(std::string_view bytes) {
  std::string text;
  text.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t left = bytes.size() - i;
    uint32_t group = uint32_t(uint8_t(bytes[i])) << 16;
    if (left > 1)
      group |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    if (left > 2)
      group |= uint8_t(bytes[i + 2]);
    text += kAlphabet[(group >> 18) & 63];
    text += kAlphabet[(group >> 12) & 63];
    text += left > 1 ? kAlphabet[(group >> 6) & 63] : '=';
    text += left > 2 ? kAlphabet[group & 63] : '=';
  }
  return text;
}

/// The 6 bits `c` stands for, or -1.
static int sextet(char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  return c == '+' ? 62 : c == '/' ? 63 : -1;
}

bool gpipe::runtime::decodeBase64(std::string_view text, std::string &bytes,
                                  std::string &error) {
  bytes.clear();
  if (text.size() % 4 != 0) {
    error = "expected a multiple of 4 characters (padded with '='), found " +
            std::to_string(text.size());
    return false;
  }
  // Up to two '=' end the text; nothing follows them.
  size_t padding = 0;
  while (padding < 2 && padding < text.size() &&
         text[text.size() - 1 - padding] == '=')
    ++padding;
  bytes.reserve(text.size() / 4 * 3);
  const size_t data = text.size() - padding;
  uint32_t group = 0;
  for (size_t i = 0; i < data; ++i) {
    int bits = sextet(text[i]);
    if (bits < 0) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      error = "unexpected character " +
              (c >= 0x20 && c < 0x7f ? "'" + std::string(1, char(c)) + "'"
                                     : "byte " + std::to_string(c)) +
              " at offset " + std::to_string(i);
      return false;
    }
    group = group << 6 | uint32_t(bits);
    if (i % 4 == 3) {
      bytes += char(group >> 16);
      bytes += char(group >> 8);
      bytes += char(group);
      group = 0;
    }
  }
  if (padding > 0) {
    // The last group's 2 or 3 characters carry 1 or 2 bytes.
    const size_t chars = 4 - padding;
    group <<= 6 * padding;
    bytes += char(group >> 16);
    if (chars == 3)
      bytes += char(group >> 8);
  }
  return true;
}
