// [R-META-001]: the map entries of metadata hold only a key and a value.
// Runtimes disagree on an entry with any other field (libprotobuf drops
// the field, upb the whole entry), so the spec refuses one as INVALID; the
// parsed message no longer shows it, so this looks at the index bytes.
#pragma once

#include <string>
#include <unordered_set>

namespace ocf {

struct MapEntryFaults {
  // Some entry of Index.metadata, at any level, holds another field (step 15).
  bool index_metadata = false;
  // The ids of the object graph's nodes whose metadata does (G3d).
  std::unordered_set<size_t> nodes;
};

// Walks the bytes of an index that parsed (so at most 100 levels deep and
// well formed) along the fields that lead to map entries: Index.metadata,
// the graph's nodes' metadata, and list and map values inside them; every
// entry on the wire counts, also one that a later entry replaces.
MapEntryFaults FindMapEntryFaults(const std::string& index_bytes);

}  // namespace ocf
