//===- BufferOffsets.cpp - Offsets of planned buffers in one arena --------===//
//
// The placement half of the memory planner (MemoryPlanner.h): given every
// buffer's size and lifetime from the replay, an offset for each such that
// no two buffers live at once share a byte, in as small an arena as the
// greedy finds: assignOffsets (exact, by size), assignOffsetsInTimeOrder
// and assignOffsetsByInstruction (for plans too large to place exactly).
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/MemoryPlanner.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <unordered_map>

using namespace gpipe;

namespace {

/// The bytes a placed buffer occupies, [low, high).
using ByteRange = std::pair<int64_t, int64_t>;

/// The union of byte ranges, as sorted ranges that neither overlap nor
/// touch. For a buffer of b > 0 bytes a range [low, high) rules out the
/// offsets in (low - b, high), so a union rules out what its parts do: the
/// placed buffers live together are mostly packed, and their union is a few
/// ranges where the buffers are thousands.
class RangeUnion {
public:
  void insert(ByteRange range) {
    // Most unions stay one range: it is kept inline, as a heap allocation
    // per node would cost more than the rest of a small placement.
    if (ranges.empty()) {
      if (one.first > one.second) {
        one = range;
        return;
      }
      if (range.first <= one.second && one.first <= range.second) {
        one = {std::min(one.first, range.first),
               std::max(one.second, range.second)};
        return;
      }
      ranges.push_back(one);
      one = kNone;
    }
    // The first range that ends at or after range's start, then those it
    // overlaps or touches.
    auto first = std::lower_bound(
        ranges.begin(), ranges.end(), range.first,
        [](const ByteRange &other, int64_t low) { return other.second < low; });
    auto last = first;
    for (; last != ranges.end() && last->first <= range.second; ++last) {
      range.first = std::min(range.first, last->first);
      range.second = std::max(range.second, last->second);
    }
    if (first == last) {
      ranges.insert(first, range);
      return;
    }
    *first = range;
    ranges.erase(first + 1, last);
  }

  /// Appends the ranges, ascending.
  void appendTo(std::vector<ByteRange> &out) const {
    if (one.first <= one.second)
      out.push_back(one);
    else
      out.insert(out.end(), ranges.begin(), ranges.end());
  }

private:
  static constexpr ByteRange kNone{1, 0};
  ByteRange one = kNone;         ///< the union while it is one range
  std::vector<ByteRange> ranges; ///< the union when it is more
};

/// The byte ranges of the placed buffers, indexed by lifetime, over times
/// 0..horizon-1: a segment tree whose nodes hold the union of the buffers
/// covering them (for "live at t"), and one whose nodes hold the union of
/// the buffers starting within them (for "starts within [s, e)"). A query
/// gathers the unions of O(log horizon) nodes, a few ranges each where the
/// buffers live with the one being placed may be thousands.
class LifetimeIndex {
public:
  explicit LifetimeIndex(int64_t horizon)
      : size(horizon), live(2 * horizon), started(2 * horizon) {}

  /// Inserts a buffer live during [start, end) (none if empty) that starts
  /// at `start`.
  void insert(int64_t start, int64_t end, ByteRange bytes) {
    for (int64_t node = start + size; node >= 1; node /= 2)
      started[node].insert(bytes);
    // The canonical nodes of [start, end), bottom-up.
    for (int64_t lo = start + size, hi = end + size; lo < hi;
         lo /= 2, hi /= 2) {
      if (lo & 1)
        live[lo++].insert(bytes);
      if (hi & 1)
        live[--hi].insert(bytes);
    }
  }

  /// Appends the ranges of the buffers live at `at` or starting within
  /// [from, to), each node's union as one ascending run.
  void overlapping(int64_t at, int64_t from, int64_t to,
                   std::vector<ByteRange> &out) const {
    for (int64_t node = at + size; node >= 1; node /= 2)
      live[node].appendTo(out);
    for (int64_t lo = from + size, hi = to + size; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1)
        started[lo++].appendTo(out);
      if (hi & 1)
        started[--hi].appendTo(out);
    }
  }

private:
  int64_t size;
  std::vector<RangeUnion> live, started;
};

/// Sorts `ranges` by merging its ascending runs pairwise: they come from a
/// few unions, each sorted, and std::sort was 2-4x slower on such input.
void sortRuns(std::vector<ByteRange> &ranges, std::vector<ByteRange> &scratch,
              std::vector<size_t> &runs) {
  runs.clear();
  for (size_t i = 0; i < ranges.size(); ++i)
    if (i == 0 || ranges[i] < ranges[i - 1])
      runs.push_back(i);
  runs.push_back(ranges.size());
  scratch.resize(ranges.size());
  while (runs.size() > 2) {
    size_t kept = 0;
    for (size_t r = 0; r + 1 < runs.size(); r += 2) {
      size_t begin = runs[r], middle = runs[r + 1];
      size_t end = r + 2 < runs.size() ? runs[r + 2] : middle;
      std::merge(ranges.begin() + begin, ranges.begin() + middle,
                 ranges.begin() + middle, ranges.begin() + end,
                 scratch.begin() + begin);
      runs[kept++] = begin;
    }
    runs[kept++] = ranges.size();
    runs.resize(kept);
    ranges.swap(scratch);
  }
}

} // namespace

int64_t gpipe::assignOffsets(std::vector<PlannedBuffer> &buffers) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].start < buffers[b].start;
  });
  // Only the order of the starts and ends matters: where the events are
  // sparse (a few blocks may span millions of events), index them by rank so
  // that the index's size follows the buffers.
  int64_t horizon = 1;
  for (const PlannedBuffer &buffer : buffers)
    horizon = std::max({horizon, buffer.start + 1, buffer.end + 1});
  std::vector<int64_t> times;
  if (horizon > 4 * int64_t(buffers.size())) {
    times.reserve(2 * buffers.size());
    for (const PlannedBuffer &buffer : buffers) {
      times.push_back(buffer.start);
      times.push_back(buffer.end);
    }
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
    horizon = int64_t(times.size()) + 1;
  }
  auto rank = [&](int64_t time) {
    if (times.empty())
      return time;
    return int64_t(std::lower_bound(times.begin(), times.end(), time) -
                   times.begin());
  };
  // Two buffers meet when each starts before the other ends; an empty
  // lifetime [t, t) meets what is live across t, never another empty one.
  // The index finds the buffers live at a buffer's first instant or starting
  // after it within its lifetime. With empty lifetimes, times are doubled:
  // [s, e) becomes [2s + 1, 2e) and [t, t) the instant 2t, which the index
  // holds only as a start; then the same query follows the rule.
  const bool anyEmpty =
      std::any_of(buffers.begin(), buffers.end(), [](const PlannedBuffer &b) {
        return b.bytes > 0 && b.start >= b.end;
      });
  const int64_t scale = anyEmpty ? 2 : 1;
  LifetimeIndex placed(scale * horizon + 1);
  std::vector<ByteRange> ranges, scratch;
  std::vector<size_t> runs;
  int64_t arena = 0;
  for (size_t index : order) {
    PlannedBuffer &buffer = buffers[index];
    // Zero-byte buffers come last, and offset 0 always fits them.
    if (buffer.bytes == 0) {
      buffer.offset = 0;
      continue;
    }
    const int64_t start = rank(buffer.start), end = rank(buffer.end);
    const bool empty = start >= end;
    const int64_t first = empty ? scale * start : scale * start + scale - 1;
    const int64_t last = empty ? first : scale * end;
    ranges.clear();
    placed.overlapping(first, first + 1, last, ranges);
    // The lowest offset that fits, scanning the ranges by offset.
    sortRuns(ranges, scratch, runs);
    int64_t offset = 0;
    for (const auto &[low, high] : ranges) {
      if (offset + buffer.bytes <= low)
        break;
      offset = std::max(offset, high);
    }
    buffer.offset = offset;
    arena = std::max(arena, offset + buffer.bytes);
    placed.insert(first, last, {offset, offset + buffer.bytes});
  }
  return arena;
}

namespace {
/// One instruction's own buffers, relative to its first event: what makes
/// two instructions' placements interchangeable.
struct Pattern {
  std::vector<int64_t> key; ///< bytes, start, end per buffer
  bool operator==(const Pattern &other) const { return key == other.key; }
};
struct PatternHash {
  size_t operator()(const Pattern &pattern) const {
    uint64_t hash = 1469598103934665603ull;
    for (int64_t word : pattern.key)
      hash = (hash ^ uint64_t(word)) * 1099511628211ull;
    return size_t(hash);
  }
};
struct PatternPlacement {
  std::vector<int64_t> offsets; ///< per buffer, in the block
  int64_t bytes = 0;            ///< the block
};
} // namespace

int64_t gpipe::assignOffsetsInTimeOrder(std::vector<PlannedBuffer> &buffers) {
  // Events at time t: the frees of buffers ending at t, then the buffers of
  // empty lifetime [t, t) (live only with what spans t: placed and released
  // at once), then the allocations of buffers starting at t.
  enum Phase { Free = 0, Instant = 1, Allocate = 2 };
  std::vector<std::pair<int64_t, int64_t>> events; // (3 t + phase, index)
  events.reserve(2 * buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const PlannedBuffer &b = buffers[i];
    if (b.start >= b.end) {
      events.push_back({3 * b.start + Instant, int64_t(i)});
      continue;
    }
    events.push_back({3 * b.start + Allocate, int64_t(i)});
    events.push_back({3 * b.end + Free, int64_t(i)});
  }
  std::sort(events.begin(), events.end());
  std::map<int64_t, int64_t> holes;            // offset -> bytes
  std::multimap<int64_t, int64_t> holesBySize; // bytes -> offset
  auto addHole = [&](int64_t offset, int64_t bytes) {
    // Merge with the neighbours.
    auto next = holes.lower_bound(offset);
    if (next != holes.end() && offset + bytes == next->first) {
      auto range = holesBySize.equal_range(next->second);
      for (auto it = range.first; it != range.second; ++it)
        if (it->second == next->first) {
          holesBySize.erase(it);
          break;
        }
      bytes += next->second;
      next = holes.erase(next);
    }
    if (next != holes.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        auto range = holesBySize.equal_range(prev->second);
        for (auto it = range.first; it != range.second; ++it)
          if (it->second == prev->first) {
            holesBySize.erase(it);
            break;
          }
        offset = prev->first;
        bytes += prev->second;
        holes.erase(prev);
      }
    }
    holes[offset] = bytes;
    holesBySize.emplace(bytes, offset);
  };
  int64_t top = 0;
  for (const auto &[when, index] : events) {
    PlannedBuffer &buffer = buffers[size_t(index)];
    Phase phase = Phase(when % 3);
    if (phase == Free) {
      if (buffer.bytes > 0)
        addHole(buffer.offset, buffer.bytes);
      continue;
    }
    auto fit = holesBySize.lower_bound(buffer.bytes); // best fit
    if (buffer.bytes == 0) {
      buffer.offset = 0;
    } else if (fit == holesBySize.end()) {
      buffer.offset = top;
      top += buffer.bytes;
    } else {
      int64_t offset = fit->second, bytes = fit->first;
      holesBySize.erase(fit);
      holes.erase(offset);
      buffer.offset = offset;
      if (bytes > buffer.bytes)
        addHole(offset + buffer.bytes, bytes - buffer.bytes);
    }
    if (phase == Instant && buffer.bytes > 0)
      addHole(buffer.offset, buffer.bytes);
  }
  return top;
}

/// The greedy where it is affordable, else the placement in time order.
static int64_t placeBuffers(std::vector<PlannedBuffer> &buffers) {
  return buffers.size() <= kExactPlacementLimit
             ? assignOffsets(buffers)
             : assignOffsetsInTimeOrder(buffers);
}

int64_t gpipe::assignOffsetsByInstruction(DeviceMemoryPlan &plan) {
  std::vector<PlannedBuffer> &buffers = plan.buffers;
  const std::vector<int64_t> &instrStart = plan.instrStart;
  const size_t numInstrs = instrStart.empty() ? 0 : instrStart.size() - 1;
  // Buffers that die in the instruction that allocated them, per instruction.
  std::vector<std::vector<size_t>> own(numInstrs);
  std::vector<size_t> crossing;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const PlannedBuffer &buffer = buffers[i];
    size_t instr = size_t(buffer.instr);
    if (instr < numInstrs && buffer.end <= instrStart[instr + 1] &&
        buffer.start >= instrStart[instr])
      own[instr].push_back(i);
    else
      crossing.push_back(i);
  }

  // Each distinct pattern placed once; one block per instruction.
  std::unordered_map<Pattern, PatternPlacement, PatternHash> placed;
  std::vector<const PatternPlacement *> placementOf(numInstrs, nullptr);
  std::vector<PlannedBuffer> reduced;
  for (size_t instr = 0; instr < numInstrs; ++instr) {
    if (own[instr].empty())
      continue;
    const int64_t base = instrStart[instr];
    Pattern pattern;
    pattern.key.reserve(3 * own[instr].size());
    for (size_t i : own[instr]) {
      pattern.key.push_back(buffers[i].bytes);
      pattern.key.push_back(buffers[i].start - base);
      pattern.key.push_back(buffers[i].end - base);
    }
    auto [it, inserted] = placed.try_emplace(std::move(pattern));
    if (inserted) {
      std::vector<PlannedBuffer> local;
      for (size_t i : own[instr]) {
        PlannedBuffer copy = buffers[i];
        copy.start -= base;
        copy.end -= base;
        local.push_back(copy);
      }
      it->second.bytes = placeBuffers(local);
      for (const PlannedBuffer &buffer : local)
        it->second.offsets.push_back(buffer.offset);
    }
    placementOf[instr] = &it->second;
    PlannedBuffer block;
    block.bytes = it->second.bytes;
    block.start = instrStart[instr];
    block.end = instrStart[instr + 1];
    block.instr = int64_t(instr);
    reduced.push_back(block);
  }
  const size_t numBlocks = reduced.size();
  for (size_t i : crossing)
    reduced.push_back(buffers[i]);
  int64_t arena = placeBuffers(reduced);

  for (size_t k = 0; k < crossing.size(); ++k)
    buffers[crossing[k]].offset = reduced[numBlocks + k].offset;
  for (size_t b = 0; b < numBlocks; ++b) {
    size_t instr = size_t(reduced[b].instr);
    const PatternPlacement &placement = *placementOf[instr];
    for (size_t j = 0; j < own[instr].size(); ++j)
      buffers[own[instr][j]].offset = reduced[b].offset + placement.offsets[j];
  }
  return arena;
}
