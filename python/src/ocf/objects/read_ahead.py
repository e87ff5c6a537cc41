"""Reading every value a restore hands over before it hands over the first.

A restore must leave every live object as it was when any of its values
cannot be read: a chunk whose checksum fails, a truncated file. Reading
values node by node while copying them would find such a fault in the third
tensor after the first two were copied, so each pass of a restore first
reads or checks every value it will hand over, then copies.

How each value is made sure of depends on what reading it again costs:

- stored uncompressed in a local file, it is checked where it is mapped
  (``Source.get_tensor``: the checksums over the page cache, no copy) and
  read again when handed over: no memory, a second checksum pass;
- otherwise (compressed, on an object store, in a TensorFlow bundle) it is
  read once and kept for the copy, while the kept values fit in
  :data:`READ_AHEAD_BYTES`;
- beyond that budget, only its stored chunks' checksums are checked
  (``Source.verify_tensor``: one chunk in memory at a time, nothing
  decoded), and it is read again when handed over.

So a restore holds at most the budget plus the value being handed over.
Not covered: a stored chunk whose checksum holds but which fails to decode
(a hostile file, a faulty writer) in a value checked beyond the budget,
which is still found while copying; and a file changed on disk between the
two reads (writers replace whole files, never rewrite one in place).
"""

from __future__ import annotations

from collections.abc import Iterable
from math import prod

import numpy as np

from ocf.format.source import AnySource

# Bytes of values a restore pass reads ahead and keeps for the copy; values beyond
# are checked first and read a second time.
READ_AHEAD_BYTES = 256 << 20


class ReadAhead:
    """The values of ``keys``, every one read or checked when this is made."""

    def __init__(self, source: AnySource, keys: Iterable[str]) -> None:
        self._source = source
        self._kept: dict[str, np.ndarray] = {}
        room = READ_AHEAD_BYTES
        for key in dict.fromkeys(keys):
            summary = source.summary(key)
            # Byte strings have no size before they are read: they are read.
            numpy = summary.dtype.numpy
            size = None if numpy is None else prod(summary.shape) * numpy.itemsize
            if size is not None and size > room:
                source.verify_tensor(key)  # raises now, before any copy
                continue
            value = source.get_tensor(key)  # raises now, before any copy
            if value.flags.writeable:  # read into memory, not a mapped view: keep it
                self._kept[key] = value
                room -= value.nbytes if size is None else size

    def value(self, key: str) -> np.ndarray:
        """A new, writable array holding ``key`` (each kept value is handed out once)."""
        kept = self._kept.pop(key, None)
        return self._source.read_tensor(key) if kept is None else kept
