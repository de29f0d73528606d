//===- FuzzIdx.cpp - libFuzzer target: the IDX image and label reader -----===//
//
// The input is split in two at its first byte's fraction: an images file and
// a labels file, each possibly gzip-compressed. loadIdxDataset must load them
// or refuse them with an error naming the file.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "gpipe/runtime/data/Dataset.h"

#include <cstdint>
#include <cstdio>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  size_t split = 1 + (size - 1) * data[0] / 255;
  std::string images =
      gpipe::fuzz::writeTempFile("idx-images", data + 1, split - 1);
  std::string labels =
      gpipe::fuzz::writeTempFile("idx-labels", data + split, size - split);
  (void)gpipe::runtime::loadIdxDataset(images, labels);
  std::remove(images.c_str());
  std::remove(labels.c_str());
  return 0;
}
