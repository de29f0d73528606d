//===- Dataset.h - IDX image datasets (MNIST, Fashion-MNIST) ----*- C++ -*-===//
//
// Loads an image classification data set stored as a pair of IDX files (the
// format of MNIST and Fashion-MNIST): an idx3 file of unsigned-byte images
// (magic 0x00000803, then big-endian count, height, width) and an idx1 file of
// unsigned-byte labels (magic 0x00000801, then big-endian count). Either file
// may be gzip-compressed; compression is detected from the gzip magic bytes
// 1f 8b, not from the file name.
//
// Only regular files are read, of at most kMaxIdxFileBytes, and a gzip file
// must decompress to at most as many: a FIFO, a device such as /dev/zero, a
// directory, a larger file or a gzip bomb is refused before it fills memory.
//
// Errors are returned as a Status (Io for a file that cannot be read, is not
// a regular file or is over the limit, InvalidArgument for one whose content
// is malformed), never printed.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DATASET_H
#define GPIPE_RUNTIME_DATASET_H

#include "gpipe/runtime/base/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gpipe::runtime {

/// The largest IDX file, raw or decompressed, 2 GiB: about 45 times
/// Fashion-MNIST's training images (47 MB); as the floats ImageDataset holds,
/// its pixels take 8 GiB. Reading or inflating one takes at most twice the
/// limit for a moment (the bytes are copied once, the buffer grows by
/// doubling), so a gzip bomb is refused within 4 GiB of memory.
constexpr uint64_t kMaxIdxFileBytes = uint64_t(2) << 30;

/// A set of single-channel images with one integer class label each.
struct ImageDataset {
  int64_t count = 0;
  int64_t height = 0;
  int64_t width = 0;
  /// count * height * width pixels, row-major per image, each byte / 255 so
  /// that values lie in [0, 1]; empty when loaded without them (a process
  /// whose devices do not read the images).
  std::vector<float> images;
  /// count labels, as stored in the file.
  std::vector<int32_t> labels;
};

/// The result of a load: the data, or an error message naming the file.
/// Loads an idx3 images file and the matching idx1 labels file; each may be
/// raw or gzip-compressed. Fails unless both are well formed and hold the same
/// number of entries.
/// `keepPixels` false checks the images file but keeps none of its pixels.
StatusOr<ImageDataset> loadIdxDataset(const std::string &imagesPath,
                                      const std::string &labelsPath,
                                      bool keepPixels = true);

/// Loads the Fashion-MNIST (or MNIST) training set (`train`) or test set from
/// `directory`, which holds the files under their distribution names
/// (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
/// t10k-labels-idx1-ubyte), each with a ".gz" suffix or uncompressed; the ".gz"
/// name is preferred when both exist.
StatusOr<ImageDataset> loadFashionMnist(const std::string &directory,
                                        bool train, bool keepPixels = true);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_DATASET_H
