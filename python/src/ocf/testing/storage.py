"""The storage contract (:class:`ocf.format.storage.backend.Backend`) as a test suite.

Every backend the reader, writer, merge and manager reach through
``backend_of`` must behave the same: small files replaced whole, outputs
invisible until published and gone when discarded, names listed and
removed, both checkpoint forms resolved and removed, shard lengths checked.
A backend's test subclasses :class:`StorageTests` and says where a fresh
place is and how to look at it from outside (the store's own listing, never
the backend under test alone)::

    class TestLocalStorage(ocf.testing.StorageTests):
        def make_place(self, request, tmp_path):
            root = tmp_path / "store"
            root.mkdir()
            return StoragePlace(root, None, lambda p: os.path.lexists(os.fspath(p)))

The project runs it over local files and a real S3-compatible server on
loopback (tests/format/storage/test_storage_contract.py).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ocf.format.container import INDEX_FILE_NAME, PREAMBLE, PREAMBLE_SIZE
from ocf.format.errors import InvalidError, LimitExceededError, MalformedError, NotFoundError
from ocf.format.storage.backend import Backend, Layout, backend_of
from ocf.format.storage.location import Location
from ocf.numpy import save_file

__all__ = ["StoragePlace", "StorageTests"]


@dataclass
class StoragePlace:
    """A fresh directory (or prefix) on one backend, and how to look at it from outside.

    Examples:
        >>> import os, tempfile
        >>> from pathlib import Path
        >>> root = Path(tempfile.mkdtemp())
        >>> place = StoragePlace(root, None, lambda p: os.path.lexists(os.fspath(p)))
        >>> place.save("one.ocf")
        >>> place.present(root / "one.ocf")
        True
    """

    root: Location
    options: Mapping[str, Any] | None  # storage_options for a URL's fsspec filesystem
    present: Callable[[Location], bool]  # asks the store itself, not the backend

    @property
    def backend(self) -> Backend:
        return backend_of(self.root)

    def url(self, name: str) -> str:
        return os.fspath(self.root / name)

    def save(self, name: str, layout: Layout = "file") -> None:
        """A small checkpoint named ``name`` under the root, written by ocf.numpy."""
        save_file({"t": np.arange(4.0)}, self.url(name), layout=layout,
                  storage_options=self.options)


class StorageTests(ABC):
    """The contract of a storage backend, checked in the place :meth:`make_place` gives.

    Examples:
        >>> import os
        >>> class TestLocalStorage(StorageTests):
        ...     def make_place(self, request, tmp_path):
        ...         return StoragePlace(tmp_path, None, lambda p: os.path.lexists(os.fspath(p)))
    """

    @abstractmethod
    def make_place(self, request: pytest.FixtureRequest, tmp_path: Path) -> StoragePlace:
        """A fresh, empty place on the backend under test (``request`` gives fixtures)."""

    @pytest.fixture
    def place(self, request: pytest.FixtureRequest, tmp_path: Path) -> StoragePlace:
        return self.make_place(request, tmp_path)

    def test_small_write_replaces_whole_and_reads_back(self, place: StoragePlace) -> None:
        path = place.root / "state.json"
        assert place.backend.read_small(path, 100) is None
        place.backend.write_small(path, b"first")
        place.backend.write_small(path, b"second, longer")
        assert place.backend.read_small(path, 100) == b"second, longer"
        assert place.present(path)

    def test_small_read_refuses_beyond_its_limit(self, place: StoragePlace) -> None:
        path = place.root / "big"
        place.backend.write_small(path, bytes(101))
        assert place.backend.read_small(path, 101) == bytes(101)
        with pytest.raises(LimitExceededError, match="larger than 100 bytes"):
            place.backend.read_small(path, 100)

    def test_output_is_invisible_until_published(self, place: StoragePlace) -> None:
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

    def test_discarded_output_leaves_nothing(self, place: StoragePlace) -> None:
        final = place.root / "gone.ocf"
        output = place.backend.create_output(final, "0123456789abcdef")
        output.write(b"y" * 100)
        output.discard()
        assert not place.present(final)
        assert place.backend.list_names(place.root) == []

    def test_names_list_exists_and_remove(self, place: StoragePlace) -> None:
        for name in ("a", "b"):
            place.backend.write_small(place.root / name, name.encode())
        assert sorted(place.backend.list_names(place.root)) == ["a", "b"]
        assert place.backend.exists(place.root / "a")
        place.backend.remove(place.root / "a")
        place.backend.remove(place.root / "a")  # quietly: already gone
        assert not place.backend.exists(place.root / "a")
        assert not place.present(place.root / "a")
        assert place.backend.list_names(place.root) == ["b"]

    def test_entry_name_is_the_name_directly_inside(self, place: StoragePlace) -> None:
        directory = os.fspath(place.root)
        assert place.backend.entry_name(directory, place.url("ckpt-3")) == "ckpt-3"
        assert place.backend.entry_name(directory, place.url("sub") + "/ckpt-3") is None

    def test_resolve_finds_both_forms_and_refuses_nothing(self, place: StoragePlace) -> None:
        place.save("one.ocf")
        place.save("dir", layout="directory")
        assert os.fspath(place.backend.resolve_checkpoint(place.root / "one.ocf")) == \
            place.url("one.ocf")
        assert os.fspath(place.backend.resolve_checkpoint(place.root / "dir")) == \
            place.url("dir") + "/" + INDEX_FILE_NAME
        with pytest.raises(NotFoundError):
            place.backend.resolve_checkpoint(place.root / "nothing")

    def test_shard_of_another_length_is_malformed_and_a_missing_one_not_found(
            self, place: StoragePlace) -> None:
        path = place.root / "shard"
        place.backend.write_small(path, PREAMBLE + bytes(64))
        place.backend.open_shard(path, PREAMBLE_SIZE + 64).close()
        with pytest.raises(MalformedError, match="R-SHARD-002"):
            place.backend.open_shard(path, PREAMBLE_SIZE)
        with pytest.raises(NotFoundError, match="R-SHARD-002"):
            place.backend.open_shard(place.root / "absent", 128)

    def test_checkpoint_removal_takes_both_forms_and_nothing_beside(
            self, place: StoragePlace) -> None:
        place.save("ckpt-1", layout="directory")
        place.save("ckpt-2")
        place.save("ckpt-10")
        place.backend.remove_checkpoint(place.root / "ckpt-1")
        place.backend.remove_checkpoint(place.root / "ckpt-2")
        assert not place.present(place.root / "ckpt-1" / INDEX_FILE_NAME)
        assert not place.present(place.root / "ckpt-2")
        assert place.present(place.root / "ckpt-10")

    def test_directory_target_refuses_a_file_and_file_target_a_directory(
            self, place: StoragePlace) -> None:
        place.backend.write_small(place.root / "taken", b"x")
        with pytest.raises(InvalidError):
            place.backend.prepare_target(place.root / "taken", "directory")
        place.save("dir", layout="directory")
        with pytest.raises(InvalidError, match="layout='directory'"):
            place.backend.prepare_target(place.root / "dir", "file")
