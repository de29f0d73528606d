//===- CudaGpuTest.cpp - CUDA backend tests that need a GPU ---------------===//
//
// Every test skips when no GPU is visible (ctest label "gpu").
//
//===----------------------------------------------------------------------===//

#include "gpipe/cuda/CublasGemm.h"
#include "gpipe/cuda/CudaDevices.h"
#include "gpipe/cuda/DeviceArena.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>

using namespace gpipe::cuda;

namespace gpipe::cuda {
// Readable parameter names in gtest/ctest output.
void PrintTo(GemmPrecision p, std::ostream *os) { *os << gemmPrecisionName(p); }
} // namespace gpipe::cuda

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    std::string why_;                                                          \
    if (!gpuAvailable(&why_))                                                  \
      GTEST_SKIP() << "no CUDA device: " << why_;                              \
  } while (0)

namespace {

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

int visibleGpus() {
  std::vector<GpuInfo> gpus;
  return queryGpus(gpus).ok ? static_cast<int>(gpus.size()) : 0;
}

/// A device buffer freed on scope exit.
struct DeviceBuffer {
  float *ptr = nullptr;
  explicit DeviceBuffer(size_t n) {
    if (n && cudaMalloc(reinterpret_cast<void **>(&ptr), n * sizeof(float)) != cudaSuccess)
      ptr = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr)
      cudaFree(ptr);
  }
};

} // namespace

TEST(CudaGpu, QueryListsGpus) {
  REQUIRE_GPU();
  std::vector<GpuInfo> gpus;
  CudaStatus st = queryGpus(gpus);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_GT(gpus.size(), 0u);
  for (const GpuInfo &g : gpus) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GT(g.totalBytes, 0u);
    EXPECT_GE(g.computeMajor, 5);
    EXPECT_GT(g.multiProcessors, 0);
  }
}

TEST(CudaGpu, ArenaAllocatePlaceAndRoundTrip) {
  REQUIRE_GPU();
  std::vector<int> map;
  ASSERT_TRUE(mapPipelineDevices(3, visibleGpus(), true, map).ok);
  gpipe::runtime::MemoryPlan plan;
  plan.devices.resize(3);
  plan.devices[0].arenaBytes = 1 << 20;
  plan.devices[1].arenaBytes = 4096;
  plan.devices[2].arenaBytes = 0; // a stage with nothing to store
  DeviceArena arena;
  CudaStatus st = arena.initFromPlan(plan, map);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_EQ(arena.numDevices(), 3);
  EXPECT_EQ(arena.arenaBytes(0), 1 << 20);
  EXPECT_NE(arena.base(0), nullptr);
  EXPECT_EQ(arena.base(2), nullptr);
  for (int d = 0; d < 3; ++d) {
    EXPECT_NE(arena.stream(d), nullptr);
    EXPECT_EQ(arena.gpu(d), map[d]);
    unsigned flags = 0;
    ASSERT_EQ(cudaStreamGetFlags(arena.stream(d), &flags), cudaSuccess);
    EXPECT_EQ(flags & cudaStreamNonBlocking, cudaStreamNonBlocking);
  }

  // Two planned buffers in device 1's arena; write through one, copy to the
  // other on the device's stream, read back.
  void *x = nullptr, *y = nullptr;
  ASSERT_TRUE(arena.place(1, 0, 1024, &x).ok);
  ASSERT_TRUE(arena.place(1, 3072, 1024, &y).ok);
  EXPECT_EQ(static_cast<char *>(y) - static_cast<char *>(x), 3072);
  std::vector<unsigned char> in(1024), out(1024, 0);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<unsigned char>(i * 7 + 3);
  ASSERT_EQ(cudaSetDevice(arena.gpu(1)), cudaSuccess);
  cudaStream_t s = arena.stream(1);
  ASSERT_EQ(cudaMemcpyAsync(x, in.data(), 1024, cudaMemcpyHostToDevice, s),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y, x, 1024, cudaMemcpyDeviceToDevice, s),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), y, 1024, cudaMemcpyDeviceToHost, s),
            cudaSuccess);
  ASSERT_TRUE(arena.synchronize().ok);
  EXPECT_EQ(in, out);

  void *z = nullptr;
  EXPECT_TRUE(arena.place(2, 0, 0, &z).ok);
  arena.release();
  EXPECT_EQ(arena.numDevices(), 0);
}

TEST(CudaGpu, ArenaBoundsErrors) {
  REQUIRE_GPU();
  DeviceArena arena;
  ASSERT_TRUE(arena.init({4096}, {0}).ok);
  void *p = reinterpret_cast<void *>(1);
  CudaStatus st = arena.place(0, 4000, 200, &p);
  EXPECT_FALSE(st.ok);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(contains(st.message, "pipeline device 0")) << st.message;
  EXPECT_TRUE(contains(st.message, "offset 4000")) << st.message;
  EXPECT_TRUE(contains(st.message, "200 bytes")) << st.message;
  EXPECT_TRUE(contains(st.message, "arena of 4096 bytes")) << st.message;
  st = arena.place(1, 0, 8, &p);
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(contains(st.message, "no arena for pipeline device 1"))
      << st.message;
}

TEST(CudaGpu, ArenaInitErrors) {
  REQUIRE_GPU();
  DeviceArena arena;
  CudaStatus st = arena.init({16, 16}, {0});
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(contains(st.message, "GPU assignments")) << st.message;
  st = arena.init({16}, {visibleGpus()});
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(contains(st.message, "GPUs are visible")) << st.message;
  // Far more than any GPU has: cudaMalloc fails, reported, not fatal.
  st = arena.init({16, int64_t(1) << 50}, {0, 0});
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(contains(st.message, "pipeline device 1")) << st.message;
  EXPECT_TRUE(contains(st.message, "cudaMalloc")) << st.message;
  EXPECT_TRUE(contains(st.message, "cudaErrorMemoryAllocation"))
      << st.message;
  EXPECT_EQ(arena.numDevices(), 0);
  // And the arena still works afterwards.
  st = arena.init({256}, {0});
  EXPECT_TRUE(st.ok) << st.message;
  gpipe::runtime::MemoryPlan none;
  st = arena.initFromPlan(none, {});
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(contains(st.message, "no memory plan")) << st.message;
}

// --- GEMM vs a double-precision CPU reference -------------------------------

namespace {

/// Row-major reference: C = alpha op(A) op(B) + beta C in double; `scale`
/// receives |alpha| sum_k |op(A)_ik op(B)_kj| + |beta C_ij|, the natural
/// magnitude against which rounding errors are measured.
void referenceGemm(const GemmArgs &g, const std::vector<float> &a,
                   const std::vector<float> &b, const std::vector<float> &c0,
                   std::vector<double> &ref, std::vector<double> &scale) {
  ref.assign(g.m * g.n, 0.0);
  scale.assign(g.m * g.n, 0.0);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double acc = 0, mag = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        double av = g.transA ? a[p * g.lda + i] : a[i * g.lda + p];
        double bv = g.transB ? b[j * g.ldb + p] : b[p * g.ldb + j];
        acc += av * bv;
        mag += std::fabs(av * bv);
      }
      double cv = c0[i * g.ldc + j];
      ref[i * g.n + j] = double(g.alpha) * acc + double(g.beta) * cv;
      scale[i * g.n + j] =
          std::fabs(double(g.alpha)) * mag + std::fabs(double(g.beta) * cv);
    }
}

double tolerance(GemmPrecision p) {
  switch (p) {
  case GemmPrecision::F32:
    return 1e-5;
  case GemmPrecision::TF32:
    return 2e-3; // two inputs each rounded to 10 mantissa bits
  case GemmPrecision::BF16:
    return 1e-2;
  }
  return 0;
}

using GemmCase = std::tuple<GemmPrecision, bool, bool, std::tuple<int, int, int>>;

std::string gemmCaseName(const ::testing::TestParamInfo<GemmCase> &info) {
  auto [p, ta, tb, mnk] = info.param;
  auto [m, n, k] = mnk;
  return std::string(gemmPrecisionName(p)) + (ta ? "_At" : "_A") +
         (tb ? "_Bt" : "_B") + "_" + std::to_string(m) + "x" +
         std::to_string(n) + "x" + std::to_string(k);
}

class CudaGemm : public ::testing::TestWithParam<GemmCase> {};

} // namespace

TEST_P(CudaGemm, MatchesDoubleReference) {
  REQUIRE_GPU();
  auto [precision, transA, transB, mnk] = GetParam();
  auto [m, n, k] = mnk;
  GemmArgs g;
  g.transA = transA;
  g.transB = transB;
  g.m = m, g.n = n, g.k = k;
  g.alpha = 1.5f;
  g.beta = 0.5f;
  // Padded row strides (+3) exercise leading dimensions > row length.
  int64_t aRows = transA ? k : m, aCols = transA ? m : k;
  int64_t bRows = transB ? n : k, bCols = transB ? k : n;
  g.lda = aCols + 3;
  g.ldb = bCols + 3;
  g.ldc = n + 3;
  std::mt19937 rng(1234 + m * 7 + n * 13 + k);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(aRows * g.lda), b(bRows * g.ldb), c(m * g.ldc);
  for (float &v : a)
    v = dist(rng);
  for (float &v : b)
    v = dist(rng);
  for (float &v : c)
    v = dist(rng);

  DeviceArena arena;
  ASSERT_TRUE(arena.init({0}, {0}).ok);
  DeviceBuffer da(a.size()), db(b.size()), dc(c.size());
  ASSERT_TRUE(da.ptr && db.ptr && dc.ptr);
  cudaStream_t s = arena.stream(0);
  ASSERT_EQ(cudaMemcpyAsync(da.ptr, a.data(), a.size() * 4,
                            cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(db.ptr, b.data(), b.size() * 4,
                            cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dc.ptr, c.data(), c.size() * 4,
                            cudaMemcpyHostToDevice, s), cudaSuccess);
  g.a = da.ptr;
  g.b = db.ptr;
  g.c = dc.ptr;

  CublasGemm gemm;
  CudaStatus st = gemm.init(0, s);
  ASSERT_TRUE(st.ok) << st.message;
  st = gemm.gemm(precision, g);
  ASSERT_TRUE(st.ok) << st.message;
  std::vector<float> out(c.size());
  ASSERT_EQ(cudaMemcpyAsync(out.data(), dc.ptr, out.size() * 4,
                            cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_TRUE(arena.synchronize().ok);

  std::vector<double> ref, scale;
  referenceGemm(g, a, b, c, ref, scale);
  double tol = tolerance(precision), worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double err = std::fabs(double(out[i * g.ldc + j]) - ref[i * n + j]);
      double rel = err / std::max(scale[i * n + j], 1e-30);
      worst = std::max(worst, rel);
      ASSERT_LE(rel, tol) << gemmPrecisionName(precision) << " C[" << i
                          << "," << j << "] = " << out[i * g.ldc + j]
                          << ", reference " << ref[i * n + j];
    }
  // The padding columns of C are untouched.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = n; j < g.ldc; ++j)
      ASSERT_EQ(out[i * g.ldc + j], c[i * g.ldc + j]);
  RecordProperty("worst_relative_error", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(
    AllPrecisions, CudaGemm,
    ::testing::Combine(
        ::testing::Values(GemmPrecision::F32, GemmPrecision::TF32,
                          GemmPrecision::BF16),
        ::testing::Bool(), ::testing::Bool(),
        ::testing::Values(std::make_tuple(1, 1, 1), std::make_tuple(17, 33, 9),
                          std::make_tuple(64, 48, 128),
                          std::make_tuple(130, 7, 257))),
    gemmCaseName);

TEST(CudaGpu, GemmRejectsBadArgsAndHandlesEmpty) {
  REQUIRE_GPU();
  DeviceArena arena;
  ASSERT_TRUE(arena.init({0}, {0}).ok);
  CublasGemm gemm;
  ASSERT_TRUE(gemm.init(0, arena.stream(0)).ok);
  DeviceBuffer buf(64);
  GemmArgs g;
  g.m = 4, g.n = 4, g.k = 4;
  g.a = g.b = buf.ptr;
  g.c = buf.ptr;
  g.lda = 2, g.ldb = 4, g.ldc = 4;
  CudaStatus st = gemm.gemm(GemmPrecision::F32, g);
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(contains(st.message, "lda=2")) << st.message;
  // k = 0: C = beta * C.
  std::vector<float> c(16, 2.0f), out(16);
  ASSERT_EQ(cudaMemcpy(buf.ptr, c.data(), 64, cudaMemcpyHostToDevice),
            cudaSuccess);
  GemmArgs z;
  z.m = 4, z.n = 4, z.k = 0, z.lda = 1, z.ldb = 4, z.ldc = 4;
  z.beta = 0.25f;
  z.c = buf.ptr;
  for (GemmPrecision p :
       {GemmPrecision::F32, GemmPrecision::TF32, GemmPrecision::BF16}) {
    ASSERT_EQ(cudaMemcpy(buf.ptr, c.data(), 64, cudaMemcpyHostToDevice),
              cudaSuccess);
    st = gemm.gemm(p, z);
    ASSERT_TRUE(st.ok) << st.message;
    ASSERT_TRUE(arena.synchronize().ok);
    ASSERT_EQ(cudaMemcpy(out.data(), buf.ptr, 64, cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (float v : out)
      EXPECT_FLOAT_EQ(v, 0.5f) << gemmPrecisionName(p);
  }
}
