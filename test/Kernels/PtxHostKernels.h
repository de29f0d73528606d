//===- PtxHostKernels.h - The PTX kernels' bodies run on the host ---------===//
//
// For the tests of generated PTX on machines without a GPU: the kernels'
// bodies as host functions (gpipe::buildPtxKernelHostModule), JIT-compiled by
// MLIR's ExecutionEngine and run thread by thread as a launch would.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TEST_KERNELS_PTXHOSTKERNELS_H
#define GPIPE_TEST_KERNELS_PTXHOSTKERNELS_H

#include "gpipe/Target/PtxKernels.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace gpipe::testing {

/// The PTX kernels' bodies, JIT-compiled for this CPU.
class HostKernels {
public:
  explicit HostKernels(llvm::ArrayRef<NamedKernel> kernels) {
    static bool initialized = [] {
      llvm::InitializeNativeTarget();
      llvm::InitializeNativeTargetAsmPrinter();
      return true;
    }();
    (void)initialized;
    mlir::DialectRegistry registry;
    mlir::registerBuiltinDialectTranslation(registry);
    mlir::registerLLVMDialectTranslation(registry);
    context.appendDialectRegistry(registry);
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
      diagnostics += d.str() + "\n";
    });
    auto module = buildPtxKernelHostModule(
        context, kernels, mlir::UnknownLoc::get(&context));
    if (mlir::failed(module))
      return;
    auto created = mlir::ExecutionEngine::create(**module);
    if (!created) {
      diagnostics += llvm::toString(created.takeError());
      return;
    }
    engine = std::move(*created);
  }

  /// Runs kernel `symbol` as a launch of `threads` threads, thread by
  /// thread (in reverse, so that no thread relies on another's order).
  void run(const std::string &symbol, std::vector<float *> pointers,
           std::vector<int64_t> sizes, int64_t threads) {
    for (int64_t thread = threads; thread-- > 0;) {
      std::vector<int64_t> scalars = sizes;
      scalars.push_back(thread);
      scalars.push_back(threads);
      std::vector<void *> args;
      for (float *&p : pointers)
        args.push_back(&p);
      for (int64_t &s : scalars)
        args.push_back(&s);
      llvm::Error error = engine->invokePacked(symbol, args);
      ASSERT_FALSE(error) << llvm::toString(std::move(error));
    }
  }

  mlir::MLIRContext context;
  std::unique_ptr<mlir::ExecutionEngine> engine;
  std::string diagnostics;
};

} // namespace gpipe::testing

#endif // GPIPE_TEST_KERNELS_PTXHOSTKERNELS_H
