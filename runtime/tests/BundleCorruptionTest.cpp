//===- BundleCorruptionTest.cpp - Damaged bundles are refused, never run --===//
//
// A bundle file that was damaged after it was written (any single bit
// flipped, cut short anywhere) is rejected with a message, never parsed into
// something that runs. And a bundle whose content was changed and then
// sealed again (a faulty writer) goes through the reader's and the
// executor's checks without a crash: it is refused with a message or it
// trains a step.
//
//===----------------------------------------------------------------------===//

#include "TestBundles.h"
#include "TestModels.h"

#include "gpipe/runtime/bundle/BundleChecksum.h"
#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/exec/Executor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

std::string writtenMlp() {
  return writeBundle(
      buildBundle(mlpGraph(4), mlpSplit(2), 2, RematPolicy::Full));
}

std::string writtenResidual() {
  return writeBundle(buildBundle(residualGraph(4), residualSplit(2), 2,
                                 RematPolicy::ExceptLast));
}

/// The text of `sealed` without its checksum member, ready to seal again.
std::string unseal(const std::string &sealed) {
  std::string body = sealed.substr(0, checksummedLength(sealed));
  body.erase(body.find_last_not_of(" \n,") + 1);
  return body + "\n}";
}

/// Zero inputs of the bundle's shapes (labels 0, which every class count
/// admits).
Batch zeroBatch(const Bundle &bundle) {
  Batch batch;
  for (const ModelInputSpec &input : bundle.inputs) {
    HostTensor tensor;
    tensor.type = input.type;
    tensor.shape = input.shape;
    if (input.type == ElementType::F32)
      tensor.f32.assign(tensor.numElements(), 0.0f);
    else
      tensor.i32.assign(tensor.numElements(), 0);
    batch[input.name] = std::move(tensor);
  }
  return batch;
}

// The written bundles read back: the fixtures below damage valid files.
TEST(BundleCorruption, WrittenBundlesRead) {
  for (const std::string &text : {writtenMlp(), writtenResidual()}) {
    StatusOr<Bundle> load = parseBundle(text, "b.json");
    EXPECT_TRUE(load.ok()) << load.status().message();
  }
}

// A flipped bit at every byte (bit at % 8, so every bit position is hit
// across the file) is rejected with a message naming the file.
TEST(BundleCorruption, EveryBitFlipIsRejected) {
  const std::string text = writtenMlp();
  ASSERT_GT(text.size(), 1000u);
  int rejected = 0;
  for (size_t at = 0; at < text.size(); ++at) {
    for (int bit : {int(at % 8)}) {
      std::string damaged = text;
      damaged[at] = char(damaged[at] ^ (1 << bit));
      StatusOr<Bundle> load = parseBundle(damaged, "b.json");
      ASSERT_FALSE(load.ok())
          << "bit " << bit << " of byte " << at << " ('" << text[at]
          << "') flipped, yet the bundle reads";
      ASSERT_EQ(load.status().message().rfind("'b.json': ", 0), 0u)
          << load.status().message();
      ASSERT_EQ(load.status().code(), StatusCode::InvalidBundle);
      ++rejected;
    }
  }
  EXPECT_EQ(rejected, int(text.size()));
}

// A file cut short anywhere before its closing brace is rejected.
TEST(BundleCorruption, EveryTruncationIsRejected) {
  const std::string text = writtenMlp();
  size_t closing = text.find_last_of('}');
  for (size_t length = 0; length <= closing; ++length) {
    StatusOr<Bundle> load = parseBundle(text.substr(0, length), "b.json");
    ASSERT_FALSE(load.ok()) << "cut to " << length << " bytes, yet it reads";
    ASSERT_FALSE(load.status().message().empty());
  }
}

// A changed checksum digit is reported with both sums.
TEST(BundleCorruption, ChecksumMismatchMessage) {
  std::string text = writtenMlp();
  size_t digits = text.rfind("crc32:") + 6;
  std::string claimed = text.substr(digits - 6, 14);
  std::string wrong = claimed;
  wrong[6] = wrong[6] == '0' ? '1' : '0';
  text.replace(digits - 6, 14, wrong);
  EXPECT_EQ(parseBundle(text, "b.json").status().message(),
            "'b.json': checksum: the content sums to " + claimed +
                " but the file says " + wrong +
                ": the bundle was corrupted or edited after it was written");
}

// The checksum member must be present, well formed and last.
TEST(BundleCorruption, ChecksumMemberErrors) {
  std::string body = unseal(writtenMlp());
  EXPECT_EQ(parseBundle(body, "b.json").status().message(),
            "'b.json': missing key 'checksum'; a version 2 bundle ends with "
            "\"checksum\": \"crc32:<8 hex digits>\", which gpipe-translate "
            "writes");
  std::string sealed = sealBundleText(body);
  std::string upper = sealed;
  size_t at = upper.rfind("crc32:");
  upper.replace(at, 5, "CRC32");
  EXPECT_EQ(parseBundle(upper, "b.json").status().message(),
            "'b.json': checksum: expected \"crc32:\" and 8 lowercase hex "
            "digits, found \"CRC32:" +
                sealed.substr(at + 6, 8) + "\"");
  // The memory plan moved from before the checksum to after it.
  size_t planAt = sealed.find(",\n  \"memory_plan\"");
  size_t checksumAt = sealed.find(",\n  \"checksum\"");
  ASSERT_NE(planAt, std::string::npos);
  ASSERT_NE(checksumAt, std::string::npos);
  std::string plan = sealed.substr(planAt, checksumAt - planAt);
  std::string moved = sealed;
  moved.erase(planAt, plan.size());
  moved.insert(moved.find_last_of('}'), plan + "\n");
  EXPECT_EQ(parseBundle(moved, "b.json").status().message(),
            "'b.json': checksum: expected the last member of the bundle, "
            "found 'memory_plan' after it");
}

// Content changed and sealed again: a one-character replacement at every
// fourth byte of the residual Transformer bundle is refused with a message or
// trains one step. Four parts, each every sixteenth byte from its own offset,
// so that ctest can run them side by side (under ASan they take 140 s in all).
class ResealedMutations : public ::testing::TestWithParam<size_t> {};

TEST_P(ResealedMutations, AreCheckedNotCrashed) {
  const std::string body = unseal(writtenResidual());
  const char replacements[] = {'0', '9', '-', '"', ']'};
  ExecutorConfig config;
  config.recvTimeout = std::chrono::milliseconds(2000);
  config.recordTimeline = false;
  int readable = 0, trained = 0;
  for (size_t at = 4 * GetParam(); at < body.size(); at += 16)
    for (char replacement : replacements) {
      if (body[at] == replacement)
        continue;
      std::string mutated = body;
      mutated[at] = replacement;
      StatusOr<Bundle> load = parseBundle(sealBundleText(mutated), "b.json");
      if (!load.ok()) {
        ASSERT_FALSE(load.status().message().empty());
        continue;
      }
      ++readable;
      std::string error;
      auto executor = PipelineExecutor::create((*load), config, error);
      if (!executor) {
        ASSERT_FALSE(error.empty());
        continue;
      }
      // A schedule that can hang never gets here (verifySchedule), so no
      // step waits out the receive timeout.
      auto start = std::chrono::steady_clock::now();
      StepResult step = executor->trainStep(zeroBatch((*load)));
      trained += step.ok();
      EXPECT_LT(std::chrono::steady_clock::now() - start, config.recvTimeout)
          << step.error;
    }
  // Most replacements break the syntax or a check; some (a digit of an
  // initializer scale, a seed) leave a bundle that runs.
  EXPECT_GT(readable, 0);
  EXPECT_GT(trained, 0);
}

INSTANTIATE_TEST_SUITE_P(BundleCorruption, ResealedMutations,
                         ::testing::Values(0, 1, 2, 3));

} // namespace
