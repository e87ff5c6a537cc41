"""The CRC-32C of a run of chunks, from the CRCs of its chunks ([R-CRC-001]).

A reader that checks thousands of small chunks one call each spends more
time calling than checksumming (the strips of a distributed save are
chunks of a few KiB). CRC-32C is linear over GF(2): for byte strings A and
B, ``crc(A + B) = shift(crc(A), len(B)) ^ crc(B)``, where ``shift(c, n)``
multiplies ``c`` by ``x^(8n)`` modulo the polynomial (zlib's
``crc32_combine``). So one checksum call over a run of chunks, compared
with :func:`fold` of the chunks' stored CRCs, checks the whole run: a run
whose chunks all match always passes, and a run with a changed chunk fails
whenever the change is confined to one chunk (``shift`` is invertible, so a
chunk's nonzero CRC difference stays nonzero); changes in several chunks of
one run pass only if their differences cancel, as likely as a random
collision of a 32-bit CRC. The caller then checks the failing run's chunks
one by one to name the chunk.

Polynomials are held reflected, as the CRC computes them: bit 31 is the
coefficient of ``x^0``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

_POLY = 0x82F63B78  # reflected Castagnoli polynomial
_ONE = 1 << 31  # x^0, reflected


def _multiply(a: int, b: int) -> int:
    """``a * b`` modulo the polynomial."""
    product, bit = 0, _ONE
    while a:
        if a & bit:
            product ^= b
            a ^= bit
        bit >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return product


@lru_cache(maxsize=64)
def _x_to_2_to(k: int) -> int:
    """``x^(2^k)`` modulo the polynomial."""
    if k == 0:
        return _ONE >> 1  # x^1
    half = _x_to_2_to(k - 1)
    return _multiply(half, half)


def _x_to(exponent: int) -> int:
    """``x^exponent`` modulo the polynomial."""
    power, k = _ONE, 0
    while exponent:
        if exponent & 1:
            power = _multiply(_x_to_2_to(k), power)
        exponent >>= 1
        k += 1
    return power


@lru_cache(maxsize=256)
def _images(nbytes: int) -> np.ndarray:
    """``shift(1 << i, nbytes)`` for every bit ``i`` of a CRC: the map is linear, so its
    value on a CRC is the XOR of these for the CRC's bits."""
    factor = _x_to(8 * nbytes)
    return np.array([_multiply(factor, 1 << i) for i in range(32)], dtype=np.uint32)


@lru_cache(maxsize=256)
def _shift_tables(nbytes: int) -> np.ndarray:
    """``shift(·, nbytes)`` as four tables of 256 values, one per byte of the CRC."""
    images = _images(nbytes)
    bits = (np.arange(256)[:, None] >> np.arange(8)) & 1  # [byte value, bit]
    tables = np.empty((4, 256), dtype=np.uint32)
    for byte in range(4):
        tables[byte] = np.bitwise_xor.reduce(
            np.where(bits == 1, images[8 * byte : 8 * byte + 8], np.uint32(0)), axis=1)
    return tables


def shift(crcs: np.ndarray, nbytes: int) -> np.ndarray:
    """For each CRC ``crc(A)`` in ``crcs`` (uint32), ``crc(A + B) ^ crc(B)`` for any ``B``
    of ``nbytes`` bytes."""
    tables = _shift_tables(nbytes)
    shifted: np.ndarray = (tables[0][crcs & 0xFF] ^ tables[1][(crcs >> 8) & 0xFF] ^
                           tables[2][(crcs >> 16) & 0xFF] ^ tables[3][crcs >> 24])
    return shifted


# Runs of at most this many chunks are folded in one step, from the images of bits.
_DIRECT_CHUNKS = 64


@lru_cache(maxsize=64)
def _fold_images(count: int, size: int, last: int) -> np.ndarray:
    """The fold of :func:`fold` as the images of single bits: entry ``32 * i + j`` is
    ``shift(1 << j, bytes after chunk i)``, so a run's CRC is the XOR of the entries
    for the bits set in its chunks' CRCs."""
    after = [(count - 2 - i) * size + last for i in range(count - 1)] + [0]
    return np.concatenate([_images(n) for n in after])


def fold(crcs: np.ndarray, size: int, last: int) -> np.ndarray:
    """The CRC of each row's run of chunks, from ``crcs`` (uint32, one row per run, one
    column per chunk, at least one): every chunk ``size`` bytes but the last, ``last``."""
    count = crcs.shape[1]
    if count <= _DIRECT_CHUNKS:  # one step: the XOR of the images of the bits set
        bits = np.unpackbits(np.ascontiguousarray(crcs, dtype="<u4").view(np.uint8),
                             axis=1, bitorder="little").view(bool)
        chosen = np.where(bits, _fold_images(count, size, last), np.uint32(0))
        return np.asarray(np.bitwise_xor.reduce(chosen, axis=1), dtype=np.uint32)
    head = count - 1  # the chunks of ``size`` bytes, folded pairwise
    width = 1 << max(head - 1, 0).bit_length() if head else 1
    # Leading zeros change nothing: the fold starts from zero, and shift(0) is 0.
    level = np.zeros((crcs.shape[0], width), dtype=np.uint32)
    level[:, width - head :] = crcs[:, :head]
    step = size
    while level.shape[1] > 1:
        level = shift(level[:, 0::2], step) ^ level[:, 1::2]
        step *= 2
    return np.asarray(shift(level[:, 0], last) ^ crcs[:, head], dtype=np.uint32)


__all__ = ["fold", "shift"]
