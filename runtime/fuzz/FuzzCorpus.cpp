//===- FuzzCorpus.cpp - libFuzzer target: the text corpus reader ----------===//
//
// Any bytes as a corpus file (fortune format: documents separated by "%"
// lines): loadTextCorpus must load it or refuse it with an error.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/TextCorpus.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path =
      "/tmp/gpipe-fuzz-corpus-" + std::to_string(::getpid()) + ".txt";
  if (std::FILE *file = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, file);
    std::fclose(file);
  }
  gpipe::runtime::TextCorpusOptions options;
  options.validationEvery = 2;
  (void)gpipe::runtime::loadTextCorpus(path, options);
  std::remove(path.c_str());
  return 0;
}
