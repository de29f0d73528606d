//===- FileReadTest.cpp - Bounded reads of input files --------------------===//
//
// readRegularFile (FileRead.h) and every reader built on it: the bundle, a
// checkpoint's files, the IDX data set, the text corpus, the pretrained
// weights and the run report's files. Each refuses a FIFO (without blocking
// in open), /dev/zero, a directory and a file over its limit with its exact
// message, and still reads a regular file. A regression that blocks or reads
// forever is killed by an alarm and fails, rather than hanging the suite.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/base/FileRead.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/train/Checkpoint.h"
#include "gpipe/runtime/data/Dataset.h"
#include "gpipe/runtime/exec/Engine.h"
#include "gpipe/runtime/report/HtmlReport.h"
#include "gpipe/runtime/bundle/SafeTensors.h"
#include "gpipe/runtime/data/TextCorpus.h"

#include "TempDir.h"
#include "TestBundles.h"
#include "TestModels.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

constexpr int64_t kRows = 8;

/// Ends the process (SIGALRM) if the scope lasts longer than `seconds`: a
/// reader that blocks on a FIFO or reads /dev/zero forever fails the test.
struct Watchdog {
  explicit Watchdog(unsigned seconds = 30) { ::alarm(seconds); }
  ~Watchdog() { ::alarm(0); }
};

std::string notRegular(const std::string &path, const char *found) {
  return "cannot read '" + path + "': expected a regular file, found " + found;
}

std::string tooLarge(const std::string &path, const char *what, uint64_t limit,
                     uint64_t size) {
  return "cannot read '" + path + "': expected " + what + " of at most " +
         std::to_string(limit) + " bytes, found " + std::to_string(size) +
         " bytes";
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string fifoAt(const std::string &path) {
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
  return path;
}

/// A file of `size` bytes that takes no disk space; false where the file
/// system cannot hold one.
bool sparseFileAt(const std::string &path, uint64_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return false;
  bool made = ::ftruncate(fd, off_t(size)) == 0;
  ::close(fd);
  return made;
}

/// `bytes` with its 32-bit big-endian header words.
std::string idx(std::initializer_list<uint32_t> header, size_t payload) {
  std::string bytes;
  for (uint32_t word : header)
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(char(word >> shift));
  return bytes + std::string(payload, '\x01');
}

//===----------------------------------------------------------------------===//
// readRegularFile
//===----------------------------------------------------------------------===//

TEST(ReadRegularFile, ReadsAFileUpToItsLimit) {
  TempDir dir("gpipe-fileread");
  std::string path = dir.path + "/ten";
  writeFile(path, "0123456789");
  StatusOr<std::string> read = readRegularFile(path, 10, "a test file");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, "0123456789");
  writeFile(path, "");
  read = readRegularFile(path, 0, "a test file");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, "");
}

TEST(ReadRegularFile, RefusesAFileOverTheLimitFromItsSize) {
  TempDir dir("gpipe-fileread");
  std::string path = dir.path + "/ten";
  writeFile(path, "0123456789");
  StatusOr<std::string> read = readRegularFile(path, 9, "a test file");
  EXPECT_EQ(read.status().code(), StatusCode::Io);
  EXPECT_EQ(read.status().message(), tooLarge(path, "a test file", 9, 10));
  // 3 GB that are never read: the size alone refuses them.
  std::string sparse = dir.path + "/sparse";
  if (!sparseFileAt(sparse, 3000000000u))
    GTEST_SKIP() << "no sparse files in " << dir.path;
  Watchdog watchdog;
  read = readRegularFile(sparse, uint64_t(1) << 31, "a test file");
  EXPECT_EQ(read.status().message(),
            tooLarge(sparse, "a test file", uint64_t(1) << 31, 3000000000u));
}

// /proc's files say they are empty and are not: the limit holds as they are
// read, as for a file that grows while it is read.
TEST(ReadRegularFile, RefusesMoreBytesThanTheLimitAsTheyArrive) {
  std::string reason;
  StatusOr<std::string> read =
      readRegularFile("/proc/self/status", 16, "a test file", &reason);
  EXPECT_EQ(read.status().code(), StatusCode::Io);
  EXPECT_EQ(read.status().message(),
            "cannot read '/proc/self/status': expected a test file of at most "
            "16 bytes, found more while reading it");
  EXPECT_EQ(reason,
            "expected a test file of at most 16 bytes, found more while "
            "reading it");
  read = readRegularFile("/proc/self/status", 1 << 20, "a test file");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->rfind("Name:", 0), 0u);
}

TEST(ReadRegularFile, RefusesWhatIsNotARegularFile) {
  TempDir dir("gpipe-fileread");
  std::string fifo = fifoAt(dir.path + "/fifo");
  Watchdog watchdog;
  std::string reason;
  StatusOr<std::string> read =
      readRegularFile(fifo, 100, "a test file", &reason);
  EXPECT_EQ(read.status().code(), StatusCode::Io);
  EXPECT_EQ(read.status().message(), notRegular(fifo, "a FIFO"));
  EXPECT_EQ(reason, "expected a regular file, found a FIFO");
  // With a writer, a blocking reader would wait for its data.
  int writer = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(writer, 0);
  EXPECT_EQ(readRegularFile(fifo, 100, "a test file").status().message(),
            notRegular(fifo, "a FIFO"));
  ::close(writer);
  EXPECT_EQ(readRegularFile("/dev/zero", 100, "a test file").status().message(),
            notRegular("/dev/zero", "a character device"));
  EXPECT_EQ(readRegularFile(dir.path, 100, "a test file").status().message(),
            notRegular(dir.path, "a directory"));
  std::string missing = dir.path + "/missing";
  read = readRegularFile(missing, 100, "a test file", &reason);
  EXPECT_EQ(read.status().code(), StatusCode::Io);
  EXPECT_EQ(read.status().message(),
            "cannot open '" + missing + "': No such file or directory");
  EXPECT_EQ(reason, "No such file or directory");
}

//===----------------------------------------------------------------------===//
// The readers
//===----------------------------------------------------------------------===//

TEST(BoundedReads, Bundle) {
  TempDir dir("gpipe-fileread");
  std::string fifo = fifoAt(dir.path + "/m.bundle.json");
  std::string sparse = dir.path + "/big.bundle.json";
  Watchdog watchdog;
  EXPECT_EQ(loadBundle(fifo).status().message(), notRegular(fifo, "a FIFO"));
  EXPECT_EQ(loadBundle(fifo).status().code(), StatusCode::Io);
  EXPECT_EQ(loadBundle("/dev/zero").status().message(),
            notRegular("/dev/zero", "a character device"));
  EXPECT_EQ(loadBundle(dir.path).status().message(),
            notRegular(dir.path, "a directory"));
  if (sparseFileAt(sparse, kMaxBundleBytes + 1)) {
    EXPECT_EQ(
        loadBundle(sparse).status().message(),
        tooLarge(sparse, "a bundle", kMaxBundleBytes, kMaxBundleBytes + 1));
  }

  std::string path = dir.path + "/ok.bundle.json";
  writeFile(path, writeBundle(buildBundle(mlpGraph(kRows), mlpSplit(2), 2,
                                          RematPolicy::Full)));
  StatusOr<Bundle> loaded = loadBundle(path);
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
}

std::unique_ptr<Engine> mlpEngine(const std::string &weights = "") {
  Bundle bundle =
      buildBundle(mlpGraph(kRows), mlpSplit(2), 2, RematPolicy::Full);
  if (!weights.empty()) {
    for (ParamSpec &spec : bundle.params)
      if (spec.name == "l1.w")
        spec.init = InitKind::Pretrained;
    bundle.weights = weights;
  }
  EngineOptions options;
  options.optimizer.kind = OptimizerKind::Adam;
  StatusOr<std::unique_ptr<Engine>> engine =
      createEngine(std::move(bundle), options);
  if (!engine.ok()) {
    ADD_FAILURE() << engine.status().message();
    return nullptr;
  }
  return std::move(*engine);
}

TEST(BoundedReads, Checkpoint) {
  TempDir dir("gpipe-fileread");
  auto engine = mlpEngine();
  ASSERT_TRUE(engine);
  StatusOr<std::string> saved = saveCheckpoint(*engine, dir.path + "/run");
  ASSERT_TRUE(saved.ok()) << saved.status().message();
  const std::string state = *saved + "/state.json";
  const std::string tensors = *saved + "/tensors.safetensors";
  const std::string stateText = [&] {
    std::ifstream in(state);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();

  Watchdog watchdog;
  ASSERT_EQ(std::remove(state.c_str()), 0);
  fifoAt(state);
  Status load = loadCheckpoint(*engine, *saved);
  EXPECT_EQ(load.code(), StatusCode::Io);
  EXPECT_EQ(load.message(), notRegular(state, "a FIFO"));
  ASSERT_EQ(std::remove(state.c_str()), 0);
  ASSERT_EQ(::symlink("/dev/zero", state.c_str()), 0);
  EXPECT_EQ(loadCheckpoint(*engine, *saved).message(),
            notRegular(state, "a character device"));
  ASSERT_EQ(std::remove(state.c_str()), 0);
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  EXPECT_EQ(loadCheckpoint(*engine, *saved).message(),
            notRegular(state, "a directory"));
  ASSERT_EQ(::rmdir(state.c_str()), 0);
  if (sparseFileAt(state, kMaxCheckpointStateBytes + 1)) {
    EXPECT_EQ(loadCheckpoint(*engine, *saved).message(),
              tooLarge(state, "a checkpoint state", kMaxCheckpointStateBytes,
                       kMaxCheckpointStateBytes + 1));
  }
  writeFile(state, stateText);

  const std::string tensorsBytes = [&] {
    std::ifstream in(tensors, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  ASSERT_EQ(std::remove(tensors.c_str()), 0);
  fifoAt(tensors);
  EXPECT_EQ(loadCheckpoint(*engine, *saved).message(),
            notRegular(tensors, "a FIFO"));
  ASSERT_EQ(std::remove(tensors.c_str()), 0);
  writeFile(tensors, tensorsBytes);
  load = loadCheckpoint(*engine, dir.path + "/run");
  EXPECT_TRUE(load.ok()) << load.message();
}

TEST(BoundedReads, IdxDataset) {
  TempDir dir("gpipe-fileread");
  std::string images = dir.path + "/images";
  std::string labels = dir.path + "/labels";
  writeFile(images, idx({0x803, 2, 2, 3}, 12));
  writeFile(labels, idx({0x801, 2}, 2));
  std::string fifo = fifoAt(dir.path + "/fifo");
  std::string sparse = dir.path + "/sparse";
  Watchdog watchdog;
  StatusOr<ImageDataset> load = loadIdxDataset(fifo, labels);
  EXPECT_EQ(load.status().code(), StatusCode::Io);
  EXPECT_EQ(load.status().message(), notRegular(fifo, "a FIFO"));
  EXPECT_EQ(loadIdxDataset(images, "/dev/zero").status().message(),
            notRegular("/dev/zero", "a character device"));
  EXPECT_EQ(loadIdxDataset(images, dir.path).status().message(),
            notRegular(dir.path, "a directory"));
  if (sparseFileAt(sparse, kMaxIdxFileBytes + 1)) {
    EXPECT_EQ(loadIdxDataset(sparse, labels).status().message(),
              tooLarge(sparse, "an IDX file", kMaxIdxFileBytes,
                       kMaxIdxFileBytes + 1));
  }
  load = loadIdxDataset(images, labels);
  ASSERT_TRUE(load.ok()) << load.status().message();
  EXPECT_EQ(load->count, 2);
}

TEST(BoundedReads, TextCorpus) {
  TempDir dir("gpipe-fileread");
  std::string text;
  for (int i = 0; i < 10; ++i)
    text += "document " + std::to_string(i) + "\n%\n";
  writeFile(dir.path + "/a", text);
  // In a directory corpus a FIFO is no corpus file: skipped, as *.dat are.
  std::string fifo = fifoAt(dir.path + "/b");
  std::string sparse = dir.path + "/big"; // made after the directory's load
  Watchdog watchdog;
  StatusOr<TextCorpus> load = loadTextCorpus(dir.path);
  ASSERT_TRUE(load.ok()) << load.status().message();
  EXPECT_EQ(load->files, std::vector<std::string>{dir.path + "/a"});
  EXPECT_EQ(load->trainDocuments + load->validationDocuments, 10);

  load = loadTextCorpus(fifo);
  EXPECT_EQ(load.status().code(), StatusCode::Io);
  EXPECT_EQ(load.status().message(), notRegular(fifo, "a FIFO"));
  EXPECT_EQ(loadTextCorpus("/dev/zero").status().message(),
            notRegular("/dev/zero", "a character device"));
  if (sparseFileAt(sparse, kMaxCorpusFileBytes + 1)) {
    EXPECT_EQ(loadTextCorpus(sparse).status().message(),
              tooLarge(sparse, "a corpus file", kMaxCorpusFileBytes,
                       kMaxCorpusFileBytes + 1));
  }
}

TEST(BoundedReads, PretrainedWeights) {
  TempDir dir("gpipe-fileread");
  std::string fifo = fifoAt(dir.path + "/w.safetensors");
  auto refusal = [](const std::string &path, const char *found) {
    return "cannot read the weights file '" + path +
           "' of pretrained parameter 'l1.w': expected a regular file, "
           "found " +
           found;
  };
  Bundle bundle =
      buildBundle(mlpGraph(kRows), mlpSplit(2), 2, RematPolicy::Full);
  for (const std::pair<std::string, const char *> &bad :
       {std::pair<std::string, const char *>{fifo, "a FIFO"},
        {"/dev/zero", "a character device"},
        {dir.path, "a directory"}}) {
    Bundle pretrained = bundle;
    for (ParamSpec &spec : pretrained.params)
      if (spec.name == "l1.w")
        spec.init = InitKind::Pretrained;
    pretrained.weights = bad.first;
    Watchdog watchdog;
    StatusOr<std::unique_ptr<Engine>> engine =
        createEngine(std::move(pretrained), EngineOptions{});
    EXPECT_EQ(engine.status().message(), refusal(bad.first, bad.second));
  }

  std::string path = dir.path + "/ok.safetensors";
  for (const ParamSpec &spec : bundle.params)
    if (spec.name == "l1.w") {
      int64_t n = 1;
      for (int64_t dim : spec.shape)
        n *= dim;
      writeFile(path, encodeSafeTensors({{spec.name, spec.shape,
                                          std::vector<float>(n, 0.5f)}},
                                        {}));
    }
  auto engine = mlpEngine(path);
  ASSERT_TRUE(engine);
  std::vector<float> values;
  ASSERT_TRUE(engine->parameter("l1.w", values).ok());
  EXPECT_EQ(values.front(), 0.5f);
}

TEST(BoundedReads, RunReportFiles) {
  TempDir dir("gpipe-fileread");
  std::string fifo = fifoAt(dir.path + "/metrics.jsonl");
  std::string sparse = dir.path + "/trace.json";
  Watchdog watchdog;
  RunReport report;
  Status metrics = readMetricsFile(fifo, report);
  EXPECT_EQ(metrics.code(), StatusCode::Io);
  EXPECT_EQ(metrics.message(), "cannot read the metrics '" + fifo +
                                   "': expected a regular file, found a FIFO");
  EXPECT_EQ(readChromeTrace("/dev/zero").status().message(),
            "cannot read the trace '/dev/zero': expected a regular file, "
            "found a character device");
  EXPECT_EQ(readMetricsFile(dir.path, report).message(),
            "cannot read the metrics '" + dir.path +
                "': expected a regular file, found a directory");
  if (sparseFileAt(sparse, kMaxRunReportFileBytes + 1)) {
    EXPECT_EQ(readChromeTrace(sparse).status().message(),
              "cannot read the trace '" + sparse +
                  "': expected the trace of at most " +
                  std::to_string(kMaxRunReportFileBytes) + " bytes, found " +
                  std::to_string(kMaxRunReportFileBytes + 1) + " bytes");
  }

  std::string path = dir.path + "/ok.jsonl";
  writeFile(path, "{\"event\":\"step\",\"step\":1,\"loss\":0.5}\n");
  Status read = readMetricsFile(path, report);
  EXPECT_TRUE(read.ok()) << read.message();
  EXPECT_FALSE(report.loss.empty());
}

} // namespace
