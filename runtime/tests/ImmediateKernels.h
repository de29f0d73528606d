//===- ImmediateKernels.h - The device kernels' bodies run on the host ---===//
//
// KernelsByFunctor with forEach = an immediate loop: the code the CUDA
// backend launches, run here on the host by the kernel tests.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_IMMEDIATEKERNELS_H
#define GPIPE_RUNTIME_TESTS_IMMEDIATEKERNELS_H

#include "gpipe/runtime/kernels/KernelsByFunctor.h"

#include <gtest/gtest.h>

#include <type_traits>

namespace gpipe::runtime::testing {

/// The stream every call goes to; forEach checks that it is passed through.
constexpr device::StreamId kStream = 3;

/// KernelsByFunctor with forEach = an immediate loop: the device code, run
/// on the host.
class ImmediateKernels
    : public device::KernelsByFunctor<ImmediateKernels, device::KernelApi> {
public:
  template <class F> void forEach(device::StreamId s, int64_t n, const F &f) {
    static_assert(std::is_trivially_copyable_v<F>);
    EXPECT_EQ(s, kStream);
    EXPECT_GT(n, 0) << "KernelsByFunctor launched an empty range";
    ++launches;
    for (int64_t i = 0; i < n; ++i)
      f(i);
  }
  template <class F>
  void forEachRow(device::StreamId s, int64_t rows, const F &f) {
    static_assert(std::is_trivially_copyable_v<F>);
    EXPECT_EQ(s, kStream);
    EXPECT_GT(rows, 0) << "KernelsByFunctor launched no rows";
    ++launches;
    for (int64_t r = 0; r < rows; ++r)
      device::kernels::runRowOnHost(f, r);
  }
  template <class F>
  void forEachColumn(device::StreamId s, int64_t cols, const F &f) {
    static_assert(std::is_trivially_copyable_v<F>);
    EXPECT_EQ(s, kStream);
    EXPECT_GT(cols, 0) << "KernelsByFunctor launched no columns";
    ++launches;
    for (int64_t c = 0; c < cols; ++c)
      device::kernels::runColumnOnHost(f, c);
  }
  void gemm(device::StreamId, const device::GemmBatch &) override {
    ADD_FAILURE() << "gemm is not KernelsByFunctor's";
  }
  void generated(device::StreamId, const device::GeneratedCall &) override {
    ADD_FAILURE() << "generated is not KernelsByFunctor's";
  }
  int64_t launches = 0;
};

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_IMMEDIATEKERNELS_H
