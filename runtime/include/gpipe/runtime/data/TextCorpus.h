//===- TextCorpus.h - Character-level text corpora --------------*- C++ -*-===//
//
// Loads a plain-text corpus in the format of the Debian `fortunes` package
// (/usr/share/games/fortunes): documents separated by lines that hold just
// "%". A corpus is a directory or a single file. In a directory, the regular
// files (symbolic links to regular files included) are read in byte order of
// their names; subdirectories, other entries that are not regular files
// (FIFOs, devices, sockets: they hold no corpus text), the index files `*.dat`
// written by strfile and the `*.u8` links to the same text are skipped. A
// corpus path that is itself such a file (a FIFO, /dev/zero) is refused, as
// is a file of more than kMaxCorpusFileBytes, before it is read.
//
// Characters: a vocabulary of kTextVocabSize = 96 ids, '\n' -> 0 and the
// printable ASCII characters ' ' (32) .. '~' (126) -> 1 .. 95. A tab reads as
// a space and "\r\n" as "\n"; every other byte (control characters such as
// the backspaces of overstruck text, and every byte of a UTF-8 multi-byte
// character) is dropped and counted in TextCorpus::droppedBytes.
//
// Split: the documents, numbered in reading order across all files, go to
// the validation set when their number modulo `validationEvery` is
// `validationEvery` - 1 (every 10th document by default) and to the training
// set otherwise, so the split depends only on the corpus. Each set is one
// character stream: its documents in order, each followed by the line "%"
// (the corpus format restricted to that set). Empty documents are skipped.
//
// Windows: a window of `seq` characters starting at offset o of a stream
// gives ids[t] = stream[o + t], positions[t] = t and targets[t] =
// stream[o + t + 1] (the next character), so it needs seq + 1 characters.
// Training windows start at offsets drawn by a seeded generator; validation
// windows are the non-overlapping windows at offsets 0, seq, 2 seq, ...
//
// Errors are returned as messages, never printed or thrown.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TEXTCORPUS_H
#define GPIPE_RUNTIME_TEXTCORPUS_H

#include "gpipe/runtime/base/Status.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace gpipe::runtime {

/// The largest corpus file, 1 GiB: 400 times the fortunes corpus; its
/// characters take 4 GiB as the ids TextCorpus holds.
constexpr uint64_t kMaxCorpusFileBytes = uint64_t(1) << 30;

/// '\n' and the 95 printable ASCII characters.
constexpr int32_t kTextVocabSize = 96;

/// The id of byte `c`, or -1 for a byte that is dropped. A tab maps to the
/// id of ' '; '\r' is dropped (so "\r\n" reads as "\n").
int32_t textCharId(unsigned char c);
/// The character of an id in [0, kTextVocabSize).
char textIdChar(int32_t id);

struct TextCorpusOptions {
  /// Every this many documents, the last goes to validation; must be >= 2.
  int64_t validationEvery = 10;
};

/// A corpus as two character-id streams.
struct TextCorpus {
  /// The files read, in reading order.
  std::vector<std::string> files;
  int64_t trainDocuments = 0;
  int64_t validationDocuments = 0;
  /// Bytes outside the vocabulary, dropped.
  int64_t droppedBytes = 0;
  /// Character ids in [0, kTextVocabSize).
  std::vector<int32_t> train;
  std::vector<int32_t> validation;
};

/// The result of a load: the corpus, or an error message naming the path.
/// Loads the corpus at `path` (a directory or a file). Fails on a missing or
/// unreadable path, a directory without corpus files, a bad option, or a
/// corpus whose training or validation stream is empty.
StatusOr<TextCorpus> loadTextCorpus(const std::string &path,
                                    const TextCorpusOptions &options = {});

/// Occurrences of each id in `text`.
std::vector<int64_t> characterCounts(const std::vector<int32_t> &text);

/// The entropy -sum_c p(c) ln p(c) of the character frequencies of `text`,
/// in nats per character (divide by ln 2 for bits); 0 for empty text. It is
/// the cross-entropy of the best model that ignores context.
double unigramEntropyNats(const std::vector<int32_t> &text);

/// Windows of `seq` characters, row-major [rows, seq] each.
struct TextWindows {
  int64_t rows = 0;
  int64_t seq = 0;
  std::vector<int32_t> ids;
  std::vector<int32_t> positions;
  std::vector<int32_t> targets;
};

/// "" if `text` holds at least one window of `seq` characters (seq + 1
/// characters), else a message naming `what` ("the training text").
std::string checkTextFitsWindow(const std::vector<int32_t> &text, int64_t seq,
                                const std::string &what);

/// The windows of `seq` characters of `text` at the offsets `starts`; each
/// offset must be at most text.size() - seq - 1.
TextWindows gatherWindows(const std::vector<int32_t> &text, int64_t seq,
                          const std::vector<int64_t> &starts);

/// Number of non-overlapping windows (offsets 0, seq, 2 seq, ...) of `text`.
int64_t sequentialWindowCount(const std::vector<int32_t> &text, int64_t seq);

/// The non-overlapping windows of numbers `windows` (window w starts at
/// w * seq); each must be below sequentialWindowCount(text, seq).
TextWindows sequentialWindows(const std::vector<int32_t> &text, int64_t seq,
                              const std::vector<int64_t> &windows);

/// `wanted` window numbers spread evenly over [0, total): floor(i * total /
/// wanted) for i in [0, wanted); all of [0, total) when wanted is 0 or at
/// least total.
std::vector<int64_t> evenlySpacedWindows(int64_t total, int64_t wanted);

/// Draws training windows at uniformly random offsets. The offsets are
/// mt19937_64 outputs reduced modulo the number of offsets, so a seed gives
/// the same windows with every standard library. Not thread-safe.
class TextSampler {
public:
  /// Null and `error` set when `text` is shorter than one window or `seq` is
  /// not positive. `text` must outlive the sampler.
  static std::unique_ptr<TextSampler> create(const std::vector<int32_t> &text,
                                             int64_t seq, uint64_t seed,
                                             std::string &error);

  /// The next `rows` windows.
  TextWindows next(int64_t rows);

private:
  TextSampler(const std::vector<int32_t> &text, int64_t seq, uint64_t seed);
  const std::vector<int32_t> &text;
  int64_t seq;
  std::mt19937_64 generator;
};

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_TEXTCORPUS_H
