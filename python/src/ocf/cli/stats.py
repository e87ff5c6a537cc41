"""``ocf inspect --stats``: per-tensor statistics, streamed in bounded memory.

For each tensor: the number of elements, the counts of NaN, infinite and
zero elements, and over its finite elements the minimum, maximum, mean and
population standard deviation (ddof=0). The tensor is read in pieces
(ocf.format.pieces); each piece's count, mean and sum of squared
deviations are merged into the running ones with the pairwise update of
Chan, Golub and LeVeque, which keeps the variance accurate where the
textbook sum-of-squares formula cancels catastrophically. Integers and
booleans count as numbers (their minimum and maximum exactly); complex
tensors get counts only (they have no order), a NaN or infinity in either
part counting; byte strings get neither.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from ocf.format.pieces import Piece, pieces, whole
from ocf.format.source import AnySource

# Bytes of float64 values per piece: a piece and its temporaries stay within a few times this.
PIECE_BYTES = 8 << 20


@dataclass
class TensorStats:
    """Running statistics of one tensor (see the module docstring)."""

    elements: int = 0
    nan: int = 0
    inf: int = 0
    zero: int = 0
    finite: int = 0
    mean: float = 0.0
    m2: float = 0.0  # sum of squared deviations from the mean
    minimum: Any = None
    maximum: Any = None
    kind: str = "number"  # or "complex" (counts only), "bytes" (nothing but elements)

    def add(self, values: np.ndarray) -> None:
        self.elements += values.size
        if values.dtype == object:
            self.kind = "bytes"
            return
        if values.dtype.kind == "c":
            self.kind = "complex"
            self.nan += int(np.count_nonzero(np.isnan(values)))
            self.inf += int(np.count_nonzero(np.isinf(values)))
            self.zero += int(np.count_nonzero(values == 0))
            return
        if values.dtype.kind in "biu":
            self._add_finite(values, values.astype(np.float64))
            self.zero += int(np.count_nonzero(values == 0))
            return
        wide = values.astype(np.float64)
        finite = np.isfinite(wide)
        self.nan += int(np.count_nonzero(np.isnan(wide)))
        self.inf += int(np.count_nonzero(np.isinf(wide)))
        self.zero += int(np.count_nonzero(wide == 0))
        self._add_finite(wide[finite], wide[finite])

    def _add_finite(self, exact: np.ndarray, wide: np.ndarray) -> None:
        """Merge a piece's finite values (``wide``: as float64) into the running moments."""
        n = wide.size
        if n == 0:
            return
        low, high = exact.min().item(), exact.max().item()
        self.minimum = low if self.minimum is None else min(self.minimum, low)
        self.maximum = high if self.maximum is None else max(self.maximum, high)
        mean = float(wide.mean())
        m2 = float(np.square(wide - mean).sum())
        total = self.finite + n
        delta = mean - self.mean
        self.mean += delta * n / total
        self.m2 += m2 + delta * delta * self.finite * n / total
        self.finite = total

    def as_dict(self) -> dict[str, Any]:
        """The statistics as ``inspect --json --stats`` reports them (None: not defined)."""
        counted = self.kind != "bytes"
        moments = self.kind == "number" and self.finite > 0
        return {
            "elements": self.elements,
            "nan": self.nan if counted else None,
            "inf": self.inf if counted else None,
            "zero": self.zero if counted else None,
            "finite": self.finite if self.kind == "number" else None,
            "min": self.minimum if moments else None,
            "max": self.maximum if moments else None,
            "mean": self.mean if moments else None,
            "std": math.sqrt(self.m2 / self.finite) if moments else None,
        }


def piece_plan(source: AnySource, key: str, budget: int = PIECE_BYTES) -> Iterator[Piece]:
    """The pieces to read ``key`` in: budgeted as float64 values, strings whole."""
    summary = source.summary(key)
    numpy = summary.dtype.numpy
    if numpy is None:
        return iter([whole(summary.shape)])
    return pieces(summary.shape, max(8, numpy.itemsize), budget)


def stored_bytes(source: AnySource, key: str) -> int:
    """The bytes of a tensor's values (one per element for strings), for progress bars."""
    summary = source.summary(key)
    numpy = summary.dtype.numpy
    return prod(summary.shape) * (1 if numpy is None else numpy.itemsize)


def tensor_stats(source: AnySource, key: str, advance: Callable[[int], object]) -> TensorStats:
    """The statistics of tensor ``key``, read piece by piece; ``advance(bytes)`` after each."""
    stats = TensorStats()
    numpy = source.summary(key).dtype.numpy
    for piece in piece_plan(source, key):
        stats.add(source.read_piece(key, piece))
        advance(piece.size * (1 if numpy is None else numpy.itemsize))
    return stats
