"""Lookup tables by dtype code and codec code, for checking an index's columns.

Each table is indexed by the code a file stores (spec/format.md, "Dtypes" and
"Codecs"), so that a whole column of codes is checked or mapped with one array
operation; :func:`defined` first keeps the codes inside a table.
"""

from __future__ import annotations

import numpy as np

from ocf.format import dtypes
from ocf.format.codecs.registry import BY_VALUE

# Item size by dtype code (0 for byte strings, -1 for undefined codes).
ITEMSIZE = np.full(max(dtypes.BY_CODE) + 1, -1, dtype=np.int64)
for _row in dtypes.TABLE:
    ITEMSIZE[_row.code] = _row.itemsize
# Whether each code is defined (dtypes, codecs); by codec: raw or not, its output bound.
DTYPE_DEFINED = ITEMSIZE >= 0
_CODEC_AT = [BY_VALUE.get(value) for value in range(max(BY_VALUE) + 1)]
STORES_RAW = np.array([codec is not None and codec.stores_raw for codec in _CODEC_AT])
MAX_RATIO = np.array([codec.max_ratio if codec else 0 for codec in _CODEC_AT], np.uint64)
CODEC_DEFINED = MAX_RATIO > 0  # every codec's bound is at least 1


# The NumPy dtype of each dtype code: NumPy's own now, ml_dtypes' once a checkpoint holds
# one (resolving them loads ml_dtypes: ocf.format.ml_types).
_NUMPY_BY_CODE = np.empty(len(ITEMSIZE), dtype=object)
for _row in dtypes.TABLE:
    if not isinstance(_row.kind, str):
        _NUMPY_BY_CODE[_row.code] = _row.numpy
_ML_CODES = np.array([r.code for r in dtypes.TABLE if isinstance(r.kind, str)], dtype=np.int64)


def numpy_dtypes(codes: np.ndarray) -> list[np.dtype[np.generic]]:
    """The NumPy dtypes of dtype codes ``codes``, one per code."""
    for code in np.intersect1d(codes, _ML_CODES).tolist():
        if _NUMPY_BY_CODE[code] is None:
            _NUMPY_BY_CODE[code] = dtypes.BY_CODE[code].numpy
    return _NUMPY_BY_CODE[codes].tolist()  # type: ignore[no-any-return]


def defined(codes: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Whether each of ``codes`` (any int64, from the file) is defined by ``table``.

    Not np.isin: it sorts, and took a tenth of opening a checkpoint of 64 tensors.
    """
    inside = (codes >= 0) & (codes < len(table))
    inside[inside] = table[codes[inside]]
    return inside
