// Reading what a conformance write case asks for (conformance/protocol.md,
// "source.json"), and the typed metadata values both directions share.
#pragma once

#include <string>
#include <vector>

#include "json.h"
#include "ocf/v1/index.pb.h"

namespace ocf {

// One tensor to write: its key, dtype, shape and canonical bytes.
struct SourceTensor {
  std::string key;
  int dtype = 0;
  std::vector<uint64_t> shape;
  std::string bytes;
};

// What source.json describes: the tensors, and an index holding the
// metadata and (when the source has one) the object graph.
struct Source {
  std::vector<SourceTensor> tensors;
  v1::Index index;
};

// Reads source.json at `path` and the data files it names. Throws
// std::runtime_error for a source that breaks the protocol.
Source ReadSource(const std::string& path);

}  // namespace ocf
