//===- DenormalFlushTest.cpp - The CPU devices flush denormals to zero ----===//
//
// Adam's first moment of a weight with no gradient decays below FLT_MIN
// late in a run, where each operation on it costs a microcode assist (39x
// the step, gpipe-runtime-bench's BM_AdamStep). The CPU devices' threads,
// the worker and its intra-op helpers, flush such numbers to zero; the
// caller's thread keeps IEEE gradual underflow.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/Optimizers.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/backends/cpu/IntraOpPool.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <thread>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

namespace {
/// 1.2e-38 x 0.9 on the calling thread, out of the compiler's reach.
float decayedOnce() {
  volatile float moment = 1.2e-38f, beta = 0.9f;
  return moment * beta;
}

TEST(DenormalFlush, OnlyTheThreadThatAsksFlushes) {
  ASSERT_GT(decayedOnce(), 0.0f) << "this thread should keep denormals";
  ASSERT_LT(decayedOnce(), FLT_MIN);
  float flushed = -1, kept = -1;
  std::thread([&] {
    if (!flushDenormalsOnThisThread(true))
      GTEST_SKIP() << "no flush-to-zero mode on this CPU";
    flushed = decayedOnce();
    flushDenormalsOnThisThread(false);
    kept = decayedOnce();
  }).join();
  EXPECT_EQ(flushed, 0.0f);
  EXPECT_EQ(kept, decayedOnce());
  EXPECT_GT(decayedOnce(), 0.0f);
}

/// Adam's first moment after one step with zero gradients, on a device of
/// 2 threads (the range split between the worker and its helper).
std::vector<float> firstMomentAfterStep(bool flushDenormals) {
  const int64_t n = 1 << 16;
  std::vector<float> params(n, 0.5f), grads(n, 0.0f), first(n, 1.2e-38f),
      second(n, 1e-6f);
  CpuThreading threading;
  threading.threadsPerDevice = 2;
  threading.packWeights = false;
  threading.flushDenormals = flushDenormals;
  CpuBackend backend(1, threading);
  OptimizerConfig config;
  config.kind = OptimizerKind::Adam;
  float *slots[2] = {first.data(), second.data()};
  const StepScalars step = stepScalarsOf(config, 900);
  backend.optimizerStep(backend.computeStream(0), config, params.data(),
                        grads.data(), slots, n, &step);
  EXPECT_EQ(backend.synchronize(std::chrono::seconds(60)), "");
  return first;
}

TEST(DenormalFlush, CpuDevicesFlushByDefault) {
  EXPECT_TRUE(CpuThreading().flushDenormals);
  std::vector<float> flushed = firstMomentAfterStep(true);
  std::vector<float> kept = firstMomentAfterStep(false);
  // Both halves of the range: the worker's and the helper's.
  for (size_t i : {size_t(0), flushed.size() - 1}) {
    EXPECT_EQ(flushed[i], 0.0f) << i;
    EXPECT_GT(kept[i], 0.0f) << i;
    EXPECT_LT(kept[i], FLT_MIN) << i;
  }
  // The caller's thread is left as it was.
  EXPECT_GT(decayedOnce(), 0.0f);
}
} // namespace
