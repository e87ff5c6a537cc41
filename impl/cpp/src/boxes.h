// Whether the boxes of one tensor are pairwise disjoint ([R-SLICE-002],
// [R-PART-001]), without comparing every pair: see boxes.cpp.
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

}  // namespace ocf
