"""A tensor read in bounded pieces: runs of consecutive elements that are also boxes.

Comparing, summarizing or re-encoding a tensor larger than memory reads it
piece by piece. A :class:`Piece` is a run of elements consecutive in C order
(``begin`` to ``end`` of the flattened tensor) that is at the same time a
box NumPy's basic indexing selects (``index``), so every format can read it
its own way: a file laid out in C order reads the byte range, an OCF
checkpoint reads the box through the chunks holding it.

:func:`pieces` cuts a shape into pieces of at most ``budget`` bytes (but
never less than one element): it fixes the leading indices and slices the
first axis whose trailing block fits, so a piece is ``tensor[i, j, a:b]``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from math import prod

# What a streaming reader holds of one tensor at a time, unless told otherwise.
DEFAULT_PIECE_BYTES = 16 << 20


@dataclass(frozen=True)
class Piece:
    """Elements ``begin`` to ``end`` (C order) of a tensor, which ``tensor[index]`` selects."""

    begin: int
    end: int
    index: tuple[int | slice, ...]
    shape: tuple[int, ...]  # of tensor[index]

    @property
    def size(self) -> int:
        return self.end - self.begin


def whole(shape: tuple[int, ...]) -> Piece:
    """The piece that is the whole tensor."""
    return Piece(0, prod(shape), (), shape)


def pieces(shape: tuple[int, ...], itemsize: int, budget: int = DEFAULT_PIECE_BYTES
           ) -> Iterator[Piece]:
    """Consecutive pieces covering a tensor of ``shape``, each of at most ``budget``
    bytes when one element of ``itemsize`` bytes fits in it."""
    count = prod(shape)
    if count * itemsize <= budget or count == 0:
        yield whole(shape)
        return
    axis = next(a for a in range(len(shape)) if prod(shape[a + 1:]) * itemsize <= budget)
    inner = prod(shape[axis + 1:])
    step = max(1, budget // (inner * itemsize))
    length = shape[axis]
    for outer, lead in enumerate(itertools.product(*map(range, shape[:axis]))):
        for start in range(0, length, step):
            stop = min(start + step, length)
            begin = (outer * length + start) * inner
            yield Piece(begin, begin + (stop - start) * inner, (*lead, slice(start, stop)),
                        (stop - start, *shape[axis + 1:]))
