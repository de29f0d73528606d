//===- NativeKernelsSupport.h - Compiling and loading generated kernels ---===//
//
// For the tests that call generated kernels directly (not through the
// runtime): compile with gpipe::compileNativeKernels, load a variant with
// dlopen as a program would, and skip the variants this CPU cannot run.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TEST_KERNELS_NATIVEKERNELSSUPPORT_H
#define GPIPE_TEST_KERNELS_NATIVEKERNELSSUPPORT_H

#include "gpipe/Target/NativeKernels.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <dlfcn.h>

#include <string>
#include <vector>

namespace gpipe::testing {

using Entry = void (*)(void **);

inline bool cpuRuns(const std::string &isa) {
  __builtin_cpu_init();
  if (isa == "x86-64")
    return true;
  bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            __builtin_cpu_supports("bmi2");
  if (isa == "x86-64-v3")
    return v3;
  return v3 && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}

/// A loaded variant: dlopen of a temporary copy of the shared object.
class Library {
public:
  explicit Library(const std::string &bytes) {
    llvm::SmallString<128> path;
    int fd;
    if (llvm::sys::fs::createTemporaryFile("gpipe-test-kernels", "so", fd,
                                           path))
      return;
    {
      llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
      out << bytes;
    }
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      error = dlerror();
    llvm::sys::fs::remove(path);
  }
  ~Library() {
    if (handle)
      dlclose(handle);
  }
  Entry entry(const std::string &symbol) const {
    return reinterpret_cast<Entry>(dlsym(handle, symbol.c_str()));
  }
  void *handle = nullptr;
  std::string error;
};

struct Compiled {
  std::vector<NativeCodeVariant> variants;
  std::string diagnostics;
};

inline Compiled compile(const std::vector<NamedKernel> &kernels) {
  mlir::MLIRContext context;
  Compiled out;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    out.diagnostics += diag.str() + "\n";
  });
  mlir::FailureOr<std::vector<NativeCodeVariant>> variants =
      compileNativeKernels(kernels, mlir::UnknownLoc::get(&context));
  if (succeeded(variants))
    out.variants = std::move(*variants);
  return out;
}

/// The elements of an operand with iteration dimensions `dims`.
inline int64_t countOf(llvm::ArrayRef<unsigned> dims,
                       llvm::ArrayRef<int64_t> space) {
  int64_t n = 1;
  for (unsigned dim : dims)
    n *= space[dim];
  return n;
}

/// The flat index at `point` of an operand with dimensions `dims` (in its
/// own order).
inline int64_t indexAt(llvm::ArrayRef<unsigned> dims,
                       llvm::ArrayRef<int64_t> space,
                       llvm::ArrayRef<int64_t> point) {
  int64_t index = 0;
  for (unsigned dim : dims)
    index = index * space[dim] + point[dim];
  return index;
}

} // namespace gpipe::testing

#endif // GPIPE_TEST_KERNELS_NATIVEKERNELSSUPPORT_H
