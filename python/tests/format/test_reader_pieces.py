"""Reading an uncompressed tensor of a local file in pieces, by the caller and idle
workers: every chunk is checked before the array is returned."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ocf
from ocf.format.errors import IntegrityError
from ocf.format.reading.blocks import HOT_PIECE

CHUNK = 1 << 16  # 64 KiB chunks: 16 in a piece, so the corrupt one is inside a piece


@pytest.fixture(params=[0, 4], ids=["caller alone", "with idle workers"])
def idle_cores(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr("ocf.format.workers._idle_cores", lambda: request.param)
    return int(request.param)


def _saved(tmp_path: Path) -> tuple[Path, np.ndarray]:
    values = np.arange(5 * HOT_PIECE // 4 + 1000, dtype=np.float32)  # 5 pieces and a bit
    path = tmp_path / "w.ocf"
    ocf.save_file({"w": values}, path, chunk_size=CHUNK)
    return path, values


def test_a_tensor_of_many_pieces_reads_back_whole(tmp_path: Path, idle_cores: int) -> None:
    path, values = _saved(tmp_path)
    with ocf.open(path) as reader:
        np.testing.assert_array_equal(reader.read_tensor("w"), values)
        out = np.empty_like(values)
        np.testing.assert_array_equal(reader.read_into("w", out), values)


def test_a_corrupt_chunk_in_a_middle_piece_is_an_integrity_error_naming_it(
        tmp_path: Path, idle_cores: int) -> None:
    path, _ = _saved(tmp_path)
    with ocf.open(path) as reader:
        block = reader["w"].block
        assert block is not None
        assert block.chunk_count > 60
        bad_chunk = 3 * HOT_PIECE // CHUNK + 5  # inside the fourth piece
        at = block.offset + bad_chunk * CHUNK + 100
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    for read in ("read_tensor", "read_into"):
        with ocf.open(path) as reader:
            args = (np.empty(reader["w"].shape, np.float32),) if read == "read_into" else ()
            with pytest.raises(IntegrityError, match=f"chunk {bad_chunk} ") as caught:
                getattr(reader, read)("w", *args)
        assert caught.value.key == "w"
