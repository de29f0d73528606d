//===- ArenaAllocator.h - Offsets in one device's arena ----------*- C++ -*-===//
//
// Best-fit placement of buffers at offsets of one arena, with coalescing of
// free neighbours. It is deterministic: the same sequence of allocate/free
// calls gives the same offsets. The device executor relies on that to turn
// its placement into a static plan: it issues one step against an unbounded
// allocator to learn the arena size (the high-water mark), allocates the arena
// once, and every real step repeats the same sequence inside it.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_ARENAALLOCATOR_H
#define GPIPE_RUNTIME_DEVICE_ARENAALLOCATOR_H

#include <cstddef>
#include <cstdint>
#include <map>

namespace gpipe::runtime::device {

class ArenaAllocator {
public:
  /// Every offset and size is a multiple of this (cudaMalloc's alignment).
  static constexpr int64_t kAlignment = 256;

  /// capacity < 0: unbounded (the arena grows at its end).
  explicit ArenaAllocator(int64_t capacity = -1) : capacity(capacity) {}

  /// The offset of a new buffer of `bytes` (>= 0; 0 takes kAlignment), or -1
  /// when a bounded arena has no free range that large.
  int64_t allocate(int64_t bytes);
  /// Frees the buffer at `offset` (which `allocate` returned and was not
  /// freed since); returns false otherwise.
  bool free(int64_t offset);

  /// The end of the highest buffer ever placed: the arena size this
  /// sequence needs.
  int64_t highWater() const { return high; }
  int64_t liveBytes() const { return live; }
  size_t liveBuffers() const { return used.size(); }

  static int64_t roundUp(int64_t bytes) {
    int64_t n = bytes > 0 ? bytes : 1;
    return (n + kAlignment - 1) / kAlignment * kAlignment;
  }

private:
  int64_t capacity;
  int64_t end = 0; ///< everything at or above `end` is free
  int64_t high = 0;
  int64_t live = 0;
  std::map<int64_t, int64_t> freeRanges; ///< offset -> size, below `end`
  std::map<int64_t, int64_t> used;       ///< offset -> size
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_DEVICE_ARENAALLOCATOR_H
