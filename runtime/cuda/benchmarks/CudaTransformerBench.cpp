//===- CudaTransformerBench.cpp - Training steps of a Transformer on GPUs -===//
//
// Google Benchmark of the device executor on the CUDA backend, for the
// Transformer stack of docs/Cuda.md: d_model 1024 (and 2048, bigger GEMMs),
// heads of 64 features, sequence 1024, causal attention, a 4x GELU
// feed-forward block, pre-norm residuals, a 256-symbol vocabulary, Adam; the
// bundle is built here (TestBundles' model graph, the compiler's planner), so
// the GPU machine needs no compiler. The GEMM precision is the bundle's, as
// gpipe-compile precision= writes it.
//
//   BM_TransformerStep   one GPU, K = 1, per layers, precision and d_model:
//                        step time, tokens/s, the model's
//                        TFLOP/s and MFU against one H100 SXM's dense peak
//                        for the GEMM precision (989 bf16, 495 TF32, 67 f32
//                        TFLOP/s; GPIPE_PEAK_TFLOPS overrides it)
//   BM_VirtualDevices    K pipeline devices on the same GPU against K = 1 at
//                        the same M: what the runtime's transfers, events and
//                        per-device issue cost (the ideal ratio is the bubble,
//                        (M + K - 1) / M, since one GPU runs them all).
//
// Model FLOPs per step (recomputation not counted, as MFU is defined):
// 6 T (12 L d^2 + d V) for the weights' products plus 12 L B s^2 d for the
// attention scores and their product with V (the kernels compute the full,
// unmasked square), with T = B s tokens.
//
// Every benchmark skips without a GPU. Not a test: run it by hand, or through
// scripts/gpu-check.sh, which records its output.
//
//===----------------------------------------------------------------------===//

#include "gpipe/cuda/CudaBackend.h"
#include "gpipe/cuda/CudaDevices.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"

#include "TestBundles.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;
using gpipe::cuda::GemmPrecision;
using gpipe::runtime::Precision;

namespace {

/// Heads of 64 features, as GPT-2's and Llama's: 16 at d_model 1024.
constexpr int64_t kHeadWidth = 64, kSeq = 1024, kVocab = 256;

/// Embedding, `layers` pre-norm blocks (attention, then a GELU feed-forward
/// block, each with its residual), a vocabulary projection and the
/// cross-entropy, at d_model `width`. A block is two graph layers, so stages
/// cut between halves.
ModelGraph transformerStack(int64_t batch, int layers, int64_t width) {
  ModelGraph g(batch);
  int ids = g.input("ids", {batch, kSeq}, ElementType::I32);
  int labels = g.input("labels", {batch, kSeq}, ElementType::I32);
  int x = g.embedding(
      ids, g.param("embed", {kVocab, width}, InitKind::Normal, 0.02));
  for (int l = 0; l < layers; ++l) {
    std::string p = "block" + std::to_string(l) + ".";
    g.nextLayer();
    int ln1 = g.layerNorm(x, g.param(p + "ln1.gamma", {width}, InitKind::Ones),
                          g.param(p + "ln1.beta", {width}, InitKind::Zeros));
    int att = g.attention(
        ln1, g.param(p + "wqkv", {width, 3 * width}, InitKind::GlorotUniform),
        g.param(p + "wo", {width, width}, InitKind::GlorotUniform), width / kHeadWidth,
        /*causal=*/true);
    x = g.add(x, att);
    g.nextLayer();
    int ln2 = g.layerNorm(x, g.param(p + "ln2.gamma", {width}, InitKind::Ones),
                          g.param(p + "ln2.beta", {width}, InitKind::Zeros));
    int hidden =
        g.unary(OpKind::Gelu,
                g.dense(ln2,
                        g.param(p + "w1", {width, 4 * width},
                                InitKind::GlorotUniform),
                        g.param(p + "b1", {4 * width}, InitKind::Zeros)));
    x = g.add(x, g.dense(hidden,
                         g.param(p + "w2", {4 * width, width},
                                 InitKind::GlorotUniform),
                         g.param(p + "b2", {width}, InitKind::Zeros)));
  }
  g.nextLayer();
  int logits =
      g.dense(x, g.param("out.w", {width, kVocab}, InitKind::GlorotUniform),
              g.param("out.b", {kVocab}, InitKind::Zeros));
  g.softmaxCrossEntropy(logits, labels);
  return g;
}

/// K stages of about equal numbers of graph layers.
std::vector<int> evenSplit(int numLayers, unsigned k) {
  std::vector<int> first;
  for (unsigned s = 0; s < k; ++s)
    first.push_back(int(int64_t(numLayers) * s / k));
  return first;
}

Batch randomTokens(int64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(rows * kSeq), labels(rows * kSeq);
  for (int32_t &v : ids)
    v = int32_t(rng() % kVocab);
  for (int32_t &v : labels)
    v = int32_t(rng() % kVocab);
  return {{"ids", HostTensor::ints({rows, kSeq}, ids)},
          {"labels", HostTensor::ints({rows, kSeq}, labels)}};
}

double modelFlops(int64_t rows, int layers, int64_t width) {
  const double tokens = double(rows) * kSeq, d = double(width);
  return 6.0 * tokens * (12.0 * layers * d * d + d * kVocab) +
         12.0 * layers * double(rows) * double(kSeq) * kSeq * d;
}

/// The dense peak of one H100 SXM in TFLOP/s for the GEMM precision, or
/// GPIPE_PEAK_TFLOPS.
double peakTflops(GemmPrecision precision) {
  if (const char *env = std::getenv("GPIPE_PEAK_TFLOPS"))
    return std::atof(env);
  switch (precision) {
  case GemmPrecision::BF16:
    return 989.4;
  case GemmPrecision::TF32:
    return 494.7;
  case GemmPrecision::F32:
    return 66.9;
  }
  return 989.4;
}

/// Times training steps of the stack; skips with the reason when it cannot.
void runSteps(benchmark::State &state, int layers, int64_t width, unsigned k,
              unsigned m, int64_t microbatchRows, GemmPrecision precision) {
  // The bundle first: without a GPU, the skip message still shows that the
  // model builds and plans (the largest device's arena).
  const int64_t rows = int64_t(m) * microbatchRows;
  ModelGraph graph = transformerStack(rows, layers, width);
  Bundle bundle =
      buildBundle(graph, evenSplit(graph.numLayers(), k), m, RematPolicy::Full);
  // The compiler's decision (gpipe-compile precision=), as the product runs.
  bundle.precision = precision == GemmPrecision::BF16   ? Precision::BF16
                     : precision == GemmPrecision::TF32 ? Precision::TF32
                                                        : Precision::F32;
  int64_t arena = 0;
  for (const auto &device : bundle.memoryPlan.devices)
    arena = std::max(arena, device.arenaBytes);
  std::string why;
  if (!gpipe::cuda::gpuAvailable(&why)) {
    state.SkipWithError(("no CUDA device (" + why + "); the bundle has " +
                         std::to_string(bundle.params.size()) +
                         " parameters and plans " +
                         std::to_string(arena >> 20) + " MiB per device")
                            .c_str());
    return;
  }
  gpipe::cuda::CudaBackendOptions options;
  options.numDevices = k;
  options.maxGpus = 1; // K pipeline devices on one GPU
  std::string error;
  auto backend = gpipe::cuda::createCudaBackend(options, error);
  if (!backend) {
    state.SkipWithError(error.c_str());
    return;
  }
  DeviceExecutorConfig config;
  config.seed = 1;
  config.optimizer.kind = OptimizerKind::Adam;
  config.optimizer.learningRate = 1e-4f;
  config.recordTimeline = false;
  auto executor = DeviceExecutor::create(std::move(bundle), std::move(backend),
                                         config, error);
  if (!executor) {
    state.SkipWithError(error.c_str());
    return;
  }
  Batch batch = randomTokens(rows, 7);
  for (int warmup = 0; warmup < 2; ++warmup) {
    StepResult step = executor->trainStep(batch);
    if (!step.ok()) {
      state.SkipWithError(step.error.c_str());
      return;
    }
  }
  for (auto _ : state) {
    StepResult step = executor->trainStep(batch);
    if (!step.ok()) {
      state.SkipWithError(step.error.c_str());
      return;
    }
    benchmark::DoNotOptimize(step.loss);
  }
  const double flops = modelFlops(rows, layers, width);
  state.counters["tokens/s"] =
      benchmark::Counter(double(state.iterations()) * double(rows) * kSeq,
                         benchmark::Counter::kIsRate);
  state.counters["TFLOP/s"] = benchmark::Counter(
      double(state.iterations()) * flops / 1e12, benchmark::Counter::kIsRate);
  state.counters["MFU"] = benchmark::Counter(
      double(state.iterations()) * flops / (peakTflops(precision) * 1e12),
      benchmark::Counter::kIsRate);
  state.SetLabel("L=" + std::to_string(layers) + " d=" + std::to_string(width) +
                 " K=" + std::to_string(k) +
                 " M=" + std::to_string(m) +
                 " rows/mb=" + std::to_string(microbatchRows) + " " +
                 gpipe::cuda::gemmPrecisionName(precision) + " peak " +
                 std::to_string(int(peakTflops(precision))) + " TFLOP/s");
}

/// Args: layers, GEMM precision (0 f32, 1 tf32, 2 bf16), d_model. K = 1,
/// M = 4 micro-batches of 2 sequences.
void BM_TransformerStep(benchmark::State &state) {
  runSteps(state, int(state.range(0)), state.range(2), 1, 4, 2,
           GemmPrecision(state.range(1)));
}

/// Args: K (pipeline devices sharing the one GPU). 8 layers, bf16, M = 8.
void BM_VirtualDevices(benchmark::State &state) {
  runSteps(state, 8, 1024, unsigned(state.range(0)), 8, 1,
           GemmPrecision::BF16);
}

} // namespace

BENCHMARK(BM_TransformerStep)
    ->ArgNames({"layers", "precision", "width"})
    ->Args({8, 2, 1024})
    ->Args({24, 2, 1024})
    ->Args({8, 1, 1024})
    ->Args({8, 0, 1024})
    ->Args({8, 2, 2048}) // bigger GEMMs
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK(BM_VirtualDevices)
    ->ArgName("K")
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
