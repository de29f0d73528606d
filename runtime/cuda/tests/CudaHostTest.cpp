//===- CudaHostTest.cpp - CUDA backend logic that needs no GPU ------------===//

#include "gpipe/cuda/CublasGemm.h"
#include "gpipe/cuda/CudaBackend.h"
#include "gpipe/cuda/CudaDevices.h"
#include "gpipe/cuda/DeviceArena.h"

#include <gtest/gtest.h>

using namespace gpipe::cuda;

namespace {
bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}
} // namespace

TEST(CudaDeviceMapping, OneGpuPerDevice) {
  std::vector<int> map;
  ASSERT_TRUE(mapPipelineDevices(4, 4, false, map).ok);
  EXPECT_EQ(map, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_TRUE(mapPipelineDevices(2, 8, false, map).ok);
  EXPECT_EQ(map, (std::vector<int>{0, 1}));
}

TEST(CudaDeviceMapping, SharingIsRoundRobin) {
  std::vector<int> map;
  ASSERT_TRUE(mapPipelineDevices(5, 2, true, map).ok);
  EXPECT_EQ(map, (std::vector<int>{0, 1, 0, 1, 0}));
  ASSERT_TRUE(mapPipelineDevices(3, 1, true, map).ok);
  EXPECT_EQ(map, (std::vector<int>{0, 0, 0}));
}

TEST(CudaDeviceMapping, TooFewGpusWithoutSharing) {
  std::vector<int> map{7};
  CudaStatus st = mapPipelineDevices(4, 2, false, map);
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(map.empty());
  EXPECT_TRUE(contains(st.message, "K=4")) << st.message;
  EXPECT_TRUE(contains(st.message, "G=2")) << st.message;
  EXPECT_TRUE(contains(st.message, "sharing")) << st.message;
}

TEST(CudaDeviceMapping, Degenerate) {
  std::vector<int> map;
  CudaStatus st = mapPipelineDevices(0, 2, true, map);
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(contains(st.message, "at least one")) << st.message;
  st = mapPipelineDevices(2, 0, true, map);
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(contains(st.message, "no GPU")) << st.message;
}

TEST(CudaDevices, DescribeNoDeviceNamesTheError) {
  std::string m = describeNoDevice(35); // cudaErrorInsufficientDriver
  EXPECT_TRUE(contains(m, "no CUDA device available")) << m;
  EXPECT_TRUE(contains(m, "cudaGetDeviceCount failed with error")) << m;
  EXPECT_TRUE(contains(m, "cudaErrorInsufficientDriver (35)")) << m;
  EXPECT_TRUE(contains(m, "driver version is insufficient")) << m;
  EXPECT_TRUE(contains(m, "needs an NVIDIA GPU and driver")) << m;
  std::string zero = describeNoDevice(0);
  EXPECT_TRUE(contains(zero, "reported 0 devices")) << zero;
}

// Whatever the machine: without a GPU the query fails cleanly with the
// sentence; with one it lists the GPUs.
TEST(CudaDevices, QueryFailsCleanlyOrListsGpus) {
  std::vector<GpuInfo> gpus;
  CudaStatus st = queryGpus(gpus);
  std::string why;
  EXPECT_EQ(gpuAvailable(&why), st.ok);
  if (!st.ok) {
    EXPECT_TRUE(gpus.empty());
    EXPECT_TRUE(contains(st.message, "no CUDA device")) << st.message;
    EXPECT_EQ(why, st.message);
    std::cout << "[ info ] " << st.message << "\n";
  } else {
    ASSERT_GT(gpus.size(), 0u);
    for (const GpuInfo &g : gpus) {
      EXPECT_FALSE(g.name.empty());
      EXPECT_GT(g.totalBytes, 0u);
      EXPECT_GT(g.computeMajor, 0);
      std::cout << "[ info ] GPU " << g.ordinal << ": " << g.name << ", "
                << (g.totalBytes >> 20) << " MiB, sm_" << g.computeMajor
                << g.computeMinor << "\n";
    }
  }
}

// The arena cannot be created without a GPU; that is an error, not a crash.
TEST(CudaDevices, ArenaWithoutGpuFailsCleanly) {
  if (gpuAvailable())
    GTEST_SKIP() << "a GPU is present; covered by GPipeCudaGpuTests";
  DeviceArena arena;
  CudaStatus st = arena.init({1024}, {0});
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(contains(st.message, "no CUDA device")) << st.message;
  EXPECT_EQ(arena.numDevices(), 0);
  CublasGemm gemm;
  GemmArgs g;
  st = gemm.gemm(GemmPrecision::F32, g);
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(contains(st.message, "init()")) << st.message;
  st = gemm.init(0, nullptr);
  EXPECT_FALSE(st.ok);
  EXPECT_FALSE(st.message.empty());
}

TEST(CudaArenaPlacement, InsideAndAtTheEdges) {
  EXPECT_TRUE(checkArenaPlacement(0, 0, 100, 100).ok);
  EXPECT_TRUE(checkArenaPlacement(0, 64, 36, 100).ok);
  EXPECT_TRUE(checkArenaPlacement(0, 100, 0, 100).ok);
  EXPECT_TRUE(checkArenaPlacement(0, 0, 0, 0).ok);
}

TEST(CudaArenaPlacement, OutsideNamesEverything) {
  CudaStatus st = checkArenaPlacement(3, 64, 37, 100);
  ASSERT_FALSE(st.ok);
  EXPECT_TRUE(contains(st.message, "pipeline device 3")) << st.message;
  EXPECT_TRUE(contains(st.message, "offset 64")) << st.message;
  EXPECT_TRUE(contains(st.message, "37 bytes")) << st.message;
  EXPECT_TRUE(contains(st.message, "arena of 100 bytes")) << st.message;
  EXPECT_FALSE(checkArenaPlacement(0, -1, 4, 100).ok);
  EXPECT_FALSE(checkArenaPlacement(0, 0, -4, 100).ok);
  EXPECT_FALSE(checkArenaPlacement(0, 101, 0, 100).ok);
  // No overflow in offset + bytes.
  EXPECT_FALSE(checkArenaPlacement(0, 8, INT64_MAX, 100).ok);
  EXPECT_FALSE(checkArenaPlacement(0, INT64_MAX, INT64_MAX, INT64_MAX).ok);
}

TEST(CudaGemmArgs, Validation) {
  float dummy = 0;
  GemmArgs g;
  g.m = 3, g.n = 5, g.k = 4;
  g.a = g.b = &dummy;
  g.c = &dummy;
  g.lda = 4, g.ldb = 5, g.ldc = 5;
  EXPECT_TRUE(checkGemmArgs(g).ok) << checkGemmArgs(g).message;
  g.transA = true; // A stored k x m: lda >= m = 3
  g.lda = 3;
  EXPECT_TRUE(checkGemmArgs(g).ok) << checkGemmArgs(g).message;
  g.lda = 2;
  CudaStatus st = checkGemmArgs(g);
  EXPECT_FALSE(st.ok);
  EXPECT_TRUE(contains(st.message, "lda=2")) << st.message;
  g.lda = 3;
  g.transB = true; // B stored n x k: ldb >= k = 4
  g.ldb = 4;
  EXPECT_TRUE(checkGemmArgs(g).ok);
  g.ldb = 3;
  EXPECT_FALSE(checkGemmArgs(g).ok);
  g.ldb = 4;
  g.ldc = 4;
  EXPECT_FALSE(checkGemmArgs(g).ok);
  g.ldc = 5;
  g.m = -1;
  EXPECT_TRUE(contains(checkGemmArgs(g).message, "negative"));
  g.m = int64_t(1) << 32;
  EXPECT_TRUE(contains(checkGemmArgs(g).message, "int range"));
  g.m = 3;
  g.c = nullptr;
  EXPECT_TRUE(contains(checkGemmArgs(g).message, "C is null"));
  // Empty products need no pointers.
  GemmArgs empty;
  empty.lda = empty.ldb = empty.ldc = 1;
  EXPECT_TRUE(checkGemmArgs(empty).ok) << checkGemmArgs(empty).message;
}

// The executor's backend: without a GPU it refuses with the no-device
// sentence; with one it maps K devices onto the GPUs.
TEST(CudaBackend, CreationFailsCleanlyWithoutGpuOrMapsDevices) {
  CudaBackendOptions options;
  options.numDevices = 3;
  std::string error;
  auto backend = createCudaBackend(options, error);
  if (!gpuAvailable()) {
    EXPECT_FALSE(backend);
    EXPECT_TRUE(contains(error, "no CUDA device available")) << error;
    return;
  }
  ASSERT_TRUE(backend) << error;
  EXPECT_EQ(backend->numDevices(), 3u);
  EXPECT_TRUE(contains(backend->describe(), "device 2 on GPU"))
      << backend->describe();
}
