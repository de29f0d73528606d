//===- KernelEmitter.cpp - Fused element-wise kernels as C++/CUDA ---------===//
//
// Each fused kernel becomes straight-line scalar code over floats: inputs are
// in0, in1, ..., intermediate results t0, t1, ..., the last result out. GELU
// and its derivative are written out as in the runtime's CPU kernels
// (runtime/src/kernels/CpuKernels.cpp): 1 + tanh(u) = 2 / (1 + exp(-2u)) and
// sech^2(u) = 4 e / (1 + e)^2 with e = exp(-2u), the exponent clamped so that
// e stays finite and e / (1 + e) never becomes inf / inf. The exact GELU
// (gelu_erf) and its derivative Phi(x) + x phi(x) are written as the
// runtime's scalar bodies (DeviceKernels.h): Phi(x) = erfc(-x / sqrt 2) / 2,
// which keeps its digits in the left tail where 1 + erf(x / sqrt 2) cancels.
//
// The descriptor string of a kernel lists its ops with the dialect's operand
// order, e.g. "add(in0,in1)->t0; gelu(t0)->out" or "relu_grad(in0,in1)->out"
// (dy first, then the forward's input), so that a test can replay it with a
// reference implementation.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Target/KernelEmitter.h"
#include "gpipe/Conversion/ElementwiseFusion.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <string>

using namespace mlir;
using namespace gpipe;

/// `name` with every character that may not appear in a C identifier
/// replaced by '_'.
static std::string sanitize(StringRef name) {
  std::string result;
  for (char c : name)
    result.push_back(llvm::isAlnum(c) ? c : '_');
  return result;
}

/// The C name of a kernel's scalar body.
static std::string kernelName(const FusedKernel &kernel) {
  return llvm::formatv("gpipe_{0}{1}_k{2}", sanitize(kernel.stage),
                       kernel.backward ? "_bwd" : "", kernel.index)
      .str();
}

/// The descriptor name of an element-wise op.
static StringRef opName(Operation *op) {
  return llvm::TypeSwitch<Operation *, StringRef>(op)
      .Case([](ReluOp) { return "relu"; })
      .Case([](GeluOp) { return "gelu"; })
      .Case([](GeluErfOp) { return "gelu_erf"; })
      .Case([](TanhOp) { return "tanh"; })
      .Case([](AddOp) { return "add"; })
      .Case([](ReluGradOp) { return "relu_grad"; })
      .Case([](GeluGradOp) { return "gelu_grad"; })
      .Case([](GeluErfGradOp) { return "gelu_erf_grad"; })
      .Case([](TanhGradOp) { return "tanh_grad"; })
      .Default([](Operation *) { return ""; });
}

constexpr const char *kSqrt2OverPi = "0.7978845608028654f";
constexpr const char *kGeluCubic = "0.044715f";
constexpr const char *kInvSqrt2 = "0.7071067811865476f";
constexpr const char *kInvSqrt2Pi = "0.3989422804014327f";
/// Largest float exponent argument whose exp is finite (as CpuKernels' exp).
constexpr const char *kExpMax = "88.3762626647949f";

/// Writes the scalar statements computing `r` from the op's operands `a`.
static void emitScalarOp(Operation *op, StringRef r, ArrayRef<std::string> a,
                         llvm::raw_ostream &os) {
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](ReluOp) {
        // As the runtime's relu: NaN stays NaN (PyTorch), -0 gives +0.
        os << llvm::formatv("  float {0} = {1} <= 0.0f ? 0.0f : {1};\n", r,
                            a[0]);
      })
      .Case([&](GeluOp) {
        os << llvm::formatv(
            "  float {0}_u = {2} * ({1} + {3} * {1} * {1} * {1});\n", r, a[0],
            kSqrt2OverPi, kGeluCubic);
        os << llvm::formatv("  float {0} = 0.5f * {1} * (2.0f / (1.0f + "
                            "expf(fminf(-2.0f * {0}_u, {2}))));\n",
                            r, a[0], kExpMax);
      })
      .Case([&](GeluErfOp) {
        os << llvm::formatv("  float {0} = 0.5f * {1} * erfcf(-{1} * {2});\n",
                            r, a[0], kInvSqrt2);
      })
      .Case([&](TanhOp) {
        os << llvm::formatv("  float {0} = tanhf({1});\n", r, a[0]);
      })
      .Case([&](AddOp) {
        os << llvm::formatv("  float {0} = {1} + {2};\n", r, a[0], a[1]);
      })
      .Case([&](ReluGradOp) {
        // relu_grad(dy, x) = x <= 0 ? 0 : dy: dy passes where x is NaN.
        os << llvm::formatv("  float {0} = {2} <= 0.0f ? 0.0f : {1};\n", r,
                            a[0], a[1]);
      })
      .Case([&](GeluGradOp) {
        // gelu_grad(dy, x) = dy (0.5 (1 + tanh u) + 0.5 x sech^2(u) u').
        StringRef dy = a[0], x = a[1];
        os << llvm::formatv("  float {0}_x2 = {1} * {1};\n", r, x);
        os << llvm::formatv("  float {0}_u = {2} * {1} * (1.0f + {3} * "
                            "{0}_x2);\n",
                            r, x, kSqrt2OverPi, kGeluCubic);
        os << llvm::formatv(
            "  float {0}_e = expf(fminf(-2.0f * {0}_u, {1}));\n", r, kExpMax);
        os << llvm::formatv("  float {0}_inv = 1.0f / (1.0f + {0}_e);\n", r);
        os << llvm::formatv(
            "  float {0}_sech2 = 4.0f * ({0}_e * {0}_inv) * {0}_inv;\n", r);
        os << llvm::formatv("  float {0}_du = {1} * (1.0f + 3.0f * {2} * "
                            "{0}_x2);\n",
                            r, kSqrt2OverPi, kGeluCubic);
        os << llvm::formatv("  float {0} = {1} * (0.5f * (2.0f * {0}_inv) + "
                            "0.5f * {2} * {0}_sech2 * {0}_du);\n",
                            r, dy, x);
      })
      .Case([&](GeluErfGradOp) {
        // gelu_erf_grad(dy, x) = dy (Phi(x) + x phi(x)).
        os << llvm::formatv(
            "  float {0} = {1} * (0.5f * erfcf(-{2} * {3}) + {2} * {4} * "
            "expf(-0.5f * {2} * {2}));\n",
            r, a[0], a[1], kInvSqrt2, kInvSqrt2Pi);
      })
      .Case([&](TanhGradOp) {
        // tanh_grad(dy, y) = dy (1 - y^2).
        os << llvm::formatv("  float {0} = {1} * (1.0f - {2} * {2});\n", r,
                            a[0], a[1]);
      });
}

/// Writes one kernel: scalar body, CUDA wrapper, host loop, table adapter.
/// Returns its descriptor string.
static std::string emitKernel(const FusedKernel &kernel,
                              llvm::raw_ostream &os) {
  std::string name = kernelName(kernel);
  llvm::DenseMap<Value, std::string> names;
  for (auto [i, input] : llvm::enumerate(kernel.inputs))
    names[input] = "in" + std::to_string(i);
  size_t numInputs = kernel.inputs.size();

  // The name of an operand: an input, or the result of an earlier op (maybe
  // seen through the yield of a layer).
  auto lookup = [&](Value value) -> std::string {
    auto it = names.find(value);
    if (it != names.end())
      return it->second;
    auto layer = cast<LayerOp>(value.getDefiningOp());
    auto yield = cast<YieldOp>(layer.getBody().front().getTerminator());
    return names.lookup(
        yield->getOperand(cast<OpResult>(value).getResultNumber()));
  };

  std::string params, args, ptrParams, tableArgs;
  for (size_t i = 0; i < numInputs; ++i) {
    std::string sep = i ? ", " : "";
    params += llvm::formatv("{0}float in{1}", sep, i).str();
    args += llvm::formatv("{0}in{1}[i]", sep, i).str();
    ptrParams += llvm::formatv("const float *in{0}, ", i).str();
    tableArgs += llvm::formatv("in[{0}], ", i).str();
  }

  os << llvm::formatv("// {0}: {1} op(s), {2} input(s), {3} elements\n", name,
                      kernel.ops.size(), numInputs, kernel.numElements);
  os << llvm::formatv("GPIPE_HD inline float {0}({1}) {{\n", name, params);
  std::string descriptor;
  for (auto [i, op] : llvm::enumerate(kernel.ops)) {
    bool last = i + 1 == kernel.ops.size();
    std::string result = last ? "out" : "t" + std::to_string(i);
    SmallVector<std::string> operands;
    for (Value operand : op->getOperands())
      operands.push_back(lookup(operand));
    emitScalarOp(op, result, operands, os);
    names[op->getResult(0)] = result;
    if (i)
      descriptor += "; ";
    descriptor += llvm::formatv("{0}({1})->{2}", opName(op),
                                llvm::join(operands, ","), result)
                      .str();
  }
  os << "  return out;\n}\n";

  os << "#ifdef __CUDACC__\n";
  os << llvm::formatv("__global__ void {0}_kernel({1}float *out, long n) {{\n",
                      name, ptrParams);
  os << "  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;\n"
        "       i += (long)gridDim.x * blockDim.x)\n";
  os << llvm::formatv("    out[i] = {0}({1});\n}\n", name, args);
  os << "#endif // __CUDACC__\n";

  os << llvm::formatv("inline void {0}_host({1}float *out, long n) {{\n", name,
                      ptrParams);
  os << "  for (long i = 0; i < n; ++i)\n";
  os << llvm::formatv("    out[i] = {0}({1});\n}\n", name, args);
  os << llvm::formatv("inline void {0}_host_table(const float *const *in, "
                      "float *out, long n) {{\n",
                      name);
  os << llvm::formatv("  {0}_host({1}out, n);\n}\n\n", name, tableArgs);
  return descriptor;
}

LogicalResult gpipe::emitElementwiseKernels(ModelOp model,
                                            llvm::raw_ostream &os) {
  FailureOr<SmallVector<FusedKernel>> kernels = analyzeElementwiseFusion(model);
  if (failed(kernels))
    return failure();

  std::string ns = "gpipe_" + sanitize(model.getSymName()) + "_kernels";
  os << llvm::formatv(
      "// Fused element-wise kernels of model @{0}, written by gpipe-translate "
      "--gpipe-emit-kernels.\n"
      "// Compiles as C++ (host loops) and as CUDA (also __global__ "
      "grid-stride kernels).\n\n",
      model.getSymName());
  os << "#include <math.h>\n\n"
        "#ifdef __CUDACC__\n"
        "#define GPIPE_HD __host__ __device__\n"
        "#else\n"
        "#define GPIPE_HD\n"
        "#endif\n\n"
        "#ifndef GPIPE_KERNEL_INFO_DEFINED\n"
        "#define GPIPE_KERNEL_INFO_DEFINED\n"
        "/// One fused kernel: `ops` lists its steps over inputs inK, "
        "temporaries tK\n"
        "/// and the result out, e.g. \"add(in0,in1)->t0; gelu(t0)->out\".\n"
        "struct GpipeKernelInfo {\n"
        "  const char *name;\n"
        "  const char *stage;\n"
        "  int backward;\n"
        "  int numInputs;\n"
        "  int numOps;\n"
        "  const char *ops;\n"
        "  long numElements;\n"
        "  void (*host)(const float *const *inputs, float *out, long n);\n"
        "};\n"
        "#endif // GPIPE_KERNEL_INFO_DEFINED\n\n";
  os << "namespace " << ns << " {\n\n";

  SmallVector<std::string> descriptors;
  for (const FusedKernel &kernel : *kernels)
    descriptors.push_back(emitKernel(kernel, os));

  os << "[[maybe_unused]] static const GpipeKernelInfo gpipeKernels[] = {\n";
  for (auto [kernel, descriptor] : llvm::zip(*kernels, descriptors)) {
    std::string name = kernelName(kernel);
    os << llvm::formatv("    {{\"{0}\", \"{1}\", {2}, {3}, {4}, \"{5}\", {6}, "
                        "{0}_host_table},\n",
                        name, kernel.stage, kernel.backward ? 1 : 0,
                        kernel.inputs.size(), kernel.ops.size(), descriptor,
                        kernel.numElements);
  }
  if (kernels->empty())
    os << "    {nullptr, nullptr, 0, 0, 0, nullptr, 0, nullptr},\n";
  os << "};\n";
  os << llvm::formatv(
      "[[maybe_unused]] static const int gpipeNumKernels = {0};\n\n",
      kernels->size());
  os << "} // namespace " << ns << "\n";
  return success();
}

LogicalResult gpipe::translateModuleToKernels(ModuleOp module,
                                              llvm::raw_ostream &os) {
  SmallVector<ModelOp> models(module.getOps<ModelOp>());
  if (models.size() != 1)
    return module.emitError()
           << "expects exactly one gpipe.model to generate kernels for, found "
           << models.size();
  return emitElementwiseKernels(models.front(), os);
}

void gpipe::registerEmitKernelsTranslation() {
  TranslateFromMLIRRegistration registration(
      "gpipe-emit-kernels",
      "write the fused element-wise kernels of a compiled gpipe model as "
      "C++/CUDA source",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError() << "expects a builtin.module";
        return translateModuleToKernels(module, os);
      },
      [](DialectRegistry &registry) { registry.insert<GPipeDialect>(); });
}
