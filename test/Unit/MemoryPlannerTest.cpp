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

/// The greedy placement as first written, quadratic: each buffer, largest
/// first, at the lowest offset that fits among the placed buffers live with
/// it, scanned in offset order. The indexed assignOffsets must reproduce it.
int64_t referencePlacement(std::vector<PlannedBuffer> &buffers) {
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].start < buffers[b].start;
  });
  std::vector<size_t> placed; // by offset, earlier placements first
  int64_t arena = 0;
  for (size_t index : order) {
    PlannedBuffer &buffer = buffers[index];
    int64_t offset = 0;
    for (size_t other : placed) {
      if (!(buffers[other].start < buffer.end &&
            buffer.start < buffers[other].end))
        continue;
      if (offset + buffer.bytes <= buffers[other].offset)
        break;
      offset = std::max(offset, buffers[other].offset + buffers[other].bytes);
    }
    buffer.offset = offset;
    arena = std::max(arena, offset + buffer.bytes);
    auto at = std::upper_bound(placed.begin(), placed.end(), index,
                               [&](size_t a, size_t b) {
                                 return buffers[a].offset < buffers[b].offset;
                               });
    placed.insert(at, index);
  }
  return arena;
}

// Random buffer sets, with repeated sizes, empty lifetimes and zero-byte
// buffers: every offset equals the reference placement's.
TEST(AssignOffsets, EqualsTheQuadraticReference) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    int n = 1 + int(rng() % 120);
    int64_t horizon = 1 + int64_t(rng() % 60);
    std::vector<PlannedBuffer> buffers(n);
    for (PlannedBuffer &b : buffers) {
      b.bytes = int64_t(rng() % 5) * 16 + (rng() % 7 == 0 ? 0 : 8);
      b.start = int64_t(rng() % horizon);
      b.end = b.start + int64_t(rng() % 4 == 0 ? 0 : rng() % 12);
    }
    std::vector<PlannedBuffer> expected = buffers;
    int64_t expectedArena = referencePlacement(expected);
    EXPECT_EQ(assignOffsets(buffers), expectedArena) << "trial " << trial;
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(buffers[i].offset, expected[i].offset)
          << "trial " << trial << ", buffer " << i;
  }
}

/// A GPipe-like set: `numStashed` long-lived buffers of one size with
/// nested and staggered lifetimes (the stashed inputs of in-flight
/// micro-batches) among short ones of a few sizes, some of them empty if
/// `withEmpty`, at event times spread `stride` apart.
std::vector<PlannedBuffer> stackedBuffers(std::mt19937_64 &rng, int numStashed,
                                          int numShort, int64_t stride,
                                          bool withEmpty) {
  std::vector<PlannedBuffer> buffers;
  const int64_t horizon = 4 * (numStashed + numShort);
  for (int i = 0; i < numStashed; ++i) {
    PlannedBuffer b;
    b.bytes = 64;
    b.start = int64_t(rng() % uint64_t(horizon / 2));
    b.end = horizon - b.start + int64_t(rng() % 8);
    buffers.push_back(b);
  }
  for (int i = 0; i < numShort; ++i) {
    PlannedBuffer b;
    b.bytes = int64_t(rng() % 3) * 32 + 32;
    b.start = int64_t(rng() % uint64_t(horizon));
    b.end = b.start + int64_t(rng() % 16) + (withEmpty ? 0 : 1);
    buffers.push_back(b);
  }
  for (PlannedBuffer &b : buffers) {
    b.start *= stride;
    b.end *= stride;
  }
  return buffers;
}

// Larger sets shaped like a pipeline's, with dense and sparse event times,
// with and without empty lifetimes: the same offsets and arena as the
// reference, and no live buffers share a byte.
TEST(AssignOffsets, EqualsTheQuadraticReferenceOnStackedSets) {
  std::mt19937_64 rng(23);
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<PlannedBuffer> buffers = stackedBuffers(
        rng, 200 + trial * 40, 600, trial % 2 ? 1000003 : 1, trial % 4 < 2);
    std::vector<PlannedBuffer> expected = buffers;
    int64_t expectedArena = referencePlacement(expected);
    int64_t arena = assignOffsets(buffers);
    EXPECT_EQ(arena, expectedArena) << "trial " << trial;
    for (size_t i = 0; i < buffers.size(); ++i)
      ASSERT_EQ(buffers[i].offset, expected[i].offset)
          << "trial " << trial << ", buffer " << i;
    expectNoConflicts(buffers, arena);
  }
}

/// Instructions of 10 events; each allocates short buffers in one of three
/// repeating patterns (as micro-batches do) plus a few that outlive it.
DeviceMemoryPlan instructionPlan(std::mt19937 &rng, int numInstrs) {
  DeviceMemoryPlan plan;
  std::vector<std::vector<PlannedBuffer>> patterns(3);
  for (auto &pattern : patterns)
    for (int k = 0; k < 6; ++k) {
      PlannedBuffer b;
      b.start = rng() % 8;
      b.end = b.start + 1 + rng() % (9 - b.start);
      b.bytes = 16 * (1 + rng() % 8);
      pattern.push_back(b);
    }
  for (int i = 0; i < numInstrs; ++i) {
    int64_t base = 10 * i;
    plan.instrStart.push_back(base);
    for (PlannedBuffer b : patterns[i % 3]) {
      b.start += base;
      b.end += base;
      b.instr = i;
      plan.buffers.push_back(b);
    }
    if (rng() % 2) { // lives into a later instruction
      PlannedBuffer b;
      b.start = base + rng() % 10;
      b.end = base + 10 + rng() % 40;
      b.bytes = 16 * (1 + rng() % 8);
      b.instr = i;
      plan.buffers.push_back(b);
    }
  }
  plan.instrStart.push_back(10 * numInstrs + 50);
  return plan;
}

// Placement by instruction never lets live buffers share bytes, needs at
// least the peak, and places repeated patterns at the same relative offsets.
TEST(AssignOffsetsByInstruction, ValidAndSharedAcrossRepeats) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    DeviceMemoryPlan plan = instructionPlan(rng, 30);
    int64_t arena = assignOffsetsByInstruction(plan);
    expectNoConflicts(plan.buffers, arena);
    EXPECT_GE(arena, maxLiveBytes(plan.buffers));
    // Instruction 0's and 3's first buffer both come from pattern 0, and
    // the pattern's second buffer sits at the same distance from its first.
    auto firstOf = [&](int instr) {
      for (size_t i = 0; i < plan.buffers.size(); ++i)
        if (plan.buffers[i].instr == instr)
          return i;
      return plan.buffers.size();
    };
    size_t a = firstOf(0), b = firstOf(3);
    EXPECT_EQ(plan.buffers[a + 1].offset - plan.buffers[a].offset,
              plan.buffers[b + 1].offset - plan.buffers[b].offset);
  }
}

// Placement in time order: never lets live buffers share bytes, needs at
// least the peak, and reuses freed holes.
TEST(AssignOffsetsInTimeOrder, ValidAndReusesHoles) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<PlannedBuffer> buffers(300);
    for (PlannedBuffer &b : buffers) {
      b.start = rng() % 400;
      b.end = b.start + int64_t(rng() % 5 == 0 ? 0 : 1 + rng() % 60);
      b.bytes = int64_t(rng() % 9 == 0 ? 0 : 1 + rng() % 4096);
    }
    int64_t arena = assignOffsetsInTimeOrder(buffers);
    expectNoConflicts(buffers, arena);
    EXPECT_GE(arena, maxLiveBytes(buffers));
    int64_t total = 0;
    for (const PlannedBuffer &b : buffers)
      total += b.bytes;
    EXPECT_LT(arena, total);
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
  PlannedStage &s = p.stages.emplace_back();
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
    p.instrs.push_back({PlannedInstrKind::LoadInput, 0, m, 0, "x"});
    p.instrs.push_back({PlannedInstrKind::LoadInput, 0, m, 0, "t"});
    p.instrs.push_back({PlannedInstrKind::Forward, 0, m, 0, ""});
  }
  for (unsigned m = microbatches; m-- > 0;)
    p.instrs.push_back({PlannedInstrKind::Backward, 0, m, 0, ""});
  p.instrs.push_back({PlannedInstrKind::OptimizerStep, 0, 0, 0, ""});
  p.microbatchRows.assign(microbatches, 2);
  p.keep = keep;
  return p;
}

// Hand-counted. A value of a 2-row micro-batch has 20 bytes, the loss 4 and
// g's scratch 10: each buffer takes whole 16-byte granules
// (kBufferGranule), so 32, 16 and 16.
//  keep all: each forward keeps x, t, a, b (128). The first backward (of
//  micro-batch 1) starts on 256 and adds d_b: 288; then b and t die (224),
//  d_a and the scratch come (272), d_b and a die, and so on.
//  recompute: each forward keeps the stash x, t (64). The first backward
//  recomputes a and b (64 + 64 + 64; the loss, +16, dies at once) and adds
//  d_b: 224.
TEST(PlanDeviceMemory, HandCountedPeaks) {
  DeviceMemoryPlan all, none;
  ASSERT_EQ(planDeviceMemory(chainProgram(KeepPolicy::All, 2), all), "");
  ASSERT_EQ(planDeviceMemory(chainProgram(KeepPolicy::None, 2), none), "");
  EXPECT_EQ(all.residentBytes, 1000);
  EXPECT_EQ(all.peakBytes, 1000 + 288);
  EXPECT_EQ(none.peakBytes, 1000 + 224);
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

// A device that runs two stages (interleaving) keeps the values of each
// apart and holds both stages' resident bytes. Two copies of chainProgram's
// stage, one micro-batch, keep all: alone a stage peaks at 128 (x, t, a, b)
// + 32 (d_b) = 160. Interleaved (F@0 F@1 B@1 B@0) stage 0 still holds its
// 128 while stage 1 peaks: 288; one after the other, 160.
TEST(PlanDeviceMemory, TwoStagesOnOneDevice) {
  auto twoStages = [](const char *order) {
    DeviceProgram p = chainProgram(KeepPolicy::All, 1);
    p.stages.push_back(p.stages.front());
    p.instrs.clear();
    for (const char *c = order; *c; c += 2) {
      unsigned v = unsigned(c[1] - '0');
      if (*c == 'F') {
        p.instrs.push_back({PlannedInstrKind::LoadInput, v, 0, 0, "x"});
        p.instrs.push_back({PlannedInstrKind::LoadInput, v, 0, 0, "t"});
      }
      p.instrs.push_back(
          {*c == 'F' ? PlannedInstrKind::Forward : PlannedInstrKind::Backward,
           v, 0, 0, ""});
    }
    p.instrs.push_back({PlannedInstrKind::OptimizerStep, 0, 0, 0, ""});
    return p;
  };
  DeviceMemoryPlan interleaved, sequential;
  ASSERT_EQ(planDeviceMemory(twoStages("F0F1B1B0"), interleaved), "");
  ASSERT_EQ(planDeviceMemory(twoStages("F0B0F1B1"), sequential), "");
  EXPECT_EQ(interleaved.residentBytes, 2000);
  EXPECT_EQ(interleaved.peakBytes, 2000 + 288);
  EXPECT_EQ(sequential.peakBytes, 2000 + 160);
  expectNoConflicts(interleaved.buffers,
                    interleaved.arenaBytes - interleaved.residentBytes);
  // An instruction of a stage the device does not run.
  DeviceProgram p = twoStages("F0F1B1B0");
  p.instrs[2].stage = 2;
  DeviceMemoryPlan plan;
  EXPECT_EQ(planDeviceMemory(p, plan),
            "op #2 (forward): stage 2 out of range: the device runs 2");
}

TEST(PlanDeviceMemory, ReadingAValueBeforeItExistsIsAnError) {
  DeviceProgram p = chainProgram(KeepPolicy::None, 1);
  p.instrs.erase(p.instrs.begin()); // no load of x
  DeviceMemoryPlan plan;
  EXPECT_EQ(planDeviceMemory(p, plan),
            "op #1 (forward): forward op 0 (f) reads value 0, which is not "
            "live");
}

/// chainProgram's stage with its backward split as a zero-bubble schedule
/// splits a dense layer's: B computes d_b (loss_grad) and d_a (the input
/// gradient part), W reads d_b with a and d_a with x (the weight gradient
/// parts, accumulated into resident memory: no results). Run as `order`
/// ("F0 F1 B0 B1 W0 W1"), one micro-batch per letter pair.
DeviceProgram splitProgram(KeepPolicy keep, const std::string &order) {
  DeviceProgram p = chainProgram(keep, 2);
  PlannedStage &s = p.stages.front();
  // ids: 0 x, 1 t, 2 a, 3 b, 4 loss, 5 d_b, 6 d_a
  s.values.resize(7);
  s.backward = {{{3, 1}, {5}, {}, "loss_grad"}, {{5}, {6}, {}, "dx"}};
  s.backwardWeights = {{{5, 2}, {}, {}, "dw"}, {{6, 0}, {}, {}, "dw"}};
  p.instrs.clear();
  for (size_t i = 0; i + 1 < order.size(); i += 3) {
    unsigned m = unsigned(order[i + 1] - '0');
    if (order[i] == 'F') {
      p.instrs.push_back({PlannedInstrKind::LoadInput, 0, m, 0, "x"});
      p.instrs.push_back({PlannedInstrKind::LoadInput, 0, m, 0, "t"});
    }
    PlannedInstrKind kind = order[i] == 'F' ? PlannedInstrKind::Forward
                            : order[i] == 'B'
                                ? PlannedInstrKind::Backward
                                : PlannedInstrKind::BackwardWeights;
    p.instrs.push_back({kind, 0, m, 0, ""});
  }
  p.instrs.push_back({PlannedInstrKind::OptimizerStep, 0, 0, 0, ""});
  return p;
}

/// The event that releases micro-batch m's value `id` (its last buffer's
/// end; -1: never allocated).
int64_t releasedAt(const DeviceMemoryPlan &plan, int m, int id) {
  int64_t end = -1;
  for (const PlannedBuffer &b : plan.buffers)
    if (b.microbatch == m && b.value == id)
      end = std::max(end, b.end);
  return end;
}

// Hand-counted, keep all (32 bytes a value, 16 the loss; resident 1000).
// After both forwards: x, t, a, b of each (256). B0 adds d_b0 (288, the
// peak), frees b0 and t0 (224), adds d_a0 (256). Run at once (no W
// instruction), W frees d_b0 and a0, then d_a0 and x0 (128), and B1 peaks at
// 160 over that. Deferred, m0 keeps x0, a0, d_b0, d_a0 (128) through B1,
// which again peaks at 288: the same peak, with m0's values alive until W0.
TEST(PlanDeviceMemory, SplitBackwardKeepsWhatWReadsUntilW) {
  DeviceMemoryPlan atOnce, deferred;
  DeviceProgram unsplit = splitProgram(KeepPolicy::All, "F0 F1 B0 B1");
  DeviceProgram split = splitProgram(KeepPolicy::All, "F0 F1 B0 B1 W0 W1");
  ASSERT_EQ(planDeviceMemory(unsplit, atOnce), "");
  ASSERT_EQ(planDeviceMemory(split, deferred), "");
  EXPECT_EQ(atOnce.peakBytes, 1000 + 288);
  EXPECT_EQ(deferred.peakBytes, 1000 + 288);
  expectNoConflicts(deferred.buffers,
                    deferred.arenaBytes - deferred.residentBytes);
  // Instructions: loads and forwards 0..5, B0 6, B1 7, W0 8, W1 9.
  for (int id : {0, 2, 5, 6}) {
    SCOPED_TRACE("value " + std::to_string(id));
    EXPECT_LT(releasedAt(atOnce, 0, id), atOnce.instrStart[7]);
    EXPECT_GE(releasedAt(deferred, 0, id), deferred.instrStart[8]);
    EXPECT_LT(releasedAt(deferred, 0, id), deferred.instrStart[9]);
  }
  // b and t are only B's: they go in B either way.
  EXPECT_LT(releasedAt(deferred, 0, 3), deferred.instrStart[7]);
  EXPECT_LT(releasedAt(deferred, 0, 1), deferred.instrStart[7]);
  // Recomputed values that W reads stay too (keep none: a0 and x0).
  DeviceMemoryPlan recomputed;
  ASSERT_EQ(
      planDeviceMemory(splitProgram(KeepPolicy::None, "F0 F1 B0 B1 W0 W1"),
                       recomputed),
      "");
  EXPECT_GE(releasedAt(recomputed, 0, 2), recomputed.instrStart[8]);
  EXPECT_GE(releasedAt(recomputed, 0, 0), recomputed.instrStart[8]);
}

TEST(PlanDeviceMemory, WeightsBeforeTheirBackwardReadNothingLive) {
  DeviceMemoryPlan plan;
  EXPECT_EQ(planDeviceMemory(splitProgram(KeepPolicy::All, "F0 W0 B0"), plan),
            "op #3 (backward_weights): backward_weights op 0 (dw) reads value "
            "5, which is not live");
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
