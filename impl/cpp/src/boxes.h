// Whether the boxes of one tensor are pairwise disjoint ([R-PART-001]), or
// tile its shape ([R-SLICE-002]), without comparing every pair: see boxes.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ocf {

// `count` boxes of rank `rank`: box b starts at starts[b * rank + d] and
// extends extents[b * rank + d] (>= 1) along dimension d; every box lies
// inside one shape whose element count is below 2^58, so start + extent
// fits in 64 bits. Returns the index of two overlapping boxes through
// `first` and `second` and false, or true when no two boxes share an
// element. Cost: O(rank * count * log count) when the boxes are the cells
// of one grid, else that plus rank times the number of pairs of boxes that
// overlap along the dimension where the fewest pairs do.
bool BoxesDisjoint(const uint64_t* starts, const uint64_t* extents, size_t count, size_t rank,
                   size_t* first, size_t* second);

// Whether `count` boxes (as for BoxesDisjoint), each non-empty and inside
// `shape` (rank values), whose element counts add up to the shape's, tile
// it exactly, that is, no two share an element. Cost: O(rank * count * log
// count) for the cells of one grid; else, when the boxes have at most
// kCornersPerBox corners each on average (every tiling of rank 4 or less,
// and rows-over-columns tilings of any size), O(rank * c * log c) for their
// c corners; else as BoxesDisjoint.
bool BoxesTile(const uint64_t* starts, const uint64_t* extents, size_t count, size_t rank,
               const uint64_t* shape);

inline constexpr uint64_t kCornersPerBox = 16;

}  // namespace ocf
