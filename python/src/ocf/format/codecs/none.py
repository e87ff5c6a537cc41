"""CODEC_NONE: a chunk is stored as its raw bytes [R-CHUNK-003]."""

from __future__ import annotations

import numpy as np

from ocf.format.codecs.base import Codec
from ocf.format.errors import MalformedError
from ocf.v1 import tensor_pb2


class NoCodec(Codec):
    name = "none"
    value = tensor_pb2.CODEC_NONE
    stores_raw = True
    max_ratio = 1

    def encode(self, raw: memoryview, level: int, itemsize: int = 1) -> memoryview | bytes:
        return raw

    def decode_into(self, stored: memoryview | bytes, out: np.ndarray, itemsize: int = 1, *,
                    zeroed: bool = False) -> None:
        if len(stored) != len(out):
            raise MalformedError(f"an uncompressed chunk of {len(stored)} bytes, expected "
                                 f"{len(out)}", requirement="R-CHUNK-003")
        out[:] = np.frombuffer(stored, np.uint8)


NONE = NoCodec()
