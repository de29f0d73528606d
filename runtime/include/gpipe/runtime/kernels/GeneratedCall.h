//===- GeneratedCall.h - A call of a generated kernel -----------*- C++ -*-===//
//
// The bundle's generated kernels (Bundle::code) are native functions with
// MLIR's C interface for memrefs:
//
//   extern "C" void <symbol>(void **args);
//
// `args` holds inputs + 1 pointers, the inputs first and then the output,
// each to a 1-D f32 memref descriptor. A kernel reads every input at element
// i and writes out[i], for i in [0, size): element-wise, so a range of
// elements may run apart from the others (the CPU backend splits it over its
// threads) and an output that IS an input runs in place. An output that
// overlaps an input only in part would read elements the kernel has already
// written: such an input is copied first.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_KERNELS_GENERATEDCALL_H
#define GPIPE_RUNTIME_KERNELS_GENERATEDCALL_H

#include <cstdint>
#include <vector>

namespace gpipe::runtime::device {

/// A generated kernel's entry (its symbol in the loaded code).
using GeneratedEntry = void (*)(void **args);

/// MLIR's descriptor of a 1-D f32 memref (StridedMemRefType<float, 1>).
struct MemRef1D {
  float *allocated = nullptr;
  float *aligned = nullptr;
  int64_t offset = 0;
  int64_t size = 0;
  int64_t stride = 1;
};

/// out[i] = kernel(inputs[0][i], ..., inputs[k-1][i]) for i in [0, n).
struct GeneratedCall {
  GeneratedEntry entry = nullptr;
  std::vector<const float *> inputs;
  float *output = nullptr;
  int64_t n = 0;
};

/// Runs elements [begin, end) of `call` on this thread, reading its inputs
/// from `inputs` (call.inputs, or copies of them: separateOverlaps).
void runGeneratedRange(const GeneratedCall &call, const float *const *inputs,
                       int64_t begin, int64_t end);

/// The inputs `call` may read while it writes its output: call.inputs, but
/// for each that overlaps the output in part (not at the same address), a
/// copy in `copies`. Run when the call runs, not when it is issued: the
/// copies take the inputs' values of that moment.
std::vector<const float *>
separateOverlaps(const GeneratedCall &call,
                 std::vector<std::vector<float>> &copies);

/// The whole call on this thread.
void runGeneratedOnHost(const GeneratedCall &call);

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_KERNELS_GENERATEDCALL_H
