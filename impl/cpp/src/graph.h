// The object graph of an object-based checkpoint: its checks
// (spec/objects.md, "Order of checks", G1 to G5) and canonical paths
// ([R-GRAPH-007]).
#pragma once

#include <string>
#include <vector>

#include "map_entries.h"
#include "ocf/v1/index.pb.h"

namespace ocf {

// Runs G1 to G5 on the graph of `index` (which must have one) after the
// index passed steps 1 to 15; throws FormatError for the first failure.
// `faults` lists the nodes whose metadata entries hold other fields (G3d).
void CheckGraph(const v1::Index& index, const MapEntryFaults& faults = MapEntryFaults());

// The canonical path of every node of a checked graph, by node id.
std::vector<std::string> CanonicalPaths(const v1::ObjectGraph& graph);

}  // namespace ocf
