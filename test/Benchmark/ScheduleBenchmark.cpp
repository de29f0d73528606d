//===- ScheduleBenchmark.cpp - GPipe schedule build and verify cost -------===//
//
// Builds and verifies the fill-drain schedule for K stages and M
// micro-batches, one tensor per boundary; builds 1F1B (a simulation of the
// devices places its transfers) and simulates a step. Items are
// instructions, so items/s is the instruction throughput; the verifier is
// meant to stay linear.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/PipelineSchedule.h"
#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/Analysis/ScheduleSimulator.h"

#include <benchmark/benchmark.h>

using namespace gpipe::schedule;

/// K stages, M micro-batches of 4 rows, one 4M x 1024 f32 tensor per
/// boundary; stage 0 reads "x" and the last stage "labels".
static PipelineSpec makeScheduleSpec(unsigned numStages,
                                     unsigned numMicrobatches) {
  PipelineSpec spec;
  spec.numStages = numStages;
  spec.numMicrobatches = numMicrobatches;
  spec.batchSize = 4 * static_cast<int64_t>(numMicrobatches);
  spec.boundaries.assign(numStages - 1, {{{spec.batchSize, 1024}, "f32"}});
  spec.stageInputs.resize(numStages);
  spec.stageInputs.front().push_back("x");
  spec.stageInputs.back().push_back("labels");
  return spec;
}

static std::size_t countInstrs(const Program &program) {
  std::size_t count = 0;
  for (const DeviceProgram &device : program.devices)
    count += device.instrs.size();
  return count;
}

static void reportInstrs(benchmark::State &state, std::size_t instrs) {
  state.counters["instructions"] = static_cast<double>(instrs);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(instrs));
}

static void BM_Schedule_Build(benchmark::State &state) {
  PipelineSpec spec = makeScheduleSpec(static_cast<unsigned>(state.range(0)),
                                       static_cast<unsigned>(state.range(1)));
  std::size_t instrs = 0;
  for (auto _ : state) {
    Program program = buildGPipeSchedule(spec);
    instrs = countInstrs(program);
    benchmark::DoNotOptimize(program);
  }
  reportInstrs(state, instrs);
}

static void BM_Schedule_Verify(benchmark::State &state) {
  Program program = buildGPipeSchedule(
      makeScheduleSpec(static_cast<unsigned>(state.range(0)),
                       static_cast<unsigned>(state.range(1))));
  for (auto _ : state) {
    std::vector<Violation> violations = verifySchedule(program);
    if (!violations.empty()) {
      state.SkipWithError("the generated schedule does not verify");
      break;
    }
    benchmark::DoNotOptimize(violations);
  }
  reportInstrs(state, countInstrs(program));
}

static void BM_Schedule_Build1F1B(benchmark::State &state) {
  PipelineSpec spec = makeScheduleSpec(static_cast<unsigned>(state.range(0)),
                                       static_cast<unsigned>(state.range(1)));
  std::size_t instrs = 0;
  for (auto _ : state) {
    Program program = buildSchedule(spec, ScheduleKind::OneFOneB);
    instrs = countInstrs(program);
    benchmark::DoNotOptimize(program);
  }
  reportInstrs(state, instrs);
}

static void BM_Schedule_Simulate(benchmark::State &state) {
  unsigned k = static_cast<unsigned>(state.range(0));
  Program program =
      buildSchedule(makeScheduleSpec(k, static_cast<unsigned>(state.range(1))),
                    ScheduleKind::OneFOneB);
  SimulationCosts costs;
  StageCosts device;
  device.forwardPerRow = 1;
  device.backwardPerRow = 2;
  device.sendFixed = 1;
  costs.stages.assign(k, device);
  for (auto _ : state) {
    SimulationResult result = simulateSchedule(program, costs);
    if (!result.error.empty()) {
      state.SkipWithError(result.error.c_str());
      break;
    }
    benchmark::DoNotOptimize(result);
  }
  reportInstrs(state, countInstrs(program));
}

BENCHMARK(BM_Schedule_Build1F1B)
    ->ArgsProduct({{2, 8, 32, 128}, {8, 64, 512}})
    ->ArgNames({"K", "M"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Schedule_Simulate)
    ->ArgsProduct({{2, 8, 32, 128}, {8, 64, 512}})
    ->ArgNames({"K", "M"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Schedule_Build)
    ->ArgsProduct({{2, 8, 32, 128}, {8, 64, 512}})
    ->ArgNames({"K", "M"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Schedule_Verify)
    ->ArgsProduct({{2, 8, 32, 128}, {8, 64, 512}})
    ->ArgNames({"K", "M"})
    ->Unit(benchmark::kMillisecond);
