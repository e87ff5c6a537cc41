"""The codecs this implementation knows, by name and by wire value.

Adding a codec is a module of this package and one entry of :data:`CODECS`;
its wire value is a new value of the proto enum ``ocf.v1.Codec`` that
spec/format.md defines [R-CHUNK-003].
"""

from __future__ import annotations

from ocf.format.codecs.base import Codec
from ocf.format.codecs.none import NONE
from ocf.format.codecs.zstd import ZSTD
from ocf.format.errors import InvalidError

CODECS: tuple[Codec, ...] = (NONE, ZSTD)
BY_VALUE: dict[int, Codec] = {codec.value: codec for codec in CODECS}
_BY_NAME: dict[str, Codec] = {codec.name: codec for codec in CODECS}


def codec_named(name: str | None) -> Codec:
    """The codec a writer's ``compression`` option names; None is no compression."""
    if name is None:
        return NONE
    codec = _BY_NAME.get(name.lower())
    if codec is None:
        raise InvalidError(f"unknown compression {name!r}; choose one of: "
                           + ", ".join(_BY_NAME))
    return codec
