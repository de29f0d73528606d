//===- MemoryPlannerTest.cpp - Static memory plans, without IR ------------===//

#include "gpipe/Analysis/MemoryPlanner.h"
#include "gpipe/Analysis/ByteCount.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <map>
#include <random>

using namespace gpipe;

namespace {

/// The largest sum of bytes live at one time: a lower bound of any arena.
int64_t maxLiveBytes(const std::vector<PlannedBuffer> &buffers) {
  std::map<int64_t, int64_t> delta;
  for (const PlannedBuffer &b : buffers) {
    delta[b.start] += b.bytes;
    delta[b.end] -= b.bytes;
  }
  int64_t live = 0, peak = 0;
  for (const auto &[time, change] : delta) {
    live += change;
    peak = std::max(peak, live);
  }
  return peak;
}

void expectNoConflicts(const std::vector<PlannedBuffer> &buffers,
                       int64_t arena) {
  for (size_t i = 0; i < buffers.size(); ++i) {
    const PlannedBuffer &a = buffers[i];
    EXPECT_GE(a.offset, 0);
    EXPECT_LE(a.offset + a.bytes, arena);
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      const PlannedBuffer &b = buffers[j];
      bool together = a.start < b.end && b.start < a.end;
      bool overlap =
          a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      ASSERT_FALSE(together && overlap)
          << "buffers " << i << " and " << j << " share bytes while both live";
    }
  }
}

TEST(AssignOffsets, RandomLifetimesNeverShareBytes) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<PlannedBuffer> buffers(200);
    for (PlannedBuffer &b : buffers) {
      b.start = rng() % 400;
      b.end = b.start + 1 + rng() % 60;
      b.bytes = 1 + rng() % 4096;
    }
    int64_t arena = assignOffsets(buffers);
    expectNoConflicts(buffers, arena);
    int64_t lower = maxLiveBytes(buffers);
    EXPECT_GE(arena, lower);
    int64_t total = 0;
    for (const PlannedBuffer &b : buffers)
      total += b.bytes;
    EXPECT_LE(arena, total);
  }
}

TEST(AssignOffsets, DisjointLifetimesReuseTheSameBytes) {
  std::vector<PlannedBuffer> buffers = {
      {100, 0, 2, 0, -1, -1}, {100, 2, 4, 0, -1, -1}, {50, 1, 3, 0, -1, -1}};
  EXPECT_EQ(assignOffsets(buffers), 150);
  EXPECT_EQ(buffers[0].offset, buffers[1].offset);
  expectNoConflicts(buffers, 150);
}

/// One stage: x -> a = op(x) -> b = op(a) -> loss(b, t); backward reads b, t
/// (d_b), then a (d_a), then x. Every value is 10 bytes per row.
DeviceProgram chainProgram(KeepPolicy keep, unsigned microbatches) {
  DeviceProgram p;
  PlannedStage &s = p.stage;
  // ids: 0 x, 1 t, 2 a, 3 b, 4 loss, 5 d_b, 6 d_a, 7 d_x
  s.values = {{0, 10}, {0, 10}, {0, 10}, {0, 10},
              {4, 0},  {0, 10}, {0, 10}, {0, 10}};
  s.inputs = {0, 1};
  s.inputChannels = {~0u, ~0u};
  s.inputNames = {"x", "t"};
  s.loss = 4;
  s.forward = {
      {{0}, {2}, {}, "f"}, {{2}, {3}, {}, "f"}, {{3, 1}, {4}, {}, "loss"}};
  s.recompute = s.forward;
  s.backward = {{{3, 1}, {5}, {}, "loss_grad"},
                {{5, 2}, {6}, {0, 5}, "g"}, // 5 bytes/row of scratch
                {{6, 0}, {7}, {}, "g"}};
  s.residentBytes = 1000;
  for (unsigned m = 0; m < microbatches; ++m) {
    p.instrs.push_back({PlannedInstrKind::LoadInput, m, 0, "x"});
    p.instrs.push_back({PlannedInstrKind::LoadInput, m, 0, "t"});
    p.instrs.push_back({PlannedInstrKind::Forward, m, 0, ""});
  }
  for (unsigned m = microbatches; m-- > 0;)
    p.instrs.push_back({PlannedInstrKind::Backward, m, 0, ""});
  p.instrs.push_back({PlannedInstrKind::OptimizerStep, 0, 0, ""});
  p.microbatchRows.assign(microbatches, 2);
  p.keep = keep;
  return p;
}

// Hand-counted, 20 bytes per value of a 2-row micro-batch, loss 4 bytes:
//  keep all: each forward keeps x, t, a, b (80). The first backward (of
//  micro-batch 1) starts on 160 and adds d_b: 180; then b and t die (140),
//  d_a and 10 bytes of scratch come (170), d_b and a die, and so on.
//  recompute: each forward keeps the stash x, t (40). The first backward
//  recomputes a and b (40 + 40 + 40; the loss, +4, dies at once) and adds
//  d_b: 140.
TEST(PlanDeviceMemory, HandCountedPeaks) {
  DeviceMemoryPlan all, none;
  ASSERT_EQ(planDeviceMemory(chainProgram(KeepPolicy::All, 2), all), "");
  ASSERT_EQ(planDeviceMemory(chainProgram(KeepPolicy::None, 2), none), "");
  EXPECT_EQ(all.residentBytes, 1000);
  EXPECT_EQ(all.peakBytes, 1000 + 180);
  EXPECT_EQ(none.peakBytes, 1000 + 140);
  EXPECT_GE(all.arenaBytes, all.peakBytes);
  EXPECT_GE(none.arenaBytes, none.peakBytes);
  expectNoConflicts(all.buffers, all.arenaBytes - all.residentBytes);
  expectNoConflicts(none.buffers, none.arenaBytes - none.residentBytes);
}

// With recompute, stash memory grows with M while the working set shrinks:
// same batch in more micro-batches never needs more than M = 1 here.
TEST(PlanDeviceMemory, MoreMicrobatchesOfTheSameBatch) {
  DeviceProgram one = chainProgram(KeepPolicy::None, 1);
  one.microbatchRows = {8};
  DeviceProgram four = chainProgram(KeepPolicy::None, 4);
  DeviceMemoryPlan p1, p4;
  ASSERT_EQ(planDeviceMemory(one, p1), "");
  ASSERT_EQ(planDeviceMemory(four, p4), "");
  EXPECT_LT(p4.peakBytes, p1.peakBytes);
}

TEST(PlanDeviceMemory, ReadingAValueBeforeItExistsIsAnError) {
  DeviceProgram p = chainProgram(KeepPolicy::None, 1);
  p.instrs.erase(p.instrs.begin()); // no load of x
  DeviceMemoryPlan plan;
  EXPECT_EQ(planDeviceMemory(p, plan),
            "op #1 (forward): forward op 0 (f) reads value 0, which is not "
            "live");
}

TEST(ByteCount, ParsesUnitsAndRejectsTheRest) {
  std::optional<uint64_t> count;
  EXPECT_TRUE(parseByteCount("", count));
  EXPECT_FALSE(count);
  EXPECT_TRUE(parseByteCount("1048576", count));
  EXPECT_EQ(*count, 1048576u);
  EXPECT_TRUE(parseByteCount(" 512 KiB ", count));
  EXPECT_EQ(*count, 512u * 1024);
  EXPECT_TRUE(parseByteCount("2GiB", count));
  EXPECT_EQ(*count, 2ull << 30);
  EXPECT_TRUE(parseByteCount("3MB", count));
  EXPECT_EQ(*count, 3000000u);
  for (const char *bad : {"lots", "1.5GiB", "-1", "12 XB", "GiB",
                          "99999999999999999999", "17000000000TiB"})
    EXPECT_FALSE(parseByteCount(bad, count)) << bad;
}

TEST(ByteCount, FormatsWithBinaryUnits) {
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(1536), "1.5 KiB");
  EXPECT_EQ(formatBytes(64.0 * (1 << 20)), "64.0 MiB");
  EXPECT_EQ(formatBytes(3.0 * (1ull << 30)), "3.0 GiB");
}

} // namespace
