"""Chunk codecs of spec/format.md, "Chunks, codecs and checksums": one module per codec,
the byte shuffle, and the registry that finds a codec by its name or wire value."""
