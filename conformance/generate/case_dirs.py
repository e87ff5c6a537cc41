"""Writing case directories: conformance/cases/<group>/<name>/case.json and its files.

A case id is ``<group>.<name>``; its directory is ``cases/<group>/<name>``.
Everything is written deterministically: files in a fixed order, JSON with
sorted object keys (the top level in the fixed order of the case format),
two-space indentation, ASCII only, a final newline.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ocf.v1 import index_pb2

import ocfbytes

LEVELS = ("required", "recommended", "optional")
CATEGORIES = ("MALFORMED", "INVALID", "UNSUPPORTED_VERSION", "UNKNOWN_REQUIRED_FEATURE",
              "INTEGRITY", "LIMIT_EXCEEDED", "NOT_FOUND")
ID = re.compile(r"^(read|reject|write|merge)\.[a-z0-9][a-z0-9._-]*[a-z0-9]$")
TOP_ORDER = ("id", "level", "requirements", "profiles", "description", "op", "input",
             "links", "source", "layout", "checks", "save_id", "parts", "expect")
# The checks of written bytes a write case may ask the harness for (protocol.md, Cases).
CHECKS = ("deterministic-index", "no-gaps", "zstd-content-size")
CODEC_ZSTD = 2


def _index_of(blob: bytes | None) -> index_pb2.Index | None:
    """The index of an index file, or None when the file (damaged on purpose) has none
    that parses."""
    if blob is None:
        return None
    try:
        return ocfbytes.index_of(blob)
    except Exception:  # any damage: the case then needs no profile beyond its base
        return None


def profiles_of(base: str, indexes: list[index_pb2.Index | None]) -> list[str]:
    """The conformance profiles (spec/README.md) a case needs, from what its index
    files use: zstd blocks, tensors in slices, an object graph."""
    found = [index for index in indexes if index is not None]
    uses = {
        "zstd": any(CODEC_ZSTD in index.blocks.codecs for index in found),
        "slices": any(any(index.tensors.slice_counts) for index in found),
        "object-graph": any(index.HasField("object_graph") for index in found),
        "pool": any(any(shard.pool_sha256 for shard in index.shards) for index in found),
    }
    if base == "parts-merge":  # a merger neither decodes nor reads slices: it copies them
        uses["zstd"] = uses["slices"] = False
    return [base, *(name for name, used in uses.items() if used)]


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def dump(value: dict[str, Any], top_order: tuple[str, ...] = ()) -> bytes:
    """Canonical JSON bytes; keys of ``value`` itself in ``top_order`` when given."""
    ordered = _sorted(value)
    if isinstance(ordered.get("expect"), dict):  # the result first, then what it holds
        expect = ordered["expect"]
        ordered["expect"] = {"result": expect["result"],
                             **{k: v for k, v in expect.items() if k != "result"}}
    if top_order:
        ordered = {k: ordered[k] for k in top_order if k in ordered}
        assert set(ordered) == set(value), set(value) - set(ordered)
    return (json.dumps(ordered, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def error(category: str) -> dict[str, str]:
    assert category in CATEGORIES, category
    return {"result": "error", "category": category}


class Suite:
    """Collects cases and writes each into its own directory under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ids: set[str] = set()

    def _directory(self, case_id: str) -> Path:
        assert ID.match(case_id), f"bad case id {case_id!r}"
        assert case_id not in self.ids, f"case id {case_id!r} used twice"
        self.ids.add(case_id)
        group, name = case_id.split(".", 1)
        directory = self.root / group / name
        directory.mkdir(parents=True)
        return directory

    @staticmethod
    def _check_common(level: str, requirements: list[str], description: str) -> None:
        assert level in LEVELS
        assert requirements and all(re.fullmatch(r"R-[A-Z]+-\d{3}", r) for r in requirements)
        assert len(set(requirements)) == len(requirements)
        assert description.endswith(".") and "\n" not in description, description

    def read(self, case_id: str, *, requirements: list[str], description: str,
             files: dict[str, bytes], input: str, expect: dict[str, Any],
             level: str = "required", links: dict[str, str] | None = None) -> None:
        """A read case: ``files`` (relative path -> bytes) are the checkpoint; ``links``
        (relative name -> relative target) are symbolic links the harness makes."""
        self._check_common(level, requirements, description)
        assert expect["result"] in ("ok", "error")
        directory = self._directory(case_id)
        for relative in sorted(files):
            assert not relative.startswith("/") and ".." not in relative.split("/")
            target = directory / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(files[relative])
        index_file = files.get(input, files.get(f"{input}/index.ocf"))
        case = {"id": case_id, "level": level, "requirements": requirements,
                "profiles": profiles_of("core-read", [_index_of(index_file)]),
                "description": description, "op": "read", "input": input, "expect": expect}
        if links:
            assert all(name not in files for name in links)
            case["links"] = links
        (directory / "case.json").write_bytes(dump(case, TOP_ORDER))

    def write(self, case_id: str, *, requirements: list[str], description: str,
              source: dict[str, Any], data: dict[str, bytes], layout: str,
              expect: dict[str, Any], level: str = "required",
              checks: list[str] | None = None) -> None:
        """A write case: ``source`` is source.json, ``data`` its raw tensor files;
        ``checks`` name properties of the written bytes the harness also checks."""
        self._check_common(level, requirements, description)
        assert all(name in CHECKS for name in checks or [])
        assert layout in ("file", "directory")
        directory = self._directory(case_id)
        for relative in sorted(data):
            target = directory / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data[relative])
        (directory / "source.json").write_bytes(dump(source))
        case = {"id": case_id, "level": level, "requirements": requirements,
                "profiles": ["write", *(["object-graph"] if source["object_graph"] else [])],
                "description": description, "op": "write", "source": "source.json",
                "layout": layout, "expect": expect}
        if checks:
            case["checks"] = checks
        (directory / "case.json").write_bytes(dump(case, TOP_ORDER))

    def merge(self, case_id: str, *, requirements: list[str], description: str,
              files: dict[str, bytes], input: str, save_id: str, parts: int,
              expect: dict[str, Any], level: str = "required",
              links: dict[str, str] | None = None) -> None:
        """A merge case: ``files`` hold the directory ``input`` with the parts of
        save ``save_id``; the implementation merges ``parts`` parts in a copy of it,
        where the harness makes ``links`` (names inside ``input``) first."""
        self._check_common(level, requirements, description)
        assert expect["result"] in ("ok", "error")
        assert (re.fullmatch(r"[0-9a-f]{16}", save_id) and 1 <= parts <= 65536) \
            or expect == error("INVALID"), "arguments out of range are refused (M0)"
        directory = self._directory(case_id)
        for relative in sorted(files):
            assert relative.startswith(input + "/") and ".." not in relative.split("/")
            target = directory / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(files[relative])
        (directory / input).mkdir(exist_ok=True)
        parts_files = [data for name, data in files.items() if name.endswith(".ocfpart")]
        case = {"id": case_id, "level": level, "requirements": requirements,
                "profiles": profiles_of("parts-merge", [_index_of(p) for p in parts_files]),
                "description": description, "op": "merge", "input": input,
                "save_id": save_id, "parts": parts, "expect": expect}
        if links:
            assert all(name.startswith(input + "/") and name not in files for name in links)
            case["links"] = links
        (directory / "case.json").write_bytes(dump(case, TOP_ORDER))
