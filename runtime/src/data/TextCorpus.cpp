//===- TextCorpus.cpp - Character-level text corpora ----------------------===//
//
// Each corpus file is read whole, cut into lines, and the lines are gathered
// into documents at the "%" separator lines; a document never spans two
// files. Characters are mapped to ids as they are appended to the stream of
// the document's set.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/data/TextCorpus.h"
#include "gpipe/runtime/base/FileRead.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

using namespace gpipe::runtime;
namespace fs = std::filesystem;

namespace {

std::string quoted(const std::string &path) { return "'" + path + "'"; }

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The corpus files of `path`: the path itself if it is not a directory
/// (readRegularFile refuses it if it is not a regular file either), else its
/// regular files but *.dat and *.u8, sorted by name. A FIFO or a device in a
/// directory is skipped as a subdirectory is: it holds no corpus text.
std::string listCorpusFiles(const std::string &path,
                            std::vector<std::string> &files) {
  std::error_code error;
  fs::file_status status = fs::status(path, error);
  if (error || !fs::exists(status))
    return "cannot open corpus " + quoted(path) + ": " +
           (error ? error.message() : std::strerror(ENOENT));
  if (!fs::is_directory(status)) {
    files.push_back(path);
    return "";
  }
  fs::directory_iterator it(path, error);
  if (error)
    return "cannot list corpus directory " + quoted(path) + ": " +
           error.message();
  for (const fs::directory_entry &entry : it) {
    std::string name = entry.path().filename().string();
    if (endsWith(name, ".dat") || endsWith(name, ".u8"))
      continue;
    std::error_code ignored;
    if (fs::is_regular_file(entry.path(), ignored))
      files.push_back(entry.path().string());
  }
  if (files.empty())
    return "no corpus files in " + quoted(path) +
           ": expected plain-text files other than *.dat and *.u8";
  std::sort(files.begin(), files.end());
  return "";
}

/// Whether the mapped document holds anything but spaces and newlines.
bool hasText(const std::vector<int32_t> &document) {
  return std::any_of(document.begin(), document.end(), [](int32_t id) {
    return id != textCharId('\n') && id != textCharId(' ');
  });
}

} // namespace

int32_t gpipe::runtime::textCharId(unsigned char c) {
  if (c == '\n')
    return 0;
  if (c == '\t')
    c = ' ';
  if (c >= 32 && c <= 126)
    return int32_t(c) - 31;
  return -1;
}

char gpipe::runtime::textIdChar(int32_t id) {
  return id == 0 ? '\n' : char(id + 31);
}

StatusOr<TextCorpus>
gpipe::runtime::loadTextCorpus(const std::string &path,
                               const TextCorpusOptions &options) {
  if (options.validationEvery < 2)
    return Status(StatusCode::InvalidArgument,
                  "validation split every " +
                      std::to_string(options.validationEvery) +
                      " documents: expected at least 2");
  TextCorpus corpus;
  std::string error = listCorpusFiles(path, corpus.files);
  if (!error.empty())
    return Status(StatusCode::Io, error);

  int64_t documents = 0;
  std::vector<int32_t> document;
  auto endDocument = [&] {
    if (hasText(document)) {
      bool validation =
          documents % options.validationEvery == options.validationEvery - 1;
      std::vector<int32_t> &stream =
          validation ? corpus.validation : corpus.train;
      stream.insert(stream.end(), document.begin(), document.end());
      stream.push_back(textCharId('%'));
      stream.push_back(textCharId('\n'));
      ++(validation ? corpus.validationDocuments : corpus.trainDocuments);
      ++documents;
    }
    document.clear();
  };

  for (const std::string &file : corpus.files) {
    StatusOr<std::string> text =
        readRegularFile(file, kMaxCorpusFileBytes, "a corpus file");
    if (!text.ok())
      return text.status();
    const std::string &bytes = *text;
    size_t begin = 0;
    while (begin < bytes.size()) {
      size_t end = bytes.find('\n', begin);
      if (end == std::string::npos)
        end = bytes.size();
      size_t length = end - begin;
      if (length > 0 && bytes[begin + length - 1] == '\r')
        --length;
      if (length == 1 && bytes[begin] == '%') {
        endDocument();
      } else {
        for (size_t i = begin; i < end; ++i) {
          int32_t id = textCharId(static_cast<unsigned char>(bytes[i]));
          if (id >= 0)
            document.push_back(id);
          else
            ++corpus.droppedBytes;
        }
        // A last line without its newline still ends with one.
        document.push_back(textCharId('\n'));
      }
      begin = end + 1;
    }
    endDocument();
  }

  if (corpus.validation.empty())
    return Status(
        StatusCode::InvalidArgument,
        "corpus " + quoted(path) + " has " + std::to_string(documents) +
            " non-empty documents: expected at least " +
            std::to_string(options.validationEvery) + ", as every " +
            std::to_string(options.validationEvery) + "th goes to validation");
  return corpus;
}

std::vector<int64_t>
gpipe::runtime::characterCounts(const std::vector<int32_t> &text) {
  std::vector<int64_t> counts(kTextVocabSize, 0);
  for (int32_t id : text)
    ++counts[id];
  return counts;
}

double gpipe::runtime::unigramEntropyNats(const std::vector<int32_t> &text) {
  if (text.empty())
    return 0.0;
  double total = double(text.size()), entropy = 0.0;
  for (int64_t count : characterCounts(text))
    if (count > 0) {
      double p = double(count) / total;
      entropy -= p * std::log(p);
    }
  return entropy;
}

std::string gpipe::runtime::checkTextFitsWindow(const std::vector<int32_t> &text,
                                                int64_t seq,
                                                const std::string &what) {
  if (seq <= 0)
    return "window length " + std::to_string(seq) + ": expected at least 1";
  if (int64_t(text.size()) < seq + 1)
    return what + " has " + std::to_string(text.size()) +
           " characters: expected at least " + std::to_string(seq + 1) +
           " for one window of " + std::to_string(seq) +
           " characters and its next-character targets";
  return "";
}

TextWindows gpipe::runtime::gatherWindows(const std::vector<int32_t> &text,
                                          int64_t seq,
                                          const std::vector<int64_t> &starts) {
  TextWindows out;
  out.rows = int64_t(starts.size());
  out.seq = seq;
  out.ids.resize(out.rows * seq);
  out.positions.resize(out.rows * seq);
  out.targets.resize(out.rows * seq);
  for (int64_t r = 0; r < out.rows; ++r) {
    const int32_t *from = text.data() + starts[r];
    for (int64_t t = 0; t < seq; ++t) {
      out.ids[r * seq + t] = from[t];
      out.positions[r * seq + t] = int32_t(t);
      out.targets[r * seq + t] = from[t + 1];
    }
  }
  return out;
}

int64_t gpipe::runtime::sequentialWindowCount(const std::vector<int32_t> &text,
                                              int64_t seq) {
  if (seq <= 0 || text.empty())
    return 0;
  return (int64_t(text.size()) - 1) / seq;
}

TextWindows
gpipe::runtime::sequentialWindows(const std::vector<int32_t> &text,
                                  int64_t seq,
                                  const std::vector<int64_t> &windows) {
  std::vector<int64_t> starts(windows.size());
  for (size_t i = 0; i < windows.size(); ++i)
    starts[i] = windows[i] * seq;
  return gatherWindows(text, seq, starts);
}

std::vector<int64_t> gpipe::runtime::evenlySpacedWindows(int64_t total,
                                                         int64_t wanted) {
  if (wanted <= 0 || wanted > total)
    wanted = total;
  std::vector<int64_t> windows(std::max<int64_t>(wanted, 0));
  for (int64_t i = 0; i < wanted; ++i)
    windows[i] = i * total / wanted;
  return windows;
}

TextSampler::TextSampler(const std::vector<int32_t> &text, int64_t seq,
                         uint64_t seed)
    : text(text), seq(seq), generator(seed) {}

std::unique_ptr<TextSampler>
TextSampler::create(const std::vector<int32_t> &text, int64_t seq,
                    uint64_t seed, std::string &error) {
  error = checkTextFitsWindow(text, seq, "the training text");
  if (!error.empty())
    return nullptr;
  return std::unique_ptr<TextSampler>(new TextSampler(text, seq, seed));
}

TextWindows TextSampler::next(int64_t rows) {
  // Offsets 0 .. size - seq - 1: each window keeps its last target.
  uint64_t offsets = uint64_t(text.size()) - uint64_t(seq);
  std::vector<int64_t> starts(std::max<int64_t>(rows, 0));
  for (int64_t &start : starts)
    start = int64_t(generator() % offsets);
  return gatherWindows(text, seq, starts);
}
