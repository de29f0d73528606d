//===- DatasetTest.cpp - Tests of the IDX dataset loader ------------------===//
//
// Loads the real Fashion-MNIST (the expected labels and pixel sums were read
// independently with Python's gzip module), round-trips small files written
// here, and checks the exact message of every malformed-file error, both for
// raw and for gzip-compressed files.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/data/Dataset.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

using namespace gpipe::runtime;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

void appendBigEndian32(Bytes &bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8)
    bytes.push_back(static_cast<uint8_t>(value >> shift));
}

Bytes idxImages(uint32_t count, uint32_t height, uint32_t width,
                const Bytes &pixels, uint32_t magic = 0x00000803) {
  Bytes bytes;
  appendBigEndian32(bytes, magic);
  appendBigEndian32(bytes, count);
  appendBigEndian32(bytes, height);
  appendBigEndian32(bytes, width);
  bytes.insert(bytes.end(), pixels.begin(), pixels.end());
  return bytes;
}

Bytes idxLabels(uint32_t count, const Bytes &labels,
                uint32_t magic = 0x00000801) {
  Bytes bytes;
  appendBigEndian32(bytes, magic);
  appendBigEndian32(bytes, count);
  bytes.insert(bytes.end(), labels.begin(), labels.end());
  return bytes;
}

/// One gzip member holding `data`.
Bytes gzipBytes(const Bytes &data) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED,
                         16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  Bytes out(deflateBound(&stream, data.size()) + 32);
  stream.next_in = const_cast<Bytef *>(data.data());
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

// Two 2x3 images and their labels, every pixel distinct.
const Bytes kPixels = {0, 255, 1, 128, 64, 7, 200, 3, 9, 10, 11, 254};
const Bytes kLabels = {3, 7};

class DatasetFiles : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern =
        (fs::temp_directory_path() / "gpipe-dataset-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }

  /// Writes `bytes` to `name` in the temporary directory; returns its path.
  std::string write(const std::string &name, const Bytes &bytes) {
    std::string path = (dir / name).string();
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char *>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(file.good()) << path;
    return path;
  }

  /// Writes the images and labels, gzip-compressed if `gzip`, and loads them.
  StatusOr<ImageDataset> load(const Bytes &images, const Bytes &labels,
                              bool gzip) {
    imagesPath = write("images", gzip ? gzipBytes(images) : images);
    labelsPath = write("labels", gzip ? gzipBytes(labels) : labels);
    return loadIdxDataset(imagesPath, labelsPath);
  }

  fs::path dir;
  std::string imagesPath, labelsPath;
};

void expectSmallDataset(const StatusOr<ImageDataset> &load) {
  ASSERT_TRUE(load.ok()) << load.status().message();
  const ImageDataset &data = (*load);
  EXPECT_EQ(data.count, 2);
  EXPECT_EQ(data.height, 2);
  EXPECT_EQ(data.width, 3);
  ASSERT_EQ(data.images.size(), kPixels.size());
  for (size_t i = 0; i < kPixels.size(); ++i)
    EXPECT_EQ(data.images[i], static_cast<float>(kPixels[i]) / 255.0f) << i;
  EXPECT_EQ(data.labels, (std::vector<int32_t>{3, 7}));
}

void checkFashionMnist(const StatusOr<ImageDataset> &load, int64_t count,
                       const std::vector<int32_t> &firstLabels,
                       int64_t firstImageByteSum) {
  ASSERT_TRUE(load.ok()) << load.status().message();
  const ImageDataset &data = (*load);
  EXPECT_EQ(data.count, count);
  EXPECT_EQ(data.height, 28);
  EXPECT_EQ(data.width, 28);
  ASSERT_EQ(data.images.size(), static_cast<size_t>(count * 28 * 28));
  ASSERT_EQ(data.labels.size(), static_cast<size_t>(count));
  EXPECT_EQ(std::vector<int32_t>(data.labels.begin(),
                                 data.labels.begin() + firstLabels.size()),
            firstLabels);
  std::set<int32_t> classes;
  for (int32_t label : data.labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    classes.insert(label);
  }
  EXPECT_EQ(classes.size(), 10u);
  auto [low, high] =
      std::minmax_element(data.images.begin(), data.images.end());
  EXPECT_EQ(*low, 0.0f);
  EXPECT_EQ(*high, 1.0f);
  double firstSum = 0;
  for (int i = 0; i < 28 * 28; ++i)
    firstSum += data.images[i] * 255.0;
  EXPECT_NEAR(firstSum, static_cast<double>(firstImageByteSum), 1e-2);
}

} // namespace

TEST(FashionMnist, LoadsTrainingSet) {
  checkFashionMnist(loadFashionMnist(GPIPE_FASHION_MNIST_DIR, /*train=*/true),
                    60000, {9, 0, 0, 3, 0, 2, 7, 2, 5, 5, 0, 9}, 76247);
}

TEST(FashionMnist, LoadsTestSet) {
  checkFashionMnist(loadFashionMnist(GPIPE_FASHION_MNIST_DIR, /*train=*/false),
                    10000, {9, 2, 1, 1, 6, 1, 4, 6, 5, 7, 4, 5}, 33456);
}

TEST_F(DatasetFiles, RawRoundTrip) {
  expectSmallDataset(load(idxImages(2, 2, 3, kPixels), idxLabels(2, kLabels),
                          /*gzip=*/false));
}

TEST_F(DatasetFiles, GzipRoundTrip) {
  expectSmallDataset(load(idxImages(2, 2, 3, kPixels), idxLabels(2, kLabels),
                          /*gzip=*/true));
}

TEST_F(DatasetFiles, ConcatenatedGzipMembers) {
  Bytes images = idxImages(2, 2, 3, kPixels);
  Bytes first(images.begin(), images.begin() + 10);
  Bytes second(images.begin() + 10, images.end());
  Bytes joined = gzipBytes(first);
  Bytes tail = gzipBytes(second);
  joined.insert(joined.end(), tail.begin(), tail.end());
  expectSmallDataset(loadIdxDataset(write("images", joined),
                                    write("labels", idxLabels(2, kLabels))));
}

TEST_F(DatasetFiles, FashionMnistFallsBackToUncompressedNames) {
  write("train-images-idx3-ubyte", idxImages(2, 2, 3, kPixels));
  write("train-labels-idx1-ubyte.gz", gzipBytes(idxLabels(2, kLabels)));
  expectSmallDataset(loadFashionMnist(dir.string(), /*train=*/true));
}

TEST_F(DatasetFiles, FashionMnistMissingDirectory) {
  StatusOr<ImageDataset> load =
      loadFashionMnist((dir / "none").string(), false);
  EXPECT_EQ(load.status().code(), StatusCode::Io);
  EXPECT_EQ(load.status().message(),
            "cannot open '" +
                (dir / "none" / "t10k-images-idx3-ubyte.gz").string() +
                "': No such file or directory");
}

TEST_F(DatasetFiles, MissingImages) {
  std::string labels = write("labels", idxLabels(2, kLabels));
  std::string missing = (dir / "missing").string();
  EXPECT_EQ(loadIdxDataset(missing, labels).status().message(),
            "cannot open '" + missing + "': No such file or directory");
}

TEST_F(DatasetFiles, MissingLabels) {
  std::string images = write("images", idxImages(2, 2, 3, kPixels));
  std::string missing = (dir / "missing").string();
  EXPECT_EQ(loadIdxDataset(images, missing).status().message(),
            "cannot open '" + missing + "': No such file or directory");
}

TEST_F(DatasetFiles, DirectoryInsteadOfFile) {
  std::string labels = write("labels", idxLabels(2, kLabels));
  EXPECT_EQ(loadIdxDataset(dir.string(), labels).status().message(),
            "cannot read '" + dir.string() +
                "': expected a regular file, found a directory");
}

class DatasetErrors : public DatasetFiles,
                      public ::testing::WithParamInterface<bool> {
protected:
  bool gzip() const { return GetParam(); }
  /// How the messages count the bytes of a (decompressed) file.
  std::string bytesFound(size_t n) const {
    return std::to_string(n) +
           (gzip() ? " bytes after decompression" : " bytes");
  }
};

TEST_P(DatasetErrors, ImagesBadMagic) {
  StatusOr<ImageDataset> result = load(idxImages(2, 2, 3, kPixels, 0x00000801),
                                       idxLabels(2, kLabels), gzip());
  EXPECT_EQ(result.status().code(), StatusCode::InvalidArgument);
  EXPECT_EQ(result.status().message(),
            "'" + imagesPath +
                "' is not an idx images file: expected magic "
                "0x00000803, found 0x00000801");
}

TEST_P(DatasetErrors, LabelsBadMagic) {
  StatusOr<ImageDataset> result = load(
      idxImages(2, 2, 3, kPixels), idxLabels(2, kLabels, 0x00000803), gzip());
  EXPECT_EQ(result.status().message(),
            "'" + labelsPath +
                "' is not an idx labels file: expected magic "
                "0x00000801, found 0x00000803");
}

TEST_P(DatasetErrors, TruncatedHeader) {
  Bytes images = idxImages(2, 2, 3, {});
  images.resize(6);
  StatusOr<ImageDataset> result = load(images, idxLabels(2, kLabels), gzip());
  EXPECT_EQ(result.status().message(),
            "'" + imagesPath +
                "' is truncated: expected 16 header bytes, "
                "found " +
                bytesFound(6));
}

TEST_P(DatasetErrors, EmptyFile) {
  StatusOr<ImageDataset> result = load({}, idxLabels(2, kLabels), gzip());
  EXPECT_EQ(result.status().message(),
            "'" + imagesPath +
                "' is truncated: expected 16 header bytes, "
                "found " +
                bytesFound(0));
}

TEST_P(DatasetErrors, TruncatedImages) {
  Bytes pixels(kPixels.begin(), kPixels.end() - 1);
  StatusOr<ImageDataset> result =
      load(idxImages(2, 2, 3, pixels), idxLabels(2, kLabels), gzip());
  EXPECT_EQ(result.status().message(),
            "'" + imagesPath +
                "' is truncated: expected 28 bytes (16-byte "
                "header and 2 images of 2x3), found " +
                bytesFound(27));
}

TEST_P(DatasetErrors, TrailingImageData) {
  Bytes pixels = kPixels;
  pixels.push_back(0);
  StatusOr<ImageDataset> result =
      load(idxImages(2, 2, 3, pixels), idxLabels(2, kLabels), gzip());
  EXPECT_EQ(result.status().message(),
            "'" + imagesPath +
                "' has trailing data: expected 28 bytes "
                "(16-byte header and 2 images of 2x3), found " +
                bytesFound(29));
}

TEST_P(DatasetErrors, TruncatedLabels) {
  StatusOr<ImageDataset> result =
      load(idxImages(2, 2, 3, kPixels), idxLabels(2, {3}), gzip());
  EXPECT_EQ(result.status().message(),
            "'" + labelsPath +
                "' is truncated: expected 10 bytes (8-byte "
                "header and 2 labels), found " +
                bytesFound(9));
}

TEST_P(DatasetErrors, CountMismatch) {
  StatusOr<ImageDataset> result =
      load(idxImages(2, 2, 3, kPixels), idxLabels(3, {3, 7, 1}), gzip());
  EXPECT_EQ(result.status().message(),
            "expected as many labels as images, found 2 images "
            "in '" +
                imagesPath + "' and 3 labels in '" + labelsPath + "'");
}

TEST_P(DatasetErrors, ZeroImages) {
  StatusOr<ImageDataset> result =
      load(idxImages(0, 2, 3, {}), idxLabels(0, {}), gzip());
  EXPECT_EQ(result.status().message(),
            "'" + imagesPath + "' declares 0 images: expected at least one");
}

TEST_P(DatasetErrors, ZeroWidth) {
  StatusOr<ImageDataset> result =
      load(idxImages(2, 2, 0, {}), idxLabels(2, kLabels), gzip());
  EXPECT_EQ(result.status().message(),
            "'" + imagesPath +
                "' declares images of 2x0 pixels: expected "
                "each dimension in [1, 65536]");
}

TEST_P(DatasetErrors, AbsurdHeight) {
  StatusOr<ImageDataset> result = load(idxImages(2, 4000000000u, 28, kPixels),
                                       idxLabels(2, kLabels), gzip());
  EXPECT_EQ(result.status().message(),
            "'" + imagesPath +
                "' declares images of 4000000000x28 pixels: "
                "expected each dimension in [1, 65536]");
}

TEST_P(DatasetErrors, HugeCountIsTruncated) {
  StatusOr<ImageDataset> result =
      load(idxImages(4294967295u, 65536, 65536, kPixels), idxLabels(2, kLabels),
           gzip());
  EXPECT_EQ(result.status().message(),
            "'" + imagesPath +
                "' is truncated: expected 18446744069414584336 bytes (16-byte "
                "header and 4294967295 images of 65536x65536), found " +
                bytesFound(28));
}

INSTANTIATE_TEST_SUITE_P(RawAndGzip, DatasetErrors, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return info.param ? "Gzip" : "Raw";
                         });

TEST_F(DatasetFiles, NonGzipGarbage) {
  std::string text = "this is not an idx file at all";
  Bytes garbage(text.begin(), text.end());
  StatusOr<ImageDataset> result =
      load(garbage, idxLabels(2, kLabels), /*gzip=*/false);
  EXPECT_EQ(result.status().message(),
            "'" + imagesPath +
                "' is not an idx images file: expected magic "
                "0x00000803, found 0x74686973");
}

TEST_F(DatasetFiles, GzipUnknownMethod) {
  Bytes images = gzipBytes(idxImages(2, 2, 3, kPixels));
  images[2] = 7; // the compression method: only 8 (deflate) exists
  std::string path = write("images", images);
  EXPECT_EQ(loadIdxDataset(path, write("labels", idxLabels(2, kLabels)))
                .status()
                .message(),
            "corrupt gzip data in '" + path + "': unknown compression method");
}

TEST_F(DatasetFiles, GzipBadChecksum) {
  Bytes images = gzipBytes(idxImages(2, 2, 3, kPixels));
  images[images.size() - 8] ^= 0xff; // the CRC-32 of the trailer
  std::string path = write("images", images);
  EXPECT_EQ(loadIdxDataset(path, write("labels", idxLabels(2, kLabels)))
                .status()
                .message(),
            "corrupt gzip data in '" + path + "': incorrect data check");
}

TEST_F(DatasetFiles, GzipTruncated) {
  Bytes images = gzipBytes(idxImages(2, 2, 3, kPixels));
  images.resize(images.size() - 5);
  std::string path = write("images", images);
  EXPECT_EQ(loadIdxDataset(path, write("labels", idxLabels(2, kLabels)))
                .status()
                .message(),
            "corrupt gzip data in '" + path +
                "': expected more compressed data, found end of file after " +
                std::to_string(images.size()) + " bytes");
}

TEST_F(DatasetFiles, GzipTrailingGarbage) {
  Bytes images = gzipBytes(idxImages(2, 2, 3, kPixels));
  images.push_back(0);
  images.push_back(0);
  images.push_back(0);
  std::string path = write("images", images);
  EXPECT_EQ(loadIdxDataset(path, write("labels", idxLabels(2, kLabels)))
                .status()
                .message(),
            "corrupt gzip data in '" + path +
                "': expected end of file or another gzip member after the "
                "compressed stream, found 3 more bytes");
}
