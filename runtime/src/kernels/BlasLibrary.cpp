//===- BlasLibrary.cpp - The sgemm the CPU kernels call -------------------===//

#include "gpipe/runtime/kernels/BlasLibrary.h"

#include <cblas.h>

#include <cstdlib>
#include <dlfcn.h>

using namespace gpipe::runtime;
using namespace gpipe::runtime::cpu;

static_assert(CblasRowMajor == 101 && CblasNoTrans == 111 && CblasTrans == 112,
              "cpu::Sgemm passes CBLAS's enums as their standard values");

namespace {
void openBlasSgemm(int order, int transA, int transB, int m, int n, int k,
                   float alpha, const float *a, int lda, const float *b,
                   int ldb, float beta, float *c, int ldc) {
  cblas_sgemm(CBLAS_ORDER(order), CBLAS_TRANSPOSE(transA),
              CBLAS_TRANSPOSE(transB), m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

BlasLibrary linkedOpenBlas() {
  std::string config = openblas_get_config();
  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ...": the name and version.
  size_t end = config.find(' ', config.find(' ') + 1);
  return {openBlasSgemm, config.substr(0, end), ""};
}

/// Sets the library to one thread where it says how; "" or what failed.
std::string singleThreaded(void *library) {
  // MKL: the sequential layer, before its first call (1 =
  // MKL_THREADING_SEQUENTIAL); it returns the layer it set.
  if (auto setLayer = reinterpret_cast<int (*)(int)>(
          dlsym(library, "MKL_Set_Threading_Layer"))) {
    int layer = setLayer(1);
    return layer == 1 ? ""
                      : "MKL kept threading layer " + std::to_string(layer) +
                            ", not sequential";
  }
  if (auto set = reinterpret_cast<void (*)(int)>(
          dlsym(library, "openblas_set_num_threads")))
    set(1);
  else if (auto bli = reinterpret_cast<void (*)(long)>(
               dlsym(library, "bli_thread_set_num_threads")))
    bli(1);
  return "";
}
} // namespace

BlasLibrary cpu::loadBlasLibrary(const std::string &path) {
  BlasLibrary linked = linkedOpenBlas();
  if (path.empty())
    return linked;
  auto failed = [&](const std::string &why) {
    linked.error = "cannot use the BLAS library '" + path +
                   "' (GPIPE_BLAS_LIBRARY): " + why;
    return linked;
  };
  // Never closed: its sgemm serves the process to its end.
  void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return failed(dlerror());
  auto sgemm = reinterpret_cast<Sgemm>(dlsym(library, "cblas_sgemm"));
  if (!sgemm)
    return failed("it has no cblas_sgemm");
  if (std::string error = singleThreaded(library); !error.empty())
    return failed(error);
  return {sgemm, path, ""};
}

const BlasLibrary &cpu::blas() {
  static const BlasLibrary library = [] {
    const char *path = std::getenv("GPIPE_BLAS_LIBRARY");
    return loadBlasLibrary(path ? path : "");
  }();
  return library;
}

Status cpu::checkBlas() {
  const std::string &error = blas().error;
  return error.empty() ? Status() : Status(StatusCode::Unavailable, error);
}
