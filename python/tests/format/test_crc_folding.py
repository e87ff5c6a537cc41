"""The CRC-32C of a run of chunks from the chunks' CRCs (ocf.format.crc_folding), against
the CRC of the run's bytes computed directly."""

from __future__ import annotations

import numpy as np
import pytest

from ocf.format.checksum import crc32c
from ocf.format.crc_folding import fold, shift


@pytest.mark.parametrize(("size", "count", "last"), [
    (64, 1, 64),       # one chunk: its own CRC
    (64, 1, 5),        # one short chunk
    (4096, 2, 4096),   # two full chunks
    (4096, 16, 4096),  # a strip of a distributed save
    (128, 7, 100),     # not a power of two, a short last chunk
    (1, 9, 1),         # one-byte chunks
    (64, 1000, 3),     # a long run
])
def test_the_fold_of_the_chunks_crcs_is_the_crc_of_their_bytes(size: int, count: int,
                                                                last: int) -> None:
    rng = np.random.default_rng(size * count + last)
    runs = [[rng.integers(0, 256, size if i < count - 1 else last, np.uint8).tobytes()
             for i in range(count)] for _ in range(3)]
    table = np.array([[crc32c(chunk) for chunk in run] for run in runs], dtype=np.uint32)
    assert fold(table, size, last).tolist() == [crc32c(b"".join(run)) for run in runs]


def test_a_changed_chunk_changes_the_fold_wherever_it_is() -> None:
    rng = np.random.default_rng(7)
    chunks = [rng.integers(0, 256, 256, np.uint8).tobytes() for _ in range(9)]
    right = fold(np.array([[crc32c(c) for c in chunks]], dtype=np.uint32), 256, 256)[0]
    for victim in range(9):
        wrong = [bytearray(c) for c in chunks]
        wrong[victim][17] ^= 1
        table = np.array([[crc32c(bytes(c)) for c in wrong]], dtype=np.uint32)
        assert fold(table, 256, 256)[0] != right
        assert fold(table, 256, 256)[0] == crc32c(b"".join(bytes(c) for c in wrong))


def test_shifting_appends_zero_crc_bytes() -> None:
    # crc(A + B) = shift(crc(A), len(B)) ^ crc(B), for every B of that length.
    a, b = b"123456789", bytes(range(200))
    assert int(shift(np.array([crc32c(a)], np.uint32), len(b))[0]) ^ crc32c(b) == \
        crc32c(a + b)
    assert shift(np.zeros(4, np.uint32), 12345).tolist() == [0, 0, 0, 0]
