"""Names and identities of the parts of a multi-writer save (spec/parts.md).

A save of ``count`` parts has one save id, shared by every part and new for
every save [R-PART-002]; part ``n`` publishes its part index as
``part-<save id>-<n, 5 digits>.ocfpart`` in the checkpoint directory
[R-PART-001]. A merge asks for exactly these names, so part files of other
saves (a crashed earlier attempt) are never mixed in.
"""

from __future__ import annotations

import re

from ocf.format.commit import new_write_id
from ocf.format.errors import InvalidError

PART_SUFFIX = ".ocfpart"
PART_PREFIX = "part-"
# A merged checkpoint lists at most 65536 shards; more parts could not all
# hold data, and the 5-digit part number then always suffices.
MAX_PARTS = 65536
"""The most parts one multi-writer save may have.

Examples:
    >>> assert parts <= ocf.distributed.parts.MAX_PARTS
"""
SAVE_ID = re.compile(r"[0-9a-f]{16}")
PART_FILE = re.compile(r"part-[0-9a-f]{16}-[0-9]{5}\.ocfpart")


def new_save_id() -> str:
    """A fresh save id: 16 random lowercase hexadecimal digits [R-PART-002].

    Examples:
        >>> from ocf.distributed.parts import new_save_id
        >>> save_id = new_save_id()  # shared by every part of one save
    """
    return new_write_id()


def check_save(save_id: str, count: int) -> None:
    """Refuse a save id or part count that spec/parts.md does not allow."""
    if not isinstance(save_id, str) or not SAVE_ID.fullmatch(save_id):
        raise InvalidError(f"save id {save_id!r} is not 16 lowercase hexadecimal digits",
                           requirement="R-PART-004")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PARTS:
        raise InvalidError(f"part count {count!r} is not in [1, {MAX_PARTS}]",
                           requirement="R-PART-004")


def part_file_name(save_id: str, number: int) -> str:
    """The name of the part index of part ``number`` of save ``save_id``.

    Examples:
        >>> from ocf.distributed.parts import part_file_name
        >>> name = part_file_name(save_id, 0)  # part 0's index in the checkpoint directory
    """
    return f"{PART_PREFIX}{save_id}-{number:05d}{PART_SUFFIX}"


def is_part_file_name(name: str) -> bool:
    return PART_FILE.fullmatch(name) is not None
