"""GGUF files, read by OCF's own parser: values, shapes, metadata, quantized types, the
command line, and hostile files.

Valid files are written by the gguf package (llama.cpp's Python writer, and its
quantizer for Q8_0 and Q4_0 tensors) and read back by OCF; the expected values are
the arrays given to the writer. Hostile files are assembled by hand
(foreign_files.assemble) from the documented layout.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

pytest.importorskip("gguf")

import gguf  # the test set-up installs it (the frameworks extra)
import numpy as np
from cli_support import run, run_json
from foreign_files import (
    assemble,
    assert_reads_back,
    kv_u32,
    small_file,
    string,
    tensor_info,
    write_with_gguf,
)

import ocf
from ocf.interop.gguf.ggml_types import TYPES
from ocf.interop.gguf.header import MAX_ARRAY_DEPTH

TENSORS = {"token_embd.weight": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
           "output_norm.weight": np.linspace(-1, 1, 8).astype(np.float16),
           "rope.freqs": np.array([1.0, 0.5, 0.25], dtype=np.float64),
           "ids": np.array([[-3, 7]], dtype=np.int32)}
Q8 = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_with_gguf(tmp_path_factory.mktemp("gguf") / "model.gguf", TENSORS)


@pytest.fixture(scope="module")
def quantized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_with_gguf(tmp_path_factory.mktemp("gguf_q") / "q.gguf",
                           {"norm": np.ones(64, np.float32)},
                           quantized={"blk.0.attn_q.weight": (Q8, "Q8_0"),
                                      "blk.0.ffn_up.weight": (Q8, "Q4_0")})


def test_the_type_table_agrees_with_the_gguf_package_on_every_block_size() -> None:
    sizes = gguf.constants.GGML_QUANT_SIZES
    for code, ours in TYPES.items():
        theirs = gguf.GGMLQuantizationType(code)
        assert theirs.name == ours.name
        assert sizes[theirs] == (ours.block_elements, ours.block_bytes), ours.name


def test_float_and_integer_tensors_read_as_written_with_numpys_shapes(model: Path) -> None:
    assert_reads_back(model, "GGUF", TENSORS)
    with ocf.open(model) as source:
        assert list(source) == list(TENSORS)  # in the file's order
    # GGUF itself stores the dimensions innermost first, as gguf's own reader shows.
    stored = {t.name: list(t.shape) for t in gguf.GGUFReader(str(model)).tensors}
    assert stored["token_embd.weight"] == [4, 3, 2]


def test_bfloat16_tensors_read_as_bfloat16(tmp_path: Path) -> None:
    import ml_dtypes

    values = np.arange(8, dtype=np.float32).reshape(2, 4)
    raw = values.astype(ml_dtypes.bfloat16)
    path = write_with_gguf(tmp_path / "b.gguf", {}, metadata=False)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("w", raw.view(np.uint16), raw_shape=raw.shape,
                      raw_dtype=gguf.GGMLQuantizationType.BF16)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with ocf.open(path) as source:
        assert source["w"].dtype.name == "bfloat16"
        np.testing.assert_array_equal(source.read_tensor("w").astype(np.float32), values)


def test_the_header_metadata_is_exposed_with_its_types(model: Path) -> None:
    with ocf.open(model) as source:
        assert source.metadata["gguf.version"] == 3
        found = source.metadata["gguf.metadata"]
    assert isinstance(found, dict)
    assert found["general.architecture"] == "llama"
    assert found["llama.block_count"] == 2
    assert isinstance(found["llama.block_count"], int)
    assert found["llama.rope.freq_base"] == 10000.0
    assert found["tokenizer.ggml.add_bos_token"] is True
    assert found["tokenizer.ggml.tokens"] == ["<s>", "a", "\u00fc"]
    assert found["tokenizer.ggml.scores"] == [0.0, -1.5, -2.25]


def test_quantized_tensors_are_listed_by_type_and_refused_as_numbers(quantized: Path) -> None:
    with ocf.open(quantized) as source:
        view = source["blk.0.attn_q.weight"]
        assert (view.dtype.name, view.shape) == ("q8_0", (4, 64))
        assert source["blk.0.ffn_up.weight"].dtype.name == "q4_0"
        with pytest.raises(ocf.InvalidError, match=r"Q8_0 is a quantized ggml type") as info:
            source.read_tensor("blk.0.attn_q.weight")
        assert info.value.key == "blk.0.attn_q.weight"
        assert str(quantized) in str(info.value)
        np.testing.assert_array_equal(source.read_tensor("norm"), np.ones(64, np.float32))
    document = run_json("inspect", str(quantized))
    stored = {t["key"]: (t["dtype"], t["stored_bytes"], t["codec"])
              for t in document["tensors"]}
    # 4 rows of 64 values: 8 blocks of 32, 34 bytes each for Q8_0 and 18 for Q4_0.
    assert stored["blk.0.attn_q.weight"] == ("q8_0", 8 * 34, "Q8_0")
    assert stored["blk.0.ffn_up.weight"] == ("q4_0", 8 * 18, "Q4_0")
    verified = run_json("verify", str(quantized))  # the structure; "norm"'s values
    assert (verified["ok"], verified["tensors"]) == (True, 3)
    assert "quantized tensors" in verified["checked"]
    text = run("inspect", str(quantized))
    assert text.returncode == 0, text.stderr
    assert "Q8_0" in text.stdout
    assert "32 in 34 B" in text.stdout


def test_converting_a_quantized_file_is_refused_naming_the_tensor(quantized: Path,
                                                                 tmp_path: Path) -> None:
    done = run("convert", str(quantized), str(tmp_path / "q.ocf"))
    assert done.returncode == 1
    assert "INVALID" in done.stderr
    assert "blk.0.attn_q.weight" in done.stderr
    assert not (tmp_path / "q.ocf").exists()


def test_the_command_line_inspects_verifies_diffs_and_converts(model: Path,
                                                               tmp_path: Path) -> None:
    document = run_json("inspect", "--all", str(model))
    assert document["format"] == "GGUF"
    values = {t["key"]: t["value"] for t in document["tensors"]}
    np.testing.assert_array_equal(np.array(values["token_embd.weight"], np.float32),
                                  TENSORS["token_embd.weight"])
    verified = run_json("verify", str(model))
    assert (verified["ok"], verified["tensors"], verified["checksums"]) == (True, 4, False)
    assert run("tree", str(model)).returncode == 0  # no object graph: says so
    converted = tmp_path / "model.ocf"
    assert run("convert", str(model), str(converted)).returncode == 0
    loaded = ocf.load_file(converted)
    for key, value in TENSORS.items():
        np.testing.assert_array_equal(loaded[key], value)
        assert loaded[key].dtype == value.dtype
    assert ocf.open(converted).metadata["gguf.metadata"]["general.name"] == "tiny"
    assert run("diff", str(model), str(converted)).returncode == 0
    to_safetensors = tmp_path / "model.safetensors"
    assert run("convert", str(model), str(to_safetensors)).returncode == 0
    assert run("diff", str(model), str(to_safetensors)).returncode == 1  # metadata differs
    changed = dict(TENSORS, ids=np.array([[-3, 8]], np.int32))
    other = write_with_gguf(tmp_path / "other.gguf", changed)
    report = run_json("diff", str(model), str(other), status=1)
    assert [t["key"] for t in report["tensors"]] == ["ids"]


def test_writing_gguf_is_refused_clearly(model: Path, tmp_path: Path) -> None:
    ocf.save_file(TENSORS, tmp_path / "m.ocf")
    done = run("convert", str(tmp_path / "m.ocf"), str(tmp_path / "m.gguf"))
    assert done.returncode == 1
    assert "does not write them" in done.stderr


# -- hostile files ------------------------------------------------------------------------


def _read_everything(path: Path) -> None:
    with ocf.open(path) as source:
        for key in source:
            source.read_tensor(key)


def _refused(tmp_path: Path, data: bytes, error: type[ocf.OCFError], *words: str) -> str:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(error) as info:
        _read_everything(path)
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message, message
    return message


def test_the_hand_built_base_file_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "ok.gguf"
    path.write_bytes(small_file())
    with ocf.open(path) as source:
        np.testing.assert_array_equal(source.read_tensor("w"),
                                      np.arange(6, dtype=np.float32).reshape(2, 3))


def test_version_2_files_read_as_version_3_ones(tmp_path: Path) -> None:
    path = tmp_path / "v2.gguf"
    path.write_bytes(small_file(version=2))
    with ocf.open(path) as source:
        assert source.metadata["gguf.version"] == 2
        np.testing.assert_array_equal(source.read_tensor("w"),
                                      np.arange(6, dtype=np.float32).reshape(2, 3))


def test_every_truncation_is_an_ocf_error_naming_the_file(tmp_path: Path) -> None:
    whole = small_file()
    for length in range(len(whole)):
        _refused(tmp_path, whole[:length], ocf.MalformedError)


@pytest.mark.parametrize(("data", "error", "words"), [
    (b"GGUG" + small_file()[4:], ocf.MalformedError, ("magic", "offset 0")),
    (assemble([], [], b"", version=1), ocf.UnsupportedVersionError, ("version 1",)),
    (assemble([], [], b"", version=3 << 24), ocf.UnsupportedVersionError, ("big-endian",)),
    (assemble([], [], b"", tensor_count=1 << 62), ocf.MalformedError,
     ("tensor count", "offset 8")),
    (assemble([], [], b"", pair_count=1 << 40), ocf.MalformedError,
     ("metadata count", "offset 16")),
    (assemble([struct.pack("<Q", 1 << 60) + b"k"], [], b""), ocf.MalformedError,
     ("metadata key 0", "offset 24")),
    (assemble([string("k") + struct.pack("<I", 13)], [], b""), ocf.MalformedError,
     ("unknown value type 13",)),
    (assemble([string("k") + struct.pack("<IB", 7, 2)], [], b""), ocf.MalformedError,
     ("a bool is 0 or 1",)),
    (assemble([string(b"\xff\xfe")], [], b""), ocf.MalformedError, ("not UTF-8",)),
    (assemble([kv_u32("k", 1), kv_u32("k", 2)], [], b""), ocf.MalformedError,
     ("appears twice",)),
    (assemble([string("k") + struct.pack("<IIQ", 9, 4, 1 << 61)], [], b""), ocf.MalformedError,
     ("length", "do not fit")),
    (assemble([string("k") + struct.pack("<I", 9)
               + struct.pack("<IQ", 9, 1) * (MAX_ARRAY_DEPTH + 1)], [], b""),
     ocf.LimitExceededError, ("nest deeper",)),
    (assemble([kv_u32("general.alignment", 24)], [], b""), ocf.InvalidError,
     ("general.alignment", "power of two")),
    (assemble([kv_u32("general.alignment", 0)], [], b""), ocf.InvalidError,
     ("general.alignment",)),
    (assemble([], [tensor_info("w", [3, 2], 99, 0)], bytes(24)), ocf.InvalidError,
     ("ggml type 99",)),
    (assemble([], [tensor_info("w", [3, 2], 0, 8)], bytes(64)), ocf.MalformedError,
     ("not a multiple of the alignment",)),
    (assemble([], [tensor_info("w", [3, 2], 0, 0)], bytes(20)), ocf.MalformedError,
     ("run past", "data section")),
    (assemble([], [tensor_info("w", [3, 2], 0, 1 << 62)], bytes(24)), ocf.MalformedError,
     ("run past",)),
    (assemble([], [tensor_info("w", [1 << 40, 1 << 40], 0, 0)], bytes(24)),
     ocf.LimitExceededError, ("elements",)),
    (assemble([], [tensor_info("w", [1] * 33, 0, 0)], bytes(32)), ocf.LimitExceededError,
     ("dimensions",)),
    (assemble([], [tensor_info("q", [33, 1], 8, 0)], bytes(64)), ocf.InvalidError,
     ("block of 32",)),
    (assemble([], [tensor_info("q", [], 8, 0)], bytes(64)), ocf.InvalidError,
     ("at least one dimension",)),
    (assemble([], [tensor_info("a", [16], 0, 0), tensor_info("b", [8], 0, 32)], bytes(64)),
     ocf.InvalidError, ("overlaps",)),
    (assemble([], [tensor_info("a", [8], 0, 0), tensor_info("a", [8], 0, 32)], bytes(64)),
     ocf.MalformedError, ("appears twice",)),
], ids=["magic", "version-1", "big-endian", "tensor-count", "pair-count", "key-length",
        "value-type", "bool", "utf8", "duplicate-key", "array-length", "array-depth",
        "alignment-24", "alignment-0", "ggml-type", "unaligned-offset", "short-data",
        "huge-offset", "huge-shape", "rank", "partial-block", "quantized-scalar", "overlap",
        "duplicate-tensor"])
def test_hostile_headers_are_refused_naming_file_field_and_offset(
        tmp_path: Path, data: bytes, error: type[ocf.OCFError], words: tuple[str, ...]
        ) -> None:
    _refused(tmp_path, data, error, *words)


def test_a_huge_declared_string_allocates_nothing_before_refusing(tmp_path: Path) -> None:
    from memory_support import traced_memory

    data = assemble([struct.pack("<Q", (1 << 63) - 1) + b"x"], [], b"")
    with traced_memory() as traced:
        _refused(tmp_path, data, ocf.MalformedError, "metadata key 0", "do not fit")
    assert traced.peak < 1 << 20


def test_json_of_inspect_carries_the_gguf_metadata(model: Path) -> None:
    done = run("inspect", "--json", str(model))
    metadata = json.loads(done.stdout)["metadata"]
    assert metadata["gguf.metadata"]["tokenizer.ggml.tokens"] == ["<s>", "a", "\u00fc"]
