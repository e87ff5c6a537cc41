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

// Whether the corners of boxes that are the cells of one grid are distinct:
// two such cells meet only when they start at the same corner.
bool GridCellsDistinct(const Boxes& boxes, size_t* first, size_t* second) {
  const size_t rank = boxes.rank;
  const uint64_t* starts = boxes.starts;
  std::vector<size_t> order(boxes.count);
  std::iota(order.begin(), order.end(), 0);
  auto corner_less = [&](size_t a, size_t b) {
    return std::lexicographical_compare(starts + a * rank, starts + a * rank + rank,
                                        starts + b * rank, starts + b * rank + rank);
  };
  std::sort(order.begin(), order.end(), corner_less);
  for (size_t i = 1; i < boxes.count; ++i) {
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
bool SweepDisjoint(const Boxes& boxes, size_t* first, size_t* second) {
  const size_t count = boxes.count;
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  size_t axis = 0;
  uint64_t fewest = UINT64_MAX;
  for (size_t d = 0; d < boxes.rank; ++d) {
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

// Whether boxes inside `shape` tile it, by their signed corners: 1 or 0, or
// -1 when they have more than kCornersPerBox corners per box on average.
//
// A box's indicator is the sum over its 2^rank corners c of (-1)^(number of
// upper coordinates of c) times the orthant {x >= c}; the orthants of
// distinct points are linearly independent, so the boxes tile the shape iff
// their signed corners, summed point by point, equal the shape's. On the
// shape an orthant at an upper coordinate equal to the shape's size is
// empty, so such corners are left out (the shape keeps one corner, the
// origin), and a dimension no box splits drops away. A dimension where more
// boxes start at 0 than end at its size is mirrored first.
int CornersCancel(const Boxes& boxes, const uint64_t* shape) {
  std::vector<size_t> split;
  for (size_t d = 0; d < boxes.rank; ++d) {
    for (size_t b = 0; b < boxes.count; ++b) {
      if (boxes.lo(b, d) != 0 || boxes.hi(b, d) != shape[d]) {
        split.push_back(d);
        break;
      }
    }
  }
  if (split.empty()) return boxes.count == 1;  // every box is the whole shape
  const size_t s = split.size();
  // The boxes along the split dimensions, mirrored where that leaves out more.
  std::vector<uint64_t> lo(boxes.count * s), hi(boxes.count * s);
  for (size_t j = 0; j < s; ++j) {
    const size_t d = split[j];
    size_t at_zero = 0, at_end = 0;
    for (size_t b = 0; b < boxes.count; ++b) {
      at_zero += boxes.lo(b, d) == 0;
      at_end += boxes.hi(b, d) == shape[d];
    }
    const bool mirror = at_zero > at_end;
    for (size_t b = 0; b < boxes.count; ++b) {
      lo[b * s + j] = mirror ? shape[d] - boxes.hi(b, d) : boxes.lo(b, d);
      hi[b * s + j] = mirror ? shape[d] - boxes.lo(b, d) : boxes.hi(b, d);
    }
  }
  uint64_t corners = 0;
  std::vector<std::vector<size_t>> kept(boxes.count);  // the dimensions whose end counts
  for (size_t b = 0; b < boxes.count; ++b) {
    for (size_t j = 0; j < s; ++j) {
      if (hi[b * s + j] < shape[split[j]]) kept[b].push_back(j);
    }
    corners += uint64_t(1) << kept[b].size();  // at most 4096 * 2^32 (65536 * 2^4 up to rank 4)
  }
  if (corners > kCornersPerBox * boxes.count) return -1;
  // Every corner's point (s values) and sign; the shape's origin, negated, last.
  std::vector<uint64_t> points;
  std::vector<int64_t> signs;
  points.reserve((corners + 1) * s);
  signs.reserve(corners + 1);
  for (size_t b = 0; b < boxes.count; ++b) {
    for (uint64_t mask = 0; mask < (uint64_t(1) << kept[b].size()); ++mask) {
      const size_t at = points.size();
      points.insert(points.end(), lo.begin() + b * s, lo.begin() + (b + 1) * s);
      int64_t sign = 1;
      for (size_t k = 0; k < kept[b].size(); ++k) {
        if (mask >> k & 1) {
          points[at + kept[b][k]] = hi[b * s + kept[b][k]];
          sign = -sign;
        }
      }
      signs.push_back(sign);
    }
  }
  points.insert(points.end(), s, 0);
  signs.push_back(-1);
  std::vector<size_t> order(signs.size());
  std::iota(order.begin(), order.end(), 0);
  auto point_less = [&](size_t a, size_t b) {
    return std::lexicographical_compare(points.begin() + a * s, points.begin() + (a + 1) * s,
                                        points.begin() + b * s, points.begin() + (b + 1) * s);
  };
  std::sort(order.begin(), order.end(), point_less);
  int64_t sum = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i > 0 && point_less(order[i - 1], order[i])) {
      if (sum != 0) return 0;
      sum = 0;
    }
    sum += signs[order[i]];
  }
  return sum == 0;
}

}  // namespace

bool BoxesTile(const uint64_t* starts, const uint64_t* extents, size_t count, size_t rank,
               const uint64_t* shape) {
  const Boxes boxes{starts, extents, count, rank};
  if (count < 2) return true;
  if (rank == 0) return false;  // two boxes of a scalar are the same element
  size_t first = 0, second = 0;
  if (CellsOfOneGrid(boxes)) return GridCellsDistinct(boxes, &first, &second);
  const int verdict = CornersCancel(boxes, shape);
  return verdict < 0 ? SweepDisjoint(boxes, &first, &second) : verdict == 1;
}

bool BoxesDisjoint(const uint64_t* starts, const uint64_t* extents, size_t count, size_t rank,
                   size_t* first, size_t* second) {
  const Boxes boxes{starts, extents, count, rank};
  if (count < 2) return true;
  // Rank 0 too: every box is the one cell.
  if (CellsOfOneGrid(boxes)) return GridCellsDistinct(boxes, first, second);
  return SweepDisjoint(boxes, first, second);
}

}  // namespace ocf
