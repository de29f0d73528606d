//===- HostBackendTest.cpp - The host backends' streams and memory --------===//
//
// The host emulation's interleavings catch a missing event, and both host
// backends report what they cannot do: an allocation beyond memory, a wait
// on an event never recorded.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/backends/host/HostBackend.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

using namespace gpipe::runtime::device;

// A device that does not fit in host memory is an error that names it, not
// an abort (LLVM's tools install a new-handler that would abort in new).
TEST(HostBackend, AllocationThatCannotBeMetIsAnError) {
  const int64_t huge = int64_t(1) << 61;
  void *memory = &memory;
  // As LLVM's tools do: operator new, even nothrow, would now abort.
  std::new_handler previous = std::set_new_handler([] { std::abort(); });
  CpuBackend cpu(2);
  EXPECT_EQ(cpu.allocate(1, huge, &memory),
            "device 1: out of memory: cannot allocate " + std::to_string(huge) +
                " bytes of host memory");
  EXPECT_EQ(memory, nullptr);
  HostBackend host(2, 1);
  EXPECT_EQ(host.allocate(0, huge, &memory),
            "device 0: out of memory: cannot allocate " + std::to_string(huge) +
                " bytes");
  std::set_new_handler(previous);
}

/// A producer on one stream, a copy on another: with the event the copy
/// always sees the data; without it, some interleaving copies it too early.
/// This is what makes the executor tests sensitive to a missing event.
TEST(HostBackend, MissingEventIsCaughtByTheInterleaving) {
  auto run = [](uint64_t seed, bool withEvent) {
    HostBackend backend(2, seed);
    void *a = nullptr, *b = nullptr;
    EXPECT_EQ(backend.allocate(0, 64 * 4, &a), "");
    EXPECT_EQ(backend.allocate(1, 64 * 4, &b), "");
    std::vector<float> ones(64, 1.0f), out(64, 0.0f);
    StreamId producer = backend.computeStream(0),
             copier = backend.copyStream(0);
    backend.fillZero(producer, a, 64 * 4);
    backend.copyToDevice(producer, a, ones.data(), 64 * 4);
    backend.relu(producer, static_cast<float *>(a), static_cast<float *>(a),
                 64);
    if (withEvent)
      backend.waitEvent(copier, backend.recordEvent(producer));
    backend.copyBetweenDevices(copier, b, 1, a, 0, 64 * 4);
    backend.copyToHost(copier, out.data(), b, 64 * 4);
    EXPECT_EQ(backend.synchronize(std::chrono::milliseconds(1000)), "");
    return out == ones;
  };
  int wrongWithout = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    EXPECT_TRUE(run(seed, true)) << "seed " << seed;
    wrongWithout += !run(seed, false);
  }
  EXPECT_GT(wrongWithout, 0);
}

TEST(HostBackend, WaitOnAnEventNeverRecordedIsAnError) {
  HostBackend backend(2, 1);
  EXPECT_EQ(backend.error(), "");
  backend.waitEvent(backend.computeStream(1), 7);
  EXPECT_EQ(backend.synchronize(std::chrono::milliseconds(1000)),
            "device 1's compute stream waits for event 7, which was never "
            "recorded");
}

// An update reads its step's learning rate and gradient scale from device
// memory when it runs, not when it is issued: what lets a captured step be
// replayed with the next step's values.
TEST(HostBackend, AnUpdateReadsItsStepScalarsWhenItRuns) {
  HostBackend backend(1, 7);
  std::vector<float> params(8, 1.0f), grads(8, 2.0f);
  gpipe::runtime::StepScalars step;
  step.learningRate = 1.0f;
  gpipe::runtime::OptimizerConfig sgd; // Sgd
  backend.optimizerStep(backend.computeStream(0), sgd, params.data(),
                        grads.data(), nullptr, 8, &step);
  step.learningRate = 0.25f, step.gradientScale = 0.5f;
  ASSERT_EQ(backend.synchronize(std::chrono::seconds(10)), "");
  for (float p : params)
    EXPECT_EQ(p, 1.0f - 0.25f * (0.5f * 2.0f));
}
