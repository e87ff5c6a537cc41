// The meaning of a checkpoint as conformance/protocol.md, "The meaning of a
// checkpoint", writes it: tensors by key (dtype, shape, SHA-256 of the
// canonical bytes), typed metadata and the object graph by canonical path.
#pragma once

#include <string>

#include "checkpoint.h"

namespace ocf {

// The members "tensors", "metadata" and "object_graph" (without braces),
// reading every tensor in full in table order.
std::string DescribeMeaning(const Checkpoint& checkpoint);

}  // namespace ocf
