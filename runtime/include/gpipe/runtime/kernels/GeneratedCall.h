//===- GeneratedCall.h - A call of a generated kernel -----------*- C++ -*-===//
//
// The bundle's generated kernels (Bundle::code) are native functions with
// MLIR's C interface for memrefs:
//
//   extern "C" void <symbol>(void **args);
//
// `args` holds inputs + 1 pointers, the inputs first and then the output,
// each to a memref descriptor, StridedMemRefType<float, r>:
//
//   struct { float *allocated; float *aligned; int64_t offset;
//            int64_t sizes[r]; int64_t strides[r]; }
//
// (rank 0: the first three fields only). A memref whose elements are i32
// (GeneratedKernelSpec::types: integers, booleans as 0/1 words) has
// StridedMemRefType<int32_t, r>, laid out alike: its 4-byte words travel
// through the same `float *` fields, and the runtime only moves them
// (copies are of bytes, never of float values). A kernel iterates over an
// iteration space of `rank` dimensions (the kernel op's `space`, its first
// size scaled to a micro-batch's rows when batched). Input k has the
// dimensions inputDims[k] of that space (in its own order), the output
// those of outputDims (ascending): descriptor k has r = inputDims[k].size(),
// sizes[i] = its own size along its dimension i (sizeOf), and row-major
// contiguous strides (the last 1). Its own size is space[inputDims[k][i]]
// unless the kernel fixes it (`extents`): a slice reads a window of an
// input, a slice's gradient writes a window of its output (and 0 in the
// rest of it), a concat's inputs each cover a part of the output; the
// windows' offsets and steps are in the kernel's code. An input that lacks
// a dimension is broadcast along it; a dimension the output lacks is
// reduced (summed or maxed) inside the kernel.
//
// When the output has dimension 0, a range of it may run apart from the
// others (the CPU backend splits [0, space[0]) over its threads): each range
// is a call of its own whose memrefs with dimension 0 first start at the
// range's first row (allocated = aligned = base + begin * the product of
// their own other sizes, sizes[0] = the range's rows), the others whole
// (no extent is ever fixed on dimension 0). A kernel that reduces
// dimension 0 (a bias gradient) splits its output's first dimension s
// instead, where no memref has an extent along s: each memref with s starts
// at the range's first index along it (base + begin * its stride there),
// with the range's size there and the whole memref's strides, so an input
// part is strided, not contiguous; each output element is computed as in
// the whole call. Other kernels run whole. An element-wise kernel (no
// dimension reduced) may write in place: its output IS an input with the
// output's dimensions and extents. Any other input that overlaps the
// output's bytes would read elements the kernel has already written, or
// that another range writes: it is copied first (separateOverlaps).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_KERNELS_GENERATEDCALL_H
#define GPIPE_RUNTIME_KERNELS_GENERATEDCALL_H

#include "gpipe/runtime/bundle/OpTable.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpipe::runtime::device {

/// A generated kernel's entry (its symbol in the loaded code).
using GeneratedEntry = void (*)(void **args);

/// MLIR's descriptor of an f32 memref of any rank r <= kMaxKernelRank (and
/// of an i32 one: StridedMemRefType<int32_t, r> differs only in the
/// pointers' element type):
/// StridedMemRefType<float, r> is {allocated, aligned, offset, sizes[r],
/// strides[r]}, every field 8 bytes and none padded, so this one struct,
/// with the sizes at rest[0, r) and the strides at rest[r, 2r), is laid out
/// as each of them (a kernel of rank r reads no further).
struct MemRefDescriptor {
  float *allocated = nullptr;
  float *aligned = nullptr;
  int64_t offset = 0;
  int64_t rest[2 * kMaxKernelRank] = {};
};
static_assert(sizeof(float *) == 8 &&
                  offsetof(MemRefDescriptor, offset) == 16 &&
                  offsetof(MemRefDescriptor, rest) == 24 &&
                  sizeof(MemRefDescriptor) == 24 + 16 * kMaxKernelRank,
              "MemRefDescriptor is laid out as StridedMemRefType<float, r>");

/// The descriptor of a row-major contiguous memref of `rank` dimensions
/// with `sizes` at `base` (offset 0, allocated = aligned = base).
MemRefDescriptor contiguousMemRef(float *base, const int64_t *sizes,
                                  unsigned rank);

/// One call of a generated kernel over its whole iteration space.
struct GeneratedCall {
  /// The host entry (a backend that runs host code); null on a backend that
  /// loaded the kernels itself (DeviceBackend::loadGeneratedKernels), which
  /// finds its own by `kernel`.
  GeneratedEntry entry = nullptr;
  /// The kernel's index in the bundle's code.kernels (-1: not a bundle's).
  int kernel = -1;
  std::vector<const float *> inputs;
  float *output = nullptr;
  /// The iteration sizes of this call, one per dimension of the kernel
  /// (space[0] already scaled to the micro-batch's rows when batched).
  std::vector<int64_t> space;
  /// GeneratedKernelSpec's: per input the dimensions it has (in its own
  /// order), and the output's (ascending).
  std::vector<std::vector<unsigned>> inputDims;
  std::vector<unsigned> outputDims;
  /// GeneratedKernelSpec's: empty (every memref has the space's sizes), or
  /// per memref (the inputs, then the output) per dimension of it, -1 (the
  /// space's size) or its fixed size.
  std::vector<std::vector<int64_t>> extents;

  /// A 1-D element-wise call: out[i] = kernel(inputs[0][i], ...) for i in
  /// [0, n).
  static GeneratedCall elementWise(GeneratedEntry entry,
                                   std::vector<const float *> inputs,
                                   float *output, int64_t n);

  /// Memrefs by index: input k is memref k, the output memref
  /// inputDims.size() (inputs.size() once the inputs are set).
  size_t outputMemRef() const { return inputDims.size(); }
  /// Memref `memref`'s dimensions (inputDims[memref], or outputDims).
  const std::vector<unsigned> &dimsOf(size_t memref) const {
    return memref < inputDims.size() ? inputDims[memref] : outputDims;
  }
  /// Its fixed size along its dimension i, or -1 (the space's size there).
  int64_t extentOf(size_t memref, size_t i) const {
    return extents.empty() ? -1 : extents[memref][i];
  }
  /// Its own size along its dimension i: its extent, or the space's size.
  int64_t sizeOf(size_t memref, size_t i) const {
    const int64_t extent = extentOf(memref, i);
    return extent >= 0 ? extent : space[dimsOf(memref)[i]];
  }
  /// Its elements: the product of its own sizes.
  int64_t elementsOf(size_t memref) const;
  int64_t outputElements() const { return elementsOf(outputMemRef()); }
  /// Whether rows of dimension 0 may run apart: the output keeps dimension
  /// 0, and every memref that has it has it first (a slice of rows stays
  /// contiguous; a transposed input's would not). Otherwise the call runs
  /// whole.
  bool splitsRows() const {
    if (outputDims.empty() || outputDims[0] != 0)
      return false;
    for (const std::vector<unsigned> &dims : inputDims)
      for (size_t i = 1; i < dims.size(); ++i)
        if (dims[i] == 0)
          return false;
    return true;
  }
  /// Whether a dimension is reduced (the output lacks it).
  bool reduces() const { return outputDims.size() < space.size(); }
  /// The dimension whose ranges may run apart (runGeneratedRange): 0 where
  /// rows split, the output's first dimension where dimension 0 is reduced
  /// and no memref has an extent along it, or -1 (the call runs whole).
  int splitDimension() const;
  /// The iterations of one index of dimension `dim`: the product of the
  /// other sizes (an index's work, for splitting).
  int64_t workPerIndex(unsigned dim) const;
};

/// Runs indices [begin, end) of dimension splitDimension() of `call` on this
/// thread, reading its inputs from `inputs` (call.inputs, or copies of them:
/// separateOverlaps). A call that does not split (splitDimension() < 0)
/// takes only the whole range [0, space[0]).
void runGeneratedRange(const GeneratedCall &call, const float *const *inputs,
                       int64_t begin, int64_t end);

/// The indices of the inputs `call` must read from a copy: those whose
/// elements overlap the output's, except an element-wise kernel's input at
/// the output's very address with the output's dimensions and extents (in
/// place). The host copies them (separateOverlaps); a GPU into device
/// scratch, on the call's stream.
std::vector<size_t> overlappingInputs(const GeneratedCall &call);

/// The inputs `call` may read while it writes its output: call.inputs, but
/// for each whose elements overlap the output's, except an element-wise
/// kernel's input at the output's very address with the output's
/// dimensions and extents (in place), a copy in `copies` (of its bytes: an
/// i32 memref's words are copied as they are). Run when the call
/// runs, not when it is issued: the copies take the inputs' values of that
/// moment.
std::vector<const float *>
separateOverlaps(const GeneratedCall &call,
                 std::vector<std::vector<float>> &copies);

/// The whole call on this thread.
void runGeneratedOnHost(const GeneratedCall &call);

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_KERNELS_GENERATEDCALL_H
