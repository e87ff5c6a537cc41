"""What every chunk codec gives: its identity, encoding, bounded decoding [R-CODEC-001].

A codec object is looked up (:mod:`ocf.format.codecs.registry`), never
branched on: the writer, the index tables and the reader ask it what they
need to know, so that a codec is added by one module and one registry line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class Codec(ABC):
    """One value of the ``codecs`` column of the block table."""

    #: The codec's name in the API, the CLI and ``TensorInfo.codec_name``.
    name: str
    #: Its value in the proto enum ``ocf.v1.Codec`` (the wire value).
    value: int
    #: Whether a chunk is stored as its raw bytes: chunks sit at their raw offsets
    #: and may be mapped, the block owns no ``chunk_stored_lengths`` and takes no
    #: byte shuffle [R-CHUNK-003].
    stores_raw: bool
    #: The output bound: the most raw bytes one stored byte of a chunk can decode to,
    #: which bounds every buffer a reader sizes from the index [R-CHUNK-004]
    #: [R-LIMIT-003]; decoding itself stops at the chunk's raw length [R-CODEC-001].
    max_ratio: int

    @abstractmethod
    def encode(self, raw: memoryview, level: int, itemsize: int = 1) -> memoryview | bytes:
        """The stored bytes of the raw chunk ``raw``, byte-shuffled first when ``itemsize``
        is above 1 [R-CODEC-002]; ``level`` is the writer's compression level."""

    @abstractmethod
    def decode_into(self, stored: memoryview | bytes, out: np.ndarray, itemsize: int = 1, *,
                    zeroed: bool = False) -> None:
        """Decode the stored chunk ``stored`` into ``out``, a uint8 array of exactly the
        chunk's raw length, unshuffling when ``itemsize`` is above 1 (``zeroed``: ``out``
        holds zeros, whose bytes need not be written again). MalformedError for
        anything that does not decode to exactly ``len(out)`` bytes; the output is
        bounded by ``len(out)`` before any byte is decoded [R-CODEC-001]."""

    def decode(self, stored: memoryview | bytes, raw_length: int, itemsize: int = 1
               ) -> np.ndarray:
        """:meth:`decode_into` a new uint8 array of ``raw_length`` bytes, returned."""
        # Zero-filled memory costs no more than any new memory (the system's pages are
        # zero), and lets the unshuffle skip streams of zeros.
        out = np.zeros(raw_length, np.uint8)
        self.decode_into(stored, out, itemsize, zeroed=True)
        return out

    def __repr__(self) -> str:
        return f"<codec {self.name}>"
