#include "boxes.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace ocf {
namespace {

struct Boxes {
  const uint64_t* starts;
  const uint64_t* extents;
  size_t count, rank;
  uint64_t lo(size_t b, size_t d) const { return starts[b * rank + d]; }
  uint64_t hi(size_t b, size_t d) const { return starts[b * rank + d] + extents[b * rank + d]; }
  bool Overlap(size_t a, size_t b) const {
    for (size_t d = 0; d < rank; ++d) {
      if (!(lo(a, d) < hi(b, d) && lo(b, d) < hi(a, d))) return false;
    }
    return true;
  }
};

// Whether every box is one cell of the grid drawn by all boxes' starts and
// ends: along every dimension its end is the next line after its start.
// Two such cells meet only when they are the same cell.
bool CellsOfOneGrid(const Boxes& boxes) {
  std::vector<uint64_t> lines;
  for (size_t d = 0; d < boxes.rank; ++d) {
    lines.clear();
    for (size_t b = 0; b < boxes.count; ++b) {
      lines.push_back(boxes.lo(b, d));
      lines.push_back(boxes.hi(b, d));
    }
    std::sort(lines.begin(), lines.end());
    lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
    for (size_t b = 0; b < boxes.count; ++b) {
      auto next = std::upper_bound(lines.begin(), lines.end(), boxes.lo(b, d));
      if (next == lines.end() || *next != boxes.hi(b, d)) return false;
    }
  }
  return true;
}

// The number of pairs of boxes whose intervals along `d` overlap: all pairs
// less those where one box ends at or before the other starts.
uint64_t PairsOverlappingAlong(const Boxes& boxes, size_t d) {
  std::vector<uint64_t> lo(boxes.count);
  for (size_t b = 0; b < boxes.count; ++b) lo[b] = boxes.lo(b, d);
  std::sort(lo.begin(), lo.end());
  uint64_t apart = 0;
  for (size_t b = 0; b < boxes.count; ++b) {
    apart += lo.end() - std::lower_bound(lo.begin(), lo.end(), boxes.hi(b, d));
  }
  const uint64_t n = boxes.count;
  return n * (n - 1) / 2 - apart;
}

}  // namespace

bool BoxesDisjoint(const uint64_t* starts, const uint64_t* extents, size_t count, size_t rank,
                   size_t* first, size_t* second) {
  const Boxes boxes{starts, extents, count, rank};
  if (count < 2) return true;
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  if (CellsOfOneGrid(boxes)) {  // rank 0 too: every box is the one cell
    // Disjoint unless two boxes start at the same corner: sort by corner.
    auto corner_less = [&](size_t a, size_t b) {
      return std::lexicographical_compare(starts + a * rank, starts + a * rank + rank,
                                          starts + b * rank, starts + b * rank + rank);
    };
    std::sort(order.begin(), order.end(), corner_less);
    for (size_t i = 1; i < count; ++i) {
      if (!corner_less(order[i - 1], order[i])) {
        *first = std::min(order[i - 1], order[i]);
        *second = std::max(order[i - 1], order[i]);
        return false;
      }
    }
    return true;
  }
  // A sweep along the dimension where the fewest pairs overlap: after sorting
  // by start there, a box can only meet the boxes that start before its end.
  size_t axis = 0;
  uint64_t fewest = UINT64_MAX;
  for (size_t d = 0; d < rank; ++d) {
    const uint64_t pairs = PairsOverlappingAlong(boxes, d);
    if (pairs < fewest) fewest = pairs, axis = d;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return boxes.lo(a, axis) < boxes.lo(b, axis); });
  for (size_t i = 0; i < count; ++i) {
    const size_t a = order[i];
    for (size_t j = i + 1; j < count && boxes.lo(order[j], axis) < boxes.hi(a, axis); ++j) {
      if (boxes.Overlap(a, order[j])) {
        *first = std::min(a, order[j]);
        *second = std::max(a, order[j]);
        return false;
      }
    }
  }
  return true;
}

}  // namespace ocf
