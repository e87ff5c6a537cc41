"""One source registry: ocf.open, ocf.load_file, ocf.list_variables and
ocf.latest_checkpoint read every format OCF reads.

Files are written by each format's own writer (the safetensors package,
NumPy, real TensorFlow through tf_support); the expected values are the
arrays given to those writers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cli_support import Written, write_every_format

import ocf
from ocf.format.pieces import pieces

FLAT = ("ocf-file", "ocf-directory", "safetensors", "npz")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    return write_every_format(tmp_path_factory.mktemp("sources"))


@pytest.mark.parametrize("name", FLAT)
def test_open_load_file_and_list_variables_read_every_format(written: Written,
                                                             name: str) -> None:
    path = written.paths[name]
    with ocf.open(path) as opened:
        assert sorted(opened.keys()) == sorted(written.tensors)
        np.testing.assert_array_equal(opened.get_tensor("dense/kernel"),
                                      written.tensors["dense/kernel"])
    loaded = ocf.load_file(path)
    assert loaded.keys() == written.tensors.keys()
    for key, value in written.tensors.items():
        np.testing.assert_array_equal(loaded[key], value)
        assert loaded[key].dtype == value.dtype
        assert loaded[key].flags.writeable
    some = ocf.load_file(path, ["step"], dtype=np.float32)
    assert some["step"].dtype == np.float32
    assert some["step"] == 42
    assert ocf.list_variables(path) == sorted(
        (k, v.dtype.name, v.shape) for k, v in written.tensors.items())


@pytest.mark.parametrize("name", ["safetensors", "npz"])
def test_a_missing_key_is_not_found_naming_key_and_file(written: Written, name: str) -> None:
    with pytest.raises(ocf.NotFoundError) as info:
        ocf.load_file(written.paths[name], ["nope"])
    assert info.value.key == "nope"
    assert str(written.paths[name]) in str(info.value)


def test_latest_checkpoint_follows_tensorflows_state_file(tf_generated: Path) -> None:
    directory = tf_generated / "v1_partitioned"
    latest = ocf.latest_checkpoint(directory)
    assert latest == str(directory / "model.ckpt-5")  # the prefix TensorFlow saved
    assert ocf.load_file(directory).keys() == ocf.load_file(latest).keys()
    assert ocf.latest_checkpoint(tf_generated) is None  # no state file of any format


def test_a_tensorflow_prefix_opens_and_loads_by_key(tf_generated: Path) -> None:
    prefix = tf_generated / "sharded" / "ckpt"
    with ocf.open(prefix) as opened:
        key = next(k for k in opened if k.startswith("big/"))
        big = opened.get_tensor(key)
    np.testing.assert_array_equal(big, np.arange(3000, dtype=np.float64).reshape(1000, 3))


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_pieces_read_in_order_or_not_give_the_tensor(tmp_path: Path,
                                                         compressed: bool) -> None:
    values = np.arange(6 * 7 * 9, dtype=">i4").reshape(6, 7, 9)  # big-endian on disk
    save = np.savez_compressed if compressed else np.savez
    save(tmp_path / "a.npz", a=values, f=np.asfortranarray(values))
    with ocf.open(tmp_path / "a.npz") as opened:
        for key in ("a", "f"):
            plan = list(pieces(values.shape, 4, 4 * 9 * 2))  # two rows of the last axis
            for order in (plan, plan[::-1]):
                out = np.zeros(values.shape, np.int32)
                for piece in order:
                    out[piece.index] = opened.read_piece(key, piece)  # type: ignore[union-attr]
                np.testing.assert_array_equal(out, values)


def test_a_truncated_safetensors_file_is_refused_naming_it(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    path = tmp_path / "t.safetensors"
    save_file({"w": np.ones(100, np.float32)}, str(path))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ocf.MalformedError) as info:
        ocf.load_file(path)
    assert str(path) in str(info.value)


def test_a_tensorflow_tensor_read_in_pieces_is_checksummed(tmp_path: Path) -> None:
    from ocf.tensorflow import BundleWriter

    prefix = str(tmp_path / "ckpt")
    with BundleWriter(prefix) as writer:
        writer.add("w", np.arange(10_000, dtype=np.float32))
    data = Path(prefix + ".data-00000-of-00001")
    raw = bytearray(data.read_bytes())
    raw[30_000] ^= 1  # the whole-tensor checksum fails once the last piece is read
    data.write_bytes(bytes(raw))
    with ocf.open(prefix) as opened:
        plan = list(pieces((10_000,), 4, 4096))
        for piece in plan[:-1]:
            opened.read_piece("w", piece)  # type: ignore[union-attr]
        with pytest.raises(ocf.IntegrityError, match="checksum mismatch"):
            opened.read_piece("w", plan[-1])  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["safetensors", "npz"])
def test_torch_and_jax_load_file_read_foreign_formats_too(written: Written, name: str) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    import ocf.jax
    import ocf.torch

    tensors = ocf.torch.load_file(written.paths[name])
    # float64: JAX without x64 holds it only when told to cast
    arrays = ocf.jax.load_file(written.paths[name], ["dense/kernel"], dtype=np.float32)
    expected = written.tensors["dense/kernel"]
    np.testing.assert_array_equal(tensors["dense/kernel"].numpy(), expected)
    assert arrays["dense/kernel"].dtype == np.float32
    np.testing.assert_array_equal(np.asarray(arrays["dense/kernel"]), expected)
    assert tensors["step"].item() == 42


def test_a_partitioned_tensorflow_tensor_reads_in_pieces(tmp_path: Path) -> None:
    from ocf.tensorflow import BundleWriter

    values = np.arange(40 * 30, dtype=np.float32).reshape(40, 30)
    prefix = str(tmp_path / "parts")
    with BundleWriter(prefix) as writer:
        writer.add_slice("w", values.shape, (0, 0), values[:25])
        writer.add_slice("w", values.shape, (25, 0), values[25:])
    with ocf.open(prefix) as opened:
        out = np.zeros_like(values)
        for piece in pieces(values.shape, 4, 4 * 30 * 7):  # 7 rows: across the slices
            out[piece.index] = opened.read_piece("w", piece)  # type: ignore[union-attr]
    np.testing.assert_array_equal(out, values)
