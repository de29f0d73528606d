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
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
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

/// MLIR's descriptor of a memref of rank up to 6 (kMaxKernelRank), as a
/// C-interface kernel takes it.
struct MemRefND {
  float *allocated, *aligned;
  int64_t offset;
  int64_t sizesAndStrides[12];
};

/// The row-major contiguous descriptor of `data` with shape `shape`.
inline MemRefND contiguous(float *data, const std::vector<int64_t> &shape) {
  MemRefND d{data, data, 0, {}};
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    d.sizesAndStrides[i] = shape[i];
    d.sizesAndStrides[shape.size() + i] = stride;
    stride *= shape[i];
  }
  return d;
}

/// The product of shape[from, to).
inline int64_t product(const std::vector<int64_t> &shape, size_t from = 0,
                       size_t to = ~size_t(0)) {
  int64_t n = 1;
  for (size_t i = from; i < std::min(to, shape.size()); ++i)
    n *= shape[i];
  return n;
}

/// Fails unless `got` holds `want`'s bits (NaN and the sign of 0 included).
inline void expectBits(const std::vector<float> &got,
                       const std::vector<float> &want,
                       const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
        << what << " element " << i << ": " << got[i] << ", expected "
        << want[i];
}

} // namespace gpipe::testing

#endif // GPIPE_TEST_KERNELS_NATIVEKERNELSSUPPORT_H
