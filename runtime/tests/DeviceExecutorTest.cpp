//===- DeviceExecutorTest.cpp - The device executor on the host backend ---===//
//
// The device executor (the one the CUDA backend runs) on HostBackend: the
// GPU's kernel bodies, CBLAS GEMMs, and streams whose work runs in a random
// order that respects only stream order and events. Each step is compared
// with the CPU executor (itself checked against a double-precision
// whole-batch reference in ExecutorTest.cpp): losses, every parameter
// gradient, and parameters after several Adam steps, for the MLP, the
// Transformer block and the MSE model at K = 1, 2, 4 (3 for the MSE model's
// two layers: 1, 2), every remat policy and several micro-batch counts. Also:
// the host backend does catch a missing event, the arena placement, and the
// errors of a bad batch or a bad backend.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/runtime/verify/BundleValidation.h"
#include "gpipe/runtime/exec/Executor.h"
#include "gpipe/runtime/verify/ProgramAnalysis.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/backends/host/HostBackend.h"

#include "AllClose.h"
#include "TestBundles.h"
#include "TestModels.h"
#include "TestPlacement.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <new>
#include <random>
#include <set>
#include <tuple>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;

namespace {

constexpr int64_t kBatch = 10;
// The same kernels up to float summation order (CBLAS blocking, the loss
// sums): as tight as the CPU executor's own test against its reference.
constexpr double kRtol = 1e-5, kAtol = 4e-5;

enum class Model { Mlp, Transformer, Mse, Conv, BatchNorm };

const char *modelName(Model model) {
  switch (model) {
  case Model::Mlp:
    return "mlp";
  case Model::Transformer:
    return "transformer";
  case Model::Mse:
    return "mse";
  case Model::Conv:
    return "conv";
  case Model::BatchNorm:
    return "batchnorm";
  }
  return "?";
}

Bundle bundleOf(Model model, unsigned k, unsigned m, RematPolicy remat) {
  switch (model) {
  case Model::Mlp:
    return buildBundle(mlpGraph(kBatch), mlpSplit(k), m, remat);
  case Model::Transformer:
    return buildBundle(residualGraph(kBatch), residualSplit(k), m, remat);
  case Model::Mse:
    return buildBundle(mseGraph(kBatch), k == 1 ? std::vector<int>{0}
                                                : std::vector<int>{0, 1},
                       m, remat);
  case Model::Conv:
    return buildBundle(convGraph(kBatch), convSplit(k), m, remat);
  case Model::BatchNorm:
    return buildBundle(batchNormGraph(kBatch),
                       k == 1 ? std::vector<int>{0} : std::vector<int>{0, 1}, m,
                       remat);
  }
  return {};
}

Batch batchOf(Model model, uint64_t seed) {
  switch (model) {
  case Model::Mlp:
    return mlpBatch(kBatch, seed);
  case Model::Transformer:
    return residualBatch(kBatch, seed);
  case Model::Mse:
    return mseBatch(kBatch, seed);
  case Model::Conv:
    return convBatch(kBatch, seed);
  case Model::BatchNorm:
    return batchNormBatch(kBatch, seed);
  }
  return {};
}

/// On the host emulation with `scheduleSeed`, or with 0 on CpuBackend's
/// threads.
std::unique_ptr<DeviceExecutor> makeDeviceExecutor(Bundle bundle,
                                                   uint64_t scheduleSeed,
                                                   OptimizerConfig optimizer) {
  unsigned devices = bundle.stages.size();
  DeviceExecutorConfig config;
  config.seed = 42;
  config.optimizer = optimizer;
  std::string error;
  std::unique_ptr<DeviceBackend> backend;
  if (scheduleSeed == 0)
    backend = std::make_unique<CpuBackend>(devices);
  else
    backend = std::make_unique<HostBackend>(devices, scheduleSeed);
  auto executor = DeviceExecutor::create(std::move(bundle), std::move(backend),
                                         config, error);
  EXPECT_TRUE(executor) << error;
  return executor;
}

std::unique_ptr<PipelineExecutor> makeCpuExecutor(Bundle bundle,
                                                  OptimizerConfig optimizer) {
  ExecutorConfig config;
  config.seed = 42;
  config.optimizer = optimizer;
  config.recordTimeline = false;
  std::string error;
  auto executor = PipelineExecutor::create(std::move(bundle), config, error);
  EXPECT_TRUE(executor) << error;
  return executor;
}

std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

using SweepParam = std::tuple<Model, unsigned, unsigned, RematPolicy>;

std::string sweepName(const ::testing::TestParamInfo<SweepParam> &info) {
  auto [model, k, m, remat] = info.param;
  const char *policy = remat == RematPolicy::None   ? "none"
                       : remat == RematPolicy::Full ? "full"
                                                    : "exceptlast";
  return std::string(modelName(model)) + "_K" + std::to_string(k) + "_M" +
         std::to_string(m) + "_" + policy;
}

class DeviceVersusCpu : public ::testing::TestWithParam<SweepParam> {};

/// Three Adam steps on different batches: each step's loss and gradients,
/// then the parameters, against the CPU executor; under two emulated
/// interleavings and on CpuBackend's threads.
TEST_P(DeviceVersusCpu, SameLossesGradientsAndParameters) {
  auto [model, k, m, remat] = GetParam();
  OptimizerConfig adam;
  adam.kind = OptimizerKind::Adam;
  adam.learningRate = 0.01f;
  auto cpu = makeCpuExecutor(bundleOf(model, k, m, remat), adam);
  ASSERT_TRUE(cpu);
  std::vector<std::unique_ptr<DeviceExecutor>> devices;
  for (uint64_t scheduleSeed : {1u, 2u, 0u}) {
    devices.push_back(
        makeDeviceExecutor(bundleOf(model, k, m, remat), scheduleSeed, adam));
    ASSERT_TRUE(devices.back());
  }
  for (uint64_t step = 1; step <= 3; ++step) {
    Batch batch = batchOf(model, 100 + step);
    StepResult expected = cpu->trainStep(batch);
    ASSERT_TRUE(expected.ok()) << expected.error;
    for (auto &device : devices) {
      StepResult actual = device->trainStep(batch);
      ASSERT_TRUE(actual.ok()) << actual.error;
      EXPECT_NEAR(actual.loss, expected.loss,
                  kRtol * std::fabs(expected.loss) + 1e-7)
          << "step " << step;
      ASSERT_EQ(actual.microbatchLosses.size(), size_t(m));
      for (const ParamSpec &spec : cpu->bundle().params) {
        std::vector<float> grad;
        ASSERT_EQ(device->gradient(spec.name, grad), "");
        EXPECT_TRUE(gpipe::testing::allClose(
            grad, toDouble(*cpu->gradient(spec.name)), kRtol, kAtol))
            << "gradient " << spec.name << ", step " << step;
      }
    }
  }
  for (auto &device : devices)
    for (const ParamSpec &spec : cpu->bundle().params) {
      std::vector<float> value;
      ASSERT_EQ(device->parameter(spec.name, value), "");
      EXPECT_TRUE(gpipe::testing::allClose(
          value, toDouble(*cpu->parameter(spec.name)), kRtol, kAtol))
          << "parameter " << spec.name;
    }
}

INSTANTIATE_TEST_SUITE_P(
    MlpAndTransformer, DeviceVersusCpu,
    ::testing::Combine(::testing::Values(Model::Mlp, Model::Transformer),
                       ::testing::Values(1u, 2u, 4u),
                       ::testing::Values(1u, 3u, 4u),
                       ::testing::Values(RematPolicy::None, RematPolicy::Full,
                                         RematPolicy::ExceptLast)),
    sweepName);
INSTANTIATE_TEST_SUITE_P(
    Conv, DeviceVersusCpu,
    ::testing::Combine(::testing::Values(Model::Conv),
                       ::testing::Values(1u, 2u, 4u), ::testing::Values(1u, 3u),
                       ::testing::Values(RematPolicy::None, RematPolicy::Full)),
    sweepName);
INSTANTIATE_TEST_SUITE_P(
    BatchNorm, DeviceVersusCpu,
    ::testing::Combine(::testing::Values(Model::BatchNorm),
                       ::testing::Values(1u, 2u), ::testing::Values(1u, 3u),
                       ::testing::Values(RematPolicy::None, RematPolicy::Full)),
    sweepName);
INSTANTIATE_TEST_SUITE_P(
    Mse, DeviceVersusCpu,
    ::testing::Combine(::testing::Values(Model::Mse),
                       ::testing::Values(1u, 2u), ::testing::Values(1u, 3u),
                       ::testing::Values(RematPolicy::Full,
                                         RematPolicy::ExceptLast)),
    sweepName);

Batch batchOf(Model model, int64_t rows, uint64_t seed) {
  switch (model) {
  case Model::Mlp:
    return mlpBatch(rows, seed);
  case Model::Transformer:
    return residualBatch(rows, seed);
  case Model::Mse:
    return mseBatch(rows, seed);
  case Model::Conv:
    return convBatch(rows, seed);
  case Model::BatchNorm:
    return batchNormBatch(rows, seed);
  }
  return {};
}

void expectCloseTensors(const HostTensor &actual, const HostTensor &expected,
                        const std::string &what) {
  ASSERT_EQ(actual.type, expected.type) << what;
  ASSERT_EQ(actual.shape, expected.shape) << what;
  if (expected.type == ElementType::I32) {
    EXPECT_EQ(actual.i32, expected.i32) << what;
    return;
  }
  EXPECT_TRUE(gpipe::testing::allClose(actual.f32, toDouble(expected.f32),
                                       kRtol, kAtol))
      << what;
}

using EvalParam = std::tuple<Model, unsigned>;

class DeviceEvaluate : public ::testing::TestWithParam<EvalParam> {};

/// Evaluation after a training step, on fewer, as many and more rows than
/// the training batch: the loss, the prediction and the target equal the
/// CPU executor's, on the emulated streams and on CpuBackend's threads.
TEST_P(DeviceEvaluate, MatchesTheCpuExecutor) {
  auto [model, k] = GetParam();
  OptimizerConfig sgd;
  sgd.learningRate = 0.05f;
  for (uint64_t scheduleSeed : {3u, 0u}) {
    auto cpu = makeCpuExecutor(bundleOf(model, k, 2, RematPolicy::Full), sgd);
    ASSERT_TRUE(cpu);
    ASSERT_TRUE(cpu->trainStep(batchOf(model, 7)).ok());
    auto device = makeDeviceExecutor(bundleOf(model, k, 2, RematPolicy::Full),
                                     scheduleSeed, sgd);
    ASSERT_TRUE(device);
    StepResult step = device->trainStep(batchOf(model, 7));
    ASSERT_TRUE(step.ok()) << step.error;
    for (int64_t rows : {int64_t(3), kBatch, 2 * kBatch + 1, int64_t(3)}) {
      Batch batch = batchOf(model, rows, 50 + rows);
      EvalResult expected = cpu->evaluate(batch, rows);
      ASSERT_TRUE(expected.ok()) << expected.error;
      EvalResult actual = device->evaluate(batch, rows);
      ASSERT_TRUE(actual.ok()) << actual.error;
      EXPECT_NEAR(actual.loss, expected.loss,
                  kRtol * std::fabs(expected.loss) + 1e-6)
          << rows << " rows";
      expectCloseTensors(actual.prediction, expected.prediction, "prediction");
      expectCloseTensors(actual.target, expected.target, "target");
    }
    // Evaluation left the training state alone: the next step matches.
    StepResult expected = cpu->trainStep(batchOf(model, 8));
    StepResult actual = device->trainStep(batchOf(model, 8));
    ASSERT_TRUE(actual.ok()) << actual.error;
    EXPECT_NEAR(actual.loss, expected.loss,
                kRtol * std::fabs(expected.loss) + 1e-7);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllModels, DeviceEvaluate,
    ::testing::Combine(::testing::Values(Model::Mlp, Model::Transformer,
                                         Model::Conv, Model::BatchNorm,
                                         Model::Mse),
                       ::testing::Values(1u, 2u)),
    [](const ::testing::TestParamInfo<EvalParam> &info) {
      return std::string(modelName(std::get<0>(info.param))) + "_K" +
             std::to_string(std::get<1>(info.param));
    });

TEST(DeviceEvaluate, RefusesBadRowsAndBatches) {
  auto device = makeDeviceExecutor(
      bundleOf(Model::Mlp, 2, 2, RematPolicy::Full), 1, OptimizerConfig());
  ASSERT_TRUE(device);
  EXPECT_EQ(device->evaluate(mlpBatch(4, 1), 0).error,
            "evaluate: expects at least 1 row, got 0");
  EXPECT_NE(device->evaluate(mlpBatch(4, 1), 5).error.find("evaluate: "),
            std::string::npos);
  Batch bad = mlpBatch(4, 1);
  bad["labels"].i32[2] = 99;
  std::string error = device->evaluate(bad, 4).error;
  EXPECT_NE(error.find("label 99 outside [0, 5)"), std::string::npos) << error;
}

/// Every instruction of a step is on its device's lane, in program order,
/// with its micro-batch, and so is every recompute; compute and transfers
/// are told apart, and the measured bubble lies in [0, 1).
TEST(DeviceExecutorTimeline, OneEventPerInstructionAndRecompute) {
  const unsigned numMicrobatches = 3;
  for (uint64_t scheduleSeed : {1u, 0u}) {
    Bundle bundle =
        bundleOf(Model::Transformer, 2, numMicrobatches, RematPolicy::Full);
    auto device = makeDeviceExecutor(bundle, scheduleSeed, OptimizerConfig());
    ASSERT_TRUE(device);
    ASSERT_TRUE(device->trainStep(batchOf(Model::Transformer, 1)).ok());
    const Timeline &timeline = device->timeline();
    ASSERT_EQ(timeline.numDevices(), 2u);
    for (unsigned d = 0; d < 2; ++d) {
      SCOPED_TRACE("device " + std::to_string(d));
      // GPipe's order under full remat: every backward but the last
      // micro-batch's, which follows its own forward, first recomputes; a
      // receive of its gradient waits after that recompute.
      std::vector<std::pair<std::string, int64_t>> expected, waiting;
      for (const Instr &instr : bundle.programs[d]) {
        const bool step = instr.kind == InstrKind::OptimizerStep;
        std::pair<std::string, int64_t> event{
            instructionName(instr.kind), step ? -1 : int64_t(instr.microbatch)};
        const bool last = instr.microbatch == numMicrobatches - 1;
        if (instr.kind == InstrKind::RecvGradient && !last) {
          waiting.push_back(event);
          continue;
        }
        if (instr.kind == InstrKind::Backward && !last) {
          expected.push_back({"recompute", instr.microbatch});
          expected.insert(expected.end(), waiting.begin(), waiting.end());
          waiting.clear();
        }
        expected.push_back(event);
      }
      const std::vector<TimelineEvent> &lane = timeline.lane(d);
      std::vector<std::pair<std::string, int64_t>> seen;
      for (const TimelineEvent &event : lane) {
        seen.push_back({event.name, event.microbatch});
        EXPECT_EQ(event.compute, event.name == "forward" ||
                                     event.name == "backward" ||
                                     event.name == "recompute" ||
                                     event.name == "optimizer step")
            << event.name;
        EXPECT_GE(event.startUs, 0.0);
        EXPECT_GE(event.durationUs, 0.0);
      }
      EXPECT_EQ(seen, expected);
    }
    double bubble = timeline.bubbleFraction();
    EXPECT_GE(bubble, 0.0);
    EXPECT_LT(bubble, 1.0);
  }
}

TEST(DeviceExecutor, StepsInterleaveTheStreams) {
  auto executor = makeDeviceExecutor(
      bundleOf(Model::Transformer, 4, 4, RematPolicy::Full), 3, {});
  ASSERT_TRUE(executor);
  StepResult step = executor->trainStep(batchOf(Model::Transformer, 1));
  ASSERT_TRUE(step.ok()) << step.error;
  auto &backend = static_cast<HostBackend &>(executor->backend());
  // The last synchronize was the step's (no read-back since).
  EXPECT_GT(backend.tasksRun(), 100);
  EXPECT_GT(backend.streamSwitches(), backend.tasksRun() / 4);
}

// Every input copy of a step reads the backend's staging memory (page-locked
// on CUDA), not the caller's batch: on a GPU a copy from pageable memory
// would stall the one thread that issues all devices' programs. So does each
// device's copy of the step's scalars (StepScalars). Evaluation on more rows
// than the training batch grows the staging.
TEST(DeviceExecutor, InputsAreCopiedFromStagingMemory) {
  const unsigned m = 4;
  auto executor =
      makeDeviceExecutor(bundleOf(Model::Mlp, 2, m, RematPolicy::None), 5, {});
  ASSERT_TRUE(executor);
  auto &backend = static_cast<HostBackend &>(executor->backend());
  for (uint64_t seed : {1u, 2u}) {
    StepResult step = executor->trainStep(batchOf(Model::Mlp, seed));
    ASSERT_TRUE(step.ok()) << step.error;
    EXPECT_EQ(backend.unstagedCopies(), 0);
    EXPECT_EQ(backend.stagedCopies(), 2 * m + 2)
        << "images and labels, and the two devices' step scalars";
  }
  EvalResult eval =
      executor->evaluate(batchOf(Model::Mlp, 3 * kBatch, 9), 3 * kBatch);
  ASSERT_TRUE(eval.ok()) << eval.error;
  EXPECT_EQ(backend.unstagedCopies(), 0);
  EXPECT_GT(backend.stagedCopies(), 0);
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

/// The compiler's fused pairs (dense + activation, residual add + layer
/// norm) give the bits of the two kernels they replace, on the CPU threads
/// and on the host emulation: losses and parameters after two Adam steps.
TEST(DeviceExecutor, FusedPairsGiveTheUnfusedBits) {
  for (Model model : {Model::Mlp, Model::Transformer}) {
    SCOPED_TRACE(modelName(model));
    Bundle fused = bundleOf(model, 2, 3, RematPolicy::Full);
    std::set<FusionKind> kinds;
    Bundle unfused = fused;
    for (StageProgram &stage : unfused.stages)
      for (std::vector<Op> *ops : {&stage.forward, &stage.recompute})
        for (Op &op : *ops) {
          if (op.fusion != FusionKind::None)
            kinds.insert(op.fusion);
          op.fusion = FusionKind::None;
        }
    placeBundle(unfused);
    EXPECT_EQ(kinds.size(), model == Model::Mlp ? 1u : 2u);
    for (uint64_t scheduleSeed : {0, 5}) {
      OptimizerConfig adam;
      adam.kind = OptimizerKind::Adam;
      auto a = makeDeviceExecutor(fused, scheduleSeed, adam);
      auto b = makeDeviceExecutor(unfused, scheduleSeed, adam);
      ASSERT_TRUE(a && b);
      for (uint64_t step = 0; step < 2; ++step) {
        StepResult x = a->trainStep(batchOf(model, step));
        StepResult y = b->trainStep(batchOf(model, step));
        ASSERT_TRUE(x.ok() && y.ok()) << x.error << y.error;
        EXPECT_EQ(x.microbatchLosses, y.microbatchLosses);
      }
      for (const ParamSpec &param : fused.params) {
        std::vector<float> x, y;
        ASSERT_EQ(a->parameter(param.name, x), "");
        ASSERT_EQ(b->parameter(param.name, y), "");
        EXPECT_EQ(x, y) << param.name << ", schedule seed " << scheduleSeed;
      }
    }
  }
}

/// A fusion mark the runtime has no kernel for, or one that breaks the
/// pairing rules, is refused when the bundle is loaded.
TEST(DeviceExecutor, RefusesMalformedFusions) {
  const Bundle good = bundleOf(Model::Transformer, 1, 2, RematPolicy::Full);
  size_t pair = 0;
  const std::vector<Op> &forward = good.stages[0].forward;
  while (forward[pair].fusion != FusionKind::AddLayerNorm)
    ++pair;
  auto errorOf = [&](const std::function<void(Bundle &)> &edit) {
    Bundle bad = good;
    edit(bad);
    return validateBundle(bad);
  };
  std::string at = "stage 0: forward op " + std::to_string(pair) +
                   " (add): fusion 'add_layer_norm' ";
  EXPECT_EQ(errorOf([&](Bundle &b) {
              b.stages[0].forward[pair].fusion = FusionKind::DenseActivation;
            }),
            "stage 0: forward op " + std::to_string(pair) +
                " (add): fusion 'dense_activation' does not apply to add "
                "then layer_norm");
  EXPECT_EQ(errorOf([&](Bundle &b) {
              b.stages[0].forward[pair + 1].fusion = FusionKind::AddLayerNorm;
            }),
            at + "is followed by another fusion; fusions pair two ops");
  EXPECT_NE(errorOf([&](Bundle &b) {
              b.stages[0].backward[0].fusion = FusionKind::AddLayerNorm;
            }).find("in a backward; only forward and recompute ops fuse"),
            std::string::npos);
  EXPECT_NE(errorOf([&](Bundle &b) {
              b.stages[0].forward.back().fusion = FusionKind::AddLayerNorm;
            }).find("it is the last op"),
            std::string::npos);
}

/// Each device's arena is exactly the compiler's (the plan's arena less its
/// resident bytes), and remat shrinks it.
TEST(DeviceExecutor, ArenaIsTheCompilersAndFollowsRemat) {
  auto arenas = [](RematPolicy remat) {
    Bundle bundle = bundleOf(Model::Transformer, 2, 4, remat);
    auto device = makeDeviceExecutor(bundle, 1, {});
    EXPECT_TRUE(device->trainStep(batchOf(Model::Transformer, 5)).ok());
    std::vector<int64_t> bytes;
    for (unsigned d = 0; d < 2; ++d) {
      const PlannedDeviceMemory &plan = bundle.memoryPlan.devices[d];
      EXPECT_EQ(device->memory()[d].arenaBytes,
                plan.arenaBytes - plan.residentBytes)
          << "device " << d;
      EXPECT_GE(plan.arenaBytes, plan.peakBytes) << "device " << d;
      bytes.push_back(device->memory()[d].arenaBytes);
    }
    return bytes;
  };
  std::vector<int64_t> none = arenas(RematPolicy::None);
  std::vector<int64_t> full = arenas(RematPolicy::Full);
  for (unsigned d = 0; d < 2; ++d)
    EXPECT_LT(full[d], none[d]) << "device " << d;
}

/// Sends that complete in the background, each awaited where the compiler
/// placed its wait, change only when a sent buffer may be reused: the same
/// bits as sends copied as issued, under every schedule and window, on the
/// emulated streams and on threads.
TEST(DeviceExecutor, SendWindowsGiveTheBitsOfCopiedSends) {
  using gpipe::schedule::ScheduleKind;
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::ZeroBubbleH1})
    for (unsigned window : {1u, 2u, 5u}) {
      SCOPED_TRACE(std::string(gpipe::schedule::scheduleKindName(kind)) +
                   ", window " + std::to_string(window));
      auto bundle = [&](unsigned sendWindow) {
        return buildBundle(residualGraph(kBatch), residualSplit(4), 5,
                           RematPolicy::Full, kind, 1, sendWindow);
      };
      Bundle copied = bundle(0), awaited = bundle(window);
      EXPECT_EQ(awaited.sendWindow, window);
      for (uint64_t scheduleSeed : {1u, 0u}) {
        auto expected = makeDeviceExecutor(copied, scheduleSeed, {});
        auto actual = makeDeviceExecutor(awaited, scheduleSeed, {});
        ASSERT_TRUE(expected && actual);
        for (uint64_t step = 1; step <= 2; ++step) {
          Batch batch = batchOf(Model::Transformer, 200 + step);
          StepResult a = actual->trainStep(batch), e = expected->trainStep(batch);
          ASSERT_TRUE(a.ok() && e.ok()) << a.error << e.error;
          EXPECT_EQ(a.loss, e.loss) << "step " << step;
        }
        for (const ParamSpec &spec : copied.params) {
          std::vector<float> a, e;
          ASSERT_EQ(actual->parameter(spec.name, a), "");
          ASSERT_EQ(expected->parameter(spec.name, e), "");
          EXPECT_EQ(a, e) << spec.name;
        }
      }
    }
}

/// The executor plans nothing: a bundle whose placement lacks a buffer, or
/// gives one too few bytes, or has none at all, is refused at creation with
/// the device, instruction and value named.
TEST(DeviceExecutor, RefusesAPlacementThatDoesNotFitTheProgram) {
  const Bundle good = bundleOf(Model::Mlp, 2, 2, RematPolicy::Full);
  auto create = [](Bundle bundle) {
    std::string error;
    auto executor = DeviceExecutor::create(
        std::move(bundle), std::make_unique<HostBackend>(2), {}, error);
    EXPECT_FALSE(executor);
    return error;
  };
  // The first buffer that holds a value of device 1.
  size_t first = 0;
  const std::vector<PlacedBuffer> &buffers = good.memoryPlan.devices[1].buffers;
  while (!buffers[first].holdsValue())
    ++first;
  const PlacedBuffer &target = buffers[first];
  std::string named = "device 1: instruction " + std::to_string(target.instr) +
                      " defines value " + std::to_string(target.value);

  Bundle smaller = good;
  smaller.memoryPlan.devices[1].buffers[first].bytes -= 4;
  std::string error = create(smaller);
  EXPECT_NE(error.find(named), std::string::npos) << error;
  EXPECT_NE(error.find("gives it " + std::to_string(target.bytes - 4)),
            std::string::npos)
      << error;

  Bundle missing = good;
  missing.memoryPlan.devices[1].buffers[first].value =
      int64_t(good.stages[1].values.size()) - 1;
  missing.memoryPlan.devices[1].buffers[first].microbatch = -1;
  error = create(missing);
  EXPECT_NE(error.find(named), std::string::npos) << error;
  EXPECT_NE(error.find("has no buffer for it"), std::string::npos) << error;

  // Two buffers of one instruction that claim the same value.
  Bundle twice = good;
  std::vector<PlacedBuffer> &all = twice.memoryPlan.devices[1].buffers;
  size_t a = 0, b = 0;
  for (size_t i = 0; i < all.size() && !b; ++i)
    for (size_t j = i + 1; j < all.size() && !b; ++j)
      if (all[i].holdsValue() && all[j].holdsValue() &&
          all[i].instr == all[j].instr)
        a = i, b = j;
  ASSERT_NE(b, 0u);
  all[b].value = all[a].value;
  error = create(twice);
  EXPECT_NE(error.find("device 1: buffers #" + std::to_string(a) + " and #" +
                       std::to_string(b) + " both hold value " +
                       std::to_string(all[a].value)),
            std::string::npos)
      << error;

  Bundle unplanned = good;
  unplanned.memoryPlan = MemoryPlan();
  error = create(unplanned);
  EXPECT_NE(error.find("recompile it with gpipe-translate"), std::string::npos)
      << error;
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(DeviceExecutor, BadLabelFailsTheStepAndLeavesTheParameters) {
  Bundle bundle = bundleOf(Model::Mlp, 2, 2, RematPolicy::Full);
  auto cpu = makeCpuExecutor(bundle, {});
  auto device = makeDeviceExecutor(bundle, 1, {});
  Batch batch = batchOf(Model::Mlp, 3);
  batch.at("labels").i32[7] = 9; // micro-batch 1 (rows 5..9), position 2
  StepResult expected = cpu->trainStep(batch);
  StepResult actual = device->trainStep(batch);
  ASSERT_FALSE(expected.ok());
  EXPECT_EQ(actual.error, expected.error);
  std::vector<float> before;
  ASSERT_EQ(device->parameter("l1.w", before), "");
  EXPECT_TRUE(gpipe::testing::allClose(before, toDouble(*cpu->parameter("l1.w")),
                                       0, 0));
  EXPECT_EQ(device->stepsDone(), 0);
  batch.at("labels").i32[7] = 4;
  EXPECT_TRUE(device->trainStep(batch).ok()) << "recovers";
}

TEST(DeviceExecutor, BadEmbeddingIdMatchesTheCpuMessage) {
  Bundle bundle = bundleOf(Model::Transformer, 2, 2, RematPolicy::Full);
  auto cpu = makeCpuExecutor(bundle, {});
  auto device = makeDeviceExecutor(bundle, 1, {});
  Batch batch = batchOf(Model::Transformer, 3);
  batch.at("ids").i32[3] = -1;
  StepResult expected = cpu->trainStep(batch);
  ASSERT_FALSE(expected.ok());
  EXPECT_EQ(device->trainStep(batch).error, expected.error);
}

TEST(DeviceExecutor, RefusesBadBatchesBundlesAndBackends) {
  Bundle bundle = bundleOf(Model::Mlp, 2, 2, RematPolicy::Full);
  auto device = makeDeviceExecutor(bundle, 1, {});
  Batch batch = batchOf(Model::Mlp, 3);
  batch.erase("labels");
  EXPECT_NE(device->trainStep(batch).error.find("missing model input 'labels'"),
            std::string::npos);
  std::vector<float> values;
  EXPECT_EQ(device->parameter("nope", values), "unknown parameter 'nope'");
  EXPECT_NE(device->setParameter("l1.b", {1.0f}).find("has 16 elements"),
            std::string::npos);

  std::string error;
  EXPECT_FALSE(DeviceExecutor::create(bundle, std::make_unique<HostBackend>(3),
                                      {}, error));
  EXPECT_EQ(error, "the bundle has 2 pipeline devices, the backend 3");
  Bundle broken = bundle;
  for (Op &op : broken.stages[1].forward)
    if (op.kind == OpKind::Dense) {
      op.operands = {op.operands[0]};
      break;
    }
  EXPECT_FALSE(DeviceExecutor::create(broken, std::make_unique<HostBackend>(2),
                                      {}, error));
  EXPECT_EQ(error, validateBundle(broken));
  DeviceExecutorConfig zero;
  zero.stepTimeout = std::chrono::milliseconds(0);
  EXPECT_FALSE(DeviceExecutor::create(bundle, std::make_unique<HostBackend>(2),
                                      zero, error));
  EXPECT_NE(error.find("positive step timeout"), std::string::npos);
}

/// Device 0 sends micro-batch 0's activation only after it has received a
/// gradient, which device 1 cannot send before that activation: the issue
/// order cannot go on, and `create` (whose placement run issues a step) says
/// where each device waits.
TEST(DeviceExecutor, ScheduleThatCannotGoOnIsRefusedWithBothPositions) {
  Bundle bundle = bundleOf(Model::Mlp, 2, 2, RematPolicy::Full);
  auto &program = bundle.programs[0];
  auto at = [&](InstrKind kind) {
    size_t i = 0;
    while (i < program.size() &&
           !(program[i].kind == kind && program[i].microbatch == 0))
      ++i;
    return i;
  };
  size_t send = at(InstrKind::SendActivation);
  Instr moved = program[send];
  program.erase(program.begin() + send);
  program.insert(program.begin() + at(InstrKind::RecvGradient) + 1, moved);
  std::string error;
  EXPECT_FALSE(DeviceExecutor::create(bundle, std::make_unique<HostBackend>(2),
                                      {}, error));
  EXPECT_EQ(error, "the schedule cannot go on: device 0 waits at op #5 (recv "
                   "gradient from device 1, micro-batch 1, channel 0); device 1 "
                   "waits at op #0 (recv activation from device 0, micro-batch "
                   "0, channel 0)");
}

TEST(DeviceExecutor, SetParameterIsUsedByTheNextStep) {
  Bundle bundle = bundleOf(Model::Mlp, 2, 2, RematPolicy::Full);
  auto cpu = makeCpuExecutor(bundle, {});
  auto device = makeDeviceExecutor(bundle, 1, {});
  std::vector<float> bias(16, 0.25f);
  ASSERT_EQ(cpu->setParameter("l1.b", bias), "");
  ASSERT_EQ(device->setParameter("l1.b", bias), "");
  Batch batch = batchOf(Model::Mlp, 9);
  StepResult expected = cpu->trainStep(batch), actual = device->trainStep(batch);
  ASSERT_TRUE(actual.ok()) << actual.error;
  EXPECT_NEAR(actual.loss, expected.loss, kRtol * std::fabs(expected.loss));
}

} // namespace
