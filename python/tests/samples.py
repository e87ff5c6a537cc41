"""Sample arrays and comparisons shared by the tests."""

from __future__ import annotations

from collections.abc import Mapping

import ml_dtypes
import numpy as np


def every_dtype() -> dict[str, np.ndarray]:
    """One small tensor per OCF dtype, with values that exercise each encoding."""
    rng = np.random.default_rng(1234)
    floats = rng.standard_normal(24) * 100
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-3])
    return {
        "bool": np.array([[True, False, True], [False, False, True]]),
        "int8": np.array([-128, -1, 0, 1, 127], np.int8),
        "int16": np.array([-32768, 0, 32767], np.int16),
        "int32": rng.integers(-(2**31), 2**31 - 1, size=(2, 3, 4), dtype=np.int32),
        "int64": np.array([-(2**63), 0, 2**63 - 1], np.int64),
        "uint8": np.arange(256, dtype=np.uint8).reshape(16, 16),
        "uint16": np.array([0, 1, 65535], np.uint16),
        "uint32": np.array([0, 2**32 - 1], np.uint32),
        "uint64": np.array([0, 2**64 - 1], np.uint64),
        "float16": np.concatenate([floats, special]).astype(np.float16),
        "bfloat16": np.concatenate([floats, special]).astype(ml_dtypes.bfloat16),
        "float32": np.concatenate([floats, special]).astype(np.float32).reshape(5, 6),
        "float64": np.concatenate([floats, special]),
        "complex64": (floats[:12] + 1j * floats[12:]).astype(np.complex64),
        "complex128": floats[:12] - 1j * floats[12:],
        "float8_e4m3fn": np.clip(floats, -448, 448).astype(ml_dtypes.float8_e4m3fn),
        "float8_e5m2": floats.astype(ml_dtypes.float8_e5m2),
        "bytes": np.array([[b"", b"a"], [b"\x00\xff" * 3, "ünïcode".encode()]], dtype=object),
    }


def assert_bit_exact(actual: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    """Same dtype, shape and bytes (NaN payloads and -0.0 included); ``what`` names the
    array in a failure."""
    assert actual.dtype == expected.dtype, what
    assert actual.shape == expected.shape, what
    if expected.dtype == object:
        assert actual.tolist() == expected.tolist(), what
    else:
        assert actual.tobytes() == expected.tobytes(), what


def assert_all_bit_exact(actual: Mapping[str, np.ndarray],
                         expected: Mapping[str, np.ndarray]) -> None:
    """The same keys, and each array bit-exact (:func:`assert_bit_exact`)."""
    assert sorted(actual) == sorted(expected)
    for key, value in expected.items():
        assert_bit_exact(actual[key], value, key)
