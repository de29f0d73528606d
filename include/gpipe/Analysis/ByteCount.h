//===- ByteCount.h - Byte counts as users write and read them ---*- C++ -*-===//

#ifndef GPIPE_ANALYSIS_BYTECOUNT_H
#define GPIPE_ANALYSIS_BYTECOUNT_H

#include <cstdint>
#include <optional>
#include <string>

namespace gpipe {

/// Parses "1048576", "512KiB", "64MiB", "2GiB", "1TiB" or decimal "KB", "MB",
/// "GB", "TB" (a space before the unit is allowed). Empty text is no count
/// (std::nullopt in `count`). Returns false on anything else or on overflow.
bool parseByteCount(const std::string &text, std::optional<uint64_t> &count);

/// "512 B", "1.5 KiB", "64.0 MiB", ...
std::string formatBytes(double bytes);

} // namespace gpipe

#endif // GPIPE_ANALYSIS_BYTECOUNT_H
