// Writing a checkpoint: the tensors' blocks (CODEC_NONE, one chunk each),
// the index, and the commit protocol of spec/commit.md for both forms.
#pragma once

#include <string>

#include "source.h"

namespace ocf {

enum class Layout { kFile, kDirectory };

// Writes `source` as a checkpoint at `output` (nothing may exist there) and
// returns once it is committed ([R-COMMIT-001] or [R-COMMIT-002]). The
// index is checked as a reader would check it before anything is written.
void WriteCheckpoint(Source source, const std::string& output, Layout layout);

}  // namespace ocf
