//===- FuzzCorpus.cpp - libFuzzer target: the text corpus reader ----------===//
//
// Any bytes as a corpus file (fortune format: documents separated by "%"
// lines): loadTextCorpus must load it or refuse it with an error.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "gpipe/runtime/data/TextCorpus.h"

#include <cstdint>
#include <cstdio>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = gpipe::fuzz::writeTempFile("corpus", data, size);
  gpipe::runtime::TextCorpusOptions options;
  options.validationEvery = 2;
  (void)gpipe::runtime::loadTextCorpus(path, options);
  std::remove(path.c_str());
  return 0;
}
