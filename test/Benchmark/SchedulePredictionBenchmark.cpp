//===- SchedulePredictionBenchmark.cpp - Simulated against measured steps -===//
//
// How well the schedule simulator (gpipe-report --simulate) predicts a step
// it has not seen. For each (schedule, K, M, remat), the MLP example runs
// under GPipe with that K, M and remat, profiled as gpipe-run --profile
// measures it, in turns with steps under `schedule`, which are timed; the
// simulator predicts that schedule's step from the mean GPipe profile.
// Counters:
//   predicted_ms   the simulated step
//   ratio          predicted / measured step time
//   bubble         the measured bubble fraction (the executor's timeline)
//   sim_bubble     the simulated one
//
//===----------------------------------------------------------------------===//

#include "ExampleBundles.h"

#include "gpipe/Analysis/ScheduleSimulator.h"
#include "gpipe/Analysis/SimulationCosts.h"
#include "gpipe/runtime/report/Profile.h"

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace rt = gpipe::runtime;
namespace sched = gpipe::schedule;
using gpipe::benchmarks::Compiled;
using gpipe::benchmarks::compileExample;
using gpipe::benchmarks::randomBatch;

namespace {

/// Untimed steps first (first touch of every buffer, caches), then profiled.
constexpr int kWarmupSteps = 3;

/// The bundle's device programs as the simulator reads them (transfers
/// without shapes: a profile prices them per event).
sched::Program programOf(const rt::Bundle &bundle) {
  sched::Program program;
  program.numMicrobatches = bundle.microbatchRows.size();
  program.numVirtualStages = bundle.stagesPerDevice();
  program.sendWindow = bundle.sendWindow;
  for (unsigned d = 0; d < bundle.programs.size(); ++d) {
    sched::DeviceProgram &device = program.devices.emplace_back();
    device.device = d;
    for (const rt::Instr &from : bundle.programs[d]) {
      sched::Instr instr;
      instr.stage = from.stage;
      instr.microbatch = from.microbatch;
      instr.peer = from.peer;
      instr.channel = from.channel;
      instr.inputName = from.inputName;
      if (from.kind != rt::InstrKind::OptimizerStep)
        instr.rows = bundle.microbatchRows[from.microbatch];
      switch (from.kind) {
      case rt::InstrKind::LoadInput:
        instr.kind = sched::InstrKind::LoadInput;
        break;
      case rt::InstrKind::Forward:
        instr.kind = sched::InstrKind::Forward;
        break;
      case rt::InstrKind::BackwardWeights:
        instr.kind = sched::InstrKind::BackwardWeights;
        break;
      case rt::InstrKind::Backward:
        instr.kind = sched::InstrKind::Backward;
        break;
      case rt::InstrKind::SendActivation:
      case rt::InstrKind::SendGradient:
        instr.kind = sched::InstrKind::Send;
        break;
      case rt::InstrKind::RecvActivation:
      case rt::InstrKind::RecvGradient:
        instr.kind = sched::InstrKind::Recv;
        break;
      case rt::InstrKind::WaitSendActivation:
      case rt::InstrKind::WaitSendGradient:
        instr.kind = sched::InstrKind::WaitSend;
        break;
      case rt::InstrKind::OptimizerStep:
        instr.kind = sched::InstrKind::OptimizerStep;
        break;
      }
      bool gradient = from.kind == rt::InstrKind::SendGradient ||
                      from.kind == rt::InstrKind::RecvGradient ||
                      from.kind == rt::InstrKind::WaitSendGradient;
      instr.direction =
          gradient ? sched::Direction::Gradient : sched::Direction::Activation;
      device.instrs.push_back(std::move(instr));
    }
  }
  return program;
}

gpipe::KeepPolicy keepOf(gpipe::RematPolicy remat) {
  switch (remat) {
  case gpipe::RematPolicy::None:
    return gpipe::KeepPolicy::All;
  case gpipe::RematPolicy::Full:
  case gpipe::RematPolicy::Selective:
    return gpipe::KeepPolicy::None;
  case gpipe::RematPolicy::ExceptLast:
    return gpipe::KeepPolicy::Last;
  }
  return gpipe::KeepPolicy::None;
}

/// Adds `scale` x `part` to `total`, field by field.
void accumulate(sched::SimulationCosts &total,
                const sched::SimulationCosts &part, double scale) {
  total.stages.resize(part.stages.size());
  for (size_t d = 0; d < part.stages.size(); ++d) {
    sched::StageCosts &t = total.stages[d];
    const sched::StageCosts &p = part.stages[d];
    t.forwardPerRow += scale * p.forwardPerRow;
    t.backwardPerRow += scale * p.backwardPerRow;
    t.recomputePerRow += scale * p.recomputePerRow;
    t.loadPerRow += scale * p.loadPerRow;
    t.optimizerStep += scale * p.optimizerStep;
    t.sendFixed += scale * p.sendFixed;
    t.recvFixed += scale * p.recvFixed;
  }
  total.stepOverhead += scale * part.stepOverhead;
}

/// `bundle` on an executor that has run kWarmupSteps untimed steps (first
/// touch of every buffer, warm caches).
std::unique_ptr<rt::PipelineExecutor>
warmExecutor(rt::Bundle bundle, const rt::Batch &batch, std::string &error) {
  rt::ExecutorConfig config;
  config.optimizer.kind = rt::OptimizerKind::Adam;
  config.optimizer.learningRate = 1e-3f;
  config.seed = 1;
  auto executor =
      rt::PipelineExecutor::create(std::move(bundle), config, error);
  for (int step = 0; executor && step < kWarmupSteps; ++step) {
    rt::StepResult result = executor->trainStep(batch);
    if (!result.ok()) {
      error = result.error;
      executor.reset();
    }
  }
  return executor;
}

/// Args: schedule (0 gpipe, 1 1f1b, 2 zb-h1, 3 interleaved with V = 2, 4 the
/// same predicted from its own profile), K, M, remat (0 none, 1 full).
/// Each iteration runs one profiled step, whose profile joins the mean costs,
/// and one step of `schedule`, which is timed: the two see the same machine
/// (it is shared and noisy). The prediction uses the mean costs. The profile
/// is GPipe's with the same stages, one per device: K x V devices for
/// interleaving (3), whose threads then share the cores more than the K of
/// the step predicted; or (4) the interleaved step's own.
void BM_SchedulePrediction(benchmark::State &state) {
  const sched::ScheduleKind kinds[] = {
      sched::ScheduleKind::GPipe, sched::ScheduleKind::OneFOneB,
      sched::ScheduleKind::ZeroBubbleH1, sched::ScheduleKind::Interleaved,
      sched::ScheduleKind::Interleaved};
  sched::ScheduleKind kind = kinds[state.range(0)];
  const bool ownProfile = state.range(0) == 4;
  unsigned k = state.range(1), m = state.range(2);
  unsigned v = kind == sched::ScheduleKind::Interleaved ? 2 : 1;
  auto remat = static_cast<gpipe::RematPolicy>(state.range(3));
  Compiled profiled = ownProfile
                          ? compileExample("mlp", k, m, remat, 0, kind, v)
                          : compileExample("mlp", k * v, m, remat);
  Compiled measured = compileExample("mlp", k, m, remat, 0, kind, v);
  for (const Compiled *compiled : {&profiled, &measured})
    if (!compiled->error.empty()) {
      state.SkipWithError(compiled->error.c_str());
      return;
    }
  sched::Program program = programOf(measured.bundle);
  rt::Batch batch = randomBatch(measured.bundle, 1);
  std::string error;
  auto profiler = warmExecutor(std::move(profiled.bundle), batch, error);
  auto executor = profiler
                      ? warmExecutor(std::move(measured.bundle), batch, error)
                      : nullptr;
  if (!executor) {
    state.SkipWithError(error.c_str());
    return;
  }

  std::vector<sched::SimulationCosts> profiles;
  double wallUs = 0, bubble = 0;
  for (auto _ : state) {
    state.PauseTiming();
    rt::StepResult step = profiler->trainStep(batch);
    if (step.ok()) {
      error = gpipe::readProfile(
          rt::profileJson(profiler->bundle(), profiler->timeline()), k * v,
          profiles.emplace_back());
    }
    state.ResumeTiming();
    if (!step.ok() || !error.empty()) {
      state.SkipWithError(step.ok() ? error.c_str() : step.error.c_str());
      return;
    }
    step = executor->trainStep(batch);
    if (!step.ok()) {
      state.SkipWithError(step.error.c_str());
      return;
    }
    wallUs += executor->timeline().stepUs();
    bubble += executor->timeline().bubbleFraction();
  }
  sched::SimulationCosts costs;
  for (const sched::SimulationCosts &one : profiles)
    accumulate(costs, one, 1.0 / double(profiles.size()));
  costs.keep = keepOf(remat);
  // The devices are threads on this machine's cores.
  costs.processors = std::max(1u, std::thread::hardware_concurrency());
  sched::SimulationResult predicted = sched::simulateSchedule(program, costs);
  if (!predicted.error.empty()) {
    state.SkipWithError(predicted.error.c_str());
    return;
  }
  double steps = double(state.iterations());
  double predictedUs = predicted.simulation.stepUs;
  state.counters["predicted_ms"] = predictedUs / 1e3;
  state.counters["ratio"] = wallUs > 0 ? predictedUs / (wallUs / steps) : 0.0;
  state.counters["bubble"] = bubble / steps;
  state.counters["sim_bubble"] = predicted.simulation.bubbleFraction;
  state.SetLabel(std::string(sched::scheduleKindName(kind)) +
                 (v > 1 ? " V=" + std::to_string(v) : std::string()) +
                 " K=" + std::to_string(k) + " M=" + std::to_string(m) +
                 " remat=" + gpipe::stringifyRematPolicy(remat).str() +
                 (ownProfile ? ", predicted from its own profile"
                             : ", predicted from a gpipe profile"));
}

constexpr int64_t kNone = int64_t(gpipe::RematPolicy::None);
constexpr int64_t kFull = int64_t(gpipe::RematPolicy::Full);

BENCHMARK(BM_SchedulePrediction)
    ->ArgNames({"schedule", "K", "M", "remat"})
    ->Args({0, 2, 8, kFull})
    ->Args({1, 2, 8, kFull})
    ->Args({0, 2, 8, kNone})
    ->Args({1, 2, 8, kNone})
    ->Args({0, 2, 4, kFull})
    ->Args({1, 2, 4, kFull})
    ->Args({0, 4, 8, kFull})
    ->Args({1, 4, 8, kFull})
    ->Args({2, 2, 8, kFull})
    ->Args({2, 2, 8, kNone})
    ->Args({2, 2, 4, kFull})
    ->Args({2, 4, 8, kFull})
    ->Args({3, 2, 8, kFull})
    ->Args({3, 2, 8, kNone})
    ->Args({3, 2, 4, kFull})
    ->Args({4, 2, 8, kFull})
    ->Args({4, 2, 8, kNone})
    ->Args({4, 2, 4, kFull})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

} // namespace
