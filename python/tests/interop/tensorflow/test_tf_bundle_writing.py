"""ocf.tensorflow's BundleWriter: its files read back by TensorFlow 2.21, byte for byte
against SaveV2, and its refusals.

The ``ours_dir`` fixture writes every case once per session; TensorFlow then
reads each (in the session's TensorFlow process, tf_support.run) into
manifests the tests compare with the values written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import tf_support
from tf_support import GENERATED, QUANTIZED

from ocf.format.errors import (
    InvalidError,
)
from ocf.tensorflow import (
    BundleReader,
    BundleWriter,
    write_checkpoint_state,
)

Cuts = list[tuple[tuple[int, ...], tuple[int, ...]]]


def slices_of(full: np.ndarray, cuts: Cuts) -> list[Any]:
    return [
        (start, full[tuple(slice(s, s + n) for s, n in zip(start, shape))]) for start, shape in cuts
    ]


PARTITIONED: dict[str, tuple[np.ndarray, Cuts]] = {
    "p/rows": (
        np.arange(40, dtype=np.float32).reshape(10, 4),
        [((0, 0), (4, 4)), ((4, 0), (6, 4))],
    ),
    "p/grid": (
        np.arange(24, dtype=np.int64).reshape(2, 3, 4),
        [((0, 0, 0), (2, 3, 2)), ((0, 0, 2), (1, 3, 2)), ((1, 0, 2), (1, 3, 2))],
    ),
    "p/bf16": (np.linspace(-3, 3, 9).astype(ml_dtypes.bfloat16), [((0,), (5,)), ((5,), (4,))]),
}


def writer_cases() -> dict[str, Callable[[BundleWriter], None]]:
    samples = {**tf_support.numeric_samples(), **tf_support.string_samples()}

    def every_dtype(writer: BundleWriter) -> None:
        for key, value in samples.items():  # not sorted: call order is data order
            writer.add(key, value)
        writer.add("s/from_str", np.array(["ünï", ""], dtype=object))

    def partitioned(writer: BundleWriter) -> None:
        writer.add("whole", np.array([1.5], np.float64))
        for key, (full, cuts) in PARTITIONED.items():
            for start, part in slices_of(full, cuts):
                writer.add_slice(key, full.shape, start, part)

    def empty(writer: BundleWriter) -> None:
        del writer

    return {"w_all": every_dtype, "w_parts": partitioned, "w_empty": empty, "w_exotic": exotic}


# TensorFlow's DataType values (tensorflow/core/framework/types.proto), literally.
TF_ENUM = {"qint8": 11, "quint8": 12, "qint32": 13, "qint16": 15, "quint16": 16}
# Partitioned: TensorFlow's reader assembles int4 and qint8 slices (not qint16: "Dtype
# qint16 not supported").
EXOTIC_PARTITIONED = {
    "p/int4": (np.arange(-8, 8).astype(ml_dtypes.int4).reshape(4, 4), None),
    "p/qint8": (np.arange(-3, 5, dtype=np.int8), "qint8"),
}


def exotic(writer: BundleWriter) -> None:
    """Sub-byte arrays by their dtype alone; quantized ones named in each accepted form."""
    for i, (key, (array, name)) in enumerate(tf_support.exotic_samples().items()):
        if name in QUANTIZED:
            writer.add(key, array, tf_dtype=(name, f"DT_{name.upper()}", TF_ENUM[name])[i % 3])
        else:
            writer.add(key, array)
    cuts = {"p/int4": [((0, 0), (1, 4)), ((1, 0), (3, 4))],
            "p/qint8": [((0,), (5,)), ((5,), (3,))]}
    for key, (full, name) in EXOTIC_PARTITIONED.items():
        for start, part in slices_of(full, cuts[key]):
            writer.add_slice(key, full.shape, start, part, tf_dtype=name)


SHARD_LIMIT = 700


@pytest.fixture(scope="session")
def ours_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Checkpoints BundleWriter wrote, and TensorFlow's reading of them."""
    out = tmp_path_factory.mktemp("ocf_written")
    prefixes = []
    for name, fill in writer_cases().items():
        prefix = out / name / name
        with BundleWriter(prefix) as writer:
            fill(writer)
        prefixes.append(prefix)
    with BundleWriter(out / "w_shards" / "w_shards", max_shard_bytes=SHARD_LIMIT) as writer:
        writer_cases()["w_all"](writer)
    prefixes.append(out / "w_shards" / "w_shards")
    write_checkpoint_state(out / "w_all", out / "w_all" / "w_all", [out / "w_all" / "old"])
    tf_support.run("readback", str(out / "tf"), *map(str, prefixes))
    return out


def expected_written(name: str) -> dict[str, np.ndarray]:
    if name in ("w_all", "w_shards"):
        samples = {**tf_support.numeric_samples(), **tf_support.string_samples()}
        samples["s/from_str"] = np.array([b"\xc3\xbcn\xc3\xaf", b""], dtype=object)
        return samples
    if name == "w_parts":
        return {"whole": np.array([1.5]), **{k: full for k, (full, _) in PARTITIONED.items()}}
    return {}


def test_tensorflow_reads_sub_byte_and_quantized_writer_output_bit_for_bit(
    ours_dir: Path,
) -> None:
    manifest = tf_support.load_manifest(ours_dir / "tf" / "w_exotic.json")
    expected = {**tf_support.exotic_samples(), **EXOTIC_PARTITIONED}
    assert sorted(manifest) == sorted(expected)
    for key, (value, name) in expected.items():
        entry = manifest[key]
        assert entry["dtype"] == (name or value.dtype.name), key
        assert entry["numpy_dtype"] == value.dtype.name, key
        assert entry["shape"] == list(value.shape), key
        assert tf_support.expected_bytes(entry) == value.tobytes(), key


def test_writer_output_of_sub_byte_and_quantized_tensors_is_byte_identical_to_save_v2(
    tf_dir: Path, tmp_path: Path
) -> None:
    samples = tf_support.exotic_samples()
    samples["u/plain"] = (np.array([1, 2], np.int32), "int32")
    with BundleWriter(tmp_path / "ckpt") as writer:
        for key in sorted(samples):  # SaveV2 was given the keys sorted
            array, name = samples[key]
            writer.add(key, array, tf_dtype=name)
    theirs = tf_dir / GENERATED["subbyte"]
    for suffix in (".index", ".data-00000-of-00001"):
        assert (tmp_path / f"ckpt{suffix}").read_bytes() == Path(f"{theirs}{suffix}").read_bytes()


@pytest.mark.parametrize("name", ["w_all", "w_parts", "w_empty", "w_shards"])
def test_tensorflow_reads_writer_output_bit_for_bit(ours_dir: Path, name: str) -> None:
    manifest = tf_support.load_manifest(ours_dir / "tf" / f"{name}.json")
    expected = expected_written(name)
    assert sorted(manifest) == sorted(expected)
    for key, value in expected.items():
        entry = manifest[key]
        assert entry["shape"] == list(value.shape), key
        if value.dtype == object:
            assert tf_support.expected_strings(entry) == list(value.reshape(-1)), key
        else:
            assert entry["dtype"] == value.dtype.name, key
            assert tf_support.expected_bytes(entry) == value.tobytes(), key


def test_writer_spreads_tensors_over_shards_within_the_limit(ours_dir: Path) -> None:
    files = sorted((ours_dir / "w_shards").glob("w_shards.data-*"))
    assert len(files) > 3
    assert all(f.name.endswith(f"-of-{len(files):05d}") for f in files)
    sizes: dict[int, list[int]] = {}
    with BundleReader(ours_dir / "w_shards" / "w_shards") as reader:
        for entry in reader.entries():
            sizes.setdefault(entry.shard_id, []).append(entry.size)
    for shard, f in enumerate(files):
        # Within the limit, or a single tensor larger than it on its own.
        assert f.stat().st_size == sum(sizes[shard])
        assert sum(sizes[shard]) <= SHARD_LIMIT or len(sizes[shard]) == 1
    assert not list((ours_dir / "w_shards").glob("*tempstate*"))


def test_tensorflow_finds_latest_checkpoint_from_written_state_file(ours_dir: Path) -> None:
    state = json.loads((ours_dir / "tf" / "w_all.state.json").read_text())
    assert state["latest"] == str(ours_dir / "w_all" / "w_all")
    assert state["all"] == [str(ours_dir / "w_all" / "old"), str(ours_dir / "w_all" / "w_all")]
    text = (ours_dir / "w_all" / "checkpoint").read_text()
    assert 'model_checkpoint_path: "w_all"' in text  # relative, as TensorFlow 2 writes


def test_writer_output_is_byte_identical_to_tensorflow_save_v2(
    tf_dir: Path, tmp_path: Path
) -> None:
    samples = {**tf_support.numeric_samples(), **tf_support.string_samples()}
    with BundleWriter(tmp_path / "ckpt") as writer:
        for key in sorted(samples):  # SaveV2 was given the keys sorted
            writer.add(key, samples[key])
    theirs = tf_dir / GENERATED["alldtypes"]
    for suffix in (".index", ".data-00000-of-00001"):
        assert (tmp_path / f"ckpt{suffix}").read_bytes() == Path(f"{theirs}{suffix}").read_bytes()


def test_writer_roundtrip_through_reader_with_slices(tmp_path: Path) -> None:
    full, cuts = PARTITIONED["p/grid"]
    with BundleWriter(tmp_path / "ckpt") as writer:
        for start, part in slices_of(full, cuts):
            writer.add_slice("grid", full.shape, start, part)
    with BundleReader(tmp_path / "ckpt") as reader:
        assert reader.keys() == ["grid"]
        assert reader.read("grid").tobytes() == full.tobytes()
        assert reader.read_slice("grid", 2).tobytes() == full[1:2, 0:3, 2:4].tobytes()


@pytest.mark.parametrize(
    ("action", "match"),
    [
        (lambda w: (w.add("a", np.zeros(1)), w.add("a", np.zeros(1))), "added twice"),
        (lambda w: w.add("", np.zeros(1)), "non-empty"),
        (lambda w: w.add("x", np.array([object()])), "bytes or str"),
        (lambda w: w.add("x", np.array([1], dtype="datetime64[s]")), "no TensorFlow"),
        (lambda w: w.add("x", np.zeros(2, np.float32), tf_dtype="qint8"), "of int8, not float32"),
        (lambda w: w.add("x", np.zeros(2, np.int8), tf_dtype="resource"), "no TensorFlow dtype"),
        (lambda w: w.add("x", np.zeros(2, np.int8), tf_dtype="qint9"), "no TensorFlow dtype"),
        (lambda w: w.add("x", np.zeros(2, np.int8), tf_dtype=99), "no TensorFlow dtype"),
        (lambda w: w.add("x", np.zeros(2), tf_dtype="string"), "bytes or str, not float64"),
        (
            lambda w: w.add("x", np.array([1, 0x10], np.uint8).view(ml_dtypes.int4)),
            r"element 1 is stored as byte 0x10, which is no int4 value",
        ),
        (
            lambda w: w.add_slice(
                "x", (4,), (0,), np.array([3, 0xF3], np.uint8).view(ml_dtypes.float4_e2m1fn)
            ),
            r"element 1 .* 0xf3, which is no float4_e2m1fn",
        ),
        (
            lambda w: (
                w.add_slice("x", (4,), (0,), np.zeros(2, np.int8), tf_dtype="qint8"),
                w.add_slice("x", (4,), (2,), np.zeros(2, np.int8)),
            ),
            "int8 .* does not match earlier slices \\(qint8",
        ),
        (lambda w: w.add_slice("x", (4,), (3,), np.zeros(2)), "outside"),
        (lambda w: w.add_slice("x", (4, 4), (0,), np.zeros(2)), "rank"),
        (
            lambda w: (
                w.add_slice("x", (4,), (0,), np.zeros(2)),
                w.add_slice("x", (4,), (1,), np.zeros(2)),
            ),
            "overlaps",
        ),
        (
            lambda w: (
                w.add_slice("x", (4,), (0,), np.zeros(2)),
                w.add_slice("x", (4,), (2,), np.zeros(2, np.int32)),
            ),
            "does not match",
        ),
    ],
)
def test_writer_refuses_misuse_and_leaves_no_files(
    tmp_path: Path, action: Callable[[BundleWriter], Any], match: str
) -> None:
    with pytest.raises(InvalidError, match=match), BundleWriter(tmp_path / "ckpt") as writer:
        action(writer)
    assert list(tmp_path.iterdir()) == []
