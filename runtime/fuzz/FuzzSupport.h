//===- FuzzSupport.h - What the runtime's fuzz targets share ----*- C++ -*-===//

#ifndef GPIPE_RUNTIME_FUZZ_FUZZSUPPORT_H
#define GPIPE_RUNTIME_FUZZ_FUZZSUPPORT_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace gpipe::fuzz {

/// Writes the bytes to /tmp/gpipe-fuzz-`name`-PID (one per process, so that
/// parallel fuzzing jobs do not share it); the path. The readers under test
/// take paths.
inline std::string writeTempFile(const std::string &name, const uint8_t *data,
                                 size_t size) {
  std::string path =
      "/tmp/gpipe-fuzz-" + name + "-" + std::to_string(::getpid());
  if (std::FILE *file = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, file);
    std::fclose(file);
  }
  return path;
}

} // namespace gpipe::fuzz

#endif // GPIPE_RUNTIME_FUZZ_FUZZSUPPORT_H
