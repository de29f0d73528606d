//===- PlacementVerifier.cpp - The compiler's placement, checked ----------===//
//
// A sweep over time: buffers enter in start order, leave at their end, and
// the live ones are kept ordered by offset, so each newcomer is compared with
// its neighbours in the address space only.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/verify/PlacementVerifier.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <queue>
#include <vector>

using namespace gpipe::runtime;

std::string gpipe::runtime::verifyPlacement(const PlannedDeviceMemory &device,
                                            unsigned deviceIndex) {
  const std::vector<PlacedBuffer> &buffers = device.buffers;
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].start < buffers[b].start;
  });
  auto describe = [&](size_t a, size_t b) {
    const PlacedBuffer &x = buffers[a], &y = buffers[b];
    int64_t from = std::max(x.offset, y.offset);
    int64_t to = std::min(x.offset + x.bytes, y.offset + y.bytes);
    return "device " + std::to_string(deviceIndex) + ": buffers " +
           std::to_string(std::min(a, b)) + " and " +
           std::to_string(std::max(a, b)) + " share bytes [" +
           std::to_string(from) + ", " + std::to_string(to) +
           ") while both live (events [" + std::to_string(x.start) + ", " +
           std::to_string(x.end) + ") and [" + std::to_string(y.start) + ", " +
           std::to_string(y.end) + "))";
  };
  std::multimap<int64_t, size_t> live; // offset -> buffer
  using Ending = std::pair<int64_t, size_t>;
  std::priority_queue<Ending, std::vector<Ending>, std::greater<Ending>> ends;
  std::vector<std::multimap<int64_t, size_t>::iterator> where(buffers.size());
  for (size_t index : order) {
    const PlacedBuffer &buffer = buffers[index];
    if (buffer.bytes == 0 || buffer.start >= buffer.end)
      continue; // touches no byte, or is never live
    while (!ends.empty() && ends.top().first <= buffer.start) {
      live.erase(where[ends.top().second]);
      ends.pop();
    }
    auto next = live.lower_bound(buffer.offset);
    if (next != live.end() && next->first < buffer.offset + buffer.bytes)
      return describe(index, next->second);
    if (next != live.begin()) {
      auto previous = std::prev(next);
      const PlacedBuffer &other = buffers[previous->second];
      if (other.offset + other.bytes > buffer.offset)
        return describe(index, previous->second);
    }
    where[index] = live.emplace(buffer.offset, index);
    ends.push({buffer.end, index});
  }
  return {};
}
