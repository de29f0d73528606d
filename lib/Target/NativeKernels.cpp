//===- NativeKernels.cpp - Generated kernels as x86-64 shared objects -----===//
//
// The lowering, per variant of vector width W:
//   linalg.generic on dynamically shaped tensors (one dimension per
//   iteration dimension the operand has)
//   -> one-shot bufferization (the output argument written in place)
//   -> tiles of one point in each outer dimension and W in the innermost,
//      the innermost loop peeled so that its main part has only full tiles,
//      each vectorized to vector<Wxf32> (a reduction's lanes combined per
//      tile); the remainder (< W points) stays scalar
//   -> the math functions (exp, log, tanh, erf, erfc) as MLIR's polynomial
//      approximations, so that vectors need no libm; the scalar remainder
//      uses the same arithmetic, so an element's bits do not depend on where
//      a thread's chunk starts. sin, cos and pow call libm per element: its
//      range reduction, and pow's IEEE cases (0^0, a negative base with an
//      integer exponent), which the expansion as exp(b log a) gets wrong.
//   -> the LLVM dialect with C-interface wrappers, LLVM IR with only the
//      packed entries external, an object for the variant's CPU level
//      (-O2 without LLVM's own vectorizers and unroller), a shared object.
// Kernels run in their own MLIRContext: the compiler's context is not
// touched (nor its registered dialects) and diagnostics are forwarded.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Target/NativeKernels.h"

#include "KernelContext.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Conversion/VectorToSCF/VectorToSCF.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/TransformOps/DialectExtension.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Linalg/Transforms/TilingInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/TransformOps/SCFTransformOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Transform/IR/TransformDialect.h"
#include "mlir/Dialect/Transform/Transforms/TransformInterpreterUtils.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/TransformOps/VectorTransformOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Triple.h"

#include <mutex>
#include <thread>

using namespace mlir;
using namespace gpipe;

namespace {
constexpr llvm::StringLiteral kTriple = "x86_64-unknown-linux-gnu";

struct IsaVariant {
  llvm::StringLiteral isa;
  /// Elements per vector tile: two registers' worth, for instruction-level
  /// parallelism.
  int64_t width;
  /// Whether the CPU level has FMA; without it math.fma is split into a
  /// multiply and an add rather than becoming a call to libm's fmaf.
  bool hasFma;
};

constexpr IsaVariant kVariants[] = {
    {"x86-64", 8, false}, {"x86-64-v3", 16, true}, {"x86-64-v4", 32, true}};

/// The per-variant schedule of a kernel of `rank` dimensions: tiles of one
/// point in each outer dimension and W in the innermost, the innermost loop
/// peeled so that its main part has only full tiles, those vectorized, and
/// the vectors' reductions and unit dimensions lowered away.
static std::string scheduleFor(unsigned rank, int64_t width) {
  std::string loops, loopTypes, sizes;
  for (unsigned d = 0; d < rank; ++d) {
    loops += ", %l" + std::to_string(d);
    loopTypes += ", !transform.op<\"scf.for\">";
    sizes += (d ? ", " : "") + std::to_string(d + 1 == rank ? width : 1);
  }
  std::string text = R"mlir(
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(
      %root: !transform.any_op {transform.readonly}) {
    %generic = transform.structured.match ops{["linalg.generic"]}
        attributes {gpipe.scheduling} in %root
        : (!transform.any_op) -> !transform.any_op
    %tiled@LOOPS@ = transform.structured.tile_using_for %generic
        tile_sizes [@SIZES@]
        : (!transform.any_op) -> (!transform.any_op@LOOP_TYPES@)
    %main, %rest = transform.loop.peel %l@INNERMOST@
        : (!transform.op<"scf.for">) -> (!transform.any_op, !transform.any_op)
    transform.apply_patterns to %root {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    %full = transform.structured.match ops{["linalg.generic"]} in %main
        : (!transform.any_op) -> !transform.any_op
    transform.structured.vectorize %full : !transform.any_op
    transform.apply_patterns to %root {
      transform.apply_patterns.vector.lower_multi_reduction
          lowering_strategy = "innerreduction"
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.yield
  }
}
)mlir";
  for (auto [key, value] :
       {std::pair<llvm::StringRef, std::string>{"@LOOPS@", loops},
        {"@SIZES@", sizes},
        {"@LOOP_TYPES@", loopTypes},
        {"@INNERMOST@", std::to_string(rank - 1)}}) {
    size_t at = text.find(key);
    text.replace(at, key.size(), value);
  }
  return text;
}

DialectRegistry kernelDialects() {
  DialectRegistry registry;
  registry.insert<affine::AffineDialect, arith::ArithDialect,
                  bufferization::BufferizationDialect, cf::ControlFlowDialect,
                  func::FuncDialect, linalg::LinalgDialect, LLVM::LLVMDialect,
                  math::MathDialect, memref::MemRefDialect, scf::SCFDialect,
                  tensor::TensorDialect, transform::TransformDialect,
                  ub::UBDialect, vector::VectorDialect>();
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(
      registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerTilingInterfaceExternalModels(registry);
  linalg::registerTransformDialectExtension(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerTransformDialectExtension(registry);
  vector::registerTransformDialectExtension(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  return registry;
}

/// The CPU kernels' compilation in a context of their own (KernelContext.h).
class KernelCompilation : public KernelContext {
public:
  KernelCompilation() : KernelContext(kernelDialects(), "generated kernels") {}

  FailureOr<OwningOpRef<ModuleOp>> buildLinalg(ArrayRef<NamedKernel> kernels);
  LogicalResult lowerToLLVMDialect(ModuleOp module, const IsaVariant &variant);
};
} // namespace

/// The body function of a kernel: its entry's name is `symbol` itself.
static std::string bodyName(StringRef symbol) {
  return (symbol + "_body").str();
}

FailureOr<OwningOpRef<ModuleOp>>
KernelCompilation::buildLinalg(ArrayRef<NamedKernel> kernels) {
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  for (const NamedKernel &kernel : kernels)
    if (failed(buildKernelFunction(*module, module->getLoc(),
                                   bodyName(kernel.symbol), kernel.spec)))
      return failure();
  return module;
}

/// After bufferization each function returns its output argument: the
/// result goes, so that the C interface has no result descriptor.
static LogicalResult dropReturnedArguments(ModuleOp module) {
  for (auto func : module.getOps<func::FuncOp>()) {
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    for (Value value : ret.getOperands())
      if (!isa<BlockArgument>(value))
        return func.emitError(
            "bufferization did not write the output in place");
    ret->setOperands({});
    func.setType(
        FunctionType::get(func.getContext(), func.getArgumentTypes(), {}));
  }
  return success();
}

LogicalResult KernelCompilation::lowerToLLVMDialect(ModuleOp module,
                                                    const IsaVariant &variant) {
  PassManager bufferize(&context);
  bufferization::OneShotBufferizePassOptions oneShot;
  oneShot.bufferizeFunctionBoundaries = true;
  oneShot.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  bufferize.addPass(bufferization::createOneShotBufferizePass(oneShot));
  // A window's insert_slice bufferizes to a copy between two equal subviews
  // of the output: once they are one value, the self-copy folds away.
  bufferize.addPass(createCSEPass());
  bufferize.addPass(createCanonicalizerPass());
  if (failed(bufferize.run(module)) || failed(dropReturnedArguments(module)))
    return failure();

  // Each generic marked gpipe.tile by the schedule of its rank (the tiling's
  // loop count), one at a time (a concat has one per input): the schedule
  // finds it by a mark of the moment. A gather's loops (data-dependent
  // reads and writes) have none and stay scalar.
  for (auto func : module.getOps<func::FuncOp>()) {
    auto next = [&] {
      linalg::GenericOp found;
      func.walk([&](linalg::GenericOp generic) {
        if (!found && generic->hasAttr("gpipe.tile"))
          found = generic;
      });
      return found;
    };
    for (linalg::GenericOp generic = next(); generic; generic = next()) {
      generic->removeAttr("gpipe.tile");
      generic->setAttr("gpipe.scheduling", UnitAttr::get(&context));
      OwningOpRef<ModuleOp> transforms = parseSourceString<ModuleOp>(
          scheduleFor(generic.getNumLoops(), variant.width), &context);
      if (!transforms)
        return failure();
      Operation *entry = transform::detail::findTransformEntryPoint(
          func, *transforms, "__transform_main");
      if (!entry ||
          failed(transform::applyTransformNamedSequence(
              func, entry, *transforms, transform::TransformOptions())))
        return failure();
      func.walk([](linalg::GenericOp scheduled) {
        scheduled->removeAttr("gpipe.scheduling");
      });
    }
  }

  // A reduction tile's lanes add as a tree rather than one after another:
  // the order is fixed by the variant's width, so a kernel's sums stay
  // deterministic (and equal across pipeline splits).
  module.walk([&](vector::ReductionOp reduction) {
    reduction.setFastmath(arith::FastMathFlags::reassoc);
  });

  PassManager lower(&context);
  lower.addPass(createConvertLinalgToLoopsPass());
  if (failed(lower.run(module)))
    return failure();
  RewritePatternSet approximations(&context);
  // sin and cos stay libm's: the approximations' range reduction loses
  // digits at large arguments (1e-5 at 100), which rotary positions reach;
  // math.powf is left alone and becomes libm's powf.
  populateMathPolynomialApproximationPatterns(approximations, [](StringRef op) {
    return op != "math.sin" && op != "math.cos";
  });
  if (!variant.hasFma)
    math::populateExpansionPatterns(approximations, {"fma"});
  if (failed(applyPatternsGreedily(module, std::move(approximations))))
    return failure();
  for (auto func : module.getOps<func::FuncOp>())
    func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  UnitAttr::get(&context));

  PassManager toLLVM(&context);
  toLLVM.addPass(createLowerAffinePass());
  toLLVM.addPass(createConvertVectorToSCFPass());
  toLLVM.addPass(createSCFToControlFlowPass());
  toLLVM.addPass(memref::createExpandStridedMetadataPass());
  toLLVM.addPass(createLowerAffinePass());
  toLLVM.addPass(createConvertVectorToLLVMPass());
  toLLVM.addPass(createFinalizeMemRefToLLVMConversionPass());
  toLLVM.addPass(createConvertMathToLLVMPass());
  toLLVM.addPass(createArithToLLVMConversionPass());
  toLLVM.addPass(createUBToLLVMConversionPass());
  toLLVM.addPass(createConvertFuncToLLVMPass());
  toLLVM.addPass(createConvertControlFlowToLLVMPass());
  toLLVM.addPass(createReconcileUnrealizedCastsPass());
  return toLLVM.run(module);
}

ArrayRef<StringRef> gpipe::nativeIsaVariants() {
  static const StringRef names[] = {kVariants[0].isa, kVariants[1].isa,
                                    kVariants[2].isa};
  return names;
}

static const IsaVariant *findVariant(StringRef isa) {
  for (const IsaVariant &variant : kVariants)
    if (variant.isa == isa)
      return &variant;
  return nullptr;
}

FailureOr<std::string> gpipe::printKernelIR(ArrayRef<NamedKernel> kernels,
                                            StringRef stage, StringRef isa,
                                            Location loc) {
  const IsaVariant *variant = findVariant(isa);
  if (!variant)
    return (emitError(loc) << "unknown instruction-set variant '" << isa
                           << "'; expected x86-64, x86-64-v3 or x86-64-v4"),
           failure();
  KernelCompilation compilation;
  FailureOr<OwningOpRef<ModuleOp>> module = compilation.buildLinalg(kernels);
  if (failed(module)) {
    compilation.report(loc, "cannot build the kernels' linalg");
    return failure();
  }
  if (stage == "llvm" &&
      failed(compilation.lowerToLLVMDialect(**module, *variant))) {
    compilation.report(loc, "lowering to the LLVM dialect failed");
    return failure();
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  (*module)->print(os);
  return text;
}

/// Adds `void symbol(void **args)` calling `_mlir_ciface_<body>` with
/// args[0], ..., args[n].
static void addPackedEntry(llvm::Module &module, const NamedKernel &kernel) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Function *body =
      module.getFunction(("_mlir_ciface_" + bodyName(kernel.symbol)));
  auto *type =
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr}, false);
  auto *entry = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage,
                                       kernel.symbol, module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", entry));
  llvm::SmallVector<llvm::Value *> args;
  for (unsigned i = 0; i <= kernel.spec.numInputs; ++i)
    args.push_back(
        b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, entry->getArg(0), i)));
  b.CreateCall(body, args);
  b.CreateRetVoid();
}

/// Only the packed entries are the library's interface. With the bodies and
/// their C-interface wrappers internal, each is inlined into its one caller
/// and dropped: the optimizer and the code generator see every kernel once,
/// not up to three times.
static void internalizeAllButEntries(llvm::Module &module,
                                     ArrayRef<NamedKernel> kernels) {
  llvm::StringSet<> entries;
  for (const NamedKernel &kernel : kernels)
    entries.insert(kernel.symbol);
  for (llvm::Function &function : module)
    if (!function.isDeclaration() && !entries.contains(function.getName()))
      function.setLinkage(llvm::GlobalValue::InternalLinkage);
}

/// LLVM's -O2 without its loop vectorizer, SLP vectorizer and loop unroller.
/// The kernels arrive vectorized, in tiles of two registers, by the schedule
/// above: those three passes only re-vectorized the scalar remainder loops
/// and unrolled the tiles, and -O3 only added copies of the loop nests
/// unswitched on whether a row has a full tile, with the same vector loops.
/// With the internal bodies above, a kernel set compiles in a quarter to a
/// third of its time at -O3 (docs/Benchmarks.md, "Compile time of the
/// generated kernels").
static void optimize(llvm::Module &module, llvm::TargetMachine &machine) {
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = false;
  tuning.SLPVectorization = false;
  tuning.LoopUnrolling = false;
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  llvm::PassBuilder builder(&machine, tuning);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2)
      .run(module, modules);
}

/// An object file for `variant`'s CPU level.
static FailureOr<std::string> emitObject(llvm::Module &module,
                                         const IsaVariant &variant,
                                         std::string &error) {
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
  });
  llvm::Triple triple(kTriple);
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return failure();
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, variant.isa, "", llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  module.setTargetTriple(triple);
  module.setDataLayout(machine->createDataLayout());
  optimize(module, *machine);
  SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile)) {
    error = "the x86 target cannot emit object files";
    return failure();
  }
  codegen.run(module);
  return std::string(object.str());
}

/// Links `object` into a shared object with the system's C compiler driver
/// (cc, gcc or clang on PATH; GPIPE_CC names another).
static FailureOr<std::string> linkSharedObject(StringRef object,
                                               std::string &error) {
  std::string driver;
  if (const char *named = std::getenv("GPIPE_CC"); named && *named) {
    llvm::ErrorOr<std::string> path = llvm::sys::findProgramByName(named);
    if (!path) {
      error = std::string("GPIPE_CC names '") + named +
              "', which is not a program on PATH";
      return failure();
    }
    driver = *path;
  }
  for (StringRef name : {"cc", "gcc", "clang"}) {
    if (!driver.empty())
      break;
    if (llvm::ErrorOr<std::string> path = llvm::sys::findProgramByName(name))
      driver = *path;
  }
  if (driver.empty()) {
    error = "no C compiler driver to link them (cc, gcc or clang on PATH, or "
            "GPIPE_CC)";
    return failure();
  }
  SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("gpipe-kernels", dir)) {
    error = "cannot create a temporary directory: " + ec.message();
    return failure();
  }
  SmallString<128> objectPath(dir), libraryPath(dir), logPath(dir);
  llvm::sys::path::append(objectPath, "kernels.o");
  llvm::sys::path::append(libraryPath, "kernels.so");
  llvm::sys::path::append(logPath, "link.log");
  llvm::scope_exit cleanUp([&] {
    for (StringRef path : {objectPath.str(), libraryPath.str(), logPath.str()})
      llvm::sys::fs::remove(path);
    llvm::sys::fs::remove(dir);
  });
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(objectPath, ec);
    if (ec) {
      error = "cannot write " + objectPath.str().str() + ": " + ec.message();
      return failure();
    }
    out << object;
  }
  SmallVector<StringRef> args{driver,       "-shared",   "-Wl,-z,noexecstack",
                              "-Wl,-z,now", "-s",        "-lm",
                              "-o",         libraryPath, objectPath};
  std::optional<StringRef> redirects[] = {std::nullopt, logPath.str(),
                                          logPath.str()};
  int status = llvm::sys::ExecuteAndWait(driver, args, std::nullopt, redirects,
                                         /*SecondsToWait=*/60, 0, &error);
  if (status != 0) {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> log =
        llvm::MemoryBuffer::getFile(logPath);
    error = (driver + " -shared failed (status " + Twine(status) + ")" +
             (error.empty() ? "" : ": " + error) +
             (log && !(*log)->getBuffer().trim().empty()
                  ? ": " + (*log)->getBuffer().trim()
                  : ""))
                .str();
    return failure();
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> library =
      llvm::MemoryBuffer::getFile(libraryPath);
  if (!library) {
    error = "cannot read the linked kernels: " + library.getError().message();
    return failure();
  }
  return (*library)->getBuffer().str();
}

namespace {
/// One variant's shared object, or why there is none.
struct VariantResult {
  std::string library;
  std::string error;
};
} // namespace

/// Compiles `kernels` for `variant`. Touches no caller's context: the
/// variants compile on threads of their own.
static VariantResult compileVariant(ArrayRef<NamedKernel> kernels,
                                    const IsaVariant &variant) {
  KernelCompilation compilation;
  auto fail = [&](const Twine &what) {
    return VariantResult{"", compilation.describe(what)};
  };
  FailureOr<OwningOpRef<ModuleOp>> module = compilation.buildLinalg(kernels);
  if (failed(module))
    return fail("cannot build the kernels' linalg");
  if (failed(compilation.lowerToLLVMDialect(**module, variant)))
    return fail("lowering to the LLVM dialect failed for " + variant.isa);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(**module, llvmContext, "gpipe-kernels");
  if (!llvmModule)
    return fail("translation to LLVM IR failed");
  for (const NamedKernel &kernel : kernels)
    addPackedEntry(*llvmModule, kernel);
  internalizeAllButEntries(*llvmModule, kernels);
  std::string error;
  FailureOr<std::string> object = emitObject(*llvmModule, variant, error);
  if (failed(object))
    return {"",
            ("code generation for " + variant.isa + " failed: " + error).str()};
  FailureOr<std::string> library = linkSharedObject(*object, error);
  if (failed(library))
    return {"", error};
  return {std::move(*library), ""};
}

/// The shared objects of every kernel set this process compiled, by the set
/// (symbols and steps): a tool that compiles one model under many plans
/// (gpipe-tune, the tests) generates its kernels once.
static std::mutex cacheMutex;
static llvm::StringMap<std::vector<NativeCodeVariant>> &compiledSets() {
  static llvm::StringMap<std::vector<NativeCodeVariant>> cache;
  return cache;
}

FailureOr<std::vector<NativeCodeVariant>>
gpipe::compileNativeKernels(ArrayRef<NamedKernel> kernels, Location loc) {
  std::string key;
  for (const NamedKernel &kernel : kernels)
    key += kernel.symbol + "=" + kernel.spec.describe() + "\n";
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto it = compiledSets().find(key);
    if (it != compiledSets().end())
      return it->second;
  }
  // The variants are independent: one thread each.
  std::vector<VariantResult> results(std::size(kVariants));
  std::vector<std::thread> threads;
  for (size_t v = 1; v < results.size(); ++v)
    threads.emplace_back(
        [&, v] { results[v] = compileVariant(kernels, kVariants[v]); });
  results[0] = compileVariant(kernels, kVariants[0]);
  for (std::thread &thread : threads)
    thread.join();
  std::vector<NativeCodeVariant> variants;
  for (size_t v = 0; v < results.size(); ++v) {
    if (!results[v].error.empty())
      return (emitError(loc) << "generated kernels: " << results[v].error),
             failure();
    variants.push_back({kVariants[v].isa.str(), std::move(results[v].library)});
  }
  std::lock_guard<std::mutex> lock(cacheMutex);
  compiledSets()[key] = variants;
  return variants;
}
