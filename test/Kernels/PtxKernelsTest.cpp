//===- PtxKernelsTest.cpp - Generated kernels as PTX ---------------------===//
//
// gpipe::compilePtxKernels on every step op a kernel computes, a chain, and
// broadcasting and reducing kernels: one PTX module with an entry per
// kernel, which `ptxas -arch=sm_90` assembles where it is installed (PATH or
// /usr/local/cuda/bin; skipped otherwise), the same wherever it is compiled.
//
// No GPU here: the numerics are checked on the host instead. The PTX
// kernels' bodies, built and expanded exactly as for the GPU (the same IR up
// to the gpu ops, lowered for x86-64 and run by MLIR's ExecutionEngine as
// the threads of a launch), are compared with the CPU's generated kernels
// (bit for bit where both use the same definitions), with libm for sin, cos
// and pow, and with loops for the broadcasts and reductions.
//
//===----------------------------------------------------------------------===//

#include "NativeKernelsSupport.h"
#include "PtxHostKernels.h"

#include "gpipe/Target/CompileToBundle.h"
#include "gpipe/Target/PtxKernels.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

using namespace gpipe;
using namespace gpipe::testing;

namespace {

/// Every step op of KernelToLinalg's table, by arity (the reductions are
/// kernels of their own below).
std::vector<std::pair<std::string, unsigned>> stepOps() {
  std::vector<std::pair<std::string, unsigned>> ops;
  for (const char *op :
       {"relu", "gelu", "gelu_erf", "tanh", "neg", "abs", "exp", "log", "sqrt",
        "rsqrt", "reciprocal", "sigmoid", "silu", "erf", "sin", "cos", "clip",
        "broadcast_to", "reduce_sum_grad", "reduce_mean_grad", "reshape",
        "transpose"})
    ops.push_back({op, 1});
  for (const char *op :
       {"add", "add_grads", "relu_grad", "gelu_grad", "gelu_erf_grad",
        "tanh_grad", "sub", "mul", "div", "pow", "max", "min", "abs_grad",
        "exp_grad", "log_grad", "sqrt_grad", "rsqrt_grad", "reciprocal_grad",
        "sigmoid_grad", "silu_grad", "erf_grad", "sin_grad", "cos_grad",
        "clip_grad", "max_tie"})
    ops.push_back({op, 2});
  for (const char *op : {"div_rhs_grad", "pow_lhs_grad", "pow_rhs_grad",
                         "max_lhs_grad", "min_lhs_grad"})
    ops.push_back({op, 3});
  ops.push_back({"reduce_max_grad", 4});
  // Layout steps may not be kernel steps in every tree yet.
  llvm::erase_if(ops, [](const auto &op) { return !isKernelStepOp(op.first); });
  return ops;
}

KernelSpec single(const std::string &op, unsigned arity) {
  KernelSpec spec = KernelSpec::elementwise(arity);
  KernelStep step{op, {}};
  for (unsigned i = 0; i < arity; ++i)
    step.operands.push_back(i);
  if (op.rfind("clip", 0) == 0)
    step.constants = {{"max", 1.5}, {"min", -1.0}};
  if (op == "reduce_mean_grad")
    step.constants = {{"count", 3}};
  spec.steps.push_back(step);
  return spec;
}

KernelSpec kernel(unsigned rank, std::vector<llvm::SmallVector<unsigned>> in,
                  llvm::SmallVector<unsigned> out,
                  std::vector<KernelStep> steps) {
  KernelSpec spec;
  spec.rank = rank;
  spec.numInputs = in.size();
  spec.inputDims = std::move(in);
  spec.outputDims = std::move(out);
  spec.steps = std::move(steps);
  return spec;
}

/// add(in0, in1) -> gelu -> tanh_grad(in2, .) -> relu -> add(., in0).
KernelSpec chain() {
  KernelSpec spec = KernelSpec::elementwise(3);
  spec.steps = {{"add", {0, 1}},
                {"gelu", {3}},
                {"tanh_grad", {2, 4}},
                {"relu", {5}},
                {"add", {6, 0}}};
  return spec;
}

/// Kernels over several dimensions: broadcasts, reductions of each kind, a
/// transposed input where kernels take them.
std::vector<NamedKernel> broadcastKernels() {
  std::vector<NamedKernel> kernels = {
      {"gpipe_test_scale_and_shift",
       kernel(2, {{0, 1}, {1}, {0}}, {0, 1},
              {{"mul", {0, 1}}, {"add", {3, 2}}})},
      {"gpipe_test_row_sum",
       kernel(2, {{0, 1}}, {0}, {{"mul", {0, 0}}, {"reduce_sum", {1}}})},
      {"gpipe_test_column_sum",
       kernel(2, {{0, 1}, {0, 1}}, {1}, {{"mul", {0, 1}}, {"reduce_sum", {2}}})},
      {"gpipe_test_row_mean",
       kernel(2, {{0, 1}, {0}}, {0},
              {{"sub", {0, 1}}, {"reduce_mean", {2}, {{"count", 37}}}})},
      {"gpipe_test_middle_max",
       kernel(3, {{0, 1, 2}}, {0, 2}, {{"reduce_max", {0}}})},
      {"gpipe_test_outer_sum",
       kernel(3, {{0, 1, 2}, {1}}, {1},
              {{"add", {0, 1}}, {"reduce_sum", {2}}})},
      {"gpipe_test_total", kernel(1, {{0}}, {}, {{"reduce_sum", {0}}})},
      {"gpipe_test_exp_row_sum",
       kernel(2, {{0, 1}}, {0}, {{"exp", {0}}, {"reduce_sum", {1}}})},
      {"gpipe_test_max_grad",
       kernel(2, {{0}, {0, 1}, {0}, {0}}, {0, 1},
              {{"reduce_max_grad", {0, 1, 2, 3}}})},
      {"gpipe_test_outer_difference",
       kernel(2, {{0}, {1}, {0, 1}}, {0, 1},
              {{"sub", {0, 1}}, {"mul", {3, 2}}})},
  };
  if (isKernelStepOp("transpose"))
    kernels.push_back({"gpipe_test_transposed",
                       kernel(3, {{1, 0, 2}, {2}}, {0, 1, 2},
                              {{"mul", {0, 1}}})});
  return kernels;
}

/// Every kernel of this file.
std::vector<NamedKernel> allKernels() {
  std::vector<NamedKernel> kernels;
  for (auto &[op, arity] : stepOps())
    kernels.push_back({"gpipe_test_" + op, single(op, arity)});
  kernels.push_back({"gpipe_test_chain", chain()});
  for (NamedKernel &kernel : broadcastKernels())
    kernels.push_back(std::move(kernel));
  return kernels;
}

struct Ptx {
  std::string text;
  std::string diagnostics;
  bool ok = false;
};

Ptx compilePtx(llvm::ArrayRef<NamedKernel> kernels,
               llvm::StringRef chip = kDefaultPtxChip) {
  mlir::MLIRContext context;
  Ptx out;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    out.diagnostics += diag.str() + "\n";
  });
  mlir::FailureOr<std::string> ptx =
      compilePtxKernels(kernels, chip, mlir::UnknownLoc::get(&context));
  if (succeeded(ptx)) {
    out.text = std::move(*ptx);
    out.ok = true;
  }
  return out;
}

/// ptxas on PATH or in /usr/local/cuda/bin, or "".
std::string findPtxas() {
  if (llvm::ErrorOr<std::string> path = llvm::sys::findProgramByName("ptxas"))
    return *path;
  if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/ptxas"))
    return "/usr/local/cuda/bin/ptxas";
  return "";
}

/// Runs `ptxas -arch=<chip>` on `ptx`: "" on success, else its log.
std::string assemble(const std::string &ptxas, const std::string &ptx,
                     llvm::StringRef chip = kDefaultPtxChip) {
  llvm::SmallString<128> input, output, log;
  llvm::sys::fs::createTemporaryFile("gpipe-test", "ptx", input);
  llvm::sys::fs::createTemporaryFile("gpipe-test", "cubin", output);
  llvm::sys::fs::createTemporaryFile("gpipe-test", "log", log);
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(input, ec);
    out << ptx;
  }
  std::string arch = ("-arch=" + chip).str();
  llvm::SmallVector<llvm::StringRef> args = {ptxas, arch, input, "-o", output};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.str(),
                                                log.str()};
  std::string error;
  int status = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects,
                                         120, 0, &error);
  std::string result;
  if (status != 0) {
    result = "ptxas exited with " + std::to_string(status) + " " + error;
    if (auto text = llvm::MemoryBuffer::getFile(log))
      result += ": " + (*text)->getBuffer().str();
  }
  for (llvm::StringRef path : {input.str(), output.str(), log.str()})
    llvm::sys::fs::remove(path);
  return result;
}

} // namespace

TEST(PtxKernels, EveryStepOpHasAnEntryThatPtxasAssembles) {
  std::vector<NamedKernel> kernels = allKernels();
  ASSERT_GE(kernels.size(), 60u);
  Ptx ptx = compilePtx(kernels);
  ASSERT_TRUE(ptx.ok) << ptx.diagnostics;
  EXPECT_NE(ptx.text.find(".target sm_90"), std::string::npos);
  EXPECT_NE(ptx.text.find(".version 8.0"), std::string::npos);
  for (const NamedKernel &kernel : kernels)
    EXPECT_NE(ptx.text.find(".entry " + kernel.symbol + "("), std::string::npos)
        << kernel.symbol;
  // Nothing to link: no libdevice, no other function outside the module.
  EXPECT_EQ(ptx.text.find("__nv_"), std::string::npos);
  EXPECT_EQ(ptx.text.find(".extern"), std::string::npos);
  // IEEE square roots and divisions, products that ptxas may not fuse.
  EXPECT_NE(ptx.text.find("sqrt.rn.f32"), std::string::npos);
  EXPECT_EQ(ptx.text.find("sqrt.approx"), std::string::npos);
  EXPECT_NE(ptx.text.find("div.rn.f32"), std::string::npos);
  EXPECT_EQ(ptx.text.find("div.approx"), std::string::npos);
  EXPECT_NE(ptx.text.find("mul.rn.f32"), std::string::npos);

  std::string ptxas = findPtxas();
  if (ptxas.empty())
    GTEST_SKIP() << "no ptxas on PATH or in /usr/local/cuda/bin: the PTX was "
                    "generated but not assembled";
  EXPECT_EQ(assemble(ptxas, ptx.text), "");
}

// A kernel's parameters: its pointers, then its sizes, all 8 bytes.
TEST(PtxKernels, AnEntryTakesItsPointersThenItsSizes) {
  Ptx ptx = compilePtx({{"gpipe_test_abi", broadcastKernels()[0].spec}});
  ASSERT_TRUE(ptx.ok) << ptx.diagnostics;
  size_t entry = ptx.text.find(".entry gpipe_test_abi(");
  ASSERT_NE(entry, std::string::npos) << ptx.text;
  std::string params =
      ptx.text.substr(entry, ptx.text.find(")", entry) - entry);
  // Three inputs and the output, then rank 2 sizes.
  for (int k = 0; k < 4; ++k)
    EXPECT_NE(params.find(".param .u64 .ptr .align 1 gpipe_test_abi_param_" +
                          std::to_string(k)),
              std::string::npos)
        << params;
  for (int k = 4; k < 6; ++k)
    EXPECT_NE(params.find(".param .u64 gpipe_test_abi_param_" +
                          std::to_string(k)),
              std::string::npos)
        << params;
  EXPECT_EQ(params.find("gpipe_test_abi_param_6"), std::string::npos);
}

// No CUDA toolkit is looked for: the environment's does not change the PTX.
TEST(PtxKernels, ThePtxDoesNotDependOnTheMachinesCudaToolkit) {
  std::vector<NamedKernel> kernels = {
      {"gpipe_test_env_a", single("sin", 1)},
      {"gpipe_test_env_b", single("pow_rhs_grad", 3)},
      {"gpipe_test_env_c", chain()}};
  const char *names[] = {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"};
  std::vector<std::optional<std::string>> saved;
  for (const char *name : names) {
    const char *value = std::getenv(name);
    saved.push_back(value ? std::optional<std::string>(value) : std::nullopt);
  }
  // Unset, then pointing at a directory without a toolkit (the symbols
  // differ so that the compiler's cache does not answer).
  for (const char *name : names)
    unsetenv(name);
  Ptx without = compilePtx(kernels);
  for (const char *name : names)
    setenv(name, "/nonexistent-cuda", 1);
  for (NamedKernel &kernel : kernels)
    kernel.symbol += "_x";
  Ptx bogus = compilePtx(kernels);
  for (auto [name, value] : llvm::zip(names, saved)) {
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ASSERT_TRUE(without.ok) << without.diagnostics;
  ASSERT_TRUE(bogus.ok) << bogus.diagnostics;
  std::string renamed = bogus.text;
  for (size_t at; (at = renamed.find("_x")) != std::string::npos;)
    renamed.erase(at, 2);
  EXPECT_EQ(renamed, without.text);
}

TEST(PtxKernels, BadKernelsAndChipsAreRefused) {
  Ptx ptx = compilePtx({{"gpipe_test_bad", single("softmax", 1)}});
  EXPECT_FALSE(ptx.ok);
  EXPECT_NE(ptx.diagnostics.find("kernel 'gpipe_test_bad': 'softmax' is not "
                                 "an element-wise op a kernel computes"),
            std::string::npos)
      << ptx.diagnostics;
  KernelSpec wrongCount = single("mul", 1);
  ptx = compilePtx({{"gpipe_test_count", wrongCount}});
  EXPECT_FALSE(ptx.ok);
  EXPECT_NE(ptx.diagnostics.find("'mul' takes 2 operands, got 1"),
            std::string::npos)
      << ptx.diagnostics;
  ptx = compilePtx({{"gpipe_test_dims",
                     kernel(2, {{0, 1}}, {0}, {{"exp", {0}}})}});
  EXPECT_FALSE(ptx.ok);
  EXPECT_NE(ptx.diagnostics.find("lacks output dimensions but does not reduce"),
            std::string::npos)
      << ptx.diagnostics;

  for (llvm::StringRef chip : {"gfx90a", "sm_", "sm_9x"}) {
    ptx = compilePtx({{"gpipe_test_ok", single("exp", 1)}}, chip);
    EXPECT_FALSE(ptx.ok) << chip.str();
    EXPECT_NE(ptx.diagnostics.find("is not an NVPTX processor"),
              std::string::npos)
        << ptx.diagnostics;
  }
  ptx = compilePtx({{"gpipe_test_ok", single("exp", 1)}}, "sm_100");
  EXPECT_FALSE(ptx.ok);
  EXPECT_NE(ptx.diagnostics.find("outside what PTX ISA 8.0 targets"),
            std::string::npos)
      << ptx.diagnostics;
  ptx = compilePtx({{"gpipe_test_ok", single("exp", 1)}}, "sm_80");
  EXPECT_TRUE(ptx.ok) << ptx.diagnostics;
  EXPECT_NE(ptx.text.find(".target sm_80"), std::string::npos);
}

// The stages for dumps: the gpu.module as built, and lowered to NVVM.
TEST(PtxKernels, TheIRPrintsAtEachStage) {
  mlir::MLIRContext context;
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    diagnostics += diag.str() + "\n";
  });
  mlir::Location loc = mlir::UnknownLoc::get(&context);
  std::vector<NamedKernel> kernels = {{"gpipe_test_ir", single("cos", 1)}};
  mlir::FailureOr<std::string> gpu =
      printPtxKernelIR(kernels, "gpu", kDefaultPtxChip, loc);
  ASSERT_TRUE(mlir::succeeded(gpu)) << diagnostics;
  EXPECT_NE(gpu->find("gpu.module @gpipe_kernels [#nvvm.target<O = 3, chip = "
                      "\"sm_90\", features = \"+ptx80\">]"),
            std::string::npos)
      << *gpu;
  EXPECT_NE(gpu->find("gpu.func @gpipe_test_ir(%arg0: !llvm.ptr, %arg1: "
                      "!llvm.ptr, %arg2: i64) kernel"),
            std::string::npos)
      << *gpu;
  EXPECT_NE(gpu->find("math.cos"), std::string::npos);
  mlir::FailureOr<std::string> nvvm =
      printPtxKernelIR(kernels, "nvvm", kDefaultPtxChip, loc);
  ASSERT_TRUE(mlir::succeeded(nvvm)) << diagnostics;
  EXPECT_NE(nvvm->find("llvm.func @gpipe_test_ir("), std::string::npos);
  EXPECT_NE(nvvm->find("nvvm.kernel"), std::string::npos);
  EXPECT_NE(nvvm->find("nvvm.read.ptx.sreg.tid.x"), std::string::npos);
  EXPECT_EQ(nvvm->find("math."), std::string::npos) << *nvvm;
  EXPECT_TRUE(mlir::failed(printPtxKernelIR(kernels, "ptx", "sm_90", loc)));
  EXPECT_NE(diagnostics.find("unknown PTX kernel stage 'ptx'"),
            std::string::npos);
}

// The compile pipeline's `ptx` option: code.cuda beside code.cpu, an entry
// for each kernel of code.kernels.
TEST(PtxKernels, TheCompilePipelinesPtxOptionWritesCodeCuda) {
  const char *model = R"mlir(
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h = gpipe.layer "act" -> tensor<4x8xf32> {
    %s = gpipe.param "s" ones : tensor<8xf32>
    %0 = gpipe.mul %x, %s : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %1 = gpipe.sin %0 : tensor<4x8xf32>
    %2 = gpipe.exp %1 : tensor<4x8xf32>
    gpipe.yield %2 : tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
)mlir";
  for (bool ptx : {false, true}) {
    CompilePipelineOptions options;
    options.numStages = 1;
    options.numMicrobatches = 2;
    options.ptx = ptx;
    std::string json, diagnostics;
    ASSERT_TRUE(mlir::succeeded(
        compileSourceToBundle(model, options, json, diagnostics)))
        << diagnostics;
    llvm::Expected<llvm::json::Value> bundle = llvm::json::parse(json);
    ASSERT_TRUE(bool(bundle)) << llvm::toString(bundle.takeError());
    const llvm::json::Object *code = bundle->getAsObject()->getObject("code");
    ASSERT_TRUE(code);
    EXPECT_TRUE(code->getArray("cpu"));
    const llvm::json::Object *cuda = code->getObject("cuda");
    ASSERT_EQ(bool(cuda), ptx);
    if (!ptx)
      continue;
    EXPECT_EQ(cuda->getString("arch"), std::optional<llvm::StringRef>("sm_90"));
    std::optional<llvm::StringRef> text = cuda->getString("ptx");
    ASSERT_TRUE(text);
    const llvm::json::Array *kernels = code->getArray("kernels");
    ASSERT_TRUE(kernels && !kernels->empty());
    for (const llvm::json::Value &kernel : *kernels) {
      std::optional<llvm::StringRef> symbol =
          kernel.getAsObject()->getString("symbol");
      ASSERT_TRUE(symbol);
      EXPECT_TRUE(text->contains((".entry " + *symbol + "(").str()))
          << symbol->str();
    }
  }
}

//===----------------------------------------------------------------------===//
// The kernels' bodies on the host
//===----------------------------------------------------------------------===//

namespace {


std::vector<float> sample(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
  const float edges[] = {0.0f,
                         -0.0f,
                         std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity(),
                         std::nanf(""),
                         100.0f,
                         -100.0f,
                         30.0f,
                         -30.0f,
                         1e-30f,
                         3.0f,
                         -2.0f,
                         1.0f,
                         -1.0f,
                         0.5f,
                         1e-40f};
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i)
    x[i] = i % 5 == 3 ? edges[(i / 5) % std::size(edges)] : uniform(rng);
  return x;
}

/// MLIR's 1-D memref descriptor, the CPU kernels' argument.
struct MemRef1D {
  float *allocated, *aligned;
  int64_t offset, size, stride;
};

std::vector<float> runCpu(Entry entry, std::vector<std::vector<float>> &inputs,
                          size_t n) {
  std::vector<float> out(n, -12345.0f);
  std::vector<MemRef1D> descs;
  for (std::vector<float> &in : inputs)
    descs.push_back({in.data(), in.data(), 0, int64_t(n), 1});
  descs.push_back({out.data(), out.data(), 0, int64_t(n), 1});
  std::vector<void *> args;
  for (MemRef1D &d : descs)
    args.push_back(&d);
  entry(args.data());
  return out;
}

bool sameBits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
}

/// Distance in float ulps (0 for equal values, NaN to NaN, equal
/// infinities; huge where they disagree).
double ulps(float got, double want) {
  float rounded = float(want);
  if (std::isnan(got) || std::isnan(rounded))
    return std::isnan(got) && std::isnan(rounded) ? 0 : 1e9;
  if (std::isinf(got) || std::isinf(rounded))
    return got == rounded ? 0 : 1e9;
  if (got == rounded)
    return std::signbit(got) == std::signbit(rounded) ? 0 : 1e9;
  double unit = std::nextafter(std::fabs(rounded), INFINITY) - std::fabs(rounded);
  return std::fabs(double(got) - want) / unit;
}

/// The ops whose PTX math differs from the CPU's (libm there).
bool usesLibm(const KernelSpec &spec) {
  for (const KernelStep &step : spec.steps)
    if (llvm::is_contained({"sin", "cos", "pow", "sin_grad", "cos_grad",
                            "pow_lhs_grad", "pow_rhs_grad"},
                           step.op))
      return true;
  return false;
}

} // namespace

// Element-wise kernels: bit for bit the CPU's FMA variant where the math is
// the same; sin, cos and pow within an ulp of libm's double results (and
// their gradients within a few ulps of the CPU's).
TEST(PtxKernels, OnTheHostTheKernelsMatchTheCpuKernels) {
  std::vector<NamedKernel> kernels;
  for (auto &[op, arity] : stepOps())
    kernels.push_back({"gpipe_test_" + op, single(op, arity)});
  kernels.push_back({"gpipe_test_chain", chain()});
  HostKernels host(kernels);
  ASSERT_TRUE(host.engine) << host.diagnostics;
  Compiled cpu = compile(kernels);
  ASSERT_FALSE(cpu.variants.empty()) << cpu.diagnostics;
  // The widest variant this CPU runs: with FMA, as the GPU.
  const NativeCodeVariant *variant = nullptr;
  for (const NativeCodeVariant &candidate : cpu.variants)
    if (cpuRuns(candidate.isa))
      variant = &candidate;
  ASSERT_TRUE(variant);
  bool fma = variant->isa != "x86-64";
  Library library(variant->sharedObject);
  ASSERT_TRUE(library.handle) << library.error;

  std::mt19937 rng(17);
  for (const NamedKernel &kernel : kernels) {
    const size_t n = 1000;
    std::vector<std::vector<float>> inputs;
    for (unsigned k = 0; k < kernel.spec.numInputs; ++k)
      inputs.push_back(sample(n, rng));
    std::vector<float> want =
        runCpu(library.entry(kernel.symbol), inputs, n);
    for (int64_t threads : {1, 3, 128}) {
      std::vector<float> got(n, -12345.0f);
      std::vector<float *> pointers;
      for (std::vector<float> &in : inputs)
        pointers.push_back(in.data());
      pointers.push_back(got.data());
      host.run(kernel.symbol, pointers, {int64_t(n)}, threads);
      for (size_t i = 0; i < n; ++i) {
        std::string where = kernel.spec.describe() + " at " +
                            std::to_string(i) + ", inputs " +
                            std::to_string(inputs[0][i]) +
                            (inputs.size() > 1
                                 ? ", " + std::to_string(inputs[1][i])
                                 : "");
        const std::string &op = kernel.spec.steps[0].op;
        if (op == "sin" || op == "cos") {
          double x = inputs[0][i];
          ASSERT_LE(ulps(got[i], op == "sin" ? std::sin(x) : std::cos(x)), 1.0)
              << where << ": got " << got[i];
        } else if (op == "pow") {
          ASSERT_LE(ulps(got[i], std::pow(double(inputs[0][i]),
                                          double(inputs[1][i]))),
                    1.0)
              << where << ": got " << got[i];
        } else if (usesLibm(kernel.spec) || !fma) {
          // Rounded once more by a product: a few ulps of the CPU's.
          ASSERT_LE(ulps(got[i], want[i]), 4.0)
              << where << ": got " << got[i] << ", CPU " << want[i];
        } else {
          ASSERT_TRUE(sameBits(got[i], want[i]))
              << where << ": got " << got[i] << ", CPU " << want[i];
        }
      }
    }
  }
}

// sin and cos over the whole float range (Payne-Hanek beyond 2^30), and
// pow's special cases as C's powf.
TEST(PtxKernels, OnTheHostSinCosAndPowAreLibmsToAnUlp) {
  std::vector<NamedKernel> kernels = {{"gpipe_test_sin", single("sin", 1)},
                                      {"gpipe_test_cos", single("cos", 1)},
                                      {"gpipe_test_pow", single("pow", 2)}};
  HostKernels host(kernels);
  ASSERT_TRUE(host.engine) << host.diagnostics;
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> exponent(-38.0f, 38.5f);
  std::vector<float> x;
  for (int i = 0; i < 20000; ++i)
    x.push_back((i % 2 ? -1.0f : 1.0f) * std::pow(10.0f, exponent(rng)));
  for (float v : {0.0f, -0.0f, 1e-45f, 3.14159265f, 1.5707964f, 1e5f, 105615.0f,
                  1073741824.0f, 1073741760.0f, 3.4028235e38f, -3.4028235e38f,
                  8.5e37f, 1e22f})
    x.push_back(v);
  std::vector<float> sinX(x.size()), cosX(x.size());
  host.run("gpipe_test_sin", {x.data(), sinX.data()}, {int64_t(x.size())}, 7);
  host.run("gpipe_test_cos", {x.data(), cosX.data()}, {int64_t(x.size())}, 7);
  size_t exact = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double s = std::sin(double(x[i])), c = std::cos(double(x[i]));
    ASSERT_LE(ulps(sinX[i], s), 1.0) << "sin " << x[i] << " got " << sinX[i];
    ASSERT_LE(ulps(cosX[i], c), 1.0) << "cos " << x[i] << " got " << cosX[i];
    exact += (sinX[i] == float(s)) + (cosX[i] == float(c));
  }
  // Correctly rounded but for values within ~2^-50 of a rounding boundary.
  EXPECT_GE(exact, 2 * x.size() - 4);
  EXPECT_TRUE(std::isnan([&] {
    std::vector<float> in = {INFINITY, -INFINITY, NAN}, out(3);
    host.run("gpipe_test_sin", {in.data(), out.data()}, {3}, 1);
    return out[0] + out[1] + out[2];
  }()));

  // pow over every pair of special values, and random ones.
  const float specials[] = {0.0f,  -0.0f, 1.0f,  -1.0f,    2.0f,     -2.0f,
                            0.5f,  -0.5f, 3.0f,  -3.0f,    INFINITY, -INFINITY,
                            NAN,   1e-45f, 1e30f, -1e30f,  2.5f,     -2.5f,
                            1e-40f, 127.0f, -149.0f, 128.0f};
  std::vector<float> a, b;
  for (float p : specials)
    for (float q : specials) {
      a.push_back(p);
      b.push_back(q);
    }
  std::uniform_real_distribution<float> base(0.0f, 10.0f), power(-40.0f, 40.0f);
  for (int i = 0; i < 20000; ++i) {
    a.push_back(i % 4 == 0 ? -base(rng) : base(rng));
    b.push_back(i % 3 == 0 ? std::round(power(rng)) : power(rng));
  }
  std::vector<float> out(a.size());
  host.run("gpipe_test_pow", {a.data(), b.data(), out.data()},
           {int64_t(a.size())}, 5);
  exact = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double want = std::pow(double(a[i]), double(b[i]));
    float libm = std::pow(a[i], b[i]);
    ASSERT_LE(ulps(out[i], want), 1.0)
        << "pow(" << a[i] << ", " << b[i] << ") got " << out[i] << ", libm "
        << libm;
    exact += sameBits(out[i], libm);
  }
  EXPECT_GE(exact, a.size() - a.size() / 1000);
}

namespace {

float floatStep(const KernelStep &step, const std::vector<float> &a) {
  const std::string &op = step.op;
  if (op == "add")
    return a[0] + a[1];
  if (op == "mul")
    return a[0] * a[1];
  if (op == "sub")
    return a[0] - a[1];
  if (op == "exp")
    return std::exp(a[0]);
  if (op == "reduce_max_grad")
    return a[1] == a[2] ? a[0] / a[3] : 0.0f;
  ADD_FAILURE() << "no reference for " << op;
  return 0;
}

/// What the ABI says a kernel writes, in float: each output element's
/// reduction sequential over the reduced dimensions in row-major order.
std::vector<float> reference(const KernelSpec &spec,
                             llvm::ArrayRef<int64_t> space,
                             const std::vector<std::vector<float>> &inputs) {
  const bool reduces = spec.reduces();
  const std::string kind = reduces ? spec.steps.back().op : "";
  std::vector<float> out(countOf(spec.outputDims, space),
                         kind == "reduce_max"
                             ? -std::numeric_limits<float>::infinity()
                             : 0.0f);
  // Row-major over the whole space visits each output's reduced points in
  // row-major order.
  int64_t total = 1;
  for (int64_t size : space)
    total *= size;
  std::vector<int64_t> point(space.size(), 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat;
    for (size_t d = space.size(); d-- > 0;) {
      point[d] = rest % space[d];
      rest /= space[d];
    }
    std::vector<float> values;
    for (unsigned k = 0; k < spec.numInputs; ++k)
      values.push_back(inputs[k][indexAt(spec.inputDims[k], space, point)]);
    size_t pointwise = spec.steps.size() - (reduces ? 1 : 0);
    for (size_t i = 0; i < pointwise; ++i) {
      std::vector<float> args;
      for (unsigned operand : spec.steps[i].operands)
        args.push_back(values[operand]);
      values.push_back(floatStep(spec.steps[i], args));
    }
    float v = reduces ? values[spec.steps.back().operands[0]] : values.back();
    float &slot = out[indexAt(spec.outputDims, space, point)];
    if (kind == "reduce_max")
      slot = std::isnan(slot) || std::isnan(v) ? NAN : std::max(slot, v);
    else if (reduces)
      slot += v;
    else
      slot = v;
  }
  if (kind == "reduce_mean")
    for (float &v : out)
      v /= float(spec.steps.back().constant("count"));
  return out;
}

} // namespace

// Broadcasts and reductions: the bits of sequential float loops, whatever
// the number of threads.
TEST(PtxKernels, OnTheHostBroadcastsAndReductionsAreSequentialLoops) {
  std::vector<NamedKernel> kernels = broadcastKernels();
  HostKernels host(kernels);
  ASSERT_TRUE(host.engine) << host.diagnostics;
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  for (const NamedKernel &kernel : kernels) {
    const KernelSpec &spec = kernel.spec;
    std::vector<std::vector<int64_t>> spaces;
    if (spec.rank == 1)
      spaces = {{1}, {31}, {1000}};
    else if (spec.rank == 2)
      spaces = {{1, 1}, {3, 37}, {5, 16}, {2, 70}, {0, 4}, {4, 0}};
    else
      spaces = {{2, 3, 17}, {1, 40, 1}, {4, 1, 33}, {3, 5, 1}};
    for (const std::vector<int64_t> &space : spaces) {
      std::vector<std::vector<float>> inputs;
      for (unsigned k = 0; k < spec.numInputs; ++k) {
        std::vector<float> in(countOf(spec.inputDims[k], space));
        for (float &v : in)
          v = uniform(rng);
        inputs.push_back(std::move(in));
      }
      if (kernel.symbol == "gpipe_test_max_grad" && space[1] > 0)
        for (int64_t row = 0; row < space[0]; ++row) {
          float *x = inputs[1].data() + row * space[1];
          if (space[1] > 2)
            x[2] = x[0];
          float best = *std::max_element(x, x + space[1]);
          inputs[2][row] = best;
          inputs[3][row] = float(std::count(x, x + space[1], best));
        }
      if (kernel.symbol == "gpipe_test_middle_max" && !inputs[0].empty())
        inputs[0][inputs[0].size() / 2] = NAN;
      std::vector<float> want = reference(spec, space, inputs);
      bool exp = spec.steps[0].op == "exp";
      for (int64_t threads : {1, 4, 33}) {
        std::vector<float> got(want.size(), -12345.0f);
        std::vector<float *> pointers;
        for (std::vector<float> &in : inputs)
          pointers.push_back(in.data());
        pointers.push_back(got.data());
        host.run(kernel.symbol, pointers, space, threads);
        for (size_t i = 0; i < got.size(); ++i) {
          if (exp) // the polynomial exp: a few ulps of libm's, summed
            ASSERT_NEAR(got[i], want[i], 1e-5 * std::fabs(want[i]))
                << kernel.symbol << " at " << i;
          else
            ASSERT_TRUE(sameBits(got[i], want[i]))
                << kernel.symbol << " at " << i << " over "
                << ::testing::PrintToString(space) << " with " << threads
                << " threads: got " << got[i] << ", want " << want[i];
        }
      }
    }
  }
}
