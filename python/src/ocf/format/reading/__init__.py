"""The parts of :class:`ocf.format.reader.Reader` below its mapping of keys to tensors:
the block reader (:mod:`.blocks`), which owns the shard files, their reads and checks."""
