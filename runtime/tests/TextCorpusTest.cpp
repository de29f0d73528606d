//===- TextCorpusTest.cpp - Tests of the character-level text corpus ------===//
//
// Small corpora written to a temporary directory check the character
// mapping, the reading order, the document split, the windows and the
// sampler; every error has its exact message checked. The real Debian
// fortunes corpus is loaded too: its file, document and character counts
// and its unigram entropy were computed independently with a short Python
// script that applies the rules of TextCorpus.h.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/data/TextCorpus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace gpipe::runtime;
namespace fs = std::filesystem;

namespace {

std::vector<int32_t> encode(const std::string &text) {
  std::vector<int32_t> ids;
  for (char c : text)
    ids.push_back(textCharId(static_cast<unsigned char>(c)));
  return ids;
}

std::string decode(const std::vector<int32_t> &ids) {
  std::string text;
  for (int32_t id : ids)
    text += textIdChar(id);
  return text;
}

/// Twelve one-line documents "doc0\n" .. "doc11\n" with their separators.
std::string documents(int first, int last) {
  std::string text;
  for (int d = first; d <= last; ++d)
    text += "doc" + std::to_string(d) + "\n%\n";
  return text;
}

class TextCorpusFiles : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern =
        (fs::temp_directory_path() / "gpipe-text-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }

  /// Writes `bytes` to `name` in the temporary directory; returns its path.
  std::string write(const std::string &name, const std::string &bytes) {
    std::string path = (dir / name).string();
    std::ofstream file(path, std::ios::binary);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(file.good()) << path;
    return path;
  }

  fs::path dir;
};

} // namespace

// '\n' is 0, ' ' .. '~' are 1 .. 95, a tab is a space, everything else
// (carriage return, backspace, bell, DEL, the bytes of UTF-8) is dropped.
TEST(TextCorpus, CharacterIds) {
  EXPECT_EQ(textCharId('\n'), 0);
  EXPECT_EQ(textCharId(' '), 1);
  EXPECT_EQ(textCharId('!'), 2);
  EXPECT_EQ(textCharId('A'), 34);
  EXPECT_EQ(textCharId('a'), 66);
  EXPECT_EQ(textCharId('~'), 95);
  EXPECT_EQ(textCharId('\t'), 1);
  for (int c : {0, 7, 8, 13, 27, 31, 127, 128, 0xc3, 0xa9, 0xff})
    EXPECT_EQ(textCharId(static_cast<unsigned char>(c)), -1) << c;
  for (int32_t id = 0; id < kTextVocabSize; ++id)
    EXPECT_EQ(textCharId(static_cast<unsigned char>(textIdChar(id))), id);
}

// Files are read in name order, *.dat, *.u8 and subdirectories skipped;
// every 10th document (numbers 9, 19, ...) goes to validation, the others to
// training, each followed by the "%" line.
TEST_F(TextCorpusFiles, DirectorySplitsEveryTenthDocument) {
  write("b", documents(7, 11));
  write("a", documents(0, 6));
  write("a.dat", "index\n%\nnot text\n");
  write("a.u8", documents(100, 120));
  fs::create_directory(dir / "sub");
  write("sub/c", documents(200, 220));
  StatusOr<TextCorpus> load = loadTextCorpus(dir.string());
  ASSERT_TRUE(load.ok()) << load.status().message();
  const TextCorpus &corpus = (*load);
  EXPECT_EQ(corpus.files, (std::vector<std::string>{(dir / "a").string(),
                                                    (dir / "b").string()}));
  EXPECT_EQ(corpus.trainDocuments, 11);
  EXPECT_EQ(corpus.validationDocuments, 1);
  EXPECT_EQ(corpus.droppedBytes, 0);
  EXPECT_EQ(decode(corpus.train), documents(0, 8) + documents(10, 11));
  EXPECT_EQ(decode(corpus.validation), "doc9\n%\n");
}

// The split period is an option: every 3rd document (2, 5, 8, 11) goes to
// validation; a single file is a corpus too.
TEST_F(TextCorpusFiles, SingleFileWithSplitPeriod) {
  std::string path = write("one", documents(0, 11));
  TextCorpusOptions options;
  options.validationEvery = 3;
  StatusOr<TextCorpus> load = loadTextCorpus(path, options);
  ASSERT_TRUE(load.ok()) << load.status().message();
  EXPECT_EQ((*load).files, std::vector<std::string>{path});
  EXPECT_EQ(decode((*load).validation),
            "doc2\n%\ndoc5\n%\ndoc8\n%\ndoc11\n%\n");
  EXPECT_EQ((*load).trainDocuments, 8);
}

// Tabs read as spaces, "\r\n" as "\n"; backspaces and UTF-8 bytes are
// dropped and counted; a document without its final newline gets one;
// empty and blank documents are skipped (and not numbered); a "%" inside a
// line or followed by more text is text.
TEST_F(TextCorpusFiles, CharacterMappingAndDocuments) {
  std::string text = "a\tb\r\n"
                     "%\r\n"
                     "%\n"
                     "  \n\n"
                     "%\n"
                     "_\bX caf\xc3\xa9 5%\n"
                     "%%\n"
                     "%\n"
                     "last";
  std::string path = write("mixed", text);
  TextCorpusOptions options;
  options.validationEvery = 2;
  StatusOr<TextCorpus> load = loadTextCorpus(path, options);
  ASSERT_TRUE(load.ok()) << load.status().message();
  EXPECT_EQ(decode((*load).train), "a b\n%\nlast\n%\n");
  EXPECT_EQ(decode((*load).validation), "_X caf 5%\n%%\n%\n");
  EXPECT_EQ((*load).trainDocuments, 2);
  EXPECT_EQ((*load).validationDocuments, 1);
  // The \r of the first line (the separator's is not text), the \b and the
  // two bytes of U+00E9.
  EXPECT_EQ((*load).droppedBytes, 4);
}

// By hand: "aaab" has p(a) = 3/4, p(b) = 1/4, entropy
// -(3/4 ln 3/4 + 1/4 ln 1/4) = 0.5623351446188083 nats; four equally frequent
// characters have ln 4 nats (2 bits); one character has 0.
TEST(TextCorpus, UnigramEntropy) {
  EXPECT_NEAR(unigramEntropyNats(encode("aaab")), 0.5623351446188083, 1e-12);
  EXPECT_NEAR(unigramEntropyNats(encode("ab\n~ab\n~")), std::log(4.0), 1e-12);
  EXPECT_EQ(unigramEntropyNats(encode("zzzz")), 0.0);
  EXPECT_EQ(unigramEntropyNats({}), 0.0);
  std::vector<int64_t> counts = characterCounts(encode("aaab"));
  ASSERT_EQ(counts.size(), size_t(kTextVocabSize));
  EXPECT_EQ(counts[textCharId('a')], 3);
  EXPECT_EQ(counts[textCharId('b')], 1);
  EXPECT_EQ(counts[textCharId('c')], 0);
}

// Targets are the ids shifted by one character; positions count 0 .. seq-1.
TEST(TextCorpus, WindowsTargetTheNextCharacter) {
  std::vector<int32_t> text = encode("hello, world\n");
  TextWindows w = gatherWindows(text, 4, {0, 7, 8});
  EXPECT_EQ(w.rows, 3);
  EXPECT_EQ(w.seq, 4);
  EXPECT_EQ(decode(w.ids), "hellworlorld");
  EXPECT_EQ(decode(w.targets), "elloorldrld\n");
  EXPECT_EQ(w.positions,
            (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
}

// Validation windows do not overlap: 13 characters hold 3 windows of 4 (the
// last target of the third is character 12).
TEST(TextCorpus, SequentialWindows) {
  std::vector<int32_t> text = encode("hello, world\n");
  EXPECT_EQ(sequentialWindowCount(text, 4), 3);
  EXPECT_EQ(sequentialWindowCount(text, 12), 1);
  EXPECT_EQ(sequentialWindowCount(text, 13), 0);
  TextWindows w = sequentialWindows(text, 4, {0, 1, 2});
  EXPECT_EQ(decode(w.ids), "hello, world");
  EXPECT_EQ(decode(w.targets), "ello, world\n");
  EXPECT_EQ(evenlySpacedWindows(10, 3), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(evenlySpacedWindows(4, 0), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(evenlySpacedWindows(3, 5), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(evenlySpacedWindows(0, 5).empty());
}

// The sampler's offsets are mt19937_64(seed) outputs modulo the number of
// offsets (size - seq): the same seed gives the same windows, another seed
// others.
TEST(TextCorpus, SamplerIsSeeded) {
  std::string source;
  for (int i = 0; i < 50; ++i)
    source += "line " + std::to_string(i) + " of the text\n";
  std::vector<int32_t> text = encode(source);
  const int64_t seq = 16, rows = 8;
  std::string error;
  auto a = TextSampler::create(text, seq, 7, error);
  ASSERT_TRUE(a) << error;
  auto b = TextSampler::create(text, seq, 7, error);
  auto c = TextSampler::create(text, seq, 8, error);
  ASSERT_TRUE(b && c);
  std::mt19937_64 spec(7);
  for (int step = 0; step < 3; ++step) {
    TextWindows wa = a->next(rows), wb = b->next(rows), wc = c->next(rows);
    EXPECT_EQ(wa.ids, wb.ids);
    EXPECT_EQ(wa.targets, wb.targets);
    EXPECT_NE(wa.ids, wc.ids);
    std::vector<int64_t> starts(rows);
    for (int64_t &start : starts)
      start = int64_t(spec() % uint64_t(text.size() - seq));
    TextWindows expected = gatherWindows(text, seq, starts);
    EXPECT_EQ(wa.ids, expected.ids);
    EXPECT_EQ(wa.targets, expected.targets);
    EXPECT_EQ(wa.positions, expected.positions);
  }
}

// The shortest text for a window of 4 has 5 characters; the sampler then
// always draws offset 0.
TEST(TextCorpus, WindowErrors) {
  std::string error;
  EXPECT_FALSE(TextSampler::create(encode("abcd"), 4, 1, error));
  EXPECT_EQ(error, "the training text has 4 characters: expected at least 5 "
                   "for one window of 4 characters and its next-character "
                   "targets");
  EXPECT_FALSE(TextSampler::create(encode("abcd"), 0, 1, error));
  EXPECT_EQ(error, "window length 0: expected at least 1");
  EXPECT_EQ(checkTextFitsWindow(encode("abc"), 8, "the validation text"),
            "the validation text has 3 characters: expected at least 9 for "
            "one window of 8 characters and its next-character targets");
  std::vector<int32_t> shortest = encode("abcde");
  auto sampler = TextSampler::create(shortest, 4, 1, error);
  ASSERT_TRUE(sampler) << error;
  EXPECT_EQ(decode(sampler->next(2).targets), "bcdebcde");
}

TEST_F(TextCorpusFiles, MissingPath) {
  std::string missing = (dir / "none").string();
  EXPECT_EQ(loadTextCorpus(missing).status().message(),
            "cannot open corpus '" + missing + "': No such file or directory");
}

TEST_F(TextCorpusFiles, DirectoryWithoutCorpusFiles) {
  write("a.dat", "x");
  write("a.u8", documents(0, 20));
  fs::create_directory(dir / "sub");
  EXPECT_EQ(loadTextCorpus(dir.string()).status().message(),
            "no corpus files in '" + dir.string() +
                "': expected plain-text files other than *.dat and *.u8");
}

TEST_F(TextCorpusFiles, TooFewDocumentsForValidation) {
  std::string path = write("short", documents(0, 8) + "%\n\n%\n");
  EXPECT_EQ(loadTextCorpus(path).status().message(),
            "corpus '" + path +
                "' has 9 non-empty documents: expected at least 10, as every "
                "10th goes to validation");
}

TEST_F(TextCorpusFiles, BadSplitPeriod) {
  TextCorpusOptions options;
  options.validationEvery = 1;
  EXPECT_EQ(
      loadTextCorpus(write("a", documents(0, 20)), options).status().message(),
      "validation split every 1 documents: expected at least 2");
}

// The corpus of the Debian packages fortunes and fortunes-min: 43 files, 15217
// documents of which 1521 validate; 459 bytes dropped (backspaces, bells,
// UTF-8); unigram entropy of the training text 3.2822 nats = 4.7352 bits.
TEST(TextCorpus, LoadsFortunes) {
  StatusOr<TextCorpus> load = loadTextCorpus(GPIPE_FORTUNES_DIR);
  ASSERT_TRUE(load.ok()) << load.status().message();
  const TextCorpus &corpus = (*load);
  EXPECT_EQ(corpus.files.size(), 43u);
  EXPECT_EQ(corpus.trainDocuments, 13696);
  EXPECT_EQ(corpus.validationDocuments, 1521);
  EXPECT_EQ(corpus.train.size(), 2313549u);
  EXPECT_EQ(corpus.validation.size(), 262668u);
  EXPECT_EQ(corpus.droppedBytes, 459);
  EXPECT_NEAR(unigramEntropyNats(corpus.train), 3.282170982589728, 1e-9);
  EXPECT_EQ(decode({corpus.validation.begin(), corpus.validation.begin() + 30}),
            " A hard-luck actor who appeare");
}
