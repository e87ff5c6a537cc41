"""Type checks for JSON read from cases, sources and adapters.

Everything the conformance side parses comes from files or other programs,
so each value is checked for the type it must have; a wrong one raises
ValueError with the offending value, shortened.
"""

from __future__ import annotations

import json
from typing import Any

Json = Any


def short(item: Json) -> str:
    """``item`` as JSON text of at most 80 characters."""
    text = json.dumps(item)
    return text if len(text) <= 80 else text[:77] + "..."


def expect_object(item: Json, what: str = "value") -> dict[str, Json]:
    if not isinstance(item, dict):
        raise ValueError(f"{what} is not a JSON object: {short(item)}")
    return item


def expect_list(item: Json, what: str = "value") -> list[Json]:
    if not isinstance(item, list):
        raise ValueError(f"{what} is not a JSON array: {short(item)}")
    return item


def expect_str(item: Json, what: str = "value") -> str:
    if not isinstance(item, str):
        raise ValueError(f"{what} is not a JSON string: {short(item)}")
    return item


def expect_bool(item: Json, what: str = "value") -> bool:
    if not isinstance(item, bool):
        raise ValueError(f"{what} is not true or false: {short(item)}")
    return item


def expect_count(item: Json, what: str = "value") -> int:
    """A non-negative JSON integer (not a bool)."""
    if not isinstance(item, int) or isinstance(item, bool) or item < 0:
        raise ValueError(f"{what} is not a non-negative integer: {short(item)}")
    return item
