"""The read interface of every checkpoint format (:class:`ocf.format.source.Source`)
as a test suite.

:class:`SourceTests` checks that a checkpoint format reads as the one
interface ``ocf.open`` promises (:class:`ocf.format.source.Source`): a
read-only mapping from key to ``key``/``dtype``/``shape``, values equal to
what was written through every read method, NOT_FOUND naming a missing key.
A format's test subclasses it and says how to write a checkpoint of its own
format, with that format's own writer::

    class TestSafetensors(ocf.testing.SourceTests):
        format_name = "safetensors"

        def write(self, tensors, directory):
            path = directory / "model.safetensors"
            safetensors.numpy.save_file(tensors, str(path))
            return path

The project runs it over every format it reads (tests/interop/test_source_contract.py);
a new format of ocf.interop adds one such subclass.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from ocf.format.errors import NotFoundError
from ocf.format.pieces import pieces
from ocf.format.source import AnySource, Source
from ocf.interop.registry import format_of, open_checkpoint
from ocf.numpy import load_file

__all__ = ["SourceTests", "sample_tensors"]


def sample_tensors() -> dict[str, np.ndarray]:
    """What every format can hold: a matrix, a float64 square, an int64 scalar.

    Examples:
        >>> tensors = ocf.testing.sample_tensors()
        >>> sorted(tensors)
        ['dense/kernel', 'emb', 'step']
    """
    return {"emb": np.arange(40, dtype=np.float32).reshape(10, 4),
            "dense/kernel": np.eye(3, dtype=np.float64) * 1.5,
            "step": np.array(42, dtype=np.int64)}


# Basic indices of "emb" (10 x 4) that get_slice must answer as NumPy does.
SLICES = ((slice(2, 9, 3), 1), (Ellipsis, slice(1, 3)), -1, (slice(3, 3),),
          (7, slice(None, None, 2)), ())


class SourceTests(ABC):
    """The contract of a Source, checked on a checkpoint :meth:`write` makes.

    Examples:
        >>> class TestNpz(ocf.testing.SourceTests):  # collected by pytest
        ...     format_name = "npz"
        ...
        ...     def write(self, tensors, directory):
        ...         np.savez(directory / "weights.npz", **tensors)
        ...         return directory / "weights.npz"
    """

    #: The Source's ``format_name`` ("safetensors", "TensorFlow", ...).
    format_name: str

    @abstractmethod
    def write(self, tensors: Mapping[str, np.ndarray], directory: Path) -> Path:
        """Write ``tensors`` as a checkpoint of the format in ``directory``; its path."""

    @pytest.fixture
    def written(self, tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
        tensors = sample_tensors()
        return self.write(tensors, tmp_path), tensors

    @contextmanager
    def opened(self, path: Path) -> Iterator[AnySource]:
        with open_checkpoint(path) as source:
            yield source

    def test_opens_as_a_source_of_its_format(self, written: tuple[Path, dict[str, np.ndarray]]
                                             ) -> None:
        path, _ = written
        with self.opened(path) as source:
            assert isinstance(source, Source)
            assert source.format_name == self.format_name
            assert format_of(path).title == self.format_name

    def test_is_a_mapping_of_every_key_to_its_dtype_and_shape(
            self, written: tuple[Path, dict[str, np.ndarray]]) -> None:
        path, tensors = written
        with self.opened(path) as source:
            assert set(source) == set(tensors)
            assert len(source) == len(tensors)
            for key, value in tensors.items():
                view = source[key]
                assert (view.key, view.dtype.name, view.shape) == (key, value.dtype.name,
                                                                    value.shape)
                assert view.dtype.numpy == value.dtype.newbyteorder("<")
                assert source.summary(key) == view
                assert key in source
            assert "no such key" not in source

    def test_a_missing_key_is_not_found_naming_it(
            self, written: tuple[Path, dict[str, np.ndarray]]) -> None:
        path, _ = written
        with self.opened(path) as source:
            for read in (source.__getitem__, source.read_tensor, source.get_tensor):
                with pytest.raises(NotFoundError) as info:
                    read("no such key")
                assert info.value.key == "no such key"
                assert isinstance(info.value, KeyError)

    def test_every_read_gives_the_values_written(
            self, written: tuple[Path, dict[str, np.ndarray]]) -> None:
        path, tensors = written
        with self.opened(path) as source:
            for key, value in tensors.items():
                read = source.read_tensor(key)
                assert read.flags.writeable
                np.testing.assert_array_equal(read, value, err_msg=key)
                np.testing.assert_array_equal(source.get_tensor(key), value, err_msg=key)
                source.verify_tensor(key)
        for key, value in load_file(path).items():
            np.testing.assert_array_equal(value, tensors[key], err_msg=key)

    def test_get_slice_answers_as_numpy_indexing(
            self, written: tuple[Path, dict[str, np.ndarray]]) -> None:
        path, tensors = written
        with self.opened(path) as source:
            for index in SLICES:
                expected = tensors["emb"][index]
                got = source.get_slice("emb", index)
                assert got.shape == expected.shape, index
                np.testing.assert_array_equal(got, expected, err_msg=str(index))
            np.testing.assert_array_equal(source.get_slice("step", ()), tensors["step"])

    def test_pieces_read_in_order_give_the_tensor(
            self, written: tuple[Path, dict[str, np.ndarray]]) -> None:
        path, tensors = written
        with self.opened(path) as source:
            value = tensors["emb"]
            parts = [source.read_piece("emb", piece).reshape(-1)
                     for piece in pieces(value.shape, value.itemsize, budget=24)]
            assert len(parts) > 1
            np.testing.assert_array_equal(np.concatenate(parts), value.reshape(-1))

    def test_metadata_is_a_mapping_and_identity_is_stable(
            self, written: tuple[Path, dict[str, np.ndarray]]) -> None:
        path, _ = written
        with self.opened(path) as first, self.opened(path) as second:
            assert isinstance(first.metadata, dict)
            assert first.identity == second.identity
