//===- PrecisionTest.cpp - The bundle's precision for its products --------===//
//
// The host emulation computes TF32 and bf16 GEMMs as the GPU does (operands
// rounded, f32 accumulation): checked against a reference that rounds with
// frexp/nearbyint and sums in double. A bf16 bundle then trains on it close
// to, not bit-equal with, the CPU's f32.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/backends/host/HostBackend.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"

#include "DeviceOnlyBackend.h"
#include "TestBundles.h"
#include "TestModels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;

namespace {

/// `x` to `bits` significant bits, to nearest, ties to even.
double roundToBits(float x, int bits) {
  if (x == 0.0f || !std::isfinite(x))
    return x;
  int exponent = 0;
  double mantissa = std::frexp(double(x), &exponent); // in [0.5, 1)
  return std::ldexp(std::nearbyint(std::ldexp(mantissa, bits)),
                    exponent - bits);
}

/// C = A B^T (A m x k, B n x k) with the operands at `bits` significant
/// bits (24: f32 as it is), summed in double.
std::vector<double> reference(const std::vector<float> &a,
                              const std::vector<float> &b, int64_t m,
                              int64_t n, int64_t k, int bits) {
  std::vector<double> c(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        c[size_t(i * n + j)] += roundToBits(a[size_t(i * k + p)], bits) *
                                roundToBits(b[size_t(j * k + p)], bits);
  return c;
}

} // namespace

TEST(Precision, HostEmulationRoundsTheGemmOperands) {
  const int64_t m = 7, n = 5, k = 33;
  std::mt19937 random(3);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<float> a(size_t(m * k)), b(size_t(n * k));
  for (float &x : a)
    x = uniform(random);
  for (float &x : b)
    x = uniform(random);
  for (auto [precision, bits] : {std::pair{Precision::F32, 24},
                                 std::pair{Precision::TF32, 11},
                                 std::pair{Precision::BF16, 8}}) {
    SCOPED_TRACE(precisionName(precision));
    HostBackend backend(1);
    ASSERT_EQ(backend.usePrecision(precision), "");
    std::vector<float> c(size_t(m * n), -1.0f);
    GemmBatch call;
    call.transB = true;
    call.m = m, call.n = n, call.k = k;
    call.a = a.data(), call.lda = k;
    call.b = b.data(), call.ldb = k;
    call.c = c.data(), call.ldc = n;
    backend.gemm(backend.computeStream(0), call);
    ASSERT_EQ(backend.synchronize(std::chrono::milliseconds(10000)), "");
    const std::vector<double> rounded = reference(a, b, m, n, k, bits);
    const std::vector<double> exact = reference(a, b, m, n, k, 24);
    double farthestFromExact = 0.0;
    for (size_t i = 0; i < c.size(); ++i) {
      // f32 accumulation of 33 products of magnitude < 4.
      EXPECT_NEAR(c[i], rounded[i], 1e-4) << "element " << i;
      farthestFromExact =
          std::max(farthestFromExact, std::abs(double(c[i]) - exact[i]));
    }
    // Rounded operands move the products well past f32's rounding.
    if (precision != Precision::F32) {
      EXPECT_GT(farthestFromExact, bits == 8 ? 1e-2 : 1e-3);
    }
  }
}

/// The MLP at K=2 trained for five steps: bf16 and TF32 on the host
/// emulation stay within 0.2% of its f32 losses, and differ from them; the
/// CPU threads give a bf16 bundle their f32 bits.
TEST(Precision, ReducedPrecisionTrainsCloseToF32) {
  const int64_t batch = 16;
  Bundle f32 = buildBundle(mlpGraph(batch), mlpSplit(2), 2, RematPolicy::Full);
  auto train = [&](Bundle bundle, std::unique_ptr<DeviceBackend> backend) {
    DeviceExecutorConfig config;
    config.seed = 42;
    std::string error;
    auto executor = DeviceExecutor::create(std::move(bundle),
                                           std::move(backend), config, error);
    EXPECT_TRUE(executor) << error;
    std::vector<float> losses;
    for (uint64_t step = 1; executor && step <= 5; ++step) {
      StepResult result = executor->trainStep(mlpBatch(batch, 100 + step));
      EXPECT_TRUE(result.ok()) << result.error;
      losses.push_back(result.loss);
    }
    return losses;
  };
  const std::vector<float> expected =
      train(f32, std::make_unique<HostBackend>(2, 5));
  const std::vector<float> cpu = train(f32, std::make_unique<CpuBackend>(2));
  for (Precision precision : {Precision::TF32, Precision::BF16}) {
    SCOPED_TRACE(precisionName(precision));
    Bundle reduced = f32;
    reduced.precision = precision;
    const std::vector<float> losses =
        train(reduced, std::make_unique<HostBackend>(2, 5));
    ASSERT_EQ(losses.size(), expected.size());
    bool differs = false;
    for (size_t s = 0; s < losses.size(); ++s) {
      // Seen: at most 4.2e-5 (TF32) and 2.3e-4 (bf16) relative.
      EXPECT_NEAR(losses[s], expected[s], 2e-3 * std::abs(expected[s]))
          << "step " << s + 1;
      differs |= losses[s] != expected[s];
    }
    EXPECT_TRUE(differs);
    // The CPU threads compute a bf16 bundle's products in f32: its bits.
    EXPECT_EQ(train(reduced, std::make_unique<CpuBackend>(2)), cpu);
  }
}

/// A backend without reduced-precision products (DeviceBackend's default)
/// refuses a TF32 or bf16 bundle at creation, and takes an f32 one.
TEST(Precision, ABackendInF32OnlyRefusesAReducedPrecisionBundle) {
  Bundle bundle = buildBundle(mlpGraph(8), {0}, 1, RematPolicy::Full);
  for (Precision precision : {Precision::TF32, Precision::BF16}) {
    bundle.precision = precision;
    std::string error;
    auto executor = DeviceExecutor::create(
        bundle, std::make_unique<DeviceOnlyBackend>(), {}, error);
    EXPECT_FALSE(executor);
    EXPECT_EQ(error, std::string("the bundle's precision: a device computes "
                                 "its products in f32 only, not ") +
                         precisionName(precision));
  }
  EXPECT_EQ(DeviceOnlyBackend().usePrecision(Precision::F32), "");
}
