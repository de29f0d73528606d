//===- GeneratedCodeTest.cpp - Loading and calling generated kernels ------===//
//
// The loader of a bundle's native code (backends/GeneratedCode.h) on the
// stand-in kernels (testdata/GeneratedKernels.c): base64, the choice of a
// variant for a CPU (with made-up CPUs), the ELF checks, the symbols, the
// memref descriptors, and the backends' calls of element-wise, broadcasting
// and reducing kernels: split over threads, in place, and with an output
// that overlaps an input.
//
//===----------------------------------------------------------------------===//

#include "GeneratedKernelsSupport.h"

#include "gpipe/runtime/backends/GeneratedCode.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/backends/host/HostBackend.h"
#include "gpipe/runtime/bundle/Base64.h"

#include <gtest/gtest.h>

#include <elf.h>

#include <cstring>
#include <memory>
#include <numeric>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;

namespace {

TEST(Base64, RoundTripsEveryLength) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    std::string decoded, error;
    std::string text = encodeBase64(bytes);
    EXPECT_EQ(text.size() % 4, 0u);
    ASSERT_TRUE(decodeBase64(text, decoded, error)) << error;
    EXPECT_EQ(decoded, bytes);
    bytes += char(i * 37 + 11);
  }
  EXPECT_EQ(encodeBase64("gpipe"), "Z3BpcGU=");
}

TEST(Base64, RefusesDamage) {
  std::string bytes, error;
  EXPECT_FALSE(decodeBase64("Z3BpcGU", bytes, error));
  EXPECT_NE(error.find("multiple of 4"), std::string::npos) << error;
  EXPECT_FALSE(decodeBase64("Z3B!cGU=", bytes, error));
  EXPECT_NE(error.find("'!' at offset 3"), std::string::npos) << error;
  EXPECT_FALSE(decodeBase64("Z3=pcGU=", bytes, error)); // '=' inside
  EXPECT_FALSE(decodeBase64("Z3Bp\ncGU", bytes, error));
  EXPECT_FALSE(decodeBase64("Z===", bytes, error));
}

TEST(ChooseVariant, TakesTheWidestTheCpuRuns) {
  const std::vector<std::string> all = {"x86-64", "x86-64-v3", "x86-64-v4"};
  std::string error;
  CpuFeatures baseline{true, false, false}, v3{true, true, false},
      v4{true, true, true};
  EXPECT_EQ(chooseVariant(all, baseline, error), 0u);
  EXPECT_EQ(chooseVariant(all, v3, error), 1u);
  EXPECT_EQ(chooseVariant(all, v4, error), 2u);
  // In any order.
  EXPECT_EQ(chooseVariant({"x86-64-v4", "x86-64", "x86-64-v3"}, v3, error), 2u);
  EXPECT_EQ(chooseVariant({"x86-64-v3"}, v4, error), 0u);
}

TEST(ChooseVariant, NamesTheVariantsWhenTheCpuRunsNone) {
  std::string error;
  EXPECT_FALSE(chooseVariant({"x86-64-v4", "x86-64-v3"},
                             CpuFeatures{true, false, false}, error));
  EXPECT_EQ(error, "the bundle's generated kernels are built for x86-64-v4, "
                   "x86-64-v3; this CPU supports none of them (it runs "
                   "x86-64)");
  EXPECT_FALSE(chooseVariant({"x86-64"}, CpuFeatures{}, error));
  EXPECT_NE(error.find("it is not an x86-64 CPU"), std::string::npos) << error;
}

TEST(ChooseVariant, RefusesAnUnknownIsa) {
  std::string error;
  EXPECT_FALSE(chooseVariant({"x86-64", "x86-64-v5"},
                             CpuFeatures{true, true, true}, error));
  EXPECT_NE(error.find("unknown isa 'x86-64-v5'"), std::string::npos) << error;
}

TEST(CpuFeatures, AgreeWithTheCompiler) {
  const CpuFeatures cpu = hostCpuFeatures();
  EXPECT_TRUE(cpu.x86_64);
  EXPECT_TRUE(!cpu.v4 || cpu.v3);
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
  EXPECT_EQ(cpu.v3, bool(__builtin_cpu_supports("x86-64-v3")));
  EXPECT_EQ(cpu.v4, bool(__builtin_cpu_supports("x86-64-v4")));
#endif
}

/// The library's header with `field` at `offset` set to `value`.
std::string patched(std::string bytes, size_t offset, uint16_t value) {
  std::memcpy(&bytes[offset], &value, sizeof value);
  return bytes;
}

TEST(ElfCheck, AcceptsTheStandIns) {
  EXPECT_EQ(checkElfSharedObject(kernelLibraryBytes(), "x86-64"), "");
}

TEST(ElfCheck, RefusesWhatIsNotAnX8664SharedObject) {
  const std::string good = kernelLibraryBytes();
  const std::string prefix =
      "the code artifact for x86-64-v3 is not an x86-64 ELF shared object (";
  auto check = [&](const std::string &bytes) {
    return checkElfSharedObject(bytes, "x86-64-v3");
  };
  EXPECT_EQ(check("#!/bin/sh\nrm -rf ~\n"), prefix + "no ELF magic)");
  EXPECT_EQ(check(good.substr(0, 20)),
            prefix + "its ELF header is cut short at 20 bytes)");
  EXPECT_EQ(check(patched(good, offsetof(Elf64_Ehdr, e_machine), EM_AARCH64)),
            prefix + "built for AArch64)");
  EXPECT_EQ(check(patched(good, offsetof(Elf64_Ehdr, e_type), ET_EXEC)),
            prefix + "an executable)");
  std::string narrow = good;
  narrow[EI_CLASS] = ELFCLASS32;
  EXPECT_EQ(check(narrow), prefix + "a 32-bit ELF)");
}

TEST(LoadedCode, FindsEveryKernel) {
  std::string error;
  auto code = LoadedCode::load(kernelCode(), hostCpuFeatures(), error);
  ASSERT_TRUE(code) << error;
  EXPECT_EQ(code->isa(), "x86-64");
  std::vector<float> a = {1, -2, 3}, b = {0.5f, 1, -4}, c = {1, 1, 1}, y(3);
  runGeneratedOnHost(GeneratedCall::elementWise(
      code->entry(kMulSub), {a.data(), b.data(), c.data()}, y.data(), 3));
  EXPECT_EQ(y, (std::vector<float>{-0.5f, -3, -13}));
}

TEST(LoadedCode, RefusesAMissingSymbol) {
  GeneratedCode code = kernelCode();
  code.kernels[1].symbol = "gpipe_kernel_1_elsewhere";
  std::string error;
  EXPECT_FALSE(LoadedCode::load(code, hostCpuFeatures(), error));
  EXPECT_EQ(error, "the code artifact has no kernel 'gpipe_kernel_1_elsewhere' "
                   "(ops mul(in0,in1)->t0; sub(t0,in2)->out): built for "
                   "another bundle?");
}

TEST(LoadedCode, ChecksEveryVariantNotOnlyThisCpus) {
  GeneratedCode code = kernelCode();
  code.cpu.push_back(
      {"x86-64-v4",
       patched(code.cpu[0].bytes, offsetof(Elf64_Ehdr, e_machine), EM_RISCV)});
  std::string error;
  EXPECT_FALSE(LoadedCode::load(code, CpuFeatures{true, false, false}, error));
  EXPECT_EQ(error, "the code artifact for x86-64-v4 is not an x86-64 ELF "
                   "shared object (built for RISC-V)");
}

TEST(LoadedCode, RefusesACpuThatRunsNoVariant) {
  std::string error;
  EXPECT_FALSE(LoadedCode::load(kernelCode("x86-64-v4"),
                                CpuFeatures{true, true, false}, error));
  EXPECT_NE(error.find("built for x86-64-v4; this CPU supports none"),
            std::string::npos)
      << error;
}

// Two bundles' code loaded at once (and again after one is gone) keep their
// own libraries: glibc knows a loaded object by its path, /proc/self/fd/N.
TEST(LoadedCode, TwoLoadsKeepTheirOwnCode) {
  GeneratedCode other = kernelCode();
  other.cpu[0].bytes = kernelLibraryBytes(/*other=*/true);
  for (GeneratedKernelSpec &kernel : other.kernels)
    kernel.symbol.replace(kernel.symbol.size() - 4, 4, "other");
  std::string error;
  for (int round = 0; round < 3; ++round) {
    auto first = LoadedCode::load(kernelCode(), hostCpuFeatures(), error);
    ASSERT_TRUE(first) << error;
    auto second = LoadedCode::load(other, hostCpuFeatures(), error);
    ASSERT_TRUE(second) << error;
    EXPECT_NE(first->entry(0), second->entry(0));
  }
}

/// Runs kernel 0 (relu(a + b)) over n elements on `backend`'s device 0,
/// with a and the output at `inputAt` and `outputAt` elements into one
/// buffer of 2n + 4 (so that they may overlap); returns how many output
/// elements differ from relu(a + b) on the values a had before.
int64_t wrongAddRelu(DeviceBackend &backend, int64_t n, int64_t inputAt,
                     int64_t outputAt) {
  std::string error;
  auto code = LoadedCode::load(kernelCode(), hostCpuFeatures(), error);
  EXPECT_TRUE(code) << error;
  if (!code)
    return n;
  const int64_t room = 2 * n + 4;
  void *memory = nullptr, *other = nullptr;
  EXPECT_EQ(backend.allocate(0, room * 4, &memory), "");
  EXPECT_EQ(backend.allocate(0, n * 4, &other), "");
  float *buffer = static_cast<float *>(memory),
        *b = static_cast<float *>(other);
  for (int64_t i = 0; i < room; ++i)
    buffer[i] = float(i % 7) - 3.0f;
  for (int64_t i = 0; i < n; ++i)
    b[i] = float(i % 5) * 0.5f - 1.0f;
  const std::vector<float> before(buffer, buffer + room);
  backend.generated(backend.computeStream(0),
                    GeneratedCall::elementWise(code->entry(kAddRelu),
                                               {buffer + inputAt, b},
                                               buffer + outputAt, n));
  EXPECT_EQ(backend.synchronize(std::chrono::seconds(60)), "");
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i)
    wrong += buffer[outputAt + i] != std::max(before[inputAt + i] + b[i], 0.0f);
  return wrong;
}

class GeneratedCalls : public ::testing::TestWithParam<bool> {
protected:
  std::unique_ptr<DeviceBackend> backend() const {
    if (GetParam())
      return std::make_unique<HostBackend>(1);
    CpuThreading threading;
    threading.threadsPerDevice = 3; // a long call runs as several ranges
    return std::make_unique<CpuBackend>(1, threading);
  }
};

constexpr int64_t kLong = 100003; // several of the CPU backend's chunks

TEST_P(GeneratedCalls, SplitOverThreads) {
  EXPECT_EQ(wrongAddRelu(*backend(), kLong, 1, kLong + 2), 0);
  EXPECT_EQ(wrongAddRelu(*backend(), 5, 1, 7), 0);
}

TEST_P(GeneratedCalls, InPlace) {
  EXPECT_EQ(wrongAddRelu(*backend(), kLong, 1, 1), 0);
  EXPECT_EQ(wrongAddRelu(*backend(), 5, 1, 1), 0);
}

// The output one element after the input: a plain loop would read what it
// has just written; one before it, a later thread's range would read what
// an earlier one wrote.
TEST_P(GeneratedCalls, OutputOverlapsAnInputInPart) {
  for (int64_t n : {int64_t(5), kLong}) {
    EXPECT_EQ(wrongAddRelu(*backend(), n, 1, 2), 0) << n;
    EXPECT_EQ(wrongAddRelu(*backend(), n, 2, 1), 0) << n;
    EXPECT_EQ(wrongAddRelu(*backend(), n, 1, n / 2), 0) << n;
  }
}

/// What stand-in kernel `kernel` (kBroadcastAdd, kRowSum, kRowSumAdd,
/// kColumnSum)
/// computes over space [rows, cols] from `memory`, its inputs at `inputAt`:
/// plain loops, in double.
std::vector<double> expectedOf(int kernel, int64_t rows, int64_t cols,
                               const std::vector<float> &memory,
                               const std::vector<int64_t> &inputAt) {
  const float *x = memory.data() + inputAt[0];
  std::vector<double> out;
  switch (kernel) {
  case kBroadcastAdd:
    out.assign(rows * cols, 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        out[i * cols + j] =
            double(x[i * cols + j]) + double(memory[inputAt[1] + j]);
    break;
  case kRowSum:
    out.assign(rows, 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        out[i] += x[i * cols + j];
    break;
  case kRowSumAdd:
    out.assign(rows, 0.0);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j)
        out[i] += x[i * cols + j];
      out[i] += memory[inputAt[1] + i];
    }
    break;
  case kColumnSum:
    out.assign(cols, 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        out[j] += x[i * cols + j];
    break;
  default:
    ADD_FAILURE() << "no reference for kernel " << kernel;
  }
  return out;
}

/// Runs stand-in kernel `kernel` of rank 2 over space [rows, cols] on
/// `backend`'s device 0, its inputs at `inputAt` and its output at
/// `outputAt` elements into one buffer (so that they may overlap; the rest
/// holds other values); returns how many output elements differ from
/// expectedOf on the buffer's values before the call. The values are
/// multiples of 1/4 below 3 in magnitude: every sum here is exact, in any
/// order.
int64_t wrongCall(DeviceBackend &backend, int kernel, int64_t rows,
                  int64_t cols, const std::vector<int64_t> &inputAt,
                  int64_t outputAt) {
  std::string error;
  const GeneratedCode section = kernelCode();
  auto code = LoadedCode::load(section, hostCpuFeatures(), error);
  EXPECT_TRUE(code) << error;
  if (!code)
    return -1;
  const GeneratedKernelSpec &spec = section.kernels[kernel];
  GeneratedCall call;
  call.entry = code->entry(kernel);
  call.space = {rows, cols};
  call.inputDims = spec.inputDims;
  call.outputDims = spec.outputDims;
  int64_t room = outputAt + call.outputElements();
  for (size_t k = 0; k < inputAt.size(); ++k)
    room = std::max(room, inputAt[k] + call.elementsOf(k));
  room += 4;
  void *memory = nullptr;
  EXPECT_EQ(backend.allocate(0, room * 4, &memory), "");
  float *buffer = static_cast<float *>(memory);
  for (int64_t i = 0; i < room; ++i)
    buffer[i] = float((i * 37) % 23) * 0.25f - 2.75f;
  const std::vector<float> before(buffer, buffer + room);
  for (int64_t at : inputAt)
    call.inputs.push_back(buffer + at);
  call.output = buffer + outputAt;
  backend.generated(backend.computeStream(0), call);
  EXPECT_EQ(backend.synchronize(std::chrono::seconds(60)), "");
  const std::vector<double> expected =
      expectedOf(kernel, rows, cols, before, inputAt);
  int64_t wrong = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    wrong += double(buffer[outputAt + i]) != expected[i];
  // Nothing outside the output is written.
  for (int64_t i = 0; i < room; ++i)
    if (i < outputAt || i >= outputAt + int64_t(expected.size()))
      wrong += buffer[i] != before[i];
  return wrong;
}

// Rows and columns for several of the CPU backend's chunks of rows (its
// grain is 16384 / cols rows): 3001 x 37 in ranges of 1326, 1326 and 349
// rows; and a call small enough to run whole.
struct Space {
  int64_t rows, cols;
};
constexpr Space kSpaces[] = {{3001, 37}, {2003, 64}, {5, 3}};

TEST_P(GeneratedCalls, BroadcastsAnInputOverTheRows) {
  for (Space sp : kSpaces) {
    const int64_t n = sp.rows * sp.cols;
    EXPECT_EQ(wrongCall(*backend(), kBroadcastAdd, sp.rows, sp.cols, {1, n + 2},
                        n + sp.cols + 3),
              0)
        << sp.rows << " x " << sp.cols;
  }
}

TEST_P(GeneratedCalls, SumsRows) {
  for (Space sp : kSpaces) {
    const int64_t n = sp.rows * sp.cols;
    EXPECT_EQ(wrongCall(*backend(), kRowSum, sp.rows, sp.cols, {2}, n + 5), 0)
        << sp.rows << " x " << sp.cols;
  }
}

// Dimension 0 reduced: the CPU threads split the output's columns, in parts
// of whole tiles (multiples of 64 columns): 300 x 1000 runs as 3 ranges, each
// reading its strided part of the input.
TEST_P(GeneratedCalls, SumsColumns) {
  for (Space sp : {kSpaces[0], kSpaces[1], kSpaces[2], Space{300, 1000}}) {
    const int64_t n = sp.rows * sp.cols;
    EXPECT_EQ(wrongCall(*backend(), kColumnSum, sp.rows, sp.cols, {3}, n + 4),
              0)
        << sp.rows << " x " << sp.cols;
  }
}

// An element-wise kernel's output at an input with its dimensions: in place.
TEST_P(GeneratedCalls, BroadcastAddInPlace) {
  for (Space sp : kSpaces) {
    const int64_t n = sp.rows * sp.cols;
    EXPECT_EQ(
        wrongCall(*backend(), kBroadcastAdd, sp.rows, sp.cols, {1, n + 2}, 1),
        0)
        << sp.rows << " x " << sp.cols;
  }
}

// Each of these overlaps would read what the kernel (or another range of
// it) has already written, unless the input is copied first.
TEST_P(GeneratedCalls, CopiesAnInputThatOverlapsTheOutput) {
  for (Space sp : kSpaces) {
    const int64_t n = sp.rows * sp.cols, c = sp.cols;
    const std::string at = std::to_string(sp.rows) + " x " + std::to_string(c);
    // The broadcast input at the output's address: its dimensions are not
    // the output's, so the first row overwrites it.
    EXPECT_EQ(wrongCall(*backend(), kBroadcastAdd, sp.rows, c, {c, 0}, 0), 0)
        << at;
    // The output a row after the input and a row before it.
    EXPECT_EQ(wrongCall(*backend(), kBroadcastAdd, sp.rows, c, {0, n + c}, c),
              0)
        << at;
    EXPECT_EQ(wrongCall(*backend(), kBroadcastAdd, sp.rows, c, {c, n + c}, 0),
              0)
        << at;
    // A reduction never runs in place: at the input's address, and over
    // its last rows.
    EXPECT_EQ(wrongCall(*backend(), kRowSum, sp.rows, c, {0}, 0), 0) << at;
    EXPECT_EQ(wrongCall(*backend(), kRowSum, sp.rows, c, {0}, n - sp.rows), 0)
        << at;
    EXPECT_EQ(wrongCall(*backend(), kColumnSum, sp.rows, c, {0}, 0), 0) << at;
    EXPECT_EQ(wrongCall(*backend(), kColumnSum, sp.rows, c, {0}, c), 0) << at;
    // Nor with an input that has the output's dimensions.
    EXPECT_EQ(wrongCall(*backend(), kRowSumAdd, sp.rows, c, {0, n + 2}, n + 2),
              0)
        << at;
  }
}

TEST_P(GeneratedCalls, SumsRowsPlusAVector) {
  for (Space sp : kSpaces) {
    const int64_t n = sp.rows * sp.cols;
    EXPECT_EQ(wrongCall(*backend(), kRowSumAdd, sp.rows, sp.cols, {1, n + 2},
                        n + sp.rows + 3),
              0)
        << sp.rows << " x " << sp.cols;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, GeneratedCalls, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return info.param ? "HostEmulation" : "Cpu";
                         });

// StridedMemRefType<float, r> for r = 0, 1, 2 and 6, field by field.
TEST(MemRefDescriptor, IsLaidOutAsMlirsForEveryRank) {
  float data[4];
  const int64_t sizes[kMaxKernelRank] = {2, 3, 4, 5, 6, 7};
  auto fields = [](const MemRefDescriptor &m) {
    const char *bytes = reinterpret_cast<const char *>(&m);
    std::vector<int64_t> out(sizeof m / 8);
    std::memcpy(out.data(), bytes, out.size() * 8);
    return out;
  };
  const int64_t base = int64_t(reinterpret_cast<intptr_t>(data));
  std::vector<int64_t> rank0 = fields(contiguousMemRef(data, sizes, 0));
  EXPECT_EQ(std::vector<int64_t>(rank0.begin(), rank0.begin() + 3),
            (std::vector<int64_t>{base, base, 0}));
  std::vector<int64_t> rank1 = fields(contiguousMemRef(data, sizes, 1));
  EXPECT_EQ(std::vector<int64_t>(rank1.begin(), rank1.begin() + 5),
            (std::vector<int64_t>{base, base, 0, 2, 1}));
  std::vector<int64_t> rank2 = fields(contiguousMemRef(data, sizes, 2));
  EXPECT_EQ(std::vector<int64_t>(rank2.begin(), rank2.begin() + 7),
            (std::vector<int64_t>{base, base, 0, 2, 3, 3, 1}));
  std::vector<int64_t> rank6 = fields(contiguousMemRef(data, sizes, 6));
  EXPECT_EQ(rank6, (std::vector<int64_t>{base, base, 0, 2, 3, 4, 5, 6, 7,
                                         3 * 4 * 5 * 6 * 7, 4 * 5 * 6 * 7,
                                         5 * 6 * 7, 6 * 7, 7, 1}));
}

TEST(GeneratedCalls, OnlyHostBackendsRunHostCode) {
  EXPECT_TRUE(CpuBackend(1).runsHostCode());
  EXPECT_TRUE(HostBackend(1).runsHostCode());
}

} // namespace
