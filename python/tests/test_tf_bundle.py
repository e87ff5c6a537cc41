"""ocf.tensorflow's bundle reader and writer against real TensorFlow 2.21, and hostile files.

TensorFlow runs in the session's one TensorFlow process (tf_support.run,
shared with test_tf_interop.py), once per direction: it writes checkpoints
and reads them back with its own reader for the expected values; later it
reads what BundleWriter wrote. ocf.tensorflow itself never imports
TensorFlow.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import tf_support
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tf_support import GENERATED, QUANTIZED, SUB_BYTE, framed, table, varint

from ocf.format.errors import (
    IntegrityError,
    InvalidError,
    LimitExceededError,
    MalformedError,
    NotFoundError,
    OCFError,
    UnknownRequiredFeatureError,
    UnsupportedVersionError,
)
from ocf.tensorflow import (
    BundleReader,
    BundleWriter,
    is_tf_checkpoint,
    read_checkpoint_state,
    snappy,
    sstable,
    write_checkpoint_state,
)
from ocf.tensorflow.v1 import tensor_bundle_pb2 as pb
from ocf.tensorflow.v1 import trackable_object_graph_pb2

SRC = Path(__file__).resolve().parents[1] / "src"
TF_DTYPE_NAMES = {
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "complex64",
    "complex128",
    "bool",
    "string",
    "float8_e5m2",
    "float8_e4m3fn",
}


# TensorFlow's checkpoints, read by OCF.


@pytest.fixture(scope="session")
def tf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tf_generated")
    tf_support.run("generate", str(out))
    return out


def assert_same_as_tensorflow(value: np.ndarray, expected: dict[str, Any], key: str) -> None:
    assert list(value.shape) == expected["shape"], key
    if expected["dtype"] == "string":
        assert value.dtype == object, key
        assert list(value.reshape(-1)) == tf_support.expected_strings(expected), key
        return
    assert value.dtype.name == expected["numpy_dtype"], key
    assert value.tobytes() == tf_support.expected_bytes(expected), key


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_reader_matches_tensorflow_reader_bit_for_bit(tf_dir: Path, name: str) -> None:
    manifest = tf_support.load_manifest(tf_dir / f"{name}.json")
    with BundleReader(tf_dir / GENERATED[name]) as reader:
        assert sorted(reader.keys()) == sorted(manifest)
        for key, expected in manifest.items():
            if expected.get("unsupported"):
                continue
            assert_same_as_tensorflow(reader.read(key), expected, key)
            assert reader.entry(key).dtype_name == expected["dtype"]


def test_tensorflow_fixture_covers_every_dtype_rank0_and_empty(tf_dir: Path) -> None:
    manifest = tf_support.load_manifest(tf_dir / "alldtypes.json")
    assert {e["dtype"] for e in manifest.values()} == TF_DTYPE_NAMES
    shapes = [e["shape"] for e in manifest.values()]
    assert [] in shapes
    assert [2, 0, 3] in shapes
    strings = tf_support.expected_strings(manifest["s/vector"])
    assert b"" in strings
    assert tf_support.LONG_STRING in strings


def test_entries_give_tensorflow_dtype_codes_and_shapes(tf_dir: Path) -> None:
    with BundleReader(tf_dir / GENERATED["alldtypes"]) as reader:
        bf16 = reader.entry("t/bfloat16")
        assert (bf16.tf_dtype, bf16.dtype, bf16.shape) == (14, np.dtype(ml_dtypes.bfloat16), (26,))
        assert reader.entry("t/float16_scalar").shape == ()
        string = reader.entry("s/matrix")
        assert (string.tf_dtype, string.dtype, string.shape) == (7, None, (2, 3))
        assert reader.header.num_shards == 1
        assert (reader.header.producer, reader.header.min_consumer) == (1, 0)
        assert reader.header.endianness == "little"
        assert "" not in reader
        assert "" not in list(reader)


def test_variant_tensors_are_listed_and_refused_on_read_naming_key_and_dtype(
    tf_dir: Path,
) -> None:
    with BundleReader(tf_dir / GENERATED["object"]) as reader:
        key = "it/.ATTRIBUTES/ITERATOR_STATE"
        assert reader.entry(key).dtype_name == "variant"
        with pytest.raises(UnknownRequiredFeatureError, match=r"ITERATOR_STATE.*variant"):
            reader.read(key)


def test_tensorflow_fixture_covers_every_sub_byte_and_quantized_dtype(tf_dir: Path) -> None:
    manifest = tf_support.load_manifest(tf_dir / "subbyte.json")
    numpy_dtypes = {e["dtype"]: e["numpy_dtype"] for e in manifest.values()}
    # What TensorFlow's reader returns: ml_dtypes types, and plain ints for quantized types.
    assert numpy_dtypes == {
        "int32": "int32",
        "int4": "int4",
        "uint4": "uint4",
        "int2": "int2",
        "uint2": "uint2",
        "float4_e2m1fn": "float4_e2m1fn",
        "qint8": "int8",
        "quint8": "uint8",
        "qint16": "int16",
        "quint16": "uint16",
        "qint32": "int32",
    }
    assert set(SUB_BYTE) | set(QUANTIZED) | {"int32"} == set(numpy_dtypes)


@pytest.mark.parametrize(
    ("key", "stored"),
    [
        ("x/int4", bytes([8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7])),  # -8..7
        ("x/int2", bytes([2, 3, 0, 1])),  # -2, -1, 0, 1
        ("x/uint2_scalar", bytes([3])),
        ("x/float4_e2m1fn", bytes(range(16))),  # +0..6, then -0..-6
        ("x/int4_empty", b""),
    ],
)
def test_tensorflow_stores_sub_byte_values_one_per_byte_with_high_bits_zero(
    tf_dir: Path, key: str, stored: bytes
) -> None:
    prefix = tf_dir / GENERATED["subbyte"]
    data = Path(f"{prefix}.data-00000-of-00001").read_bytes()
    with BundleReader(prefix) as reader:
        entry = reader.entry(key)
        assert data[entry.offset : entry.offset + entry.size] == stored
        assert reader.read(key).tobytes() == stored


def test_max_shard_size_policy_checkpoint_spreads_over_data_files(tf_dir: Path) -> None:
    prefix = tf_dir / GENERATED["sharded"]
    files = sorted(p.name for p in prefix.parent.glob("ckpt.data-*"))
    with BundleReader(prefix) as reader:
        assert reader.header.num_shards == len(files) > 2
        shards = set()
        for key in reader:
            entry = reader.entry(key)
            if entry.slices is None:
                shards.add(entry.shard_id)
        assert len(shards) > 1


def test_read_slice_returns_each_stored_slice_of_tensorflow_partitions(tf_dir: Path) -> None:
    manifest = tf_support.load_manifest(tf_dir / "sharded.json")
    key = "big/.ATTRIBUTES/VARIABLE_VALUE"
    full = np.frombuffer(tf_support.expected_bytes(manifest[key]), np.float64).reshape(1000, 3)
    with BundleReader(tf_dir / GENERATED["sharded"]) as reader:
        slices = reader.entry(key).slices
        assert slices is not None
        assert len(slices) > 1
        for i, extents in enumerate(slices):
            region = tuple(slice(s, s + n) for s, n in extents)
            assert reader.read_slice(key, i).tobytes() == full[region].tobytes()


def test_v1_saver_partitioned_variable_has_its_slices(tf_dir: Path) -> None:
    manifest = tf_support.load_manifest(tf_dir / "v1_partitioned.json")
    with BundleReader(tf_dir / GENERATED["v1_partitioned"]) as reader:
        assert reader.keys() == ["dense/kernel", "emb", "words"]
        entry = reader.entry("emb")
        assert entry.shape == (10, 4)
        assert entry.slices == (((0, 4), (0, 4)), ((4, 3), (0, 4)), ((7, 3), (0, 4)))
        full = np.frombuffer(tf_support.expected_bytes(manifest["emb"]), np.float32)
        assert reader.read_slice("emb", 1).tobytes() == full.reshape(10, 4)[4:7].tobytes()
        # Partitioned strings: TensorFlow writes them but its reader refuses them.
        assert reader.read("words").tolist() == [[b"a", b"bb"], [b"ccc", b""], [b"d", b"e"]]
        assert reader.read_slice("words", 1).tolist() == [[b"d", b"e"]]


def data_blocks(index: bytes) -> int:
    """The number of data blocks: entries of the index block (restart interval 1)."""
    footer = index[-48:]
    pos = 0
    for _ in range(2):  # skip the metaindex handle's two varints
        while footer[pos] & 0x80:
            pos += 1
        pos += 1
    values = []
    for _ in range(2):
        value = shift = 0
        while True:
            value |= (footer[pos] & 0x7F) << shift
            shift += 7
            pos += 1
            if not footer[pos - 1] & 0x80:
                break
        values.append(value)
    offset, size = values
    return int.from_bytes(index[offset + size - 4 : offset + size], "little")


def test_index_of_thousands_of_keys_spans_several_blocks(tf_dir: Path) -> None:
    prefix = tf_dir / GENERATED["manykeys"]
    assert data_blocks(Path(f"{prefix}.index").read_bytes()) >= 2
    with BundleReader(prefix) as reader:
        keys = reader.keys()
        assert len(keys) == tf_support.MANY_KEYS
        assert keys == sorted(keys)
        assert reader.read(keys[-1]).tolist() == [float(tf_support.MANY_KEYS - 1)]


def test_object_graph_decodes_with_ocf_declared_messages(tf_dir: Path) -> None:
    with BundleReader(tf_dir / GENERATED["object"]) as reader:
        raw = reader.read("_CHECKPOINTABLE_OBJECT_GRAPH")
    graph = trackable_object_graph_pb2.TrackableObjectGraph.FromString(raw.item())
    root = {c.local_name for c in graph.nodes[0].children}
    assert root == {"net", "it", "name", "save_counter"}
    net = graph.nodes[next(c.node_id for c in graph.nodes[0].children if c.local_name == "net")]
    kernel = next(c.node_id for c in net.children if c.local_name == "kernel")
    attribute = graph.nodes[kernel].attributes[0]
    assert attribute.checkpoint_key == "net/kernel/.ATTRIBUTES/VARIABLE_VALUE"


def test_checkpoint_state_files_of_tensorflow(tf_dir: Path) -> None:
    latest, kept = read_checkpoint_state(tf_dir / "object")  # TF2: relative paths
    assert latest == str(tf_dir / "object" / "ckpt-1")
    assert kept == [latest]
    latest, kept = read_checkpoint_state(tf_dir / "v1_partitioned")  # v1 Saver: absolute
    assert latest == str(tf_dir / GENERATED["v1_partitioned"])


def test_is_tf_checkpoint_accepts_prefix_index_path_and_directory(tf_dir: Path) -> None:
    prefix = tf_dir / GENERATED["object"]
    assert is_tf_checkpoint(prefix)
    assert is_tf_checkpoint(f"{prefix}.index")
    assert is_tf_checkpoint(prefix.parent)
    assert not is_tf_checkpoint(tf_dir / "alldtypes")  # a directory without `checkpoint`
    assert not is_tf_checkpoint(f"{prefix}.data-00000-of-00001")
    assert not is_tf_checkpoint(tf_dir / "nothing")


def test_index_path_is_accepted_as_the_prefix(tf_dir: Path) -> None:
    with BundleReader(f"{tf_dir / GENERATED['subbyte']}.index") as reader:
        assert reader.read("u/plain").tolist() == [1, 2]


def test_bytes_read_counts_index_and_tensor_bytes(tf_dir: Path) -> None:
    prefix = tf_dir / GENERATED["subbyte"]
    index_size = Path(f"{prefix}.index").stat().st_size
    with BundleReader(prefix) as reader:
        assert reader.bytes_read == index_size
        reader.read("u/plain")
        assert reader.bytes_read == index_size + 8


# The reader in a process where TensorFlow cannot be imported.


def test_reader_and_writer_work_where_tensorflow_cannot_be_imported(
    tf_dir: Path, tmp_path: Path
) -> None:
    script = f"""
import sys
sys.modules["tensorflow"] = None  # any `import tensorflow` now raises ImportError
import numpy as np
from ocf.tensorflow import BundleReader, BundleWriter
with BundleReader({str(tf_dir / GENERATED["alldtypes"])!r}) as reader:
    assert reader.read("t/int8").tolist() == [-128, -1, 0, 1, 127]
    assert reader.read("s/scalar").item() == b"just one"
with BundleWriter({str(tmp_path / "ckpt")!r}) as writer:
    writer.add("x", np.arange(3))
assert sys.modules["tensorflow"] is None
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


# BundleWriter's files, read by TensorFlow.


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


# Hostile files: every failure is an OCFError of the right category.


def header(num_shards: int = 1, **version: Any) -> bytes:
    return pb.BundleHeaderProto(
        num_shards=num_shards, version=pb.VersionDef(producer=1, **version)
    ).SerializeToString()


def entry(**fields: Any) -> bytes:
    shape = fields.pop("shape", [])
    proto = pb.BundleEntryProto(**fields)
    for dim in shape:
        proto.shape.dims.add(size=dim)
    return proto.SerializeToString()


def sliced(shape: list[int], *extents: dict[str, int]) -> bytes:
    """A partitioned float32 parent entry with one slice of these extents."""
    return entry(dtype=1, shape=shape, slices=[pb.TensorSliceProto(extents=list(extents))])


def write_files(
    tmp_path: Path, entries: list[tuple[bytes, bytes]], data: bytes = b"", **kwargs: Any
) -> Path:
    prefix = tmp_path / "ckpt"
    (tmp_path / "ckpt.index").write_bytes(table([entries], **kwargs))
    (tmp_path / "ckpt.data-00000-of-00001").write_bytes(data)
    return prefix


FLOATS = np.array([1.0, 2.0, 3.0], np.float32).tobytes()


def float_entry(**overrides: Any) -> bytes:
    fields = {"dtype": 1, "shape": [3], "size": 12, "crc32c": tf_support.masked(FLOATS)}
    return entry(**{**fields, **overrides})


def test_hand_built_table_is_read(tmp_path: Path) -> None:
    prefix = write_files(tmp_path, [(b"", header()), (b"x", float_entry())], FLOATS)
    with BundleReader(prefix) as reader:
        assert reader.read("x").tolist() == [1.0, 2.0, 3.0]


def test_snappy_compressed_blocks_are_read(tmp_path: Path) -> None:
    entries = [(b"", header())] + [(f"k{i:03d}".encode(), float_entry()) for i in range(40)]
    prefix = write_files(tmp_path, entries, FLOATS, encode=tf_support.snappy_literals, block_type=1)
    with BundleReader(prefix) as reader:
        assert len(reader.keys()) == 40
        assert reader.read("k039").tolist() == [1.0, 2.0, 3.0]


def valid_files(tmp_path: Path) -> Path:
    """A small checkpoint with a numeric, a string and a partitioned tensor."""
    with BundleWriter(tmp_path / "ckpt") as writer:
        writer.add("f", np.array([1.0, 2.0, 3.0], np.float32))
        writer.add("s", np.array([b"ab", b"", b"xyz"], dtype=object))
        writer.add_slice("p", (4,), (0,), np.array([1, 2], np.int16))
        writer.add_slice("p", (4,), (2,), np.array([3, 4], np.int16))
    return tmp_path / "ckpt"


def open_and_read_all(prefix: Path) -> None:
    with BundleReader(prefix) as reader:
        for key in reader:
            reader.read(key)


def test_every_truncation_of_the_index_is_an_ocf_error(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    index = Path(f"{prefix}.index")
    original = index.read_bytes()
    categories = set()
    for length in range(len(original)):
        index.write_bytes(original[:length])
        with pytest.raises(OCFError) as caught:
            open_and_read_all(prefix)
        categories.add(type(caught.value))
    assert categories == {MalformedError}


def test_every_flipped_index_byte_is_detected(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    index = Path(f"{prefix}.index")
    original = index.read_bytes()
    for i in range(len(original)):
        index.write_bytes(original[:i] + bytes([original[i] ^ 0x41]) + original[i + 1 :])
        if i >= len(original) - 48 and i < len(original) - 8:
            # Footer handles and padding: no checksum covers them, so a flip
            # may point at other bytes; it must still fail cleanly or be harmless.
            with contextlib.suppress(OCFError):
                open_and_read_all(prefix)
            continue
        with pytest.raises((IntegrityError, MalformedError)):
            open_and_read_all(prefix)


def test_every_flipped_data_byte_is_an_integrity_error_naming_the_key(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    data = Path(f"{prefix}.data-00000-of-00001")
    original = data.read_bytes()
    for i in range(len(original)):
        data.write_bytes(original[:i] + bytes([original[i] ^ 0x01]) + original[i + 1 :])
        with pytest.raises(OCFError) as caught:
            open_and_read_all(prefix)
        # A flipped varint length can also make the string sizes inconsistent.
        assert isinstance(caught.value, IntegrityError | InvalidError)
        assert caught.value.key in ("f", "s", "p")


def test_flipped_data_byte_is_read_when_verification_is_off(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    data = Path(f"{prefix}.data-00000-of-00001")
    original = data.read_bytes()
    data.write_bytes(bytes([original[0] ^ 0x01]) + original[1:])
    with BundleReader(prefix, verify=False) as reader:
        assert reader.read("f")[0] != 1.0


def test_truncated_data_file_is_malformed_naming_file_and_key(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    data = Path(f"{prefix}.data-00000-of-00001")
    data.write_bytes(data.read_bytes()[:5])
    with BundleReader(prefix) as reader, pytest.raises(MalformedError) as caught:
        reader.read("s")
    assert caught.value.key == "s"
    assert caught.value.path == str(data)


def test_missing_data_shard_and_index_and_key_are_not_found(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    with BundleReader(prefix) as reader, pytest.raises(NotFoundError, match="no such tensor"):
        reader.entry("nope")
    Path(f"{prefix}.data-00000-of-00001").unlink()
    with BundleReader(prefix) as reader, pytest.raises(NotFoundError, match="data-00000-of"):
        reader.read("f")
    with pytest.raises(NotFoundError):
        BundleReader(tmp_path / "other")


def test_bad_magic_and_short_file_are_malformed(tmp_path: Path) -> None:
    prefix = valid_files(tmp_path)
    index = Path(f"{prefix}.index")
    original = index.read_bytes()
    index.write_bytes(original[:-1] + b"\x00")
    with pytest.raises(MalformedError, match="bad magic"):
        BundleReader(prefix)
    index.write_bytes(original[-47:])
    with pytest.raises(MalformedError, match="too short"):
        BundleReader(prefix)


def raw_footer(metaindex: bytes, index: bytes) -> bytes:
    return (metaindex + index).ljust(40, b"\0") + tf_support.TABLE_MAGIC


@pytest.mark.parametrize(
    ("handles", "error"),
    [
        (varint(0) + varint(2**60), MalformedError),  # block size 2**60
        (varint(2**62) + varint(10), MalformedError),  # offset far past the end
        (b"\xff" * 11, MalformedError),  # a varint longer than 10 bytes
        (b"\xff" * 9 + b"\x7f", MalformedError),  # a varint above 2**64
    ],
)
def test_absurd_block_handles_are_refused_without_allocating(
    tmp_path: Path, handles: bytes, error: type[OCFError]
) -> None:
    (tmp_path / "ckpt.index").write_bytes(b"\0" * 10 + raw_footer(handles, handles))
    tracemalloc.start()
    try:
        with pytest.raises(error):
            BundleReader(tmp_path / "ckpt")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def single_block_file(tmp_path: Path, contents: bytes) -> Path:
    body = framed(contents)
    metaindex_at = len(body)
    body += framed(tf_support.block([]))
    index_contents = tf_support.block([(b"\xff", varint(0) + varint(len(contents)))], 1)
    index_at = len(body)
    body += framed(index_contents)
    footer = raw_footer(
        varint(metaindex_at) + varint(8), varint(index_at) + varint(len(index_contents))
    )
    (tmp_path / "ckpt.index").write_bytes(body + footer)
    (tmp_path / "ckpt.data-00000-of-00001").write_bytes(b"")
    return tmp_path / "ckpt"


@pytest.mark.parametrize(
    ("contents", "match"),
    [
        ((2**31).to_bytes(4, "little"), "restart points"),  # restart count far too large
        (b"\x00\x03\x00" + (99).to_bytes(4, "little") + (1).to_bytes(4, "little"), "restart"),
        (b"\x00\x00\x00" + (0).to_bytes(4, "little") + (0).to_bytes(4, "little"), "restart points"),
        (b"\x05\x00\x00" + (0).to_bytes(4, "little") + (1).to_bytes(4, "little"), "shares 5"),
        (b"\x00\x7f\x00" + (0).to_bytes(4, "little") + (1).to_bytes(4, "little"), "runs past"),
        (b"\x00\xff\xff\xff\xff\x7f\x00" + bytes(4) + (1).to_bytes(4, "little"), "32 bits"),
        (b"", "too short"),
    ],
)
def test_corrupt_block_structure_is_malformed(tmp_path: Path, contents: bytes, match: str) -> None:
    with pytest.raises(MalformedError, match=match):
        BundleReader(single_block_file(tmp_path, contents))


def test_unknown_block_type_is_malformed(tmp_path: Path) -> None:
    with pytest.raises(MalformedError, match="compression type 7"):
        BundleReader(write_files(tmp_path, [(b"", header())], block_type=7))


def test_keys_out_of_order_and_missing_header_are_malformed(tmp_path: Path) -> None:
    unordered = tf_support.block([(b"", header()), (b"b", float_entry()), (b"a", float_entry())])
    with pytest.raises(MalformedError, match="out of order"):
        BundleReader(single_block_file(tmp_path, unordered))
    with pytest.raises(MalformedError, match="header"):
        BundleReader(write_files(tmp_path, [(b"a", float_entry())]))


@pytest.mark.parametrize(
    ("header_bytes", "error", "match"),
    [
        (header(min_consumer=2), UnsupportedVersionError, "consumer"),
        (header(bad_consumers=[1]), UnsupportedVersionError, "consumer"),
        (
            pb.BundleHeaderProto(
                num_shards=1, endianness=pb.BundleHeaderProto.ENDIANNESS_BIG
            ).SerializeToString(),
            UnsupportedVersionError,
            "big-endian",
        ),
        (header(num_shards=0), InvalidError, "num_shards"),
        (header(num_shards=2**30), LimitExceededError, "shards"),
        (b"\x0a\xff", MalformedError, "header"),
    ],
)
def test_bad_headers_are_refused(
    tmp_path: Path, header_bytes: bytes, error: type[OCFError], match: str
) -> None:
    with pytest.raises(error, match=match):
        BundleReader(write_files(tmp_path, [(b"", header_bytes)]))


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (float_entry(size=2**61, shape=[2**59]), LimitExceededError, "elements"),
        (float_entry(size=2**56, shape=[2**54]), MalformedError, "past the end"),
        (float_entry(size=8), InvalidError, "needs 12"),
        (float_entry(shape=[-3]), InvalidError, "negative"),
        (float_entry(shard_id=3), InvalidError, "shard_id"),
        (float_entry(offset=-1), InvalidError, "negative"),
        (float_entry(offset=2**62, size=2**62), LimitExceededError, "exceeds"),
        (float_entry(crc32c=1), IntegrityError, "checksum"),
        (float_entry(dtype=0), InvalidError, "DataType 0"),
        (float_entry(dtype=20), UnknownRequiredFeatureError, "resource"),
        (float_entry(dtype=7, shape=[2**50], size=2**55), MalformedError, "past the end"),
        (float_entry(dtype=7, shape=[20]), InvalidError, "cannot fit"),
        (b"\x12\xff\xff", MalformedError, "undecodable"),
        (sliced([3], {"length": 3}), InvalidError, "no entry"),
        (sliced([3], {"start": 1, "length": 3}), InvalidError, "outside"),
        (sliced([3], {"start": 1}), InvalidError, "whole dimension from start 1"),
        (sliced([3, 1], {}), InvalidError, "extents"),
    ],
)
def test_hostile_entries_are_refused_on_read_without_allocating(
    tmp_path: Path, value: bytes, error: type[OCFError], match: str
) -> None:
    prefix = write_files(tmp_path, [(b"", header()), (b"x", value)], FLOATS)
    tracemalloc.start()
    try:
        with BundleReader(prefix) as reader, pytest.raises(error, match=match) as caught:
            reader.read("x")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.key == "x"
    assert peak < 1 << 20


# TensorFlow's DataType values of the sub-byte types (types.proto), and bits per value.
SUB_BYTE_CODES = {"int4": (29, 4), "uint4": (30, 4), "int2": (31, 2), "uint2": (32, 2),
                  "float4_e2m1fn": (33, 4)}


def one_tensor_files(tmp_path: Path, code: int, shape: list[int], data: bytes) -> Path:
    value = entry(dtype=code, shape=shape, size=len(data), crc32c=tf_support.masked(data))
    return write_files(tmp_path, [(b"", header()), (b"x", value)], data)


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize(
    ("name", "bad"),
    [("int4", 0x10), ("uint4", 0x80), ("int2", 0x04), ("uint2", 0xFF), ("float4_e2m1fn", 0xF0)],
)
def test_sub_byte_element_with_a_high_bit_set_is_invalid_naming_file_key_and_element(
    tmp_path: Path, name: str, bad: int, verify: bool
) -> None:
    prefix = one_tensor_files(tmp_path, SUB_BYTE_CODES[name][0], [3], bytes([0, 1, bad]))
    message = f"element 2 is stored as byte {bad:#04x}, which is no {name} value"
    with BundleReader(prefix, verify=verify) as reader, pytest.raises(InvalidError) as caught:
        reader.read("x")
    assert message in str(caught.value)
    assert caught.value.key == "x"
    assert caught.value.path == f"{prefix}.data-00000-of-00001"


@pytest.mark.parametrize("name", sorted(SUB_BYTE_CODES))
def test_sub_byte_tensor_reads_every_in_range_byte(tmp_path: Path, name: str) -> None:
    code, bits = SUB_BYTE_CODES[name]
    data = bytes(range(1 << bits))
    with BundleReader(one_tensor_files(tmp_path, code, [len(data)], data)) as reader:
        value = reader.read("x")
    assert value.dtype == np.dtype(getattr(ml_dtypes, name))
    assert value.tobytes() == data


@pytest.mark.parametrize(
    ("code", "plain"),
    [(11, np.int8), (12, np.uint8), (13, np.int32), (15, np.int16), (16, np.uint16)],
)
def test_quantized_tensors_read_every_stored_byte_as_plain_integers(
    tmp_path: Path, code: int, plain: type[np.integer[Any]]
) -> None:
    data = bytes(range(256))
    shape = [256 // np.dtype(plain).itemsize]
    with BundleReader(one_tensor_files(tmp_path, code, shape, data)) as reader:
        value = reader.read("x")
    assert value.dtype == np.dtype(plain)
    assert value.tobytes() == data


def test_partitioned_tensor_with_inconsistent_slice_entry_is_invalid(tmp_path: Path) -> None:
    parent = entry(dtype=1, shape=[3], slices=[pb.TensorSliceProto(extents=[{"length": 3}])])
    slice_key = b"\x00x\x00\x01\x01\x01\x80\x83"  # EncodeTensorNameSlice("x", [0:3])
    wrong = entry(dtype=2, shape=[3], size=24)
    prefix = write_files(tmp_path, [(b"", header()), (slice_key, wrong), (b"x", parent)])
    with BundleReader(prefix) as reader, pytest.raises(InvalidError, match="does not match"):
        reader.read("x")
    right = float_entry()
    prefix = write_files(tmp_path, [(b"", header()), (slice_key, right), (b"x", parent)], FLOATS)
    with BundleReader(prefix) as reader:
        assert reader.read("x").tolist() == [1.0, 2.0, 3.0]
        assert reader.keys() == ["x"]


def test_partitioned_tensor_larger_than_its_slices_is_refused_before_allocating(
    tmp_path: Path,
) -> None:
    huge = entry(dtype=1, shape=[2**40], slices=[pb.TensorSliceProto(extents=[{"length": 3}])])
    slice_key = b"\x00x\x00\x01\x01\x01\x80\x83"
    prefix = write_files(
        tmp_path, [(b"", header()), (slice_key, float_entry()), (b"x", huge)], FLOATS
    )
    tracemalloc.start()
    try:
        with BundleReader(prefix) as reader, pytest.raises(InvalidError, match="slices hold 3"):
            reader.read("x")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_string_length_checksum_mismatch_is_integrity(tmp_path: Path) -> None:
    # ["ab", "", "xyz"] in TensorFlow's layout, lengths checksum zeroed.
    data = b"\x02\x00\x03" + bytes(4) + b"abxyz"
    value = entry(dtype=7, shape=[3], size=len(data), crc32c=0)
    prefix = write_files(tmp_path, [(b"", header()), (b"x", value)], data)
    with BundleReader(prefix) as reader, pytest.raises(IntegrityError, match="length checksum"):
        reader.read("x")


def test_bad_checkpoint_state_files(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        read_checkpoint_state(tmp_path)
    (tmp_path / "checkpoint").write_text("model_checkpoint_path: 3 {")
    with pytest.raises(MalformedError):
        read_checkpoint_state(tmp_path)


# Codecs: properties on random input.


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=300))
def test_snappy_decoder_on_random_bytes_succeeds_or_raises_malformed(data: bytes) -> None:
    try:
        out = snappy.decompress(data)
    except MalformedError:
        return
    assert len(out) <= snappy.MAX_RATIO * len(data)


def snappy_program() -> st.SearchStrategy[list[tuple[str, Any]]]:
    literal = st.tuples(st.just("lit"), st.binary(min_size=1, max_size=300))
    copy = st.tuples(
        st.just("copy"),
        st.tuples(st.integers(1, 2000), st.integers(1, 64), st.sampled_from([1, 2, 4])),
    )
    return st.lists(st.one_of(literal, copy), max_size=20)


def encode_program(program: list[tuple[str, Any]]) -> tuple[bytes, bytes]:
    """A Snappy block from literal/copy elements, and its decoding done naively."""
    body, out = bytearray(), bytearray()
    for kind, arg in program:
        if kind == "lit":
            n = len(arg) - 1
            body += bytes([n << 2]) if n < 60 else bytes([61 << 2]) + n.to_bytes(2, "little")
            body += arg
            out += arg
            continue
        offset, length, width = arg
        if not out:
            continue
        offset = 1 + (offset - 1) % len(out)
        if width == 1 and 4 <= length <= 11 and offset < 2048:
            body += bytes([1 | ((length - 4) << 2) | ((offset >> 8) << 5), offset & 0xFF])
        else:
            width = 4 if width == 4 else 2
            tag = (2 if width == 2 else 3) | ((length - 1) << 2)
            body += bytes([tag]) + offset.to_bytes(width, "little")
        for _ in range(length):
            out.append(out[-offset])
    return varint(len(out)) + bytes(body), bytes(out)


@settings(max_examples=300, deadline=None)
@given(snappy_program())
def test_snappy_decoder_decodes_every_element_kind(program: list[tuple[str, Any]]) -> None:
    block, expected = encode_program(program)
    assert snappy.decompress(block) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), unique=True, max_size=60), st.integers(1, 20))
def test_block_builder_output_parses_back(keys: list[bytes], interval: int) -> None:
    builder = sstable.BlockBuilder(interval)
    entries = [(k, k[::-1] * 2) for k in sorted(keys)]
    for key, value in entries:
        builder.add(key, value)
    assert sstable.parse_block(builder.finish(), None) == entries
    assert tf_support.block(entries, interval) == builder.finish()


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=200), st.integers(0, 10**6))
def test_random_index_mutations_raise_only_ocf_errors(noise: bytes, seed: int) -> None:
    rng = np.random.default_rng(seed)
    original = table([[(b"", header()), (b"a", float_entry()), (b"b", float_entry(shape=[1, 3]))]])
    data = bytearray(original)
    for _ in range(int(rng.integers(1, 4))):
        at = int(rng.integers(0, len(data)))
        data[at : at + len(noise[:4])] = noise[:4] or bytes([data[at] ^ 0xFF])
    with contextlib.suppress(OCFError):
        sstable.read_table(bytes(data), verify=bool(seed % 2))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**64 - 1))
def test_varint_roundtrip(value: int) -> None:
    from ocf.tensorflow.encoding import decode_varint, encode_varint

    encoded = encode_varint(value)
    assert encoded == varint(value)
    assert decode_varint(encoded, 0, len(encoded)) == (value, len(encoded))


# Partitioned tensors: every slice is checked before the tensor is allocated, and the
# slices are checked not to overlap without memory proportional to the elements.


def partitioned_files(
    tmp_path: Path, code: int, shape: list[int], slices: list[tuple[list[tuple[int, int]],
                                                                    dict[str, int]]],
    data: bytes,
) -> Path:
    """Parent entry "x" of ``shape``, and per slice its extents and stored entry fields."""
    from ocf.tensorflow.slice_keys import slice_key

    parent = pb.BundleEntryProto(dtype=code)
    for dim in shape:
        parent.shape.dims.add(size=dim)
    entries = [(b"", header()), (b"x", b"")]
    for extents, fields in slices:
        proto = parent.slices.add()
        for start, length in extents:
            proto.extents.add(start=start, length=length)
        entries.append((slice_key("x", extents), entry(
            dtype=code, shape=[n for _, n in extents], **fields)))
    entries[1] = (b"x", parent.SerializeToString())
    return write_files(tmp_path, sorted(entries), data)


BIG = 2**40
SHARED = np.arange(1 << 16, dtype=np.float32).tobytes()  # 256 KiB


@pytest.mark.parametrize(
    ("code", "shape", "slices", "data", "error", "match"),
    [
        # float32[2**40] in one slice claiming 0 bytes: 4 TiB would be allocated.
        (1, [BIG], [([(0, BIG)], {"size": 0})], b"", InvalidError, "needs 4398046511104"),
        (1, [BIG], [([(0, BIG)], {"size": 4})], FLOATS, InvalidError, "needs"),
        # A string slice too small for its elements.
        (7, [BIG], [([(0, BIG)], {"size": 4})], FLOATS, InvalidError, "cannot fit"),
        # A slice running past the end of its data file.
        (1, [BIG], [([(0, BIG)], {"size": 4 * BIG})], FLOATS, MalformedError, "past the end"),
        (1, [6], [([(0, 3)], {"size": 12}), ([(3, 3)], {"size": 12, "offset": 4})], FLOATS,
         MalformedError, "past the end"),
        # Sixteen slices of 256 KiB sharing the same stored bytes: 4 MiB out of 256 KiB.
        (1, [16 << 16],
         [([(i << 16, 1 << 16)], {"size": 1 << 18, "crc32c": tf_support.masked(SHARED)})
          for i in range(16)],
         SHARED, InvalidError, "share bytes"),
    ],
    ids=["empty-4TiB", "short-4TiB", "string-4TiB", "past-end-4TiB", "past-end-second",
         "shared-bytes"],
)
def test_hostile_partitioned_entries_are_refused_before_allocating(
    tmp_path: Path, code: int, shape: list[int],
    slices: list[tuple[list[tuple[int, int]], dict[str, int]]], data: bytes,
    error: type[OCFError], match: str,
) -> None:
    prefix = partitioned_files(tmp_path, code, shape, slices, data)
    tracemalloc.start()
    try:
        with BundleReader(prefix) as reader, pytest.raises(error, match=match) as caught:
            reader.read("x")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.key == "x"
    assert caught.value.path is not None
    assert caught.value.path.startswith(str(prefix))
    assert peak < 1 << 20


FOUR = np.array([1.0, 2.0, 3.0, 4.0], np.float32).tobytes()


@pytest.mark.parametrize(
    ("shape", "first", "second"),
    [
        ([4], [(0, 2)], [(1, 2)]),  # the element counts add up, the slices overlap
        ([2, 2], [(0, 2), (0, 1)], [(0, 1), (0, 2)]),
    ],
)
def test_overlapping_slices_with_their_own_bytes_are_invalid(
    tmp_path: Path, shape: list[int], first: list[tuple[int, int]],
    second: list[tuple[int, int]],
) -> None:
    crc = tf_support.masked(FOUR[:8])
    slices = [(first, {"size": 8, "crc32c": crc}),
              (second, {"size": 8, "offset": 8, "crc32c": tf_support.masked(FOUR[8:])})]
    prefix = partitioned_files(tmp_path, 1, shape, slices, FOUR)
    with BundleReader(prefix) as reader, pytest.raises(InvalidError, match="overlap") as caught:
        reader.read("x")
    assert caught.value.key == "x"


def test_assembling_needs_no_memory_per_element_beyond_the_output(tmp_path: Path) -> None:
    # Four int8 slices of 1 MiB: the output (4 MiB) and one slice's bytes at a time;
    # a coverage mask of one byte per element would add 4 MiB.
    full = np.random.default_rng(0).integers(-128, 128, size=(4, 1 << 20), dtype=np.int8)
    with BundleWriter(tmp_path / "ckpt") as writer:
        for i in range(4):
            writer.add_slice("x", full.shape, (i, 0), full[i : i + 1])
    with BundleReader(tmp_path / "ckpt") as reader:
        reader.entry("x")
        tracemalloc.start()
        try:
            value = reader.read("x")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert np.array_equal(value, full)
    assert peak < full.nbytes * 3 // 2


def brick_wall() -> list[tuple[tuple[int, int], ...]]:
    """An irregular tiling of a 6 x 6 tensor: rows of bricks offset against each other."""
    boxes = []
    for row in range(3):
        cuts = [0, 3, 6] if row % 2 == 0 else [0, 1, 4, 6]
        boxes += [((2 * row, 2), (a, b - a)) for a, b in itertools.pairwise(cuts)]
    return boxes


@pytest.mark.parametrize("grid_cells", [1 << 22, 0])  # 0: checked pair by pair
def test_tiling_check_accepts_tilings_and_names_overlapping_slices(
    monkeypatch: pytest.MonkeyPatch, grid_cells: int
) -> None:
    from ocf.tensorflow import tiling

    monkeypatch.setattr(tiling, "MAX_GRID_CELLS", grid_cells)
    wall = brick_wall()
    tiling.check_tiling(wall, "f", "x")
    tiling.check_tiling([((0, 4),), ((4, 0),), ((4, 4),), ((2, 0),)], "f", "x")
    tiling.check_tiling([((i, 1), (0, 2**40)) for i in range(3000)], "f", "x")
    with pytest.raises(InvalidError, match=r"slices \[0:2, 3:6\] and \[1:3, 5:6\] overlap"):
        tiling.check_tiling([*wall, ((1, 2), (5, 1))], "f", "x")
    with pytest.raises(InvalidError, match=r"\[0:3\] and \[2:4\] overlap") as caught:
        tiling.check_tiling([((0, 3),), ((2, 2),)], "f", "x")
    assert (caught.value.path, caught.value.key) == ("f", "x")
    many = [((i, 1), (0, 8)) for i in range(2000)] + [((1999, 1), (7, 1))]
    with pytest.raises(InvalidError, match=r"\[1999:2000, 0:8\] and \[1999:2000, 7:8\]"):
        tiling.check_tiling(many, "f", "x")


def test_irregular_tiling_is_assembled(tmp_path: Path) -> None:
    full = np.arange(36, dtype=np.int32).reshape(6, 6)
    with BundleWriter(tmp_path / "ckpt") as writer:
        for box in brick_wall():
            (r, nr), (c, nc) = box
            writer.add_slice("x", full.shape, (r, c), full[r : r + nr, c : c + nc])
    with BundleReader(tmp_path / "ckpt") as reader:
        assert np.array_equal(reader.read("x"), full)


def test_slices_too_irregular_to_check_are_refused_as_a_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ocf.tensorflow import tiling

    # Thin rows beside thin columns: a grid of 10**6 cells; sorted along either
    # dimension, every row (or column) meets all the others.
    rows = [((i, 1), (0, 1000)) for i in range(1000)]
    columns = [((0, 1000), (1000 + j, 1)) for j in range(1000)]
    tiling.check_tiling(rows + columns, "f", "x")  # on the grid
    monkeypatch.setattr(tiling, "MAX_GRID_CELLS", 1 << 16)
    tiling.check_tiling(rows + columns, "f", "x")  # pair by pair, within the limit
    monkeypatch.setattr(tiling, "MAX_PAIRS", 1 << 16)
    with pytest.raises(LimitExceededError, match="too irregular") as caught:
        tiling.check_tiling(rows + columns, "f", "x")
    assert (caught.value.path, caught.value.key) == ("f", "x")


# The writer's commit: an index never describes data other than its own, even when a
# checkpoint is overwritten and the writer is killed at any step of finish().

STRACE = shutil.which("strace")
WRITE_TAGGED = """
import sys
import numpy as np
from ocf.tensorflow import BundleWriter

def values(tag):
    # Tag 1 and 2 have the same keys and as many data files (4 KiB each, so their
    # names collide), other dtypes and values.
    dtype = np.float32 if tag == 1 else np.float64
    return {k: np.full(4096 // np.dtype(dtype).itemsize, 10 * tag + i, dtype)
            for i, k in enumerate("abc")}

if __name__ == "__main__":
    with BundleWriter(sys.argv[1], max_shard_bytes=4096) as writer:
        for key, array in values(int(sys.argv[2])).items():
            writer.add(key, array)
"""


def tagged_values(tag: int) -> dict[str, np.ndarray]:
    scope: dict[str, Any] = {}
    exec(WRITE_TAGGED, scope)  # the child's own definition of the values
    values: dict[str, np.ndarray] = scope["values"](tag)
    return values


def write_tagged(prefix: Path, tag: int, *strace: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", WRITE_TAGGED, str(prefix), str(tag)]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([*strace, *command], capture_output=True, text=True, env=env,
                          check=False)


def held(prefix: Path) -> str:
    """"none" without an index, else which values ("old" or "new") it holds, exactly."""
    if not Path(f"{prefix}.index").exists():
        return "none"
    with BundleReader(prefix) as reader:  # any OCFError fails the test
        got = {key: reader.read(key) for key in reader}
    for name, tag in (("old", 1), ("new", 2)):
        expected = tagged_values(tag)
        if sorted(got) == sorted(expected) and all(
                got[k].dtype == v.dtype and np.array_equal(got[k], v)
                for k, v in expected.items()):
            return name
    raise AssertionError(f"{prefix} holds neither the old nor the new values: {got}")


def strace_works() -> bool:
    if STRACE is None:
        return False
    probe = subprocess.run([STRACE, "-o", os.devnull, "true"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not strace_works(), reason="needs a working strace")
@pytest.mark.parametrize("syscalls", ["?unlink,?unlinkat", "?rename,?renameat,?renameat2",
                                      "fsync,fdatasync"])
def test_killed_overwrite_never_leaves_an_index_describing_other_data(
    tmp_path: Path, syscalls: str
) -> None:
    # SIGKILL on entry to the k-th call (the call does not happen), for every k
    # until the writer finishes: every point between two steps of finish().
    outcomes = []
    for k in range(1, 60):
        shutil.rmtree(tmp_path / "d", ignore_errors=True)
        prefix = tmp_path / "d" / "ckpt"
        assert write_tagged(prefix, 1).returncode == 0
        assert held(prefix) == "old"
        run = write_tagged(prefix, 2, str(STRACE), "-qq", "-o", os.devnull,
                           "-e", f"trace={syscalls}",
                           "-e", f"inject={syscalls}:signal=SIGKILL:when={k}")
        outcomes.append(held(prefix))
        if run.returncode == 0:
            break
        assert run.returncode in (-9, 128 + 9), run.stderr  # strace dies as its child did
    else:
        raise AssertionError("the writer never finished")
    assert outcomes[-1] == "new"
    if syscalls.startswith("?unlink"):
        assert outcomes[:-1] == ["old"]  # the old index is removed, nothing before
    else:
        assert "none" in outcomes
    assert write_tagged(prefix, 2).returncode == 0  # and the next write succeeds
    assert held(prefix) == "new"


@pytest.mark.skipif(not strace_works(), reason="needs a working strace")
def test_finish_fsyncs_files_and_directory_and_removes_the_old_index_first(
    tmp_path: Path,
) -> None:
    prefix = tmp_path / "ckpt"
    assert write_tagged(prefix, 1).returncode == 0
    log = tmp_path / "strace.log"
    traced = "openat,fsync,fdatasync,?rename,?renameat,?renameat2,?unlink,?unlinkat"
    run = write_tagged(prefix, 2, str(STRACE), "-qq", "-y", "-o", str(log),
                       "-e", f"trace={traced}")
    assert run.returncode == 0, run.stderr
    calls: list[tuple[str, tuple[str, ...]]] = []
    for line in log.read_text().splitlines():
        match = re.match(r"^(\w+)\((.*)\)\s+=\s+(-?\d+)", line)
        if match is None or int(match[3]) < 0:
            continue
        name, args = match[1], match[2]
        pattern = r"^\d+<([^>]*)>" if name in ("fsync", "fdatasync") else r'"([^"]*)"'
        calls.append((name, tuple(re.findall(pattern, args))))

    def first(name: str, paths: tuple[str, ...]) -> int:
        hits = [i for i, (n, p) in enumerate(calls) if n.startswith(name) and p == paths]
        assert hits, (name, paths, calls)
        return hits[0]

    def synced_between(path: str, after: int, before: int) -> bool:
        return any(n in ("fsync", "fdatasync") and p == (path,)
                   for n, p in calls[after + 1 : before])

    index = f"{prefix}.index"
    removed = first("unlink", (index,))
    renames = [(i, p) for i, (n, p) in enumerate(calls) if n.startswith("rename")]
    data = [(i, p) for i, p in renames if ".data-" in p[1]]
    assert [Path(p[1]).name for _, p in data] == [
        f"ckpt.data-0000{i}-of-00003" for i in range(3)]
    published = first("rename", (renames[-1][1][0], index))
    assert renames[-1][0] == published  # the index is renamed last
    directory = str(tmp_path)
    assert synced_between(directory, removed, data[0][0])
    assert synced_between(directory, data[-1][0], published)
    assert synced_between(directory, published, len(calls))
    for i, (temp, _) in [*data, (published, renames[-1][1])]:
        assert synced_between(temp, -1, i), temp  # every file is durable before its rename


# -- file kinds: a reader must never block on, or read forever from, a non-file --


def _small_bundle(tmp_path: Path) -> str:
    prefix = str(tmp_path / "ckpt")
    with BundleWriter(prefix) as writer:
        writer.add("w", np.arange(6, dtype=np.float32))
    return prefix


def _replace_with_fifo(path: str) -> None:
    os.remove(path)
    os.mkfifo(path)


def _run_with_deadline(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child: a reader that blocks is killed and shows as a timeout."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("target", ["index", "data", "state"])
def test_fifo_in_a_tensorflow_checkpoint_is_refused_without_blocking(
    tmp_path: Path, target: str
) -> None:
    prefix = _small_bundle(tmp_path)
    write_checkpoint_state(tmp_path, prefix, [])
    path = {"index": prefix + ".index", "data": prefix + ".data-00000-of-00001",
            "state": str(tmp_path / "checkpoint")}[target]
    _replace_with_fifo(path)
    opener = {"index": f"BundleReader({prefix!r})",
              "data": f"BundleReader({prefix!r}).read('w')",
              "state": f"read_checkpoint_state({str(tmp_path)!r})"}[target]
    result = _run_with_deadline(
        "from ocf.format.errors import NotFoundError\n"
        "from ocf.tensorflow import BundleReader, read_checkpoint_state\n"
        f"try:\n    {opener}\nexcept NotFoundError as exc:\n    print(exc)\n")
    assert result.returncode == 0, result.stderr
    assert "not a regular file" in result.stdout
    assert os.path.basename(path) in result.stdout


def test_data_file_linked_to_a_device_is_refused(tmp_path: Path) -> None:
    prefix = _small_bundle(tmp_path)
    data = prefix + ".data-00000-of-00001"
    os.remove(data)
    os.symlink("/dev/zero", data)
    with BundleReader(prefix) as reader, pytest.raises(NotFoundError, match="not a regular"):
        reader.read("w")
