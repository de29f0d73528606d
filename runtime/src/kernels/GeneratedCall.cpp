//===- GeneratedCall.cpp - A call of a generated kernel on the host -------===//

#include "gpipe/runtime/kernels/GeneratedCall.h"

#include "gpipe/runtime/bundle/OpTable.h"

#include <cassert>
#include <cstdint>
#include <functional>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

void gpipe::runtime::device::runGeneratedRange(const GeneratedCall &call,
                                               const float *const *inputs,
                                               int64_t begin, int64_t end) {
  if (end <= begin)
    return;
  const size_t count = call.inputs.size();
  assert(count >= 1 && count <= kMaxKernelInputs);
  // Each descriptor starts at element `begin`: the kernel sees its range as
  // a memref of its own, so that it never learns where the others start.
  MemRef1D descriptors[kMaxKernelInputs + 1];
  void *args[kMaxKernelInputs + 1];
  for (size_t k = 0; k <= count; ++k) {
    float *base = k < count ? const_cast<float *>(inputs[k]) : call.output;
    descriptors[k].allocated = descriptors[k].aligned = base + begin;
    descriptors[k].size = end - begin;
    args[k] = &descriptors[k];
  }
  call.entry(args);
}

std::vector<const float *> gpipe::runtime::device::separateOverlaps(
    const GeneratedCall &call, std::vector<std::vector<float>> &copies) {
  std::vector<const float *> inputs = call.inputs;
  // Compared as addresses of one flat memory (std::less: a total order even
  // across allocations).
  std::less<const float *> before;
  const float *outBegin = call.output, *outEnd = call.output + call.n;
  for (const float *&input : inputs) {
    const float *inEnd = input + call.n;
    const bool overlaps = before(input, outEnd) && before(outBegin, inEnd);
    if (!overlaps || input == outBegin)
      continue;
    copies.emplace_back(input, inEnd);
    input = copies.back().data();
  }
  return inputs;
}

void gpipe::runtime::device::runGeneratedOnHost(const GeneratedCall &call) {
  std::vector<std::vector<float>> copies;
  std::vector<const float *> inputs = separateOverlaps(call, copies);
  runGeneratedRange(call, inputs.data(), 0, call.n);
}
