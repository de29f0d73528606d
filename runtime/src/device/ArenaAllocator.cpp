//===- ArenaAllocator.cpp - Offsets in one device's arena -----------------===//

#include "gpipe/runtime/device/ArenaAllocator.h"

#include <algorithm>

using namespace gpipe::runtime::device;

int64_t ArenaAllocator::allocate(int64_t bytes) {
  if (bytes < 0)
    return -1;
  const int64_t size = roundUp(bytes);
  // Best fit among the holes below `end`; the lowest offset breaks ties.
  auto best = freeRanges.end();
  for (auto it = freeRanges.begin(); it != freeRanges.end(); ++it)
    if (it->second >= size &&
        (best == freeRanges.end() || it->second < best->second))
      best = it;
  int64_t offset;
  if (best != freeRanges.end()) {
    offset = best->first;
    int64_t rest = best->second - size;
    freeRanges.erase(best);
    if (rest > 0)
      freeRanges[offset + size] = rest;
  } else {
    // Grow at the end (no hole touches it: `free` merges those into it).
    offset = end;
    if (capacity >= 0 && offset + size > capacity)
      return -1;
    end = offset + size;
  }
  used[offset] = size;
  live += size;
  high = std::max(high, offset + size);
  return offset;
}

bool ArenaAllocator::free(int64_t offset) {
  auto it = used.find(offset);
  if (it == used.end())
    return false;
  int64_t start = offset, size = it->second;
  used.erase(it);
  live -= size;
  auto next = freeRanges.lower_bound(start);
  if (next != freeRanges.end() && next->first == start + size) {
    size += next->second;
    next = freeRanges.erase(next);
  }
  if (next != freeRanges.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      freeRanges.erase(prev);
    }
  }
  if (start + size == end)
    end = start; // the top of the arena is free again
  else
    freeRanges[start] = size;
  return true;
}
