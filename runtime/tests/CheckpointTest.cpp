//===- CheckpointTest.cpp - Saving and resuming training ------------------===//
//
// The safetensors codec (round trip, every corruption named), and
// checkpoints of an engine: a run resumed from a checkpoint continues
// bit for bit as the uninterrupted run, on the same or another number of
// pipeline devices; mismatched, corrupted or half-written checkpoints are
// refused (or skipped) with errors that name what is wrong, and a refused
// load changes nothing.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/train/Checkpoint.h"
#include "gpipe/runtime/bundle/SafeTensors.h"

#include "TestBundles.h"
#include "TestModels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

constexpr int64_t kRows = 8;

std::string freshDir(const std::string &name) {
  std::string dir = ::testing::TempDir() + "gpipe-ckpt-" + name + "-" +
                    std::to_string(::getpid());
  std::string command = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(command.c_str()), 0);
  return dir;
}

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void writeAll(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::unique_ptr<Engine> engineFor(Bundle bundle, OptimizerKind optimizer,
                                  uint64_t seed,
                                  DeviceKind device = DeviceKind::Cpu) {
  EngineOptions options;
  options.device = device;
  options.seed = seed;
  options.optimizer.kind = optimizer;
  options.optimizer.learningRate = 0.01f;
  StatusOr<std::unique_ptr<Engine>> engine =
      createEngine(std::move(bundle), options);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  return engine.ok() ? std::move(*engine) : nullptr;
}

std::unique_ptr<Engine> transformerOn(unsigned k, uint64_t seed,
                                      DeviceKind device = DeviceKind::Cpu) {
  return engineFor(
      buildBundle(residualGraph(kRows), residualSplit(k), 2, RematPolicy::Full),
      OptimizerKind::Adam, seed, device);
}

std::unique_ptr<Engine> mlpOn(int64_t hidden, unsigned k,
                              OptimizerKind optimizer) {
  return engineFor(
      buildBundle(mlpGraph(kRows, hidden), mlpSplit(k), 2, RematPolicy::Full),
      optimizer, 5);
}

std::vector<double> trainSteps(Engine &engine, uint64_t first, uint64_t last) {
  std::vector<double> losses;
  for (uint64_t step = first; step <= last; ++step) {
    StepResult result = engine.trainStep(residualBatch(kRows, step));
    EXPECT_TRUE(result.ok()) << result.error;
    losses.push_back(result.loss);
  }
  return losses;
}

std::vector<float> parameterOf(Engine &engine, const std::string &name) {
  std::vector<float> values;
  EXPECT_TRUE(engine.parameter(name, values).ok()) << name;
  return values;
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

TEST(SafeTensors, RoundTripsAndNamesEveryCorruption) {
  std::vector<NamedTensor> tensors = {{"w", {2, 3}, {1, 2, 3, 4, 5, 6}},
                                      {"b", {3}, {-1.5f, 0.0f, 7.25f}}};
  std::string bytes = encodeSafeTensors(tensors, {{"note", "x"}});
  std::map<std::string, std::string> metadata;
  auto decoded = decodeSafeTensors(bytes, "t.safetensors", &metadata);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ASSERT_EQ(decoded->size(), 2u); // by name: b, w
  EXPECT_EQ((*decoded)[0].name, "b");
  EXPECT_EQ((*decoded)[0].data, tensors[1].data);
  EXPECT_EQ((*decoded)[1].shape, tensors[0].shape);
  EXPECT_EQ((*decoded)[1].data, tensors[0].data);
  EXPECT_EQ(metadata, (std::map<std::string, std::string>{{"note", "x"}}));

  // The header length is little-endian, the header 8-byte padded JSON.
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  EXPECT_EQ(length % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + length + 9 * 4);

  std::string flipped = bytes;
  flipped[8 + length + 24 + 4] ^= 0x40; // a byte of b (after w's 24)
  EXPECT_EQ(decodeSafeTensors(flipped, "t.safetensors")
                .status()
                .message()
                .rfind("'t.safetensors': tensor 'b' fails its checksum", 0),
            0u);
  EXPECT_NE(decodeSafeTensors(bytes.substr(0, bytes.size() - 1), "t")
                .status()
                .message()
                .find("spans bytes"),
            std::string::npos);
  EXPECT_NE(decodeSafeTensors(bytes.substr(0, 5), "t")
                .status()
                .message()
                .find("expected an 8-byte header length"),
            std::string::npos);
  std::string huge = bytes;
  huge[7] = char(0x7f);
  EXPECT_NE(
      decodeSafeTensors(huge, "t").status().message().find("the header claims"),
      std::string::npos);
}

// Files written by other tools (pretrained weights) have no CRCs, perhaps no
// __metadata__: decoded unchecked, bit for bit. A CRC present is checked.
TEST(SafeTensors, DecodesFilesWithoutChecksums) {
  const uint32_t bits[] = {0x3fc00000u, 0x80000000u, 0x7fc01234u, 0x00000001u};
  auto fileOf = [&](const std::string &header) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i)
      bytes[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
    return bytes + header +
           std::string(reinterpret_cast<const char *>(bits), sizeof bits);
  };
  const std::string tensor =
      R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
  std::map<std::string, std::string> metadata;
  for (const std::string &header :
       {"{" + tensor + "}",
        "{" + tensor + R"(,"__metadata__":{"format":"pt"}})"}) {
    auto decoded =
        decodeSafeTensors(fileOf(header), "other.safetensors", &metadata);
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    ASSERT_EQ(decoded->size(), 1u);
    EXPECT_EQ((*decoded)[0].shape, (std::vector<int64_t>{2, 2}));
    ASSERT_EQ((*decoded)[0].data.size(), 4u);
    EXPECT_EQ(std::memcmp((*decoded)[0].data.data(), bits, sizeof bits), 0);
  }
  EXPECT_EQ(metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  auto wrong = decodeSafeTensors(
      fileOf("{" + tensor + R"(,"__metadata__":{"crc32/w":"00000000"}})"),
      "other.safetensors");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message().rfind(
                "'other.safetensors': tensor 'w' fails its checksum", 0),
            0u);
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

// Three Adam steps, a checkpoint, three more: a fresh engine (another
// initialization seed) loaded from the checkpoint gives the last three
// losses and the final parameters bit for bit, at K = 2 as saved and at
// K = 1 and 4 (the tensors are keyed by name, not by device). On the host
// emulation of the CUDA path, whose kernels round differently, the resumed
// losses agree to 1e-5.
TEST(Checkpoint, ResumedRunsContinueBitForBitOnAnyK) {
  const std::string dir = freshDir("resume");
  auto whole = transformerOn(2, 5);
  ASSERT_TRUE(whole);
  trainSteps(*whole, 1, 3);
  StatusOr<std::string> saved =
      saveCheckpoint(*whole, dir, R"({"epoch": 1, "cursor": 24})");
  ASSERT_TRUE(saved.ok()) << saved.status().message();
  EXPECT_EQ(*saved, dir + "/step-0000000003");
  std::vector<double> rest = trainSteps(*whole, 4, 6);

  for (unsigned k : {2u, 1u, 4u}) {
    SCOPED_TRACE("resumed on K=" + std::to_string(k));
    auto resumed = transformerOn(k, 99);
    ASSERT_TRUE(resumed);
    CheckpointInfo info;
    Status loaded = loadCheckpoint(*resumed, dir, &info);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    EXPECT_EQ(info.step, 3);
    EXPECT_EQ(info.optimizer, "adam");
    EXPECT_EQ(info.loopState, R"({"cursor":24,"epoch":1})");
    EXPECT_EQ(resumed->stepsDone(), 3);
    EXPECT_EQ(trainSteps(*resumed, 4, 6), rest);
    for (const ParamSpec &spec : resumed->bundle().params)
      EXPECT_EQ(parameterOf(*resumed, spec.name),
                parameterOf(*whole, spec.name))
          << spec.name;
  }

  auto emulated = transformerOn(2, 99, DeviceKind::HostEmulation);
  ASSERT_TRUE(emulated);
  ASSERT_TRUE(loadCheckpoint(*emulated, dir).ok());
  std::vector<double> emulatedRest = trainSteps(*emulated, 4, 6);
  for (size_t i = 0; i < rest.size(); ++i)
    EXPECT_NEAR(emulatedRest[i], rest[i], 1e-5 * std::fabs(rest[i]));
}

// A checkpoint of another model, optimizer or a corrupted one is refused
// with what is wrong, and the engine keeps its parameters and step.
TEST(Checkpoint, MismatchesAndCorruptionAreRefusedAndChangeNothing) {
  const std::string dir = freshDir("mismatch");
  auto narrow = mlpOn(16, 2, OptimizerKind::Adam);
  ASSERT_TRUE(narrow);
  ASSERT_TRUE(narrow->trainStep(mlpBatch(kRows, 1)).ok());
  StatusOr<std::string> saved = saveCheckpoint(*narrow, dir);
  ASSERT_TRUE(saved.ok()) << saved.status().message();

  auto wide = mlpOn(32, 2, OptimizerKind::Adam);
  ASSERT_TRUE(wide);
  const std::vector<float> before = parameterOf(*wide, "l1.w");
  EXPECT_EQ(loadCheckpoint(*wide, dir).message(),
            "checkpoint has l1.w [12,16], model expects [12,32]");
  EXPECT_EQ(parameterOf(*wide, "l1.w"), before);
  EXPECT_EQ(wide->stepsDone(), 0);

  auto other = mlpOn(16, 1, OptimizerKind::Sgd);
  ASSERT_TRUE(other);
  EXPECT_EQ(loadCheckpoint(*other, dir).message(),
            "'" + *saved + "' holds adam state, the run uses sgd");

  // One flipped byte near the end of the tensor file: the last tensor.
  std::string tensors = readAll(*saved + "/tensors.safetensors");
  tensors[tensors.size() - 3] ^= 0x01;
  writeAll(*saved + "/tensors.safetensors", tensors);
  auto same = mlpOn(16, 2, OptimizerKind::Adam);
  ASSERT_TRUE(same);
  const std::vector<float> initial = parameterOf(*same, "l4.b");
  Status corrupted = loadCheckpoint(*same, dir);
  EXPECT_NE(corrupted.message().find("fails its checksum"), std::string::npos)
      << corrupted.message();
  EXPECT_NE(corrupted.message().find("tensor '"), std::string::npos);
  EXPECT_EQ(same->stepsDone(), 0);
  EXPECT_EQ(parameterOf(*same, "l4.b"), initial);

  EXPECT_EQ(loadCheckpoint(*same, dir + "/nothing-here").code(),
            StatusCode::Io);
}

// Saves are atomic: a save killed before its rename leaves only a temporary
// directory, which loading ignores (it follows `latest`); `latest` moves
// only to a complete checkpoint; `keep` prunes the oldest.
TEST(Checkpoint, LatestOnlyNamesCompleteCheckpointsAndKeepPrunes) {
  const std::string dir = freshDir("atomic");
  auto engine = transformerOn(2, 5);
  ASSERT_TRUE(engine);
  for (uint64_t step = 1; step <= 4; ++step) {
    trainSteps(*engine, step, step);
    ASSERT_TRUE(saveCheckpoint(*engine, dir, "{}", /*keep=*/2).ok());
  }
  EXPECT_FALSE(exists(dir + "/step-0000000001"));
  EXPECT_FALSE(exists(dir + "/step-0000000002"));
  EXPECT_TRUE(exists(dir + "/step-0000000003"));
  EXPECT_EQ(readAll(dir + "/latest"), "step-0000000004\n");

  // What a save killed mid-write leaves: a half-written temporary directory.
  ASSERT_EQ(::mkdir((dir + "/.tmp-step-0000000005-1").c_str(), 0755), 0);
  writeAll(dir + "/.tmp-step-0000000005-1/tensors.safetensors", "\x10");
  auto resumed = transformerOn(2, 7);
  ASSERT_TRUE(resumed);
  Status loaded = loadCheckpoint(*resumed, dir);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(resumed->stepsDone(), 4);
  for (const ParamSpec &spec : resumed->bundle().params)
    EXPECT_EQ(parameterOf(*resumed, spec.name),
              parameterOf(*engine, spec.name));

  // A second save of the same step gets a name of its own, which `latest`
  // then names: the first is never replaced in place.
  StatusOr<std::string> again = saveCheckpoint(*engine, dir, "{}", 2);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, dir + "/step-0000000004-2");
  EXPECT_EQ(readAll(dir + "/latest"), "step-0000000004-2\n");
  EXPECT_TRUE(exists(dir + "/step-0000000004"));
  EXPECT_FALSE(exists(dir + "/step-0000000003"));
  ASSERT_TRUE(loadCheckpoint(*resumed, dir).ok());

  EXPECT_NE(saveCheckpoint(*engine, dir, "[1, 2]")
                .status()
                .message()
                .find("must be a JSON object"),
            std::string::npos);
}

} // namespace
