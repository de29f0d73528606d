//===- Dataset.cpp - IDX image datasets (MNIST, Fashion-MNIST) ------------===//
//
// Each file is read whole into memory (a regular file, at most
// kMaxIdxFileBytes), gunzipped in memory when it starts with the gzip magic
// (again to at most kMaxIdxFileBytes, so that a gzip bomb is refused before it
// fills memory), then validated: magic, dimensions and exact size. The
// in-memory route (rather than gzread) lets corrupt and truncated gzip data be
// told apart from a well-formed file with the wrong contents.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/data/Dataset.h"
#include "gpipe/runtime/base/FileRead.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

using namespace gpipe::runtime;

namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
constexpr size_t kImagesHeaderBytes = 16;
constexpr size_t kLabelsHeaderBytes = 8;
/// Larger images are surely a corrupt header; the bound also keeps the byte
/// count of count * height * width within 64 bits.
constexpr uint64_t kMaxImageDim = 65536;

std::string quoted(const std::string &path) { return "'" + path + "'"; }

bool isGzip(const std::string &bytes) {
  return bytes.size() >= 2 && uint8_t(bytes[0]) == 0x1f &&
         uint8_t(bytes[1]) == 0x8b;
}

/// Decompresses the gzip data `file` (one member or several concatenated, as
/// gzip itself accepts) into `out`; returns an error message.
std::string gunzip(const std::string &path, const std::string &file,
                   std::vector<uint8_t> &out) {
  const auto *in = reinterpret_cast<const uint8_t *>(file.data());
  const size_t inSize = file.size();
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK)
    return "cannot initialise zlib to decompress " + quoted(path);
  // The trailer's ISIZE (size mod 2^32 of the last member) is only a hint,
  // capped by deflate's best ratio so a corrupt trailer cannot force a huge
  // allocation.
  size_t hint = 1 << 16;
  if (inSize >= 18) {
    size_t n = inSize;
    uint64_t isize = uint64_t(in[n - 4]) | uint64_t(in[n - 3]) << 8 |
                     uint64_t(in[n - 2]) << 16 | uint64_t(in[n - 1]) << 24;
    hint = std::max<uint64_t>(
        hint, std::min<uint64_t>({isize, n * 1032, kMaxIdxFileBytes}));
  }
  out.assign(hint, 0);
  size_t produced = 0;
  stream.next_in = const_cast<Bytef *>(in);
  stream.avail_in = 0;
  size_t consumed = 0;
  std::string error;
  while (true) {
    if (stream.avail_in == 0 && consumed < inSize) {
      // avail_in is 32 bits: feed large inputs in pieces.
      size_t piece = std::min<size_t>(inSize - consumed, 1u << 30);
      stream.next_in = const_cast<Bytef *>(in + consumed);
      stream.avail_in = static_cast<uInt>(piece);
      consumed += piece;
    }
    // One byte past the limit tells a file of exactly the limit from a
    // larger one (a gzip bomb), which is refused before it fills memory.
    if (produced == out.size())
      out.resize(std::min<uint64_t>(out.size() * 2, kMaxIdxFileBytes + 1));
    size_t room = std::min<size_t>(out.size() - produced, 1u << 30);
    stream.next_out = out.data() + produced;
    stream.avail_out = static_cast<uInt>(room);
    int status = inflate(&stream, Z_NO_FLUSH);
    produced += room - stream.avail_out;
    if (produced > kMaxIdxFileBytes) {
      error = "cannot decompress " + quoted(path) +
              ": expected an IDX file of at most " +
              std::to_string(kMaxIdxFileBytes) +
              " bytes after decompression, found more";
      break;
    }
    if (status == Z_STREAM_END) {
      // next_in always points into `in`, whichever piece it is in.
      const uint8_t *next = stream.next_in;
      size_t left = inSize - static_cast<size_t>(next - in);
      if (left == 0)
        break;
      if (left >= 2 && next[0] == 0x1f && next[1] == 0x8b) {
        inflateReset(&stream);
        continue;
      }
      error = "corrupt gzip data in " + quoted(path) + ": expected end of " +
              "file or another gzip member after the compressed stream, " +
              "found " + std::to_string(left) + " more bytes";
      break;
    }
    if (status == Z_DATA_ERROR || status == Z_NEED_DICT) {
      error = "corrupt gzip data in " + quoted(path) + ": " +
              (stream.msg ? stream.msg : "invalid compressed data");
      break;
    }
    if (status == Z_MEM_ERROR) {
      error = "out of memory decompressing " + quoted(path);
      break;
    }
    if (status != Z_OK && status != Z_BUF_ERROR) {
      error = "cannot decompress " + quoted(path) + ": zlib error " +
              std::to_string(status);
      break;
    }
    // Z_BUF_ERROR with all input used: the stream stops before its end.
    if (status == Z_BUF_ERROR && stream.avail_in == 0 && consumed == inSize &&
        stream.avail_out != 0) {
      error = "corrupt gzip data in " + quoted(path) +
              ": expected more compressed data, found end of file after " +
              std::to_string(inSize) + " bytes";
      break;
    }
  }
  inflateEnd(&stream);
  out.resize(produced);
  return error;
}

uint32_t readBigEndian32(const uint8_t *p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 |
         uint32_t(p[3]);
}

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

/// Reads `path` (raw or gzip) and checks its magic and header length;
/// `what` names the expected content ("images", "labels") in messages.
std::string readIdx(const std::string &path, uint32_t magic, size_t headerBytes,
                    const char *what, std::vector<uint8_t> &bytes,
                    bool &compressed) {
  StatusOr<std::string> file =
      readRegularFile(path, kMaxIdxFileBytes, "an IDX file");
  if (!file.ok())
    return file.status().message();
  compressed = isGzip(*file);
  if (compressed) {
    if (std::string error = gunzip(path, *file, bytes); !error.empty())
      return error;
  } else {
    bytes.assign(file->begin(), file->end());
  }
  std::string found = std::to_string(bytes.size()) +
                      (compressed ? " bytes after decompression" : " bytes");
  if (bytes.size() < 4)
    return quoted(path) + " is truncated: expected " +
           std::to_string(headerBytes) + " header bytes, found " + found;
  uint32_t foundMagic = readBigEndian32(bytes.data());
  if (foundMagic != magic)
    return quoted(path) + " is not an idx " + what + " file: expected magic " +
           hex32(magic) + ", found " + hex32(foundMagic);
  if (bytes.size() < headerBytes)
    return quoted(path) + " is truncated: expected " +
           std::to_string(headerBytes) + " header bytes, found " + found;
  return "";
}

/// Checks that `bytes` holds exactly `expected` bytes; `contents` describes
/// them for the message.
std::string checkSize(const std::string &path,
                      const std::vector<uint8_t> &bytes, bool compressed,
                      uint64_t expected, const std::string &contents) {
  if (bytes.size() == expected)
    return "";
  std::string found = std::to_string(bytes.size()) +
                      (compressed ? " bytes after decompression" : " bytes");
  return quoted(path) +
         (bytes.size() < expected ? " is truncated" : " has trailing data") +
         ": expected " + std::to_string(expected) + " bytes (" + contents +
         "), found " + found;
}

} // namespace

/// A file that cannot be opened or read is an Io error; one whose content
/// is not what it should be, an invalid argument.
static Status dataError(const std::string &message) {
  return Status(message.rfind("cannot ", 0) == 0 ? StatusCode::Io
                                                 : StatusCode::InvalidArgument,
                message);
}

StatusOr<ImageDataset>
gpipe::runtime::loadIdxDataset(const std::string &imagesPath,
                               const std::string &labelsPath, bool keepPixels) {
  std::string error;
  std::vector<uint8_t> images;
  bool compressed = false;
  error = readIdx(imagesPath, kImagesMagic, kImagesHeaderBytes, "images",
                  images, compressed);
  if (!error.empty())
    return dataError(error);
  uint64_t count = readBigEndian32(images.data() + 4);
  uint64_t height = readBigEndian32(images.data() + 8);
  uint64_t width = readBigEndian32(images.data() + 12);
  std::string shape = std::to_string(height) + "x" + std::to_string(width);
  if (count == 0) {
    error = quoted(imagesPath) + " declares 0 images: expected at least one";
    return dataError(error);
  }
  if (height == 0 || width == 0 || height > kMaxImageDim ||
      width > kMaxImageDim) {
    error = quoted(imagesPath) + " declares images of " + shape +
            " pixels: expected each dimension in [1, " +
            std::to_string(kMaxImageDim) + "]";
    return dataError(error);
  }
  uint64_t pixels = count * height * width;
  error = checkSize(imagesPath, images, compressed, kImagesHeaderBytes + pixels,
                    std::to_string(kImagesHeaderBytes) + "-byte header and " +
                        std::to_string(count) + " images of " + shape);
  if (!error.empty())
    return dataError(error);

  std::vector<uint8_t> labels;
  error = readIdx(labelsPath, kLabelsMagic, kLabelsHeaderBytes, "labels",
                  labels, compressed);
  if (!error.empty())
    return dataError(error);
  uint64_t labelCount = readBigEndian32(labels.data() + 4);
  error =
      checkSize(labelsPath, labels, compressed, kLabelsHeaderBytes + labelCount,
                std::to_string(kLabelsHeaderBytes) + "-byte header and " +
                    std::to_string(labelCount) + " labels");
  if (!error.empty())
    return dataError(error);
  if (labelCount != count) {
    error = "expected as many labels as images, found " +
            std::to_string(count) + " images in " + quoted(imagesPath) +
            " and " + std::to_string(labelCount) + " labels in " +
            quoted(labelsPath);
    return dataError(error);
  }

  ImageDataset data;
  data.count = static_cast<int64_t>(count);
  data.height = static_cast<int64_t>(height);
  data.width = static_cast<int64_t>(width);
  if (keepPixels) {
    data.images.resize(pixels);
    const uint8_t *pixel = images.data() + kImagesHeaderBytes;
    for (uint64_t i = 0; i < pixels; ++i)
      data.images[i] = static_cast<float>(pixel[i]) / 255.0f;
  }
  data.labels.assign(labels.begin() + kLabelsHeaderBytes, labels.end());
  return data;
}

StatusOr<ImageDataset>
gpipe::runtime::loadFashionMnist(const std::string &directory, bool train,
                                 bool keepPixels) {
  namespace fs = std::filesystem;
  const char *prefix = train ? "train" : "t10k";
  auto pick = [&](const char *suffix) {
    fs::path base = fs::path(directory) / (std::string(prefix) + suffix);
    fs::path gz = base;
    gz += ".gz";
    std::error_code ignored;
    // Without either file, name the .gz one (the distributed form) in the
    // error.
    if (!fs::exists(gz, ignored) && fs::exists(base, ignored))
      return base.string();
    return gz.string();
  };
  return loadIdxDataset(pick("-images-idx3-ubyte"), pick("-labels-idx1-ubyte"),
                        keepPixels);
}
