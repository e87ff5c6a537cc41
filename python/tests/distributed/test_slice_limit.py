"""The limit on slices per tensor of format 1.2 [R-SLICE-004], through a real merge.

A tensor of rank 4 or less may be stored in up to 65,536 slices (the most parts a
save may have), one of higher rank in up to 4,096; the merge refuses more with
LIMIT_EXCEEDED and publishes nothing. (The reader's side, and a 1.1 file, are
conformance cases: read.slice.count-4097-rank-4, reject.tensor.slice-count-*.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ocf
from ocf.distributed.parts import PartWriter, merge_parts

SAVE = "0123456789abcdef"


def _save_rows(directory: Path, shape: tuple[int, ...], parts: int) -> np.ndarray:
    """A uint8 tensor of ``shape`` saved by ``parts`` parts, one slice per index along
    dimension 0 (tiles off), the rows dealt out to the parts in turn."""
    full = (np.arange(int(np.prod(shape))) % 251).astype(np.uint8).reshape(shape)
    rest = (0,) * (len(shape) - 1)
    for part in range(parts):
        rows = range(part, shape[0], parts)
        with PartWriter(directory, part=part, parts=parts, save_id=SAVE,
                        tile_bytes=None) as writer:
            writer.write_slices("t", full, (0, *rest), shape,
                                [((row, *rest), (1, *shape[1:])) for row in rows])
    return full


@pytest.mark.parametrize("shape", [(65536,), (4097, 1, 1, 2)])
def test_a_tensor_of_rank_4_or_less_merges_up_to_65536_slices(
        tmp_path: Path, shape: tuple[int, ...]) -> None:
    full = _save_rows(tmp_path, shape, parts=2)
    merge_parts(tmp_path, save_id=SAVE, parts=2)
    with ocf.open(tmp_path) as reader:
        assert reader.format_version == (1, 2)
        assert len(reader["t"].slices) == shape[0]
        assert np.array_equal(reader.read_tensor("t"), full)


@pytest.mark.parametrize(("shape", "limit"), [((65537,), 65536), ((4097, 1, 1, 1, 2), 4096)])
def test_a_merge_past_the_slice_limit_of_the_rank_is_refused(
        tmp_path: Path, shape: tuple[int, ...], limit: int) -> None:
    _save_rows(tmp_path, shape, parts=2)
    with pytest.raises(ocf.LimitExceededError) as caught:
        merge_parts(tmp_path, save_id=SAVE, parts=2)
    assert caught.value.requirement == "R-SLICE-004"
    assert f"{shape[0]} slices, above the limit of {limit}" in str(caught.value)
    assert not (tmp_path / "index.ocf").exists()
