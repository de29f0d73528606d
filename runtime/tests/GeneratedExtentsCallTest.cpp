//===- GeneratedExtentsCallTest.cpp - Calls of kernels with fixed extents -===//
//
// Generated kernels whose memrefs have, along some dimensions, a fixed size
// of their own (GeneratedKernelSpec::extents): a slice reads a window of its
// input, a slice's gradient writes a window of its output (zeros in the
// rest), a concat's inputs each cover a part of the output. The runtime
// builds each memref's descriptor from its own sizes (a recording entry
// checks them, over whole calls and row ranges), counts its elements from
// them (overlaps, copies), and the backends run the stand-ins (kSlice,
// kSliceGrad, kConcat) split over threads, in place and over overlaps.
//
//===----------------------------------------------------------------------===//

#include "GeneratedKernelsSupport.h"

#include "gpipe/runtime/backends/GeneratedCode.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/backends/host/HostBackend.h"

#include <gtest/gtest.h>

#include <memory>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;

namespace {

/// One memref descriptor as a kernel received it.
struct Seen {
  const float *allocated, *aligned;
  int64_t offset;
  std::vector<int64_t> sizes, strides;
};

/// The ranks of the memrefs the recording entry reads (set by each test),
/// and what it saw.
std::vector<unsigned> recordedRanks;
std::vector<Seen> recorded;

/// A kernel entry (GeneratedEntry) that records its descriptors and
/// computes nothing.
void recordDescriptors(void **args) {
  recorded.clear();
  for (size_t m = 0; m < recordedRanks.size(); ++m) {
    const auto *memref = static_cast<const MemRefDescriptor *>(args[m]);
    const unsigned r = recordedRanks[m];
    recorded.push_back(
        {memref->allocated, memref->aligned, memref->offset,
         std::vector<int64_t>(memref->rest, memref->rest + r),
         std::vector<int64_t>(memref->rest + r, memref->rest + 2 * r)});
  }
}

/// A recording call over `space`, its memrefs `dims`, the inputs' first,
/// with `extents`; the inputs and the output at 1000-element steps of
/// `memory`.
GeneratedCall recordingCall(std::vector<int64_t> space,
                            std::vector<std::vector<unsigned>> dims,
                            std::vector<std::vector<int64_t>> extents,
                            float *memory) {
  GeneratedCall call;
  call.entry = recordDescriptors;
  call.space = std::move(space);
  call.outputDims = dims.back();
  dims.pop_back();
  call.inputDims = std::move(dims);
  call.extents = std::move(extents);
  recordedRanks.clear();
  for (size_t k = 0; k < call.inputDims.size(); ++k) {
    call.inputs.push_back(memory + 1000 * k);
    recordedRanks.push_back(unsigned(call.inputDims[k].size()));
  }
  call.output = memory + 1000 * call.inputDims.size();
  recordedRanks.push_back(unsigned(call.outputDims.size()));
  return call;
}

void expectSeen(size_t m, const float *base, std::vector<int64_t> sizes,
                std::vector<int64_t> strides) {
  ASSERT_LT(m, recorded.size());
  SCOPED_TRACE("memref " + std::to_string(m));
  EXPECT_EQ(recorded[m].allocated, base);
  EXPECT_EQ(recorded[m].aligned, base);
  EXPECT_EQ(recorded[m].offset, 0);
  EXPECT_EQ(recorded[m].sizes, sizes);
  EXPECT_EQ(recorded[m].strides, strides);
}

// A slice's gradient over the window [5, 3]: its output is [5, 6], and a
// range of rows starts 6 elements a row into it, 3 into the input.
TEST(GeneratedExtents, DescriptorsHaveTheMemrefsOwnSizes) {
  std::vector<float> memory(3000);
  float *base = memory.data();
  GeneratedCall call =
      recordingCall({5, 3}, {{0, 1}, {0, 1}}, {{-1, -1}, {-1, 6}}, base);
  EXPECT_TRUE(call.splitsRows());
  EXPECT_EQ(call.sizeOf(0, 1), 3);
  EXPECT_EQ(call.sizeOf(1, 0), 5);
  EXPECT_EQ(call.sizeOf(1, 1), 6);
  EXPECT_EQ(call.elementsOf(0), 15);
  EXPECT_EQ(call.outputElements(), 30);

  runGeneratedRange(call, call.inputs.data(), 0, 5);
  expectSeen(0, base, {5, 3}, {3, 1});
  expectSeen(1, base + 1000, {5, 6}, {6, 1});

  runGeneratedRange(call, call.inputs.data(), 2, 4);
  expectSeen(0, base + 2 * 3, {2, 3}, {3, 1});
  expectSeen(1, base + 1000 + 2 * 6, {2, 6}, {6, 1});
}

// Rank 3: a transposed input with a fixed extent along its dimension 1, an
// input of dimension 2 alone with one (never offset by a range), a plain
// one, and an output with a fixed extent along dimension 2.
TEST(GeneratedExtents, RowRangesOffsetByTheOwnSizesAfterTheFirst) {
  std::vector<float> memory(5000);
  float *base = memory.data();
  GeneratedCall call =
      recordingCall({4, 5, 7}, {{0, 2, 1}, {2}, {1, 2}, {0, 1, 2}},
                    {{-1, 3, -1}, {9}, {-1, -1}, {-1, -1, 2}}, base);
  EXPECT_TRUE(call.splitsRows());
  EXPECT_EQ(call.elementsOf(0), 4 * 3 * 5);
  EXPECT_EQ(call.elementsOf(1), 9);
  EXPECT_EQ(call.elementsOf(2), 5 * 7);
  EXPECT_EQ(call.outputElements(), 4 * 5 * 2);

  runGeneratedRange(call, call.inputs.data(), 0, 4);
  expectSeen(0, base, {4, 3, 5}, {15, 5, 1});
  expectSeen(1, base + 1000, {9}, {1});
  expectSeen(2, base + 2000, {5, 7}, {7, 1});
  expectSeen(3, base + 3000, {4, 5, 2}, {10, 2, 1});

  runGeneratedRange(call, call.inputs.data(), 1, 3);
  expectSeen(0, base + 1 * 15, {2, 3, 5}, {15, 5, 1});
  expectSeen(1, base + 1000, {9}, {1});
  expectSeen(2, base + 2000, {5, 7}, {7, 1});
  expectSeen(3, base + 3000 + 1 * 10, {2, 5, 2}, {10, 2, 1});
}

// Dimension 0 reduced: the call runs whole, the input with its own width.
TEST(GeneratedExtents, AWholeCallHasTheOwnSizesToo) {
  std::vector<float> memory(3000);
  float *base = memory.data();
  GeneratedCall call =
      recordingCall({4, 5}, {{0, 1}, {1}}, {{-1, 8}, {-1}}, base);
  EXPECT_FALSE(call.splitsRows());
  runGeneratedOnHost(call);
  expectSeen(0, base, {4, 8}, {8, 1});
  expectSeen(1, base + 1000, {5}, {1});
}

// Dimension 0 reduced, no extent along the output's dimension 1: a range of
// columns starts at its first column of each memref with the whole memrefs'
// strides; the transposed input's part is its rows [1, 3).
TEST(GeneratedExtents, AColumnRangeOfADim0ReductionIsStrided) {
  std::vector<float> memory(4000);
  float *base = memory.data();
  GeneratedCall call = recordingCall({4, 5}, {{0, 1}, {1, 0}, {1}},
                                     {{-1, -1}, {-1, -1}, {-1}}, base);
  EXPECT_FALSE(call.splitsRows());
  EXPECT_EQ(call.splitDimension(), 1);
  EXPECT_EQ(call.workPerIndex(1), 4);
  runGeneratedRange(call, call.inputs.data(), 1, 3);
  expectSeen(0, base + 1, {4, 2}, {5, 1});
  expectSeen(1, base + 1000 + 1 * 4, {2, 4}, {4, 1});
  expectSeen(2, base + 2000 + 1, {2}, {1});
  // A whole call on the host: the whole columns.
  runGeneratedOnHost(call);
  expectSeen(0, base, {4, 5}, {5, 1});
  expectSeen(2, base + 2000, {5}, {1});
}

/// A call of the stand-in `kernel` of extentKernelCode() over `space`, its
/// inputs at `inputAt` and output at `outputAt` of `memory` (not run).
GeneratedCall extentCall(int kernel, std::vector<int64_t> space, float *memory,
                         const std::vector<int64_t> &inputAt,
                         int64_t outputAt) {
  const GeneratedKernelSpec spec = extentKernelCode().kernels[kernel];
  GeneratedCall call;
  call.space = std::move(space);
  call.inputDims = spec.inputDims;
  call.outputDims = spec.outputDims;
  call.extents = spec.extents;
  for (int64_t at : inputAt)
    call.inputs.push_back(memory + at);
  call.output = memory + outputAt;
  return call;
}

TEST(GeneratedExtents, OverlapsCountTheOwnElements) {
  std::vector<float> memory(1000);
  float *m = memory.data();
  // A slice over [4, 3]: its input is [4, 6], 24 elements. The output 12
  // elements in overlaps it (it would not if the input had the space's 12).
  EXPECT_EQ(overlappingInputs(extentCall(kSlice, {4, 3}, m, {0}, 12)),
            (std::vector<size_t>{0}));
  EXPECT_EQ(overlappingInputs(extentCall(kSlice, {4, 3}, m, {0}, 24)),
            (std::vector<size_t>{}));
  // Its gradient over [4, 3]: the output is [4, 6], 24 elements; an input
  // 12 in overlaps it.
  EXPECT_EQ(overlappingInputs(extentCall(kSliceGrad, {4, 3}, m, {12}, 0)),
            (std::vector<size_t>{0}));
  EXPECT_EQ(overlappingInputs(extentCall(kSliceGrad, {4, 3}, m, {24}, 0)),
            (std::vector<size_t>{}));
  // At the output's address with the output's dimensions but not its
  // extents: not in place (it would be without extents).
  EXPECT_EQ(overlappingInputs(extentCall(kSliceGrad, {4, 3}, m, {0}, 0)),
            (std::vector<size_t>{0}));
  GeneratedCall plain = extentCall(kSliceGrad, {4, 3}, m, {0}, 0);
  plain.extents.clear();
  EXPECT_EQ(overlappingInputs(plain), (std::vector<size_t>{}));
  // A concat's input at the output's address: the output's dimensions, its
  // own extents.
  EXPECT_EQ(overlappingInputs(extentCall(kConcat, {4, 6}, m, {0, 100}, 0)),
            (std::vector<size_t>{0}));
  // Dimensions and extents both the output's: in place.
  GeneratedCall same = extentCall(kSliceGrad, {4, 3}, m, {0}, 0);
  same.extents = {{-1, 6}, {-1, 6}};
  EXPECT_EQ(overlappingInputs(same), (std::vector<size_t>{}));
  same.extents = {{-1, 5}, {-1, 6}};
  EXPECT_EQ(overlappingInputs(same), (std::vector<size_t>{0}));
}

TEST(GeneratedExtents, CopiesHaveTheInputsOwnElements) {
  std::vector<float> memory(100);
  for (size_t i = 0; i < memory.size(); ++i)
    memory[i] = float(i);
  // The slice's input [2, 6] at 0, its output [2, 3] at 6.
  GeneratedCall call = extentCall(kSlice, {2, 3}, memory.data(), {0}, 6);
  std::vector<std::vector<float>> copies;
  std::vector<const float *> inputs = separateOverlaps(call, copies);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].size(), 12u);
  EXPECT_EQ(copies[0].back(), 11.0f);
  EXPECT_EQ(inputs[0], copies[0].data());
}

//===----------------------------------------------------------------------===//
// The stand-ins on the backends
//===----------------------------------------------------------------------===//

/// Each stand-in's memrefs' elements per row (its inputs', then its
/// output's) and the space's columns.
struct Widths {
  std::vector<int64_t> inputs;
  int64_t output, spaceColumns;
};

Widths widthsOf(int kernel) {
  switch (kernel) {
  case kSlice:
    return {{6}, 3, 3};
  case kSliceGrad:
    return {{3}, 6, 3};
  default:
    return {{2, 4}, 6, 6};
  }
}

/// What stand-in `kernel` writes over `rows` rows from `memory`, its inputs
/// at `inputAt`: plain loops.
std::vector<float> expectedOf(int kernel, int64_t rows,
                              const std::vector<float> &memory,
                              const std::vector<int64_t> &inputAt) {
  const float *a = memory.data() + inputAt[0];
  std::vector<float> out;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < widthsOf(kernel).output; ++c)
      switch (kernel) {
      case kSlice:
        out.push_back(a[i * 6 + 1 + 2 * c]);
        break;
      case kSliceGrad:
        out.push_back(c % 2 == 1 ? a[i * 3 + (c - 1) / 2] : 0.0f);
        break;
      default:
        out.push_back(c < 2 ? a[i * 2 + c]
                            : memory[inputAt[1] + i * 4 + (c - 2)]);
      }
  return out;
}

class GeneratedExtentCalls : public ::testing::TestWithParam<bool> {
protected:
  std::unique_ptr<DeviceBackend> backend() const {
    if (GetParam())
      return std::make_unique<HostBackend>(1);
    CpuThreading threading;
    threading.threadsPerDevice = 3; // a long call runs as several ranges
    return std::make_unique<CpuBackend>(1, threading);
  }

  /// Runs `kernel` over `rows` rows, its inputs at `inputAt` and output at
  /// `outputAt` of one buffer; the output elements that differ from
  /// expectedOf, and the elements outside it that changed.
  int64_t wrong(int kernel, int64_t rows, const std::vector<int64_t> &inputAt,
                int64_t outputAt) {
    std::string error;
    auto code = LoadedCode::load(extentKernelCode(), hostCpuFeatures(), error);
    EXPECT_TRUE(code) << error;
    if (!code)
      return -1;
    const Widths widths = widthsOf(kernel);
    int64_t room = outputAt + rows * widths.output;
    for (size_t k = 0; k < inputAt.size(); ++k)
      room = std::max(room, inputAt[k] + rows * widths.inputs[k]);
    room += 4;
    std::unique_ptr<DeviceBackend> device = backend();
    void *memory = nullptr;
    EXPECT_EQ(device->allocate(0, room * 4, &memory), "");
    float *buffer = static_cast<float *>(memory);
    for (int64_t i = 0; i < room; ++i)
      buffer[i] = float((i * 37) % 23) * 0.25f - 2.75f;
    const std::vector<float> before(buffer, buffer + room);
    GeneratedCall call = extentCall(kernel, {rows, widths.spaceColumns}, buffer,
                                    inputAt, outputAt);
    call.entry = code->entry(size_t(kernel));
    device->generated(device->computeStream(0), call);
    EXPECT_EQ(device->synchronize(std::chrono::seconds(60)), "");
    const std::vector<float> expected =
        expectedOf(kernel, rows, before, inputAt);
    int64_t count = 0;
    for (size_t i = 0; i < expected.size(); ++i)
      count += buffer[outputAt + int64_t(i)] != expected[i];
    for (int64_t i = 0; i < room; ++i)
      if (i < outputAt || i >= outputAt + int64_t(expected.size()))
        count += buffer[i] != before[i];
    return count;
  }
};

// 20011 rows: several of the CPU backend's chunks (its grain is 16384 /
// the space's columns rows); 5 rows run whole.
constexpr int64_t kRowCounts[] = {20011, 5};

TEST_P(GeneratedExtentCalls, Slice) {
  for (int64_t rows : kRowCounts) {
    EXPECT_EQ(wrong(kSlice, rows, {3}, rows * 6 + 5), 0) << rows;
    // The output over the input's last rows, and over its first.
    EXPECT_EQ(wrong(kSlice, rows, {0}, rows * 3), 0) << rows;
    EXPECT_EQ(wrong(kSlice, rows, {2}, 0), 0) << rows;
  }
}

TEST_P(GeneratedExtentCalls, SliceGradientWritesItsWholeOutput) {
  for (int64_t rows : kRowCounts) {
    EXPECT_EQ(wrong(kSliceGrad, rows, {1}, rows * 3 + 2), 0) << rows;
    // The input at the output's address, and within its rows.
    EXPECT_EQ(wrong(kSliceGrad, rows, {0}, 0), 0) << rows;
    EXPECT_EQ(wrong(kSliceGrad, rows, {rows * 3}, 0), 0) << rows;
  }
}

TEST_P(GeneratedExtentCalls, Concat) {
  for (int64_t rows : kRowCounts) {
    EXPECT_EQ(wrong(kConcat, rows, {1, rows * 2 + 3}, rows * 6 + 5), 0) << rows;
    // Each input at the output's address.
    EXPECT_EQ(wrong(kConcat, rows, {0, rows * 6 + 1}, 0), 0) << rows;
    EXPECT_EQ(wrong(kConcat, rows, {rows * 4 + 1, 0}, 0), 0) << rows;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, GeneratedExtentCalls, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return info.param ? "HostEmulation" : "Cpu";
                         });

} // namespace
