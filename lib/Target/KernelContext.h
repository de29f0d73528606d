//===- KernelContext.h - A kernel set's own MLIRContext -----------*- C++ -*-===//
//
// Private to lib/Target: the context in which NativeKernels.cpp and
// PtxKernels.cpp compile a bundle's kernels, apart from the compiler's (its
// registered dialects untouched), its diagnostics kept as text so that the
// caller reports them at its own location.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_LIB_TARGET_KERNELCONTEXT_H
#define GPIPE_LIB_TARGET_KERNELCONTEXT_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <string>

namespace gpipe {

class KernelContext {
public:
  /// `prefix` starts every reported error ("generated kernels").
  KernelContext(const mlir::DialectRegistry &registry, llvm::StringRef prefix)
      : context(registry, mlir::MLIRContext::Threading::DISABLED),
        prefix(prefix.str()),
        handler(&context, [this](mlir::Diagnostic &diag) {
          if (!messages.empty())
            messages += "; ";
          messages += diag.str();
          return mlir::success();
        }) {
    context.loadAllAvailableDialects();
  }

  /// Reports `what` and the messages collected, at `loc`.
  void report(mlir::Location loc, const llvm::Twine &what) {
    mlir::emitError(loc) << prefix << ": " << describe(what);
  }
  /// `what` and the messages collected.
  std::string describe(const llvm::Twine &what) const {
    return messages.empty() ? what.str() : (what + ": " + messages).str();
  }

  mlir::MLIRContext context;

private:
  std::string prefix;
  mlir::ScopedDiagnosticHandler handler;
  std::string messages;
};

} // namespace gpipe

#endif // GPIPE_LIB_TARGET_KERNELCONTEXT_H
