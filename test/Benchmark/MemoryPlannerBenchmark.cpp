//===- MemoryPlannerBenchmark.cpp - One device's memory plan --------------===//
//
// Times the memory planner alone on one middle device of a GPipe pipeline:
// a stage of L element-wise layers with full rematerialisation, M
// micro-batches of one row in fill-drain order. At L = 156, M = 256 it is
// one device of gpipe-compile at L = 10^4, K = 64, M = 256. Items are
// buffers, so items/s is the planner's buffer throughput.
//
// BM_MemoryPlanner_PlaceExact and BM_MemoryPlanner_PlaceByInstruction place
// the same buffers with the exact greedy and with the placement by
// instruction that planDeviceMemory uses beyond kExactPlacementLimit: their
// times and `arena` counters show what the cheaper placement costs in bytes.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/MemoryPlanner.h"

#include <benchmark/benchmark.h>

#include <algorithm>

using namespace gpipe;

/// A middle device with `numLayers` layers (16 floats per row each, a third
/// of them with scratch) and `numMicrobatches` one-row micro-batches:
/// receive, forward, send per micro-batch, then in reverse order receive the
/// gradient, recompute, backward, send the input's gradient.
static DeviceProgram makeDeviceProgram(int numLayers,
                                       unsigned numMicrobatches) {
  DeviceProgram program;
  PlannedStage &stage = program.stages.emplace_back();
  // Ids: forward values 0..L (0 the received input), then the gradient of
  // forward value i at 2L + 1 - i.
  const int n = numLayers;
  auto gradOf = [n](int i) { return 2 * n + 1 - i; };
  stage.values.assign(2 * n + 2, ByteSize{0, 64});
  stage.inputs = {0};
  stage.inputChannels = {0};
  stage.inputNames = {""};
  stage.outputs = {n};
  stage.outputGrads = {gradOf(n)};
  stage.inputGrads = {gradOf(0)};
  for (int i = 1; i <= n; ++i) {
    ByteSize scratch = i % 3 == 0 ? ByteSize{0, 32} : ByteSize{};
    stage.forward.push_back({{i - 1}, {i}, scratch, "gelu"});
  }
  stage.recompute = stage.forward;
  for (int i = n; i >= 1; --i) {
    ByteSize scratch = i % 3 == 0 ? ByteSize{0, 32} : ByteSize{};
    stage.backward.push_back(
        {{gradOf(i), i - 1}, {gradOf(i - 1)}, scratch, "gelu_grad"});
  }
  stage.residentBytes = int64_t(n) * 1024;
  for (unsigned m = 0; m < numMicrobatches; ++m) {
    program.instrs.push_back({PlannedInstrKind::RecvActivation, 0, m, 0, ""});
    program.instrs.push_back({PlannedInstrKind::Forward, 0, m, 0, ""});
    program.instrs.push_back({PlannedInstrKind::SendActivation, 0, m, 0, ""});
  }
  for (unsigned m = numMicrobatches; m-- > 0;) {
    program.instrs.push_back({PlannedInstrKind::RecvGradient, 0, m, 0, ""});
    program.instrs.push_back({PlannedInstrKind::Backward, 0, m, 0, ""});
    program.instrs.push_back({PlannedInstrKind::SendGradient, 0, m, 0, ""});
  }
  program.instrs.push_back({PlannedInstrKind::OptimizerStep, 0, 0, 0, ""});
  program.microbatchRows.assign(numMicrobatches, 1);
  program.keep = KeepPolicy::None;
  return program;
}

/// The replayed program's buffers that need room, as planDeviceMemory
/// places them.
static DeviceMemoryPlan replayed(benchmark::State &state) {
  DeviceMemoryPlan plan;
  std::string error = replayDeviceMemory(
      makeDeviceProgram(int(state.range(0)), unsigned(state.range(1))), plan);
  if (!error.empty())
    state.SkipWithError(error.c_str());
  plan.buffers.erase(std::remove_if(plan.buffers.begin(), plan.buffers.end(),
                                    [](const PlannedBuffer &buffer) {
                                      return buffer.bytes == 0;
                                    }),
                     plan.buffers.end());
  return plan;
}

static void reportBuffers(benchmark::State &state, size_t buffers) {
  state.counters["buffers"] = double(buffers);
  state.SetItemsProcessed(state.iterations() * int64_t(buffers));
}

static void BM_MemoryPlanner_Replay(benchmark::State &state) {
  DeviceProgram program =
      makeDeviceProgram(int(state.range(0)), unsigned(state.range(1)));
  size_t buffers = 0;
  for (auto _ : state) {
    DeviceMemoryPlan plan;
    std::string error = replayDeviceMemory(program, plan);
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      break;
    }
    buffers = plan.buffers.size();
    benchmark::DoNotOptimize(plan);
  }
  reportBuffers(state, buffers);
}

static void BM_MemoryPlanner_Plan(benchmark::State &state) {
  DeviceProgram program =
      makeDeviceProgram(int(state.range(0)), unsigned(state.range(1)));
  DeviceMemoryPlan plan;
  for (auto _ : state) {
    plan = DeviceMemoryPlan();
    std::string error = planDeviceMemory(program, plan);
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      break;
    }
    benchmark::DoNotOptimize(plan);
  }
  reportBuffers(state, plan.buffers.size());
  state.counters["peak"] = double(plan.peakBytes);
  state.counters["arena"] = double(plan.arenaBytes);
}

static void BM_MemoryPlanner_PlaceExact(benchmark::State &state) {
  DeviceMemoryPlan plan = replayed(state);
  int64_t arena = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<PlannedBuffer> buffers = plan.buffers;
    state.ResumeTiming();
    arena = assignOffsets(buffers);
  }
  reportBuffers(state, plan.buffers.size());
  state.counters["arena"] = double(plan.residentBytes + arena);
  state.counters["peak"] = double(plan.peakBytes);
}

static void BM_MemoryPlanner_PlaceByInstruction(benchmark::State &state) {
  DeviceMemoryPlan plan = replayed(state);
  int64_t arena = 0;
  for (auto _ : state) {
    state.PauseTiming();
    DeviceMemoryPlan copy = plan;
    state.ResumeTiming();
    arena = assignOffsetsByInstruction(copy);
  }
  reportBuffers(state, plan.buffers.size());
  state.counters["arena"] = double(plan.residentBytes + arena);
  state.counters["peak"] = double(plan.peakBytes);
}

// L = 2,500 and 156: one device of L = 10^4 at K = 4 and K = 64 (L = 25,
// M = 8: of L = 100 at K = 4).
BENCHMARK(BM_MemoryPlanner_Replay)
    ->ArgNames({"L", "M"})
    ->ArgsProduct({{156, 2500}, {8, 64, 256}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemoryPlanner_Plan)
    ->ArgNames({"L", "M"})
    ->ArgsProduct({{156, 2500}, {8, 64, 256}})
    ->Unit(benchmark::kMillisecond);
// The exact greedy grows with the buffers live at once (the M stashed
// inputs), so its sizes stop short of the others'.
BENCHMARK(BM_MemoryPlanner_PlaceExact)
    ->ArgNames({"L", "M"})
    ->Args({25, 8})
    ->Args({156, 8})
    ->Args({156, 64})
    ->Args({156, 256})
    ->Args({2500, 8})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemoryPlanner_PlaceByInstruction)
    ->ArgNames({"L", "M"})
    ->ArgsProduct({{156, 2500}, {8, 64, 256}})
    ->Unit(benchmark::kMillisecond);
