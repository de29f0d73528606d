//===- GeneratedTypesCallTest.cpp - Calls of kernels over i32 memrefs -----===//
//
// Generated kernels whose memrefs hold i32 words (GeneratedKernelSpec::types):
// a comparison writing 0 or 1, `where` reading such a mask, and the casts
// between f32 and i32 (kGreater, kWhere, kCastI32, kCastF32). The runtime
// passes their buffers as it passes f32 ones and only moves their bytes: the
// backends run the stand-ins split over threads (the CPU backend's, with
// denormals flushed), in place and over overlapping buffers (whose inputs
// are copied first), and every word comes out as plain loops over the
// words say, bit for bit: words that read as NaNs (-1, 0x7f800001),
// denormals (1) or -0 (0x80000000) as floats included.
//
//===----------------------------------------------------------------------===//

#include "GeneratedKernelsSupport.h"

#include "gpipe/runtime/backends/GeneratedCode.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/backends/host/HostBackend.h"
#include "gpipe/runtime/kernels/GeneratedCall.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;

namespace {

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

/// i32 words that are no ordinary floats: NaNs (-1, a signalling one, a
/// quiet one, -inf's neighbour), a denormal (1), -0 (INT_MIN), infinities.
const uint32_t kWords[] = {0u,          1u,          0xffffffffu, 0x80000000u,
                           0x7f800001u, 0x7fc00000u, 0xff800001u, 2u,
                           0xfffffff9u, 0x7f800000u, 0xff800000u, 0x3f800000u,
                           12345u,      0x7fffffffu};

/// f32 inputs: for the comparison every kind of float but denormals (which
/// the CPU backend's threads read as 0); for the cast to i32, values within
/// i32's range.
float floatInput(int kernel, int64_t i) {
  static const float kSpecial[] = {0.0f,
                                   -0.0f,
                                   std::numeric_limits<float>::quiet_NaN(),
                                   std::numeric_limits<float>::infinity(),
                                   -std::numeric_limits<float>::infinity(),
                                   std::numeric_limits<float>::min(),
                                   -std::numeric_limits<float>::min(),
                                   1.0f,
                                   -1.0f};
  constexpr int64_t kSpecials = sizeof(kSpecial) / sizeof(kSpecial[0]);
  if (kernel == kGreater && i % 3 == 0)
    return kSpecial[(i / 3) % kSpecials];
  return float((i * 37) % 23) * 0.75f - 8.25f; // -8.25 to 8.25, no integer
}

/// Each stand-in's inputs' types (true: i32) and its output's.
struct Signature {
  std::vector<bool> inputs;
  bool output;
};

Signature signatureOf(int kernel) {
  switch (kernel) {
  case kGreater:
    return {{false}, true};
  case kWhere:
    return {{true, false}, false};
  case kCastI32:
    return {{false}, true};
  default:
    return {{true}, false};
  }
}

/// What stand-in `kernel` writes, word by word: plain loops over the words
/// of `memory` at `inputAt`.
std::vector<uint32_t> expectedOf(int kernel, int64_t n,
                                 const std::vector<uint32_t> &memory,
                                 const std::vector<int64_t> &inputAt) {
  std::vector<uint32_t> out(n);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = memory[inputAt[0] + i];
    switch (kernel) {
    case kGreater:
      out[i] = floatOf(a) > 0.0f ? 1u : 0u;
      break;
    case kWhere:
      out[i] = a != 0 ? memory[inputAt[1] + i] : bitsOf(0.0f);
      break;
    case kCastI32:
      out[i] = uint32_t(int32_t(std::trunc(double(floatOf(a)))));
      break;
    default:
      out[i] = bitsOf(float(int32_t(a)));
    }
  }
  return out;
}

class GeneratedTypedCalls : public ::testing::TestWithParam<bool> {
protected:
  std::unique_ptr<DeviceBackend> backend() const {
    if (GetParam())
      return std::make_unique<HostBackend>(1);
    CpuThreading threading;
    threading.threadsPerDevice = 3; // a long call runs as several ranges
    return std::make_unique<CpuBackend>(1, threading);
  }

  /// Runs `kernel` over `n` elements, its inputs at `inputAt` and output at
  /// `outputAt` of one buffer (in words); the output words that differ from
  /// expectedOf, and the words outside it that changed.
  int64_t wrong(int kernel, int64_t n, const std::vector<int64_t> &inputAt,
                int64_t outputAt) {
    std::string error;
    auto code = LoadedCode::load(typedKernelCode(), hostCpuFeatures(), error);
    EXPECT_TRUE(code) << error;
    if (!code)
      return -1;
    const Signature signature = signatureOf(kernel);
    int64_t room = outputAt + n;
    for (int64_t at : inputAt)
      room = std::max(room, at + n);
    room += 4;
    std::unique_ptr<DeviceBackend> device = backend();
    void *memory = nullptr;
    EXPECT_EQ(device->allocate(0, room * 4, &memory), "");
    uint32_t *words = static_cast<uint32_t *>(memory);
    // Every word as input k would read it: the last input written wins
    // where inputs overlap, so fill in order and keep what each will read.
    for (int64_t i = 0; i < room; ++i)
      words[i] = kWords[(i * 5) % (sizeof(kWords) / 4)];
    for (size_t k = 0; k < inputAt.size(); ++k)
      if (!signature.inputs[k])
        for (int64_t i = 0; i < n; ++i)
          words[inputAt[k] + i] = bitsOf(floatInput(kernel, i));
    const std::vector<uint32_t> before(words, words + room);
    const GeneratedKernelSpec spec = typedKernelCode().kernels[kernel];
    std::vector<const float *> inputs;
    for (int64_t at : inputAt)
      inputs.push_back(reinterpret_cast<const float *>(words + at));
    GeneratedCall call = GeneratedCall::elementWise(
        code->entry(size_t(kernel)), std::move(inputs),
        reinterpret_cast<float *>(words + outputAt), n);
    call.kernel = kernel;
    device->generated(device->computeStream(0), call);
    EXPECT_EQ(device->synchronize(std::chrono::seconds(60)), "");
    const std::vector<uint32_t> expected =
        expectedOf(kernel, n, before, inputAt);
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i)
      count += words[outputAt + i] != expected[i];
    for (int64_t i = 0; i < room; ++i)
      if (i < outputAt || i >= outputAt + n)
        count += words[i] != before[i];
    return count;
  }
};

// 40011 elements: several of the CPU backend's chunks; 5 run whole.
constexpr int64_t kCounts[] = {40011, 5};

TEST_P(GeneratedTypedCalls, ComparisonWritesZeroOrOneWords) {
  for (int64_t n : kCounts) {
    EXPECT_EQ(wrong(kGreater, n, {1}, n + 3), 0) << n;
    // In place (an i32 output over its f32 input), and overlapping it.
    EXPECT_EQ(wrong(kGreater, n, {0}, 0), 0) << n;
    EXPECT_EQ(wrong(kGreater, n, {0}, 2), 0) << n;
  }
}

TEST_P(GeneratedTypedCalls, WhereReadsTheMaskAsWords) {
  for (int64_t n : kCounts) {
    EXPECT_EQ(wrong(kWhere, n, {0, n + 1}, 2 * n + 3), 0) << n;
    // The output over the mask (copied first: its NaN-like words intact),
    // and in place over the f32 input.
    EXPECT_EQ(wrong(kWhere, n, {3, n + 5}, 0), 0) << n;
    EXPECT_EQ(wrong(kWhere, n, {0, n + 1}, n + 1), 0) << n;
  }
}

TEST_P(GeneratedTypedCalls, CastsBetweenF32AndI32) {
  for (int64_t n : kCounts) {
    EXPECT_EQ(wrong(kCastI32, n, {2}, n + 3), 0) << n;
    EXPECT_EQ(wrong(kCastI32, n, {0}, 0), 0) << n;
    EXPECT_EQ(wrong(kCastF32, n, {n + 2}, 1), 0) << n;
    EXPECT_EQ(wrong(kCastF32, n, {0}, 0), 0) << n;
    EXPECT_EQ(wrong(kCastF32, n, {2}, 0), 0) << n;
  }
}

// The copy of an overlapping input keeps its words: the NaN-like ones are
// not quieted, -0 stays INT_MIN.
TEST(GeneratedTypedCopies, AreOfBytes) {
  std::vector<uint32_t> words(std::begin(kWords), std::end(kWords));
  words.resize(40, 0u);
  const int64_t n = int64_t(sizeof(kWords) / 4);
  GeneratedCall call = GeneratedCall::elementWise(
      nullptr, {reinterpret_cast<const float *>(words.data())},
      reinterpret_cast<float *>(words.data() + 1), n);
  std::vector<std::vector<float>> copies;
  std::vector<const float *> inputs = separateOverlaps(call, copies);
  ASSERT_EQ(copies.size(), 1u);
  ASSERT_EQ(inputs[0], copies[0].data());
  ASSERT_EQ(int64_t(copies[0].size()), n);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(bitsOf(copies[0][i]), kWords[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Backends, GeneratedTypedCalls, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return info.param ? "HostEmulation" : "Cpu";
                         });

} // namespace
