//===- GeneratedKernelBenchmark.cpp - Fused generated kernels vs per op ---===//
//
// A run of element-wise ops as one generated kernel against the same ops as
// one generated kernel each (every intermediate written and read back), on
// one thread, through the runtime's loader (LoadedCode) and call path
// (runGeneratedRange). The runs:
//  - rope: q cos + neg(q') sin, the element-wise part of a rotary embedding
//    (mul, neg, mul, add: 4 ops, 4 inputs);
//  - swiglu: silu(a) b, the gate of a SwiGLU feed-forward (2 ops);
//  - gelu_chain: add, gelu, tanh, relu, mul (5 ops, 3 inputs).
// And single named ops, generated against the library's kernels; RMSNorm
// and softmax over rows of 1,024 as one row kernel (leading reductions)
// against fewer fused kernels and one per op.
// At 64 Ki elements (the arrays fit in L2) and 4 Mi (they do not). Counter:
// elements/s. The ratio of the two rows of a run, measured in one process,
// is the fusion's gain (docs/Benchmarks.md).
//
//===----------------------------------------------------------------------===//

#include "gpipe/Target/NativeKernels.h"
#include "gpipe/runtime/backends/GeneratedCode.h"
#include "gpipe/runtime/backends/cpu/CpuBackend.h"
#include "gpipe/runtime/kernels/CpuKernels.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <random>

namespace dev = gpipe::runtime::device;
using gpipe::KernelSpec;
using gpipe::NamedKernel;

namespace {

/// A 1-D kernel of `inputs` inputs computing `steps`.
KernelSpec elementwise(unsigned inputs, std::vector<gpipe::KernelStep> steps) {
  KernelSpec spec = KernelSpec::elementwise(inputs);
  spec.steps = std::move(steps);
  return spec;
}

/// The runs, as kernels of their own.
std::map<std::string, KernelSpec> runs() {
  std::map<std::string, KernelSpec> out;
  out["rope"] = elementwise(
      4, {{"mul", {0, 1}}, {"neg", {2}}, {"mul", {5, 3}}, {"add", {4, 6}}});
  out["swiglu"] = elementwise(2, {{"silu", {0}}, {"mul", {2, 1}}});
  // Single named ops, against the runtime's library kernels (below).
  out["gelu"] = elementwise(1, {{"gelu", {0}}});
  out["tanh"] = elementwise(1, {{"tanh", {0}}});
  out["gelu_chain"] = elementwise(3, {{"add", {0, 1}},
                                      {"gelu", {3}},
                                      {"tanh", {4}},
                                      {"relu", {5}},
                                      {"mul", {6, 2}}});
  return out;
}

/// The kernels of a run taken one op each: step k reads the inputs and the
/// earlier steps' outputs, which the caller keeps in buffers.
KernelSpec single(const KernelSpec &run, size_t k) {
  gpipe::KernelStep step = run.steps[k];
  for (unsigned i = 0; i < step.operands.size(); ++i)
    step.operands[i] = i;
  return elementwise(step.operands.size(), {step});
}

/// `kernels` compiled for every variant and loaded as the runtime loads a
/// bundle's code (aborts on failure: a benchmark has no one to tell).
std::unique_ptr<dev::LoadedCode>
compileAndLoad(const std::vector<NamedKernel> &kernels) {
  mlir::MLIRContext context;
  mlir::FailureOr<std::vector<gpipe::NativeCodeVariant>> variants =
      gpipe::compileNativeKernels(kernels, mlir::UnknownLoc::get(&context));
  if (mlir::failed(variants))
    std::abort();
  gpipe::runtime::GeneratedCode code;
  for (const NamedKernel &kernel : kernels) {
    gpipe::runtime::GeneratedKernelSpec spec;
    spec.symbol = kernel.symbol;
    spec.inputs = kernel.spec.numInputs;
    spec.ops = kernel.spec.describe();
    spec.rank = kernel.spec.rank;
    for (const auto &dims : kernel.spec.inputDims)
      spec.inputDims.emplace_back(dims.begin(), dims.end());
    spec.outputDims.assign(kernel.spec.outputDims.begin(),
                           kernel.spec.outputDims.end());
    code.kernels.push_back(std::move(spec));
  }
  for (gpipe::NativeCodeVariant &variant : *variants)
    code.cpu.push_back({variant.isa, variant.sharedObject});
  std::string error;
  std::unique_ptr<dev::LoadedCode> loaded =
      dev::LoadedCode::load(code, dev::hostCpuFeatures(), error);
  if (!loaded)
    std::abort();
  return loaded;
}

/// Every run fused and op by op, compiled once and loaded.
struct Compiled {
  std::unique_ptr<dev::LoadedCode> code;
  std::map<std::string, size_t> fused;              ///< run -> kernel
  std::map<std::string, std::vector<size_t>> perOp; ///< run -> kernels
};

const Compiled &compiled() {
  static Compiled out = [] {
    Compiled c;
    std::vector<NamedKernel> kernels;
    for (auto &[name, run] : runs()) {
      c.fused[name] = kernels.size();
      kernels.push_back({"bench_" + name, run});
      for (size_t k = 0; k < run.steps.size(); ++k) {
        c.perOp[name].push_back(kernels.size());
        kernels.push_back(
            {"bench_" + name + "_" + std::to_string(k), single(run, k)});
      }
    }
    c.code = compileAndLoad(kernels);
    return c;
  }();
  return out;
}

/// Inputs in [-2, 2] and one buffer per step.
struct Buffers {
  std::vector<std::vector<float>> values;
  Buffers(const KernelSpec &run, int64_t n) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    values.resize(run.numInputs + run.steps.size(), std::vector<float>(n));
    for (unsigned i = 0; i < run.numInputs; ++i)
      for (float &v : values[i])
        v = u(rng);
  }
};

void run(benchmark::State &state, const std::string &name, bool fused) {
  const Compiled &c = compiled();
  const KernelSpec run = runs().at(name);
  const int64_t n = state.range(0);
  Buffers buffers(run, n);
  auto call = [&](size_t kernel, std::vector<const float *> inputs,
                  float *output) {
    dev::GeneratedCall call = dev::GeneratedCall::elementWise(
        c.code->entry(kernel), std::move(inputs), output, n);
    dev::runGeneratedRange(call, call.inputs.data(), 0, n);
  };
  for (auto _ : state) {
    if (fused) {
      std::vector<const float *> inputs;
      for (unsigned i = 0; i < run.numInputs; ++i)
        inputs.push_back(buffers.values[i].data());
      call(c.fused.at(name), inputs, buffers.values.back().data());
    } else {
      for (size_t k = 0; k < run.steps.size(); ++k) {
        std::vector<const float *> inputs;
        for (unsigned operand : run.steps[k].operands)
          inputs.push_back(buffers.values[operand].data());
        call(c.perOp.at(name)[k], inputs,
             buffers.values[run.numInputs + k].data());
      }
    }
    benchmark::DoNotOptimize(buffers.values.back().data());
    benchmark::ClobberMemory();
  }
  state.counters["elements/s"] = benchmark::Counter(
      double(n) * state.iterations(), benchmark::Counter::kIsRate);
}

#define GPIPE_GENERATED_BENCHMARK(run_name)                                    \
  void BM_Generated_##run_name##_Fused(benchmark::State &state) {              \
    run(state, #run_name, true);                                               \
  }                                                                            \
  void BM_Generated_##run_name##_PerOp(benchmark::State &state) {              \
    run(state, #run_name, false);                                              \
  }                                                                            \
  BENCHMARK(BM_Generated_##run_name##_Fused)->Arg(1 << 16)->Arg(1 << 22);      \
  BENCHMARK(BM_Generated_##run_name##_PerOp)->Arg(1 << 16)->Arg(1 << 22);

/// RMSNorm, x rsqrt(mean(x^2)) g over rows of `width`, five general ops:
/// as the bundle fuses them (x^2 into its row mean; rsqrt; the two muls
/// into one kernel: three kernels) against one kernel per op.
struct RmsNormKernels {
  static KernelSpec spec(unsigned rank,
                         std::vector<llvm::SmallVector<unsigned>> inputDims,
                         llvm::SmallVector<unsigned> outputDims,
                         std::vector<gpipe::KernelStep> steps) {
    KernelSpec spec;
    spec.rank = rank;
    spec.numInputs = inputDims.size();
    spec.inputDims = std::move(inputDims);
    spec.outputDims = std::move(outputDims);
    spec.steps = std::move(steps);
    return spec;
  }
  static std::vector<NamedKernel> kernels(int64_t width) {
    gpipe::KernelStep mean{"reduce_mean", {1}, {{"count", double(width)}}};
    gpipe::KernelStep meanOfInput{"reduce_mean", {0}, {{"count", double(width)}}};
    return {
        // Fused: 0 1 2.
        {"rms_square_mean", spec(2, {{0, 1}}, {0}, {{"mul", {0, 0}}, mean})},
        {"rms_rsqrt", spec(1, {{0}}, {0}, {{"rsqrt", {0}}})},
        {"rms_scale", spec(2, {{0, 1}, {0}, {1}}, {0, 1},
                           {{"mul", {0, 1}}, {"mul", {3, 2}}})},
        // Per op: 3 (square), 4 (mean), 1 (rsqrt), 5 (x r), 6 (. g).
        {"rms_square", spec(1, {{0}, {0}}, {0}, {{"mul", {0, 1}}})},
        {"rms_mean", spec(2, {{0, 1}}, {0}, {meanOfInput})},
        {"rms_mul_rows", spec(2, {{0, 1}, {0}}, {0, 1}, {{"mul", {0, 1}}})},
        {"rms_mul_columns", spec(2, {{0, 1}, {1}}, {0, 1}, {{"mul", {0, 1}}})},
        // One row kernel (a leading mean): 7.
        {"rms_row", rows(spec(2, {{0, 1}, {1}}, {0, 1},
                              {{"mul", {0, 0}},
                               {"reduce_mean", {2}, {{"count", double(width)}}},
                               {"rsqrt", {3}},
                               {"mul", {0, 4}},
                               {"mul", {5, 1}}}))},
        // Softmax over each row: one row kernel (8), or a maximum (9), the
        // shifted exponentials (10), their sum (11) and the division (12).
        {"softmax_row", rows(spec(2, {{0, 1}}, {0, 1},
                                  {{"reduce_max", {0}},
                                   {"sub", {0, 1}},
                                   {"exp", {2}},
                                   {"reduce_sum", {3}},
                                   {"div", {3, 4}}}))},
        {"softmax_max", spec(2, {{0, 1}}, {0}, {{"reduce_max", {0}}})},
        {"softmax_exp", spec(2, {{0, 1}, {0}}, {0, 1},
                             {{"sub", {0, 1}}, {"exp", {2}}})},
        {"softmax_sum", spec(2, {{0, 1}}, {0}, {{"reduce_sum", {0}}})},
        {"softmax_div", spec(2, {{0, 1}, {0}}, {0, 1}, {{"div", {0, 1}}})},
        // Its gradient (dy, y): y (dy - sum(dy y)), one row kernel: 13.
        {"softmax_grad_row", rows(spec(2, {{0, 1}, {0, 1}}, {0, 1},
                                       {{"mul", {0, 1}},
                                        {"reduce_sum", {2}},
                                        {"sub", {0, 3}},
                                        {"mul", {1, 4}}}))},
    };
  }
  static KernelSpec rows(KernelSpec spec) {
    spec.rowDims = 1;
    return spec;
  }
};

/// How the benchmarks below compute a norm or a softmax.
enum class RowFusion { PerOp, Trailing, Row, Library };

void rmsNorm(benchmark::State &state, RowFusion fusion) {
  const int64_t rows = state.range(0), width = 1024;
  static std::unique_ptr<dev::LoadedCode> code =
      compileAndLoad(RmsNormKernels::kernels(width));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> x(rows * width), g(width), square(rows * width),
      mean(rows), r(rows), scaled(rows * width), out(rows * width);
  for (float &v : x)
    v = u(rng);
  for (float &v : g)
    v = u(rng);
  auto call = [&](size_t kernel, std::vector<int64_t> space,
                  std::vector<std::vector<unsigned>> inputDims,
                  std::vector<unsigned> outputDims,
                  std::vector<const float *> inputs, float *output) {
    dev::GeneratedCall c;
    c.entry = code->entry(kernel);
    c.inputs = std::move(inputs);
    c.output = output;
    c.space = std::move(space);
    c.inputDims = std::move(inputDims);
    c.outputDims = std::move(outputDims);
    dev::runGeneratedRange(c, c.inputs.data(), 0, c.space[0]);
  };
  const int64_t n = rows * width;
  for (auto _ : state) {
    if (fusion == RowFusion::Row) {
      call(7, {rows, width}, {{0, 1}, {1}}, {0, 1}, {x.data(), g.data()},
           out.data());
    } else if (fusion == RowFusion::Trailing) {
      call(0, {rows, width}, {{0, 1}}, {0}, {x.data()}, mean.data());
      call(1, {rows}, {{0}}, {0}, {mean.data()}, r.data());
      call(2, {rows, width}, {{0, 1}, {0}, {1}}, {0, 1},
           {x.data(), r.data(), g.data()}, out.data());
    } else {
      call(3, {n}, {{0}, {0}}, {0}, {x.data(), x.data()}, square.data());
      call(4, {rows, width}, {{0, 1}}, {0}, {square.data()}, mean.data());
      call(1, {rows}, {{0}}, {0}, {mean.data()}, r.data());
      call(5, {rows, width}, {{0, 1}, {0}}, {0, 1}, {x.data(), r.data()},
           scaled.data());
      call(6, {rows, width}, {{0, 1}, {1}}, {0, 1}, {scaled.data(), g.data()},
           out.data());
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["elements/s"] = benchmark::Counter(
      double(n) * state.iterations(), benchmark::Counter::kIsRate);
}
void BM_Generated_rmsnorm_Fused(benchmark::State &state) {
  rmsNorm(state, RowFusion::Trailing);
}
void BM_Generated_rmsnorm_PerOp(benchmark::State &state) {
  rmsNorm(state, RowFusion::PerOp);
}
void BM_Generated_rmsnorm_Row(benchmark::State &state) {
  rmsNorm(state, RowFusion::Row);
}
BENCHMARK(BM_Generated_rmsnorm_Fused)->Arg(64)->Arg(4096);
BENCHMARK(BM_Generated_rmsnorm_PerOp)->Arg(64)->Arg(4096);
BENCHMARK(BM_Generated_rmsnorm_Row)->Arg(64)->Arg(4096);

/// Softmax over rows of 1,024: one row kernel against the four kernels the
/// bundle formed before leading reductions fused (maximum; shift and
/// exponential; sum; division).
void softmax(benchmark::State &state, RowFusion fusion) {
  const int64_t rows = state.range(0), width = 1024;
  static std::unique_ptr<dev::LoadedCode> code =
      compileAndLoad(RmsNormKernels::kernels(width));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> x(rows * width), m(rows), e(rows * width), sum(rows),
      out(rows * width);
  for (float &v : x)
    v = u(rng);
  auto call = [&](size_t kernel, std::vector<std::vector<unsigned>> inputDims,
                  std::vector<unsigned> outputDims,
                  std::vector<const float *> inputs, float *output) {
    dev::GeneratedCall c;
    c.entry = code->entry(kernel);
    c.inputs = std::move(inputs);
    c.output = output;
    c.space = {rows, width};
    c.inputDims = std::move(inputDims);
    c.outputDims = std::move(outputDims);
    dev::runGeneratedRange(c, c.inputs.data(), 0, c.space[0]);
  };
  for (auto _ : state) {
    if (fusion == RowFusion::Library) {
      gpipe::runtime::cpu::softmaxForward(x.data(), out.data(), rows, width);
    } else if (fusion == RowFusion::Row) {
      call(8, {{0, 1}}, {0, 1}, {x.data()}, out.data());
    } else {
      call(9, {{0, 1}}, {0}, {x.data()}, m.data());
      call(10, {{0, 1}, {0}}, {0, 1}, {x.data(), m.data()}, e.data());
      call(11, {{0, 1}}, {0}, {e.data()}, sum.data());
      call(12, {{0, 1}, {0}}, {0, 1}, {e.data(), sum.data()}, out.data());
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["elements/s"] = benchmark::Counter(
      double(rows * width) * state.iterations(), benchmark::Counter::kIsRate);
}
void BM_Generated_softmax_Row(benchmark::State &state) {
  softmax(state, RowFusion::Row);
}
void BM_Generated_softmax_PerOp(benchmark::State &state) {
  softmax(state, RowFusion::PerOp);
}
/// The named op's library kernel (gpipe.softmax), one thread.
void BM_Library_softmax(benchmark::State &state) {
  softmax(state, RowFusion::Library);
}
/// The gradient: one row kernel against the library's softmaxBackward.
void softmaxGrad(benchmark::State &state, bool library) {
  const int64_t rows = state.range(0), width = 1024;
  static std::unique_ptr<dev::LoadedCode> code =
      compileAndLoad(RmsNormKernels::kernels(width));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> dy(rows * width), y(rows * width), dx(rows * width);
  for (float &v : dy)
    v = u(rng) - 0.5f;
  for (float &v : y)
    v = u(rng) / float(width);
  dev::GeneratedCall c;
  c.entry = code->entry(13);
  c.inputs = {dy.data(), y.data()};
  c.output = dx.data();
  c.space = {rows, width};
  c.inputDims = {{0, 1}, {0, 1}};
  c.outputDims = {0, 1};
  for (auto _ : state) {
    if (library)
      gpipe::runtime::cpu::softmaxBackward(y.data(), dy.data(), dx.data(), rows,
                                           width);
    else
      dev::runGeneratedRange(c, c.inputs.data(), 0, rows);
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
  state.counters["elements/s"] = benchmark::Counter(
      double(rows * width) * state.iterations(), benchmark::Counter::kIsRate);
}
void BM_Generated_softmax_grad_Row(benchmark::State &state) {
  softmaxGrad(state, false);
}
void BM_Library_softmax_grad(benchmark::State &state) {
  softmaxGrad(state, true);
}
BENCHMARK(BM_Generated_softmax_grad_Row)->Arg(64)->Arg(4096);
BENCHMARK(BM_Library_softmax_grad)->Arg(64)->Arg(4096);
BENCHMARK(BM_Generated_softmax_Row)->Arg(64)->Arg(4096);
BENCHMARK(BM_Generated_softmax_PerOp)->Arg(64)->Arg(4096);
BENCHMARK(BM_Library_softmax)->Arg(64)->Arg(4096);

/// A single named op: its generated kernel against the library's
/// vectorized CPU kernel (CpuKernels.h), the decision of which runs a lone
/// op (docs/Architecture.md).
template <void (*Library)(const float *, float *, int64_t)>
void library(benchmark::State &state) {
  const int64_t n = state.range(0);
  Buffers buffers(runs().at("gelu"), n);
  for (auto _ : state) {
    Library(buffers.values[0].data(), buffers.values[1].data(), n);
    benchmark::ClobberMemory();
  }
  state.counters["elements/s"] = benchmark::Counter(
      double(n) * state.iterations(), benchmark::Counter::kIsRate);
}
void BM_Library_gelu(benchmark::State &state) {
  library<gpipe::runtime::cpu::geluForward>(state);
}
void BM_Library_tanh(benchmark::State &state) {
  library<gpipe::runtime::cpu::tanhForward>(state);
}
void BM_Generated_gelu(benchmark::State &state) { run(state, "gelu", true); }
void BM_Generated_tanh(benchmark::State &state) { run(state, "tanh", true); }
BENCHMARK(BM_Library_gelu)->Arg(1 << 16)->Arg(1 << 22);
BENCHMARK(BM_Generated_gelu)->Arg(1 << 16)->Arg(1 << 22);
BENCHMARK(BM_Library_tanh)->Arg(1 << 16)->Arg(1 << 22);
BENCHMARK(BM_Generated_tanh)->Arg(1 << 16)->Arg(1 << 22);

/// A bias gradient: dy [4096, 1024] summed over its rows, dimension 0
/// reduced, through the CPU backend with 1 or 2 threads, which split the
/// output's columns (GeneratedCall::splitDimension).
void BM_Generated_column_sum(benchmark::State &state) {
  const int64_t rows = 4096, width = 1024;
  KernelSpec spec;
  spec.rank = 2;
  spec.numInputs = 1;
  spec.inputDims = {{0, 1}};
  spec.outputDims = {1};
  spec.steps = {{"reduce_sum", {0}}};
  static std::unique_ptr<dev::LoadedCode> code =
      compileAndLoad({{"gpipe_bench_column_sum", spec}});
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> dy(rows * width), db(width);
  for (float &v : dy)
    v = u(rng);
  dev::CpuThreading threading;
  threading.threadsPerDevice = unsigned(state.range(0));
  dev::CpuBackend backend(1, threading);
  dev::GeneratedCall c;
  c.entry = code->entry(0);
  c.inputs = {dy.data()};
  c.output = db.data();
  c.space = {rows, width};
  c.inputDims = {{0, 1}};
  c.outputDims = {1};
  for (auto _ : state) {
    backend.generated(backend.computeStream(0), c);
    if (!backend.synchronize(std::chrono::seconds(60)).empty())
      state.SkipWithError("the CPU backend failed");
    benchmark::DoNotOptimize(db.data());
  }
  state.counters["elements/s"] = benchmark::Counter(
      double(rows * width) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Generated_column_sum)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime();

GPIPE_GENERATED_BENCHMARK(rope)
GPIPE_GENERATED_BENCHMARK(swiglu)
GPIPE_GENERATED_BENCHMARK(gelu_chain)

} // namespace
