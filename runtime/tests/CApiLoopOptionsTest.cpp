//===- CApiLoopOptionsTest.cpp - The loops' options structs, under gtest --===//
//
// Runs the C checks of CApiLoopOptionsTest.c: an image session (the MLP of
// TestModels.h on a small IDX set of 3 x 4 images written here) and a text
// session (a character model on the fortunes corpus, as CApiLoopsTest.cpp).
//
//===----------------------------------------------------------------------===//

#include "CApiLoopOptionsTest.h"

#include "CApiLoopSupport.h"
#include "TestBundles.h"
#include "TestModels.h"

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/data/TextCorpus.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;
using namespace gpipe::runtime::testing::capi;

namespace {

const char *orOk(const char *error) { return error ? error : "ok"; }

/// `count` images of random bytes with random labels in [0, 5).
ByteImages randomImages(uint32_t count, uint64_t seed) {
  Lcg rng(seed);
  ByteImages images;
  for (uint32_t i = 0; i < count * 12; ++i)
    images.pixels.push_back(uint8_t(rng.below(256)));
  for (uint32_t i = 0; i < count; ++i)
    images.labels.push_back(uint8_t(rng.below(5)));
  return images;
}

gpipe_session_t *imageSession() {
  return adamSessionOf(
      buildBundle(mlpGraph(20), mlpSplit(2), 2, RematPolicy::Full));
}

/// Token and position embeddings, one dense layer to the 96 characters.
gpipe_session_t *textSession() {
  constexpr int64_t batch = 8, seq = 8, width = 8;
  ModelGraph g = characterGraph(batch, seq, width);
  return adamSessionOf(buildBundle(g, {0, 1}, 2, RematPolicy::Full));
}

class CApiLoopOptions : public ::testing::Test {
protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("gpipe-capi-loop-options-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    writeIdx(dir.string(), "train", randomImages(40, 1));
    writeIdx(dir.string(), "t10k", randomImages(20, 2));
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::filesystem::path dir;
};

} // namespace

TEST(CApiLoopOptionsInit, StampsTheSizeAndTheDefaults) {
  EXPECT_STREQ(orOk(capi_loop_options_check_init()), "ok");
}

TEST_F(CApiLoopOptions, WrongSizesAreRefused) {
  gpipe_session_t *images = imageSession();
  gpipe_session_t *text = textSession();
  ASSERT_TRUE(images && text);
  EXPECT_STREQ(orOk(capi_loop_options_check_sizes(images, dir.c_str(), text,
                                                  GPIPE_FORTUNES_DIR)),
               "ok");
  gpipe_session_destroy(images);
  gpipe_session_destroy(text);
}

TEST_F(CApiLoopOptions, ImageFirstLayoutStillRuns) {
  gpipe_session_t *session = imageSession();
  ASSERT_TRUE(session);
  EXPECT_STREQ(
      orOk(capi_loop_options_check_image_layouts(session, dir.c_str())), "ok");
  gpipe_session_destroy(session);
}

TEST(CApiLoopOptionsText, TextFirstLayoutStillRuns) {
  gpipe_session_t *session = textSession();
  ASSERT_TRUE(session);
  EXPECT_STREQ(
      orOk(capi_loop_options_check_text_layouts(session, GPIPE_FORTUNES_DIR)),
      "ok");
  gpipe_session_destroy(session);
}
