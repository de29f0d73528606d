//===- GeneratedIndexBoundsTest.cpp - A gather kernel's index bounds ------===//
//
// `code.kernels[k].indexBounds`: per input, 0 or the extent of the axis an
// i32 input indexes. The writer writes it only where some input holds
// indices (other bundles keep their bytes); the reader reads it back and
// names each malformed list with what was expected and found: the count,
// a negative bound, a bound on an f32 input. (The executor's check of
// indices from the batch against it runs in the compiled gather models'
// tests, test/Integration/GatherGradientsTest.cpp.)
//
//===----------------------------------------------------------------------===//

#include "BundleReaderSupport.h"
#include "GeneratedKernelsSupport.h"

#include "gpipe/runtime/bundle/BundleReader.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing;

namespace {

using Json = nlohmann::ordered_json;
using bundlereader::mentions;

/// The mask model with kernel kWhere's (in0 i32, in1 f32) indexBounds set
/// to `bounds` (JSON text), read back: its error ("" if none).
std::string withBounds(const char *bounds) {
  return bundlereader::editedReadError(maskModelBundle(), [&](Json &j) {
    j["code"]["kernels"][kWhere]["indexBounds"] = Json::parse(bounds);
  });
}

TEST(GeneratedIndexBounds, WriterWritesThemLastAndOnlyWhereSet) {
  Bundle bundle = maskModelBundle();
  const std::string plain = writeBundle(bundle);
  EXPECT_FALSE(mentions(plain, "indexBounds"));
  bundle.code.kernels[kWhere].indexBounds = {0, 0};
  EXPECT_EQ(writeBundle(bundle), plain);
  bundle.code.kernels[kWhere].indexBounds = {7, 0};
  const std::string text = writeBundle(bundle);
  EXPECT_EQ(Json::parse(text)["code"]["kernels"][kWhere].dump(),
            R"({"symbol":"gpipe_kernel_11_test","inputs":2,)"
            R"("ops":"where(in0,in1,0)->out","rank":1,)"
            R"("inputDims":[[0],[0]],"outputDims":[0],)"
            R"("types":["i32","f32","f32"],"indexBounds":[7,0]})");
  StatusOr<Bundle> read = parseBundle(text, "mask.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->code.kernels[kWhere].indexBounds,
            (std::vector<int64_t>{7, 0}));
  EXPECT_TRUE(read->code.kernels[kGreater].indexBounds.empty());
  EXPECT_EQ(writeBundle(*read), text);
}

TEST(GeneratedIndexBounds, ReaderNamesWhatItExpected) {
  EXPECT_EQ(withBounds("[3, 0]"), "");
  EXPECT_PRED2(mentions, withBounds("[3]"),
               "code.kernels[11]: expected 'indexBounds' with 2 entries (one "
               "per input), found 1");
  EXPECT_PRED2(mentions, withBounds("[-1, 0]"),
               "code.kernels[11]: expected 'indexBounds[0]' as 0 or an axis's "
               "extent >= 1, found -1");
  EXPECT_PRED2(mentions, withBounds("[0, 4]"),
               "code.kernels[11]: expected 'indexBounds[1]' as 0: input 1 is "
               "f32, and only i32 inputs hold indices");
  EXPECT_PRED2(mentions, withBounds("7"),
               "code.kernels[11]: expected an array 'indexBounds', found a "
               "number");
  EXPECT_PRED2(mentions, withBounds(R"(["7", 0])"), "indexBounds[0]");
}

} // namespace
