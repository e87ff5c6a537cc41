"""The storage contract (ocf.format.storage.backend): one suite, every backend.

Each test runs over local files and over a real S3-compatible server on
loopback (moto through s3fs), through :func:`backend_of` exactly as the
reader, writer, merge and manager use it. Expected bytes are written by
the test; what exists is checked through the store's own listing (os or
s3fs), never through the backend under test alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from s3server import S3Server

import ocf
from ocf.format.container import INDEX_FILE_NAME, PREAMBLE, PREAMBLE_SIZE
from ocf.format.errors import InvalidError, LimitExceededError, MalformedError, NotFoundError
from ocf.format.storage.backend import Backend, backend_of
from ocf.format.storage.location import Location, locate


@dataclass
class Place:
    """A fresh directory (or prefix) on one backend, and how to look at it from outside."""

    root: Location
    options: dict[str, Any] | None
    present: Callable[[Location], bool]  # asks the store itself, not the backend

    @property
    def backend(self) -> Backend:
        return backend_of(self.root)

    def url(self, name: str) -> str:
        return os.fspath(self.root / name)


@pytest.fixture(params=["local", "s3"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "local":
        root = tmp_path / "store"
        root.mkdir()
        return Place(root, None, lambda p: os.path.lexists(os.fspath(p)))
    server: S3Server = request.getfixturevalue("s3_server")
    bucket = server.new_bucket()
    root = locate(f"s3://{bucket}/store", server.storage_options)

    def present(path: Location) -> bool:
        key = os.fspath(path).removeprefix("s3://")
        server.fs.invalidate_cache()
        return bool(server.fs.exists(key))

    return Place(root, server.storage_options, present)


def test_small_write_replaces_whole_and_reads_back(place: Place) -> None:
    path = place.root / "state.json"
    assert place.backend.read_small(path, 100) is None
    place.backend.write_small(path, b"first")
    place.backend.write_small(path, b"second, longer")
    assert place.backend.read_small(path, 100) == b"second, longer"
    assert place.present(path)


def test_small_read_refuses_beyond_its_limit(place: Place) -> None:
    path = place.root / "big"
    place.backend.write_small(path, bytes(101))
    assert place.backend.read_small(path, 101) == bytes(101)
    with pytest.raises(LimitExceededError, match="larger than 100 bytes"):
        place.backend.read_small(path, 100)


def test_output_is_invisible_until_published(place: Place) -> None:
    final = place.root / "file.ocf"
    output = place.backend.create_output(final, "0123456789abcdef")
    output.write(b"x" * 10)
    output.align()
    assert output.position == 128  # the preamble, 10 bytes, padding to 64
    assert not place.present(final)
    output.close_durably()
    output.publish()
    assert place.present(final)
    opened = place.backend.open_index(final)
    try:
        assert opened.size == 128
        assert opened.pread(PREAMBLE_SIZE, 0) == PREAMBLE
        assert opened.pread(10, PREAMBLE_SIZE) == b"x" * 10
    finally:
        opened.close()


def test_discarded_output_leaves_nothing(place: Place) -> None:
    final = place.root / "gone.ocf"
    output = place.backend.create_output(final, "0123456789abcdef")
    output.write(b"y" * 100)
    output.discard()
    assert not place.present(final)
    assert place.backend.list_names(place.root) == []


def test_names_list_exists_and_remove(place: Place) -> None:
    for name in ("a", "b"):
        place.backend.write_small(place.root / name, name.encode())
    assert sorted(place.backend.list_names(place.root)) == ["a", "b"]
    assert place.backend.exists(place.root / "a")
    place.backend.remove(place.root / "a")
    place.backend.remove(place.root / "a")  # quietly: already gone
    assert not place.backend.exists(place.root / "a")
    assert not place.present(place.root / "a")
    assert place.backend.list_names(place.root) == ["b"]


def test_entry_name_is_the_name_directly_inside(place: Place) -> None:
    directory = os.fspath(place.root)
    assert place.backend.entry_name(directory, place.url("ckpt-3")) == "ckpt-3"
    assert place.backend.entry_name(directory, place.url("sub") + "/ckpt-3") is None


def test_resolve_finds_both_forms_and_refuses_nothing(place: Place) -> None:
    ocf.save_file({"t": np.arange(4.0)}, place.url("one.ocf"), storage_options=place.options)
    ocf.save_file({"t": np.arange(4.0)}, place.url("dir"), layout="directory",
                  storage_options=place.options)
    assert os.fspath(place.backend.resolve_checkpoint(place.root / "one.ocf")) == \
        place.url("one.ocf")
    assert os.fspath(place.backend.resolve_checkpoint(place.root / "dir")) == \
        place.url("dir") + "/" + INDEX_FILE_NAME
    with pytest.raises(NotFoundError):
        place.backend.resolve_checkpoint(place.root / "nothing")


def test_shard_of_another_length_is_malformed_and_a_missing_one_not_found(
    place: Place,
) -> None:
    path = place.root / "shard"
    place.backend.write_small(path, PREAMBLE + bytes(64))
    place.backend.open_shard(path, PREAMBLE_SIZE + 64).close()
    with pytest.raises(MalformedError, match="R-SHARD-002"):
        place.backend.open_shard(path, PREAMBLE_SIZE)
    with pytest.raises(NotFoundError, match="R-SHARD-002"):
        place.backend.open_shard(place.root / "absent", 128)


def test_checkpoint_removal_takes_both_forms_and_nothing_beside(place: Place) -> None:
    ocf.save_file({"t": np.arange(4.0)}, place.url("ckpt-1"), layout="directory",
                  storage_options=place.options)
    ocf.save_file({"t": np.arange(4.0)}, place.url("ckpt-2"), storage_options=place.options)
    ocf.save_file({"t": np.arange(4.0)}, place.url("ckpt-10"), storage_options=place.options)
    place.backend.remove_checkpoint(place.root / "ckpt-1")
    place.backend.remove_checkpoint(place.root / "ckpt-2")
    assert not place.present(place.root / "ckpt-1" / INDEX_FILE_NAME)
    assert not place.present(place.root / "ckpt-2")
    assert place.present(place.root / "ckpt-10")


def test_directory_target_refuses_a_file_and_file_target_a_directory(place: Place) -> None:
    place.backend.write_small(place.root / "taken", b"x")
    with pytest.raises(InvalidError):
        place.backend.prepare_target(place.root / "taken", "directory")
    ocf.save_file({"t": np.arange(4.0)}, place.url("dir"), layout="directory",
                  storage_options=place.options)
    with pytest.raises(InvalidError, match="layout='directory'"):
        place.backend.prepare_target(place.root / "dir", "file")
