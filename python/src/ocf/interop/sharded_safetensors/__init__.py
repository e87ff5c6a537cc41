"""Hugging Face sharded safetensors models (``model.safetensors.index.json`` and its
shards), read as one checkpoint (:mod:`.source`) and converted to OCF."""

from __future__ import annotations

from typing import Any

from ocf.format.errors import InvalidError
from ocf.format.source import AnySource
from ocf.interop.base import LocalFormat
from ocf.interop.sharded_safetensors.source import (
    INDEX_NAME,
    ShardedSafetensorsSource,
    index_path,
)
from ocf.interop.source_writing import write_source
from ocf.interop.text import format_size, format_table


class ShardedSafetensorsFormat(LocalFormat):
    """A directory holding ``model.safetensors.index.json`` and the shards it names (or
    the index file itself)."""

    name = "sharded-safetensors"
    title = "sharded-safetensors"
    checks = "none: safetensors has no checksums"
    checksums = False
    source = ShardedSafetensorsSource

    def detect(self, path: str) -> bool:
        return index_path(path) is not None

    def to_ocf(self, src: str, dst: str, **options: Any) -> None:
        with ShardedSafetensorsSource(src) as source:
            write_source(source, dst, **options)

    def from_ocf(self, src: str, dst: str) -> None:
        raise InvalidError(f"OCF does not write sharded safetensors models; convert to one "
                           f".safetensors file (whose {INDEX_NAME} is not needed)", path=dst)

    def storage(self, source: AnySource, key: str) -> tuple[int | None, str | None]:
        opened = _opened(source)
        entry = opened.shards[opened.weight_map[key]].entry(key)
        return entry.end - entry.begin, None

    def checked_bytes(self, source: AnySource, values: int) -> int:
        return sum(shard.size for shard in _opened(source).shards.values())

    def overview(self, source: AnySource) -> list[str]:
        opened = _opened(source)
        lines = [f"checkpoint: {opened.path}",
                 f"sharded safetensors model, {len(opened)} tensors in {len(opened.shards)} "
                 f"shards, {format_size(self.checked_bytes(opened, 0))} (no checksums: bit "
                 "flips in tensor data go unnoticed)"]
        lines += [f"metadata {key} = {value!r}" for key, value in opened.metadata.items()]
        rows = [("KEY", "DTYPE", "SHAPE", "SHARD")]
        rows += [(key, view.dtype.name, str(list(view.shape)), opened.weight_map[key])
                 for key, view in opened.items()]
        return [*lines, format_table(rows)]


def _opened(source: AnySource) -> ShardedSafetensorsSource:
    assert isinstance(source, ShardedSafetensorsSource), \
        "a sharded safetensors model opens as ShardedSafetensorsSource"
    return source


SHARDED_SAFETENSORS = ShardedSafetensorsFormat()
