//===- GeneratedCall.cpp - A call of a generated kernel on the host -------===//

#include "gpipe/runtime/kernels/GeneratedCall.h"

#include <cassert>
#include <cstdint>
#include <cstring>
#include <functional>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

MemRefDescriptor gpipe::runtime::device::contiguousMemRef(float *base,
                                                          const int64_t *sizes,
                                                          unsigned rank) {
  assert(rank <= kMaxKernelRank);
  MemRefDescriptor memref;
  memref.allocated = memref.aligned = base;
  int64_t stride = 1;
  for (unsigned i = rank; i-- > 0;) {
    memref.rest[i] = sizes[i];
    memref.rest[rank + i] = stride;
    stride *= sizes[i];
  }
  return memref;
}

GeneratedCall GeneratedCall::elementWise(GeneratedEntry entry,
                                         std::vector<const float *> inputs,
                                         float *output, int64_t n) {
  GeneratedCall call;
  call.entry = entry;
  call.inputDims.assign(inputs.size(), {0});
  call.inputs = std::move(inputs);
  call.output = output;
  call.space = {n};
  call.outputDims = {0};
  return call;
}

int64_t GeneratedCall::elementsOf(size_t memref) const {
  int64_t n = 1;
  for (size_t i = 0; i < dimsOf(memref).size(); ++i)
    n *= sizeOf(memref, i);
  return n;
}

int GeneratedCall::splitDimension() const {
  if (splitsRows())
    return 0;
  if (outputDims.empty() || outputDims[0] == 0)
    return -1; // dimension 0 is kept, but some input has it transposed
  const unsigned dim = outputDims[0];
  for (size_t memref = 0; memref <= inputDims.size(); ++memref)
    for (size_t i = 0; i < dimsOf(memref).size(); ++i)
      if (dimsOf(memref)[i] == dim && extentOf(memref, i) >= 0)
        return -1;
  return int(dim);
}

int64_t GeneratedCall::workPerIndex(unsigned dim) const {
  int64_t n = 1;
  for (size_t d = 0; d < space.size(); ++d)
    if (d != dim)
      n *= space[d];
  return n;
}

void gpipe::runtime::device::runGeneratedRange(const GeneratedCall &call,
                                               const float *const *inputs,
                                               int64_t begin, int64_t end) {
  const int dim = call.splitDimension();
  const bool split = dim >= 0;
  if (split && end <= begin)
    return;
  const size_t count = call.inputs.size();
  [[maybe_unused]] const unsigned rank = unsigned(call.space.size());
  assert(count >= 1 && count <= kMaxKernelInputs);
  assert(rank >= 1 && rank <= kMaxKernelRank);
  assert(call.inputDims.size() == count);
  assert(call.extents.empty() || call.extents.size() == count + 1);
  assert(split || (begin == 0 && end == call.space[0]));
  // Each memref with the split dimension starts at index `begin` of it: the
  // kernel sees its range as a call of its own, so that it never learns
  // where the others start. Its own sizes are the space's but where an
  // extent fixes them (never along the split dimension), its strides the
  // whole memref's: a part along dimension 0 stays contiguous, one along
  // another dimension is strided.
  MemRefDescriptor descriptors[kMaxKernelInputs + 1];
  void *args[kMaxKernelInputs + 1];
  for (size_t k = 0; k <= count; ++k) {
    const std::vector<unsigned> &dims = call.dimsOf(k);
    const unsigned rankOf = unsigned(dims.size());
    float *base = k < count ? const_cast<float *>(inputs[k]) : call.output;
    int64_t sizes[kMaxKernelRank];
    for (size_t i = 0; i < rankOf; ++i)
      sizes[i] = call.sizeOf(k, i);
    MemRefDescriptor &memref = descriptors[k] =
        contiguousMemRef(base, sizes, rankOf);
    for (size_t i = 0; split && i < rankOf; ++i) {
      if (dims[i] != unsigned(dim))
        continue;
      assert(call.extentOf(k, i) < 0);
      memref.allocated = memref.aligned = base + begin * memref.rest[rankOf + i];
      memref.rest[i] = end - begin;
    }
    args[k] = &memref;
  }
  call.entry(args);
}

std::vector<size_t>
gpipe::runtime::device::overlappingInputs(const GeneratedCall &call) {
  std::vector<size_t> overlapping;
  // Compared as addresses of one flat memory (std::less: a total order even
  // across allocations).
  std::less<const float *> before;
  const float *outBegin = call.output,
              *outEnd = call.output + call.outputElements();
  const bool elementWise = !call.reduces();
  const size_t output = call.outputMemRef();
  // Whether input k has the output's dimensions and extents: it is read
  // where the output is written, element for element.
  auto sameShape = [&](size_t k) {
    if (call.inputDims[k] != call.outputDims)
      return false;
    for (size_t i = 0; i < call.outputDims.size(); ++i)
      if (call.extentOf(k, i) != call.extentOf(output, i))
        return false;
    return true;
  };
  for (size_t k = 0; k < call.inputs.size(); ++k) {
    const float *input = call.inputs[k];
    const float *inEnd = input + call.elementsOf(k);
    const bool overlaps = before(input, outEnd) && before(outBegin, inEnd);
    const bool inPlace = elementWise && input == outBegin && sameShape(k);
    if (overlaps && !inPlace)
      overlapping.push_back(k);
  }
  return overlapping;
}

std::vector<const float *> gpipe::runtime::device::separateOverlaps(
    const GeneratedCall &call, std::vector<std::vector<float>> &copies) {
  std::vector<const float *> inputs = call.inputs;
  const std::vector<size_t> overlapping = overlappingInputs(call);
  // Reserved: the copies' data must not move as more are added.
  copies.reserve(copies.size() + overlapping.size());
  for (size_t k : overlapping) {
    // Bytes: an i32 memref's words (a -1 reads as a NaN) are no floats.
    const size_t count = size_t(call.elementsOf(k));
    copies.emplace_back(count);
    if (count > 0)
      std::memcpy(copies.back().data(), inputs[k], count * sizeof(float));
    inputs[k] = copies.back().data();
  }
  return inputs;
}

void gpipe::runtime::device::runGeneratedOnHost(const GeneratedCall &call) {
  std::vector<std::vector<float>> copies;
  std::vector<const float *> inputs = separateOverlaps(call, copies);
  const int dim = call.splitDimension();
  runGeneratedRange(call, inputs.data(), 0, call.space[dim < 0 ? 0 : dim]);
}
