//===- PtxKernels.cpp - Generated kernels as PTX for CUDA -----------------===//
//
// Each kernel is built as a gpu.func over raw pointers (the ABI of
// PtxKernels.h) whose body, a thread's output elements, is PtxKernelBody.cpp's;
// together they form one gpu.module, compiled here to PTX (or, for tests, the
// same bodies as host functions).
//
// The lowering: math expansions (PtxMath.cpp), scf to cf, arith, cf and math
// to the LLVM dialect (math as LLVM intrinsics), then the gpu ops to NVVM (the
// kernels, the special registers), LLVM IR, -O3 for nvptx64-nvidia-cuda at
// the chip, PTX ISA 8.0, and the NVPTX back end's assembly. The serializer
// links no library (no libdevice: PtxMath.cpp says why).
//
//===----------------------------------------------------------------------===//

#include "gpipe/Target/PtxKernels.h"

#include "KernelContext.h"
#include "PtxEmit.h"
#include "PtxKernelBody.h"
#include "PtxMath.h"

#include "gpipe/Conversion/KernelToLinalg.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/ModuleToObject.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"

#include <mutex>

using namespace mlir;
using namespace gpipe;
using namespace gpipe::ptx_detail;

namespace {
constexpr llvm::StringLiteral kTriple = "nvptx64-nvidia-cuda";
constexpr llvm::StringLiteral kFeatures = "+ptx80";
constexpr llvm::StringLiteral kModuleName = "gpipe_kernels";

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

DialectRegistry ptxDialects() {
  DialectRegistry registry;
  registry.insert<arith::ArithDialect, cf::ControlFlowDialect,
                  func::FuncDialect, gpu::GPUDialect, LLVM::LLVMDialect,
                  math::MathDialect, NVVM::NVVMDialect, scf::SCFDialect,
                  ub::UBDialect>();
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  return registry;
}

/// The PTX kernels' compilation in a context of their own (KernelContext.h).
class PtxCompilation : public KernelContext {
public:
  PtxCompilation() : KernelContext(ptxDialects(), "PTX kernels") {}

  FailureOr<OwningOpRef<ModuleOp>> build(ArrayRef<NamedKernel> kernels,
                                         StringRef chip);
  LogicalResult lowerToNVVM(gpu::GPUModuleOp module);
  FailureOr<std::string> serialize(gpu::GPUModuleOp module, StringRef chip);
};

/// The gpu.module of `module`.
gpu::GPUModuleOp kernelModule(ModuleOp module) {
  return *module.getOps<gpu::GPUModuleOp>().begin();
}
} // namespace

FailureOr<OwningOpRef<ModuleOp>>
PtxCompilation::build(ArrayRef<NamedKernel> kernels, StringRef chip) {
  Location loc = UnknownLoc::get(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b(&context);
  (*module)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                     b.getUnitAttr());
  b.setInsertionPointToEnd(module->getBody());
  auto target = NVVM::NVVMTargetAttr::get(&context, /*optLevel=*/3, kTriple,
                                          chip, kFeatures);
  auto gpuModule = gpu::GPUModuleOp::create(b, loc, kModuleName,
                                            ArrayRef<Attribute>{target});
  for (const NamedKernel &kernel : kernels) {
    if (failed(checkKernel(&context, loc, kernel)))
      return failure();
    b.setInsertionPointToEnd(gpuModule.getBody());
    auto func = gpu::GPUFuncOp::create(
        b, loc, kernel.symbol,
        b.getFunctionType(parameterTypes(&context, kernel.spec), {}));
    func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    Block &entry = func.getBody().front();
    b.setInsertionPointToStart(&entry);
    Emit e{b, loc};
    auto index64 = [&](Value v) {
      return arith::IndexCastUIOp::create(b, loc, e.i64(), v).getResult();
    };
    Value thread = index64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
    Value block = index64(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
    Value blockSize =
        index64(gpu::BlockDimOp::create(b, loc, gpu::Dimension::x));
    Value gridSize = index64(gpu::GridDimOp::create(b, loc, gpu::Dimension::x));
    ValueRange params = entry.getArguments();
    unsigned n = kernel.spec.numInputs;
    BodyArgs args{params.take_front(n), params[n], params.drop_front(n + 1),
                  e.addi(e.muli(block, blockSize), thread),
                  e.muli(gridSize, blockSize)};
    if (failed(emitKernelBody(b, loc, kernel, args)))
      return failure();
    gpu::ReturnOp::create(b, loc);
  }
  if (failed(verify(*module)))
    return failure();
  return module;
}

LogicalResult PtxCompilation::lowerToNVVM(gpu::GPUModuleOp module) {
  if (failed(expandMath(module)))
    return failure();
  PassManager scfToCf(&context, gpu::GPUModuleOp::getOperationName());
  scfToCf.addPass(createSCFToControlFlowPass());
  if (failed(scfToCf.run(module)))
    return failure();

  LowerToLLVMOptions options(&context);
  options.overrideIndexBitwidth(64);
  LLVMTypeConverter converter(&context, options);
  configureGpuToNVVMTypeConverter(converter);
  // First arith, math (as LLVM intrinsics: sqrt.rn, abs, fma, floor, ...),
  // cf and ub, before the GPU patterns, which would make some of them calls
  // to libdevice (minnumf as __nv_fminf, sqrt as __nv_sqrtf, ...).
  {
    RewritePatternSet patterns(&context);
    arith::populateArithToLLVMConversionPatterns(converter, patterns);
    cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
    ub::populateUBToLLVMConversionPatterns(converter, patterns);
    populateMathToLLVMConversionPatterns(converter, patterns,
                                         /*approximateLog1p=*/false);
    LLVMConversionTarget target(context);
    target.addLegalDialect<gpu::GPUDialect>();
    target.addIllegalDialect<math::MathDialect, arith::ArithDialect,
                             cf::ControlFlowDialect, ub::UBDialect>();
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return failure();
  }
  // Then the kernels and the thread indices.
  {
    RewritePatternSet patterns(&context);
    populateGpuToNVVMConversionPatterns(converter, patterns);
    LLVMConversionTarget target(context);
    target.addLegalDialect<NVVM::NVVMDialect>();
    target.addIllegalDialect<gpu::GPUDialect>();
    target.addLegalOp<gpu::GPUModuleOp>();
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return failure();
  }
  PassManager reconcile(&context, gpu::GPUModuleOp::getOperationName());
  reconcile.addPass(createReconcileUnrealizedCastsPass());
  if (failed(reconcile.run(module)))
    return failure();
  // Nothing may be left to link: no libdevice, no other library.
  for (auto func : module.getOps<LLVM::LLVMFuncOp>())
    if (func.isExternal())
      return func.emitError() << "the kernels call '" << func.getName()
                              << "', which no library provides to them";
  return success();
}

namespace {
/// LLVM IR to PTX for the NVPTX target, linking nothing (MLIR's NVVM
/// serializer would link libdevice wherever it finds a CUDA toolkit).
class PtxSerializer : public LLVM::ModuleToObject {
public:
  PtxSerializer(Operation &module, StringRef chip)
      : ModuleToObject(module, kTriple, chip, kFeatures, /*optLevel=*/3) {}

protected:
  FailureOr<SmallVector<char, 0>>
  moduleToObject(llvm::Module &llvmModule) override {
    FailureOr<llvm::TargetMachine *> machine = getOrCreateTargetMachine();
    if (failed(machine))
      return getOperation().emitError()
             << "no NVPTX target machine for " << triple << " " << chip;
    FailureOr<SmallString<0>> ptx = translateModuleToISA(
        llvmModule, **machine, [&] { return getOperation().emitError(); });
    if (failed(ptx))
      return failure();
    return SmallVector<char, 0>(ptx->begin(), ptx->end());
  }
};

void initializeNvptx() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

/// Why `chip` cannot be targeted, or "": an NVPTX processor sm_50 ... sm_90a
/// (what PTX ISA 8.0 covers).
std::string checkChip(StringRef chip) {
  initializeNvptx();
  std::string error;
  llvm::Triple triple(kTriple);
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return "LLVM has no NVPTX target: " + error;
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      target->createMCSubtargetInfo(triple, "", ""));
  StringRef digits = chip;
  unsigned version = 0;
  bool named = digits.consume_front("sm_");
  digits.consume_back("a");
  if (!named || digits.getAsInteger(10, version) || !info ||
      !info->isCPUStringValid(chip))
    return ("'" + chip + "' is not an NVPTX processor (sm_90, sm_80, ...)")
        .str();
  if (version < 50 || version > 90)
    return ("'" + chip +
            "' is outside what PTX ISA 8.0 targets (sm_50 to sm_90a)")
        .str();
  return "";
}
} // namespace

FailureOr<std::string> PtxCompilation::serialize(gpu::GPUModuleOp module,
                                                 StringRef chip) {
  initializeNvptx();
  PtxSerializer serializer(*module, chip);
  std::optional<SmallVector<char, 0>> ptx = serializer.run();
  if (!ptx)
    return failure();
  return std::string(ptx->begin(), ptx->end());
}

FailureOr<std::string> gpipe::printPtxKernelIR(ArrayRef<NamedKernel> kernels,
                                               StringRef stage, StringRef chip,
                                               Location loc) {
  if (stage != "gpu" && stage != "nvvm")
    return (emitError(loc) << "unknown PTX kernel stage '" << stage
                           << "'; expected gpu or nvvm"),
           failure();
  PtxCompilation compilation;
  FailureOr<OwningOpRef<ModuleOp>> module = compilation.build(kernels, chip);
  if (failed(module)) {
    compilation.report(loc, "cannot build the kernels");
    return failure();
  }
  if (stage == "nvvm" &&
      failed(compilation.lowerToNVVM(kernelModule(**module)))) {
    compilation.report(loc, "lowering to NVVM failed");
    return failure();
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  (*module)->print(os);
  return text;
}

/// The PTX of every kernel set this process compiled, by chip and set: a
/// tool that compiles one model under many plans generates it once.
static std::mutex ptxCacheMutex;
static llvm::StringMap<std::string> &compiledPtx() {
  static llvm::StringMap<std::string> cache;
  return cache;
}

FailureOr<std::string> gpipe::compilePtxKernels(ArrayRef<NamedKernel> kernels,
                                                StringRef chip, Location loc) {
  if (std::string problem = checkChip(chip); !problem.empty())
    return (emitError(loc) << "PTX kernels: " << problem), failure();
  std::string key = chip.str() + "\n";
  for (const NamedKernel &kernel : kernels)
    key += kernel.symbol + "=" + kernel.spec.describe() + "\n";
  {
    std::lock_guard<std::mutex> lock(ptxCacheMutex);
    auto it = compiledPtx().find(key);
    if (it != compiledPtx().end())
      return it->second;
  }
  PtxCompilation compilation;
  FailureOr<OwningOpRef<ModuleOp>> module = compilation.build(kernels, chip);
  if (failed(module)) {
    compilation.report(loc, "cannot build the kernels");
    return failure();
  }
  gpu::GPUModuleOp gpuModule = kernelModule(**module);
  if (failed(compilation.lowerToNVVM(gpuModule))) {
    compilation.report(loc, "lowering to NVVM failed");
    return failure();
  }
  FailureOr<std::string> ptx = compilation.serialize(gpuModule, chip);
  if (failed(ptx)) {
    compilation.report(loc, "PTX code generation failed for " + chip);
    return failure();
  }
  std::lock_guard<std::mutex> lock(ptxCacheMutex);
  compiledPtx()[key] = *ptx;
  return ptx;
}

FailureOr<OwningOpRef<ModuleOp>>
gpipe::buildPtxKernelHostModule(MLIRContext &context,
                                ArrayRef<NamedKernel> kernels, Location loc) {
  context.appendDialectRegistry(ptxDialects());
  context.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b(&context);
  for (const NamedKernel &kernel : kernels) {
    if (failed(checkKernel(&context, loc, kernel)))
      return failure();
    b.setInsertionPointToEnd(module->getBody());
    SmallVector<Type> types = parameterTypes(&context, kernel.spec);
    types.append(2, b.getI64Type()); // first, step
    auto func = func::FuncOp::create(b, loc, kernel.symbol,
                                     b.getFunctionType(types, {}));
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    ValueRange params = entry->getArguments();
    unsigned n = kernel.spec.numInputs, rank = kernel.spec.rank;
    BodyArgs args{params.take_front(n), params[n],
                  params.slice(n + 1, rank), params[n + 1 + rank],
                  params[n + 2 + rank]};
    if (failed(emitKernelBody(b, loc, kernel, args)))
      return failure();
    func::ReturnOp::create(b, loc);
  }
  if (failed(expandMath(*module)))
    return (emitError(loc) << "PTX kernels on the host: math expansion failed"),
           failure();
  PassManager lower(&context);
  lower.addPass(createSCFToControlFlowPass());
  lower.addPass(createConvertMathToLLVMPass());
  lower.addPass(createArithToLLVMConversionPass());
  lower.addPass(createUBToLLVMConversionPass());
  lower.addPass(createConvertFuncToLLVMPass());
  lower.addPass(createConvertControlFlowToLLVMPass());
  lower.addPass(createReconcileUnrealizedCastsPass());
  if (failed(lower.run(*module)))
    return (emitError(loc) << "PTX kernels on the host: lowering failed"),
           failure();
  return module;
}
