"""Layer 2, the format core: container files, the index, dtypes, codecs,
checksums, chunks, slices, metadata, object-graph messages, limits, the
commit protocol, errors, and the storage the bytes live on (spec/format.md,
spec/commit.md, spec/errors.md). Pure NumPy, protobuf and zstandard: it
imports no framework and nothing of the layers above it.
"""
