"""The API every framework adapter shares (``ocf.numpy``, ``ocf.torch``, ``ocf.jax``,
``ocf.keras``) as a test suite.

An adapter has ``save_file(tensors, path)``, ``load_file(path)``,
``save(state, path)`` and ``restore(target, path)`` with the arguments of
``ocf.numpy`` in the same order, and behaves the same way with its
framework's tensors: every dtype the framework holds round-trips bit for
bit, a dtype it cannot hold is refused rather than changed, a call with the
path first is a TypeError that says the order, a strict restore refuses a
missing or unexpected value or a wrong shape with the project's errors and
changes nothing when it fails, and foreign formats (safetensors, npz) read
through it in a process that imported nothing else. What a save wrote is
checked through ``ocf.open`` (the reference reader), never through the
adapter under test alone.

A framework's test subclasses :class:`AdapterTests` and says how to make its
tensors and how to look at them as NumPy arrays::

    class TestTorchAdapter(ocf.testing.AdapterTests):
        module = ocf.torch
        float16 = torch.float16

        def dtypes(self):
            return ALL_DTYPES - {"bytes"}

        def tensor(self, array):
            return torch.from_numpy(array.copy())

        def to_numpy(self, tensor):
            return tensor.numpy()

        def is_tensor(self, value):
            return isinstance(value, torch.Tensor)

The project runs it over every adapter (tests/adapters/*/test_adapter_contract_*.py).
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ocf.format.async_save import SaveHandle
from ocf.format.dtypes import BY_NAME, TABLE
from ocf.format.errors import IntegrityError, InvalidError, NotFoundError
from ocf.format.reader import Reader
from ocf.format.source import AnySource
from ocf.interop.registry import open_checkpoint
from ocf.numpy import save_file as numpy_save_file
from ocf.objects.restore_status import RestoreMismatchError

__all__ = ["ALL_DTYPES", "AdapterTests", "dtype_samples"]

ALL_DTYPES: frozenset[str] = frozenset(row.name for row in TABLE)
"""The name of every OCF dtype (spec/format.md, "Data types"): what
:meth:`AdapterTests.dtypes` returns for a framework holding them all.

Examples:
    >>> "bfloat16" in ocf.testing.ALL_DTYPES
    True
"""

# The parameters every adapter's function takes, in this order (name, kind, default);
# ``device`` (where the framework has devices) and ``translation`` (another
# framework's names, ocf.jax) are the documented extras some adapters add.
_P = inspect.Parameter
SIGNATURES: dict[str, list[tuple[str, Any, Any]]] = {
    "save_file": [("tensors", _P.POSITIONAL_OR_KEYWORD, _P.empty),
                  ("path", _P.POSITIONAL_OR_KEYWORD, _P.empty),
                  ("metadata", _P.POSITIONAL_OR_KEYWORD, None),
                  ("blocking", _P.KEYWORD_ONLY, True), ("options", _P.VAR_KEYWORD, _P.empty)],
    "load_file": [("path", _P.POSITIONAL_OR_KEYWORD, _P.empty),
                  ("keys", _P.POSITIONAL_OR_KEYWORD, None), ("dtype", _P.KEYWORD_ONLY, None),
                  ("verify", _P.KEYWORD_ONLY, True),
                  ("storage_options", _P.KEYWORD_ONLY, None)],
    "save": [("state", _P.POSITIONAL_OR_KEYWORD, _P.empty),
             ("path", _P.POSITIONAL_OR_KEYWORD, _P.empty),
             ("metadata", _P.POSITIONAL_OR_KEYWORD, None), ("blocking", _P.KEYWORD_ONLY, True),
             ("options", _P.VAR_KEYWORD, _P.empty)],
    "restore": [("target", _P.POSITIONAL_OR_KEYWORD, _P.empty),
                ("path", _P.POSITIONAL_OR_KEYWORD, _P.empty),
                ("start", _P.KEYWORD_ONLY, ""), ("partial", _P.KEYWORD_ONLY, False),
                ("cast", _P.KEYWORD_ONLY, False), ("name_map", _P.KEYWORD_ONLY, None),
                ("rename", _P.KEYWORD_ONLY, None), ("verify", _P.KEYWORD_ONLY, True),
                ("storage_options", _P.KEYWORD_ONLY, None)],
}
ADAPTER_ONLY = frozenset({"device", "translation"})
ORDER = "the object comes first and the path second"


def dtype_samples(names: Collection[str] = ALL_DTYPES, shape: tuple[int, ...] = (3, 5)
                  ) -> dict[str, np.ndarray]:
    """One array per OCF dtype in ``names``, keyed by the dtype's name: random bits
    (NaN payloads, infinities and subnormals among them), 0/1 for bool, byte strings
    with a NUL for bytes.

    Examples:
        >>> samples = ocf.testing.dtype_samples({"bfloat16", "int8"})
        >>> sorted((key, str(array.dtype)) for key, array in samples.items())
        [('bfloat16', 'bfloat16'), ('int8', 'int8')]
    """
    rng = np.random.default_rng(20261206)
    samples = {}
    for name in sorted(names):
        row = BY_NAME[name]
        count = int(np.prod(shape))
        if row.numpy is None:
            values = [bytes(rng.integers(0, 256, i % 4, dtype=np.uint8)) + b"\x00"
                      for i in range(count)]
            samples[name] = np.array(values, dtype=object).reshape(shape)
        elif name == "bool":
            samples[name] = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            bits = rng.integers(0, 256, count * row.itemsize, dtype=np.uint8)
            samples[name] = bits.view(row.numpy).reshape(shape)
    return samples


def same_bits(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    """Same dtype, shape and bytes (byte strings: the same values)."""
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), what
    if expected.dtype == object:
        assert actual.tolist() == expected.tolist(), what
    else:
        assert np.ascontiguousarray(actual).tobytes() == expected.tobytes(), what


def stored(path: Path) -> dict[str, np.ndarray]:
    """What the checkpoint at ``path`` holds, through the reference reader."""
    source: AnySource
    with open_checkpoint(path) as source:
        return {key: source.read_tensor(key) for key in source}


class AdapterTests(ABC):
    """The contract of a framework adapter, checked with the tensors :meth:`tensor` makes.

    Examples:
        >>> class TestNumpyAdapter(ocf.testing.AdapterTests):  # collected by pytest
        ...     module = ocf.numpy
        ...     float16 = np.float16
        ...
        ...     def dtypes(self):
        ...         return ocf.testing.ALL_DTYPES
        ...
        ...     def tensor(self, array):
        ...         return array.copy()
        ...
        ...     def to_numpy(self, tensor):
        ...         return tensor
        ...
        ...     def is_tensor(self, value):
        ...         return isinstance(value, np.ndarray)
    """

    #: The adapter under test (``ocf.torch``, ...).
    module: ModuleType
    #: The framework's float16 dtype, as ``load_file(dtype=...)`` takes it.
    float16: Any

    @abstractmethod
    def dtypes(self) -> Collection[str]:
        """The OCF dtypes whose values the framework's tensors hold unchanged."""

    @abstractmethod
    def tensor(self, array: np.ndarray) -> Any:
        """A tensor of the framework with ``array``'s dtype, shape and bytes."""

    @abstractmethod
    def to_numpy(self, tensor: Any) -> np.ndarray:
        """The values of a tensor (or state leaf) of the framework as a NumPy array."""

    @abstractmethod
    def is_tensor(self, value: object) -> bool:
        """Whether ``value`` is a tensor of the framework (what ``load_file`` gives)."""

    def leaf(self, array: np.ndarray) -> Any:
        """What a state given to ``save`` and ``restore`` holds for ``array``: by
        default :meth:`tensor` (keras: a ``keras.Variable``)."""
        return self.tensor(array)

    def restored(self, result: Any, target: Any) -> Any:
        """The state a ``restore(target, path)`` call produced: the target, filled in
        place, by default; frameworks of immutable arrays return a new tree."""
        return target

    def process_environment(self) -> Mapping[str, str]:
        """Variables a fresh process of the framework needs (keras: its backend)."""
        return {}

    # -- helpers ----------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.module.__name__

    def state_of(self, arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """A nested state of :meth:`leaf` values: ``{"layer": {key: ...}}``."""
        return {"layer": {key: self.leaf(array) for key, array in arrays.items()}}

    def arrays_of(self, state: Any) -> dict[str, np.ndarray]:
        return {key: self.to_numpy(value) for key, value in state["layer"].items()}

    def framework_tensors(self, arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
        return {key: self.tensor(array) for key, array in arrays.items()}

    @staticmethod
    def small() -> dict[str, np.ndarray]:
        """Values every framework holds (32 bits at most)."""
        return {"w": np.arange(12, dtype=np.float32).reshape(3, 4),
                "b": np.array([1, -2, 3], dtype=np.int32)}

    def zeros(self) -> dict[str, np.ndarray]:
        """:meth:`small`'s keys, dtypes and shapes, all zero: a target to restore into."""
        return {key: np.zeros_like(array) for key, array in self.small().items()}

    def loaded(self, path: str | os.PathLike[str], *args: Any, **kwargs: Any
               ) -> dict[str, np.ndarray]:
        """``load_file``'s result, each value checked to be a framework tensor."""
        result = self.module.load_file(path, *args, **kwargs)
        for key, value in result.items():
            assert self.is_tensor(value), (key, type(value))
        return {key: self.to_numpy(value) for key, value in result.items()}

    def assert_same(self, actual: Mapping[str, np.ndarray],
                    expected: Mapping[str, np.ndarray]) -> None:
        assert sorted(actual) == sorted(expected)
        for key, array in expected.items():
            same_bits(actual[key], array, f"{self.name}: {key}")

    # -- the signatures ------------------------------------------------------------------

    @pytest.mark.parametrize("function", sorted(SIGNATURES))
    def test_takes_the_arguments_of_every_adapter_in_the_same_order(self, function: str
                                                                     ) -> None:
        parameters = inspect.signature(getattr(self.module, function)).parameters.values()
        taken = [(p.name, p.kind, p.default) for p in parameters if p.name not in ADAPTER_ONLY]
        assert taken == SIGNATURES[function]

    # -- save_file / load_file -----------------------------------------------------------

    @pytest.mark.parametrize("compression", [None, "zstd"])
    def test_every_dtype_it_holds_round_trips_bit_exactly_through_save_file(
            self, tmp_path: Path, compression: str | None) -> None:
        arrays = dtype_samples(self.dtypes())
        path = tmp_path / "all.ocf"
        assert self.module.save_file(self.framework_tensors(arrays), path,
                                     compression=compression) is None
        self.assert_same(stored(path), arrays)
        self.assert_same(self.loaded(path), arrays)

    def test_scalars_empty_and_many_dimensional_tensors_keep_their_shapes(
            self, tmp_path: Path) -> None:
        arrays = {"scalar": np.array(2.5, np.float32), "empty": np.zeros((0, 3), np.int32),
                  "cube": np.arange(24, dtype=np.float32).reshape(2, 3, 4)}
        self.module.save_file(self.framework_tensors(arrays), tmp_path / "shapes.ocf")
        self.assert_same(stored(tmp_path / "shapes.ocf"), arrays)
        self.assert_same(self.loaded(tmp_path / "shapes.ocf"), arrays)

    def test_a_stored_dtype_it_cannot_hold_is_refused_by_load_file_naming_the_key(
            self, tmp_path: Path) -> None:
        missing = ALL_DTYPES - set(self.dtypes())
        if not missing:
            pytest.skip(f"{self.name} holds every OCF dtype")
        for name, array in dtype_samples(missing).items():
            path = tmp_path / f"{name}.ocf"
            numpy_save_file({"held": np.zeros(2, np.float32), name: array}, path)
            with pytest.raises(InvalidError, match=rf"'{name}'.*{name}"):
                self.module.load_file(path)
            assert list(self.module.load_file(path, ["held"])) == ["held"]

    def test_metadata_is_the_third_positional_argument_of_save_file(self, tmp_path: Path
                                                                    ) -> None:
        path = tmp_path / "flat.ocf"
        self.module.save_file(self.framework_tensors(self.small()), path,
                              {"step": 7, "name": "run"})
        with open_checkpoint(path) as source:
            assert source.metadata == {"step": 7, "name": "run"}

    def test_load_file_reads_only_the_keys_asked_for_and_names_a_missing_one(
            self, tmp_path: Path) -> None:
        path = tmp_path / "flat.ocf"
        self.module.save_file(self.framework_tensors(self.small()), path)
        assert list(self.loaded(path, ["b"])) == ["b"]
        with pytest.raises(NotFoundError, match="'missing'") as raised:
            self.module.load_file(path, ["b", "missing"])
        assert raised.value.key == "missing"

    def test_directory_layout_and_compression_are_options_of_save_file(self, tmp_path: Path
                                                                       ) -> None:
        path = tmp_path / "ckpt"
        self.module.save_file(self.framework_tensors(self.small()), path, layout="directory",
                              compression="zstd")
        assert (path / "index.ocf").is_file()
        with Reader(path) as reader:
            assert {reader[key].codec_name for key in reader} == {"zstd"}
        self.assert_same(self.loaded(path), self.small())

    def test_save_file_without_blocking_returns_a_handle_and_commits_in_the_background(
            self, tmp_path: Path) -> None:
        path = tmp_path / "flat.ocf"
        handle = self.module.save_file(self.framework_tensors(self.small()), path,
                                       blocking=False)
        assert isinstance(handle, SaveHandle)
        assert handle.wait() == str(path)
        self.assert_same(stored(path), self.small())

    def test_an_unknown_option_is_a_type_error_at_the_call_even_without_blocking(
            self, tmp_path: Path) -> None:
        with pytest.raises(TypeError, match="chunk_sise"):
            self.module.save_file(self.framework_tensors(self.small()), tmp_path / "x.ocf",
                                  blocking=False, chunk_sise=4096)
        assert list(tmp_path.iterdir()) == []

    def test_load_file_keeps_stored_dtypes_unless_dtype_casts_them(self, tmp_path: Path
                                                                   ) -> None:
        path = tmp_path / "flat.ocf"
        self.module.save_file({"w": self.tensor(self.small()["w"])}, path)
        assert self.loaded(path)["w"].dtype == np.float32
        cast = self.loaded(path, dtype=self.float16)["w"]
        same_bits(cast, self.small()["w"].astype(np.float16), "w")

    def test_load_file_verifies_checksums_unless_told_not_to(self, tmp_path: Path) -> None:
        path = tmp_path / "flat.ocf"
        self.module.save_file({"w": self.tensor(self.small()["w"])}, path)
        flip_a_stored_byte(path, "w")
        with pytest.raises(IntegrityError, match=r"flat\.ocf: tensor 'w'"):
            self.module.load_file(path)
        assert self.loaded(path, verify=False)["w"].shape == (3, 4)

    # -- the argument order ---------------------------------------------------------------

    def test_a_call_with_the_path_first_says_the_order_and_writes_nothing(
            self, tmp_path: Path) -> None:
        path = tmp_path / "ckpt.ocf"
        calls = {"save_file": self.framework_tensors(self.small()),
                 "save": self.state_of(self.small()), "restore": self.state_of(self.small())}
        for function, first in calls.items():
            with pytest.raises(TypeError) as raised:
                getattr(self.module, function)(path, first)
            message = str(raised.value)
            assert ORDER in message, function
            assert "got a path as the first argument ('" in message, function
            assert str(path) in message, function
        assert list(tmp_path.iterdir()) == []

    def test_an_object_where_the_path_goes_is_a_type_error_that_says_the_order(self) -> None:
        for function, first in (("save_file", self.framework_tensors(self.small())),
                                ("save", self.state_of(self.small()))):
            with pytest.raises(TypeError, match=f"{ORDER}; got a dict as the second argument"):
                getattr(self.module, function)(first, {"not": "a path"})

    # -- save / restore -------------------------------------------------------------------

    def test_every_dtype_it_holds_round_trips_bit_exactly_through_save_and_restore(
            self, tmp_path: Path) -> None:
        arrays = dtype_samples(self.dtypes())
        path = tmp_path / "state.ocf"
        assert self.module.save(self.state_of(arrays), path, {"step": 3}) == str(path)
        with open_checkpoint(path) as source:
            assert source.metadata == {"step": 3}
        self.assert_same({key.removeprefix("layer/").removesuffix("/.value"): value
                          for key, value in stored(path).items()}, arrays)
        target = self.state_of({key: np.zeros_like(array) for key, array in arrays.items()})
        result = self.module.restore(target, path)
        self.assert_same(self.arrays_of(self.restored(result, target)), arrays)

    def test_save_takes_the_options_of_save_file(self, tmp_path: Path) -> None:
        path = tmp_path / "state"
        handle = self.module.save(self.state_of(self.small()), path, layout="directory",
                                  compression="zstd", blocking=False)
        assert isinstance(handle, SaveHandle)
        handle.wait()
        with Reader(path) as reader:
            assert reader.object_graph is not None
            assert {reader[key].codec_name for key in reader} == {"zstd"}

    def test_a_strict_restore_refuses_a_value_the_checkpoint_lacks_unless_partial(
            self, tmp_path: Path) -> None:
        path = self.module.save(self.state_of(self.small()), tmp_path / "state.ocf")
        target = self.state_of({**self.zeros(), "extra": np.ones(2, np.float32)})
        with pytest.raises(RestoreMismatchError, match=r"state\.ocf.*'layer/extra'"):
            self.module.restore(target, path)
        self.assert_same(self.arrays_of(target), {**self.zeros(),
                                                  "extra": np.ones(2, np.float32)})
        result = self.module.restore(target, path, partial=True)
        self.assert_same(self.arrays_of(self.restored(result, target)),
                         {**self.small(), "extra": np.ones(2, np.float32)})

    def test_a_strict_restore_refuses_a_value_the_target_lacks_unless_partial(
            self, tmp_path: Path) -> None:
        path = self.module.save(self.state_of(self.small()), tmp_path / "state.ocf")
        target = self.state_of({"w": self.zeros()["w"]})
        with pytest.raises(RestoreMismatchError, match=r"state\.ocf.*'layer/b'"):
            self.module.restore(target, path)
        result = self.module.restore(target, path, partial=True)
        self.assert_same(self.arrays_of(self.restored(result, target)),
                         {"w": self.small()["w"]})

    def test_a_wrong_shape_is_refused_naming_the_key_and_both_shapes(self, tmp_path: Path
                                                                     ) -> None:
        path = self.module.save(self.state_of(self.small()), tmp_path / "state.ocf")
        target = self.state_of({"w": np.zeros((4, 3), np.float32), "b": self.zeros()["b"]})
        for partial in (False, True):
            with pytest.raises(InvalidError, match=r"state\.ocf.*'layer/w") as raised:
                self.module.restore(target, path, partial=partial)
            assert "[3, 4]" in str(raised.value)
            assert "[4, 3]" in str(raised.value)
        self.assert_same(self.arrays_of(target), {"w": np.zeros((4, 3), np.float32),
                                                  "b": self.zeros()["b"]})

    def test_another_dtype_is_refused_unless_cast(self, tmp_path: Path) -> None:
        path = self.module.save(self.state_of(self.small()), tmp_path / "state.ocf")
        halves = {"w": np.zeros((3, 4), np.float16), "b": self.zeros()["b"]}
        target = self.state_of(halves)
        with pytest.raises(InvalidError, match=r"state\.ocf.*'layer/w") as raised:
            self.module.restore(target, path)
        for named in ("float32", "float16", "cast=True"):  # both dtypes, and the remedy
            assert named in str(raised.value), raised.value
        self.assert_same(self.arrays_of(target), halves)
        result = self.module.restore(target, path, cast=True)
        self.assert_same(self.arrays_of(self.restored(result, target)),
                         {"w": self.small()["w"].astype(np.float16), "b": self.small()["b"]})

    def test_a_corrupt_value_fails_the_restore_before_the_target_changes(
            self, tmp_path: Path) -> None:
        path = Path(self.module.save(self.state_of(self.small()), tmp_path / "state.ocf"))
        flip_a_stored_byte(path, "layer/w/.value")
        target = self.state_of(self.zeros())
        with pytest.raises(IntegrityError) as raised:
            self.module.restore(target, path)
        assert (raised.value.key, raised.value.path) == ("layer/w/.value", str(path))
        self.assert_same(self.arrays_of(target), self.zeros())

    # -- foreign formats ------------------------------------------------------------------

    def foreign_files(self, directory: Path) -> dict[str, Path]:
        """The :meth:`small` values as an npz archive (NumPy's writer) and, when the
        safetensors package is installed, a safetensors file (its own writer)."""
        files = {"npz": directory / "model.npz"}
        arrays: dict[str, Any] = self.small()
        np.savez(files["npz"], **arrays)
        try:
            from safetensors.numpy import save_file as save_safetensors
        except ImportError:
            return files
        files["safetensors"] = directory / "model.safetensors"
        save_safetensors(self.small(), str(files["safetensors"]))
        return files

    def test_load_file_reads_safetensors_and_npz(self, tmp_path: Path) -> None:
        for path in self.foreign_files(tmp_path).values():
            self.assert_same(self.loaded(path), self.small())

    def test_load_file_reads_safetensors_and_npz_in_a_process_that_imported_only_it(
            self, tmp_path: Path) -> None:
        for fmt, path in self.foreign_files(tmp_path).items():
            out = tmp_path / f"{fmt}-read.npz"
            done = subprocess.run([sys.executable, "-c", FRESH_READ, self.name, str(path),
                                   str(out)], env={**os.environ, **self.process_environment()},
                                  capture_output=True, text=True, timeout=600, check=False)
            assert done.returncode == 0, f"{fmt}:\n{done.stderr[-3000:]}"
            with np.load(out) as read:
                self.assert_same({key: read[key] for key in read.files}, self.small())


# The child of the fresh-process test: the adapter is its first import of ocf.
FRESH_READ = """
import importlib, sys
adapter = importlib.import_module(sys.argv[1])
import numpy
loaded = adapter.load_file(sys.argv[2])
numpy.savez(sys.argv[3], **{key: numpy.asarray(value) for key, value in loaded.items()})
"""


def flip_a_stored_byte(path: Path, key: str) -> None:
    """Flip one stored byte of tensor ``key`` of the OCF file at ``path`` (found through
    the reference reader), so that its checksum fails."""
    with Reader(path) as reader:
        block = reader[key].block
        assert block is not None
        start, end = block.stored_range(0)
    data = bytearray(path.read_bytes())
    data[(start + end) // 2] ^= 0x01
    path.write_bytes(bytes(data))
