"""Writer.sync_data: the tensor bytes made durable before the commit, which then writes
only the index; tensors written after it go to new shards."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import ocf


def test_tensors_written_before_and_after_sync_data_read_back(tmp_path: Path) -> None:
    first, second = np.arange(1000.0), np.ones((30, 7), np.float32)
    with ocf.Writer(tmp_path / "ckpt", layout="directory") as writer:
        writer.write("first", first)
        writer.sync_data()
        writer.write("second", second)
    shards = sorted(p.name for p in (tmp_path / "ckpt").iterdir() if p.suffix == ".ocfd")
    assert len(shards) == 2  # the second tensor went to a new shard
    with ocf.Reader(tmp_path / "ckpt") as reader:
        assert np.array_equal(reader.read_tensor("first"), first)
        assert np.array_equal(reader.read_tensor("second"), second)


def test_sync_data_fsyncs_the_shards_and_publishes_nothing(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    writer = ocf.Writer(tmp_path / "ckpt", layout="directory")
    writer.write("w", np.arange(100))
    writer.sync_data()
    assert synced  # the shard's bytes are durable before any commit
    assert not (tmp_path / "ckpt" / "index.ocf").exists()
    writer.abort()  # and an abort still drops them
    assert not list((tmp_path / "ckpt").glob("*.ocfd"))


def test_sync_data_of_a_closed_writer_is_refused(tmp_path: Path) -> None:
    writer = ocf.Writer(tmp_path / "c.ocf")
    writer.commit()
    with pytest.raises(ocf.InvalidError, match="closed"):
        writer.sync_data()


def test_sync_data_of_the_file_layout_keeps_one_file(tmp_path: Path) -> None:
    with ocf.Writer(tmp_path / "c.ocf") as writer:
        writer.write("a", np.arange(5))
        writer.sync_data()
        writer.write("b", np.arange(3))
    with ocf.Reader(tmp_path / "c.ocf") as reader:
        assert reader.read_tensor("b").tolist() == [0, 1, 2]
