//===- CApiLoopSupport.cpp - Image files and sessions for loop tests ------===//

#include "CApiLoopSupport.h"

#include "gpipe/runtime/bundle/BundleReader.h"

#include <gtest/gtest.h>

#include <fstream>

namespace gpipe::runtime::testing::capi {

static void writeBigEndian(std::ofstream &out, uint32_t value) {
  const char bytes[4] = {char(value >> 24), char(value >> 16), char(value >> 8),
                         char(value)};
  out.write(bytes, 4);
}

void writeIdx(const std::string &dir, const std::string &prefix,
              const ByteImages &images) {
  uint32_t count = images.labels.size();
  std::ofstream pixels(dir + "/" + prefix + "-images-idx3-ubyte",
                       std::ios::binary);
  for (uint32_t word : {0x00000803u, count, 3u, 4u})
    writeBigEndian(pixels, word);
  pixels.write(reinterpret_cast<const char *>(images.pixels.data()),
               images.pixels.size());
  std::ofstream labels(dir + "/" + prefix + "-labels-idx1-ubyte",
                       std::ios::binary);
  for (uint32_t word : {0x00000801u, count})
    writeBigEndian(labels, word);
  labels.write(reinterpret_cast<const char *>(images.labels.data()),
               images.labels.size());
}

gpipe_session_t *adamSessionOf(const Bundle &bundle) {
  std::string json = writeBundle(bundle);
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.seed = 3;
  options.optimizer = GPIPE_OPTIMIZER_ADAM;
  gpipe_session_t *session = nullptr;
  EXPECT_EQ(gpipe_session_create_from_json(json.data(), json.size(), "test",
                                           &options, &session),
            GPIPE_OK)
      << gpipe_last_error();
  return session;
}

} // namespace gpipe::runtime::testing::capi
