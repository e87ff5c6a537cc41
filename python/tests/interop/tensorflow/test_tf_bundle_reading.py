"""ocf.tensorflow's BundleReader on TensorFlow 2.21's own checkpoints, and on tables built by hand.

TensorFlow writes its checkpoints once per session in the session's one
TensorFlow process (the ``tf_dir`` fixture of conftest.py, through
tf_support.run) and reads them back with its own reader for the expected
values: every value below comes from TensorFlow, not from the code under test.
ocf.tensorflow itself never imports TensorFlow (the last TensorFlow test here
runs it where TensorFlow cannot be imported).

See test_tf_bundle_writing.py for BundleWriter, test_tf_bundle_hostile.py for
damaged and hostile files, test_tf_bundle_partitioned.py for partitioned
tensors, test_tf_bundle_codecs.py for Snappy, blocks and varints, and
test_tf_bundle_crash.py for a writer killed while it commits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import tf_support
from bundle_files import (
    FLOATS,
    SRC,
    SUB_BYTE_CODES,
    float_entry,
    header,
    one_tensor_files,
    write_files,
)
from tf_support import GENERATED, QUANTIZED, SUB_BYTE

from ocf.format.errors import (
    UnknownRequiredFeatureError,
)
from ocf.tensorflow import (
    BundleReader,
    is_tensorflow_checkpoint,
    is_tf_checkpoint,
    read_checkpoint_state,
)
from ocf.tensorflow.v1 import trackable_object_graph_pb2

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


def test_is_tensorflow_checkpoint_accepts_prefix_index_path_and_directory(tf_dir: Path) -> None:
    prefix = tf_dir / GENERATED["object"]
    assert is_tensorflow_checkpoint(prefix)
    assert is_tensorflow_checkpoint(f"{prefix}.index")
    assert is_tensorflow_checkpoint(prefix.parent)
    assert not is_tensorflow_checkpoint(tf_dir / "alldtypes")  # a directory without `checkpoint`
    assert not is_tensorflow_checkpoint(f"{prefix}.data-00000-of-00001")
    assert not is_tensorflow_checkpoint(tf_dir / "nothing")
    assert is_tf_checkpoint is is_tensorflow_checkpoint  # the name before 0.2.0 still works


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
