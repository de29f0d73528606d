//===- Base64.h - The base64 of a bundle's generated code -------*- C++ -*-===//
//
// A bundle is JSON text, so the native code it carries (Bundle::code) is
// written as base64: RFC 4648's standard alphabet, padded with '=', no line
// breaks (what LLVM's encodeBase64 and Python's b64encode write). The
// decoder is strict: anything else is damage, and no byte of a damaged
// artifact is ever loaded.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_BUNDLE_BASE64_H
#define GPIPE_RUNTIME_BUNDLE_BASE64_H

#include <string>
#include <string_view>

namespace gpipe::runtime {

std::string encodeBase64(std::string_view bytes);

/// The bytes `text` encodes; false and `error` (what is wrong, and where)
/// when it is not padded standard base64.
bool decodeBase64(std::string_view text, std::string &bytes,
                  std::string &error);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_BUNDLE_BASE64_H
