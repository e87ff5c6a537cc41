"""safetensors and npz conversion (ocf.interop) and ``ocf convert``, with the real packages.

Files are produced and checked by the safetensors package and by NumPy
themselves; the converters never use them.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

import ml_dtypes
import numpy as np
import safetensors.numpy as st_numpy
import safetensors.torch as st_torch
import torch
from cli_support import run
from memory_support import traced_memory

import ocf
from ocf.interop.base import Format
from ocf.interop.converting import convert
from ocf.interop.npz import convert as npz
from ocf.interop.registry import FORMATS, by_name
from ocf.interop.safetensors import convert as safetensors


def torch_tensors() -> dict[str, object]:
    """One tensor of every safetensors dtype OCF stores, odd sizes, a 0-d and an empty one."""
    g = torch.Generator().manual_seed(7)
    floats = torch.randn(3, 5, generator=g)
    return {
        "f32": floats, "f64": torch.randn(2, 3, generator=g, dtype=torch.float64),
        "f16": floats.half(), "bf16": floats.bfloat16(),
        "f8_e4m3": floats.to(torch.float8_e4m3fn), "f8_e5m2": floats.to(torch.float8_e5m2),
        "i8": torch.randint(-128, 127, (7,), generator=g, dtype=torch.int8),
        "u8": torch.randint(0, 255, (7,), generator=g, dtype=torch.uint8),
        "i16": torch.tensor([-3, 30000], dtype=torch.int16),
        "u16": torch.tensor([1, 65535], dtype=torch.uint16),
        "i32": torch.tensor([[-(2**31), 2**31 - 1]], dtype=torch.int32),
        "u32": torch.tensor([2**32 - 1], dtype=torch.uint32),
        "i64": torch.tensor(-(2**62), dtype=torch.int64),
        "u64": torch.tensor([2**64 - 1], dtype=torch.uint64),
        "bool": torch.tensor([True, False, True]),
        "c64": torch.complex(floats[0], floats[1]),
        "empty": torch.zeros(0, 4),
        "layer.0/weight": floats.T.contiguous(),  # names with '.' and '/'
    }


METADATA = {"format": "pt", "note": 'quotes " and \\ and\nnewline and é ✓', "z": "",
            "a": "1", "m": "2", "b": "3"}


@pytest.fixture
def st_file(tmp_path: Path) -> Path:
    path = tmp_path / "model.safetensors"
    st_torch.save_file(torch_tensors(), str(path), metadata=METADATA)
    return path


# -- safetensors ----------------------------------------------------------------


def test_safetensors_file_converts_to_ocf_and_back_bit_exactly(st_file: Path,
                                                               tmp_path: Path) -> None:
    safetensors.to_ocf(st_file, tmp_path / "model.ocf")
    safetensors.from_ocf(tmp_path / "model.ocf", tmp_path / "back.safetensors")
    assert (tmp_path / "back.safetensors").read_bytes() == st_file.read_bytes()


def test_safetensors_tensors_arrive_in_ocf_with_their_dtypes_and_values(
        st_file: Path, tmp_path: Path) -> None:
    safetensors.to_ocf(st_file, tmp_path / "model.ocf")
    loaded = ocf.load_file(tmp_path / "model.ocf")
    for key, tensor in torch_tensors().items():
        stored = loaded[key]
        assert stored.shape == tuple(tensor.shape), key
        expected = tensor.reshape(-1).view(torch.uint8).numpy().tobytes()
        assert stored.tobytes() == expected, key
    assert loaded["bf16"].dtype == ml_dtypes.bfloat16
    assert loaded["f8_e4m3"].dtype == ml_dtypes.float8_e4m3fn
    assert loaded["f8_e5m2"].dtype == ml_dtypes.float8_e5m2
    assert loaded["bool"].dtype == np.bool_
    assert loaded["c64"].dtype == np.complex64


def test_safetensors_metadata_is_kept_as_a_string_map(st_file: Path, tmp_path: Path) -> None:
    safetensors.to_ocf(st_file, tmp_path / "model.ocf")
    with ocf.open(tmp_path / "model.ocf") as reader:
        assert reader.metadata["safetensors.metadata"] == METADATA


def test_safetensors_export_reads_back_in_the_safetensors_package(tmp_path: Path) -> None:
    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4),
              "h": np.ones(5, ml_dtypes.bfloat16), "step": np.array(9, np.int64)}
    ocf.save_file(arrays, tmp_path / "a.ocf",
                  metadata={"safetensors.metadata": {"author": "me"}})
    safetensors.from_ocf(tmp_path / "a.ocf", tmp_path / "a.safetensors")
    back = st_numpy.load_file(str(tmp_path / "a.safetensors"))
    assert back.keys() == arrays.keys()
    for key, value in arrays.items():
        assert back[key].dtype == value.dtype
        assert back[key].tobytes() == value.tobytes()
    from safetensors import safe_open
    with safe_open(str(tmp_path / "a.safetensors"), "np") as f:
        assert f.metadata() == {"author": "me"}


def test_safetensors_export_equals_the_package_s_own_bytes(tmp_path: Path) -> None:
    """An OCF checkpoint written by ocf (no recorded order) exports the bytes
    safetensors.numpy.save_file writes for the same tensors and one metadata key."""
    arrays = {"b": np.ones((2, 2), np.float16), "a": np.zeros(3, np.float64),
              "c": np.arange(4, dtype=np.uint8), "d": np.array([True])}
    ocf.save_file(arrays, tmp_path / "a.ocf", metadata={"safetensors.metadata": {"k": "v"}})
    safetensors.from_ocf(tmp_path / "a.ocf", tmp_path / "mine.safetensors")
    st_numpy.save_file(arrays, str(tmp_path / "theirs.safetensors"), metadata={"k": "v"})
    assert (tmp_path / "mine.safetensors").read_bytes() == \
        (tmp_path / "theirs.safetensors").read_bytes()


def test_safetensors_export_refuses_a_dtype_it_has_no_name_for(tmp_path: Path) -> None:
    ocf.save_file({"z": np.zeros(2, np.complex128)}, tmp_path / "a.ocf")
    with pytest.raises(ocf.InvalidError, match="complex128") as info:
        safetensors.from_ocf(tmp_path / "a.ocf", tmp_path / "a.safetensors")
    assert info.value.key == "z"
    assert not (tmp_path / "a.safetensors").exists()


def test_safetensors_export_warns_about_metadata_it_drops(tmp_path: Path) -> None:
    ocf.save_file({"x": np.ones(1)}, tmp_path / "a.ocf", metadata={"epoch": 3})
    with pytest.warns(UserWarning, match="'epoch'"):
        safetensors.from_ocf(tmp_path / "a.ocf", tmp_path / "a.safetensors")


# -- hostile safetensors headers ----------------------------------------------------


def forge(path: Path, header: object, data: bytes = b"", *, raw: bytes | None = None,
          length: int | None = None) -> Path:
    text = raw if raw is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text) if length is None else length) + text + data)
    return path


def entry(dtype: str, shape: list[int], begin: int, end: int) -> dict[str, object]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


HOSTILE = {
    "shorter than the header length": ({"raw": b"", "length": None}, b"", ocf.MalformedError,
                                       "shorter than the 8-byte"),
    "length past the end": ({"raw": b"{}", "length": 50}, b"", ocf.MalformedError,
                            "runs past the end"),
    "huge length": ({"raw": b"{}", "length": 2**63}, b"", ocf.LimitExceededError,
                    "exceeds the safetensors limit"),
    "not JSON": ({"raw": b"{nope"}, b"", ocf.MalformedError, "not valid JSON"),
    "not UTF-8": ({"raw": b'{"\xff": 1}'}, b"", ocf.MalformedError, "not UTF-8"),
    "JSON list": ({"raw": b"[1]"}, b"", ocf.MalformedError, "does not start with"),
    "NaN": ({"raw": b'{"a": NaN}'}, b"", ocf.MalformedError, "non-JSON number"),
    "duplicate name": ({"raw": b'{"a": {}, "a": {}}'}, b"", ocf.MalformedError, "twice"),
    "deep nesting": ({"raw": b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}"}, b"",
                     ocf.MalformedError, "nests too deeply"),
    "metadata not strings": ({"header": {"__metadata__": {"a": 1}}}, b"", ocf.MalformedError,
                             "map of strings"),
    "unknown dtype": ({"header": {"t": entry("F128", [1], 0, 16)}}, bytes(16),
                      ocf.MalformedError, "unknown dtype"),
    "sub-byte dtype": ({"header": {"t": entry("F4", [2], 0, 1)}}, bytes(1),
                       ocf.InvalidError, "no OCF equivalent"),
    "negative dim": ({"header": {"t": entry("U8", [-1], 0, 0)}}, b"", ocf.MalformedError,
                     "non-negative integers"),
    "bool dim": ({"header": {"t": entry("U8", [True], 0, 1)}}, bytes(1), ocf.MalformedError,
                 "non-negative integers"),
    "huge shape": ({"header": {"t": entry("U8", [2**40, 2**40], 0, 0)}}, b"",
                   ocf.LimitExceededError, "exceeds the limits"),
    "extra field": ({"header": {"t": {**entry("U8", [1], 0, 1), "x": 1}}}, bytes(1),
                    ocf.MalformedError, "exactly dtype"),
    "reversed offsets": ({"header": {"t": entry("U8", [0], 1, 0)}}, bytes(1),
                         ocf.MalformedError, "begin <= end"),
    "size disagrees": ({"header": {"t": entry("F32", [2], 0, 4)}}, bytes(4),
                       ocf.InvalidError, "takes 8"),
    "overlap": ({"header": {"a": entry("U8", [4], 0, 4), "b": entry("U8", [2], 2, 4)}},
                bytes(4), ocf.InvalidError, "overlap"),
    "gap": ({"header": {"a": entry("U8", [2], 0, 2), "b": entry("U8", [2], 4, 6)}},
            bytes(6), ocf.InvalidError, "belong to no tensor"),
    "trailing bytes": ({"header": {"a": entry("U8", [2], 0, 2)}}, bytes(5), ocf.InvalidError,
                       "after the last tensor"),
    "truncated data": ({"header": {"a": entry("U8", [8], 0, 8)}}, bytes(3),
                       ocf.MalformedError, "truncated"),
    # JSON escapes can spell a lone surrogate, which no UTF-8 file (nor OCF) can hold.
    "lone surrogate name": ({"raw": b'{"\\ud800": {"dtype": "U8", "shape": [1], '
                                    b'"data_offsets": [0, 1]}}'}, bytes(1),
                            ocf.MalformedError, "not valid Unicode"),
    "lone surrogate metadata": ({"raw": b'{"__metadata__": {"k": "\\udfff"}}'}, b"",
                                ocf.MalformedError, "not valid Unicode"),
    # Python refuses to parse integers of over 4300 digits with a plain ValueError.
    "5000-digit integer": ({"raw": b'{"a": {"dtype": "U8", "shape": [' + b"1" * 5000
                                   + b'], "data_offsets": [0, 1]}}'}, bytes(1),
                           ocf.MalformedError, "not valid JSON"),
    # Names ocf.Writer refuses: the error names the safetensors file too.
    "empty name": ({"header": {"": entry("U8", [1], 0, 1)}}, bytes(1), ocf.InvalidError,
                   "non-empty"),
    "NUL in name": ({"header": {"a\0b": entry("U8", [1], 0, 1)}}, bytes(1),
                    ocf.InvalidError, "without NUL"),
    "name too long": ({"header": {"n" * 5000: entry("U8", [1], 0, 1)}}, bytes(1),
                      ocf.LimitExceededError, "above the limit"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_safetensors_header_is_refused_with_an_ocf_error(case: str,
                                                                 tmp_path: Path) -> None:
    spec, data, error, message = HOSTILE[case]
    src = tmp_path / "bad.safetensors"
    if case == "shorter than the header length":
        src.write_bytes(b"\x01\x02")
    else:
        forge(src, spec.get("header"), data, raw=spec.get("raw"),  # type: ignore[arg-type]
              length=spec.get("length"))  # type: ignore[arg-type]
    with pytest.raises(error, match=message) as info:
        safetensors.to_ocf(src, tmp_path / "out.ocf")
    assert str(src) in str(info.value)
    assert info.value.path == str(src)
    assert not (tmp_path / "out.ocf").exists()


@pytest.mark.parametrize("make", [lambda p: p / "missing.safetensors", lambda p: p],
                         ids=["missing", "directory"])
def test_safetensors_and_npz_source_that_is_no_file_is_not_found(
        make: Callable[[Path], Path], tmp_path: Path) -> None:
    for module in (safetensors, npz):
        with pytest.raises(ocf.NotFoundError) as info:
            module.to_ocf(make(tmp_path), tmp_path / "out.ocf")  # type: ignore[attr-defined]
        assert info.value.path == str(make(tmp_path))


def test_safetensors_export_refuses_a_tensor_named_like_the_metadata_field(
        tmp_path: Path) -> None:
    ocf.save_file({"__metadata__": np.ones(2, np.float32)}, tmp_path / "a.ocf")
    with pytest.raises(ocf.InvalidError, match="metadata field") as info:
        safetensors.from_ocf(tmp_path / "a.ocf", tmp_path / "a.safetensors")
    assert info.value.key == "__metadata__"
    assert not (tmp_path / "a.safetensors").exists()


def test_writer_refuses_a_key_utf8_cannot_encode_when_written_not_at_commit(
        tmp_path: Path) -> None:
    with ocf.Writer(tmp_path / "a.ocf") as writer:
        with pytest.raises(ocf.InvalidError, match="not valid Unicode") as info:
            writer.write("w\ud800", np.zeros(1))
        assert info.value.key == "w\ud800"
        writer.write("ok", np.zeros(1))  # the writer is still usable
    assert list(ocf.load_file(tmp_path / "a.ocf")) == ["ok"]


def test_safetensors_errors_name_the_tensor(tmp_path: Path) -> None:
    src = forge(tmp_path / "bad.safetensors", {"layer/w": entry("F32", [3], 0, 8)}, bytes(8))
    with pytest.raises(ocf.InvalidError) as info:
        safetensors.to_ocf(src, tmp_path / "out.ocf")
    assert info.value.key == "layer/w"


def test_safetensors_header_padded_with_spaces_and_empty_file_convert(tmp_path: Path) -> None:
    src = forge(tmp_path / "empty.safetensors", None, raw=b"{}      ")
    safetensors.to_ocf(src, tmp_path / "e.ocf")
    assert ocf.load_file(tmp_path / "e.ocf") == {}
    safetensors.from_ocf(tmp_path / "e.ocf", tmp_path / "back.safetensors")
    assert st_numpy.load_file(str(tmp_path / "back.safetensors")) == {}


# -- npz ------------------------------------------------------------------------------


def npz_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {
        "w": rng.normal(size=(3, 4)).astype(np.float32),
        "big_endian": np.arange(6, dtype=">i4").reshape(2, 3),
        "fortran": np.asfortranarray(rng.normal(size=(2, 5))),
        "scalar": np.array(2.5, np.float16),
        "flags": np.array([True, False]),
        "c": np.array([1 + 2j], np.complex128),
        "empty": np.zeros((0, 3), np.uint16),
        "layer/0": np.arange(3, dtype=np.int8),
    }


def test_npz_converts_to_ocf_and_back_with_equal_arrays(tmp_path: Path) -> None:
    arrays = npz_arrays()
    np.savez(tmp_path / "a.npz", **arrays)
    npz.to_ocf(tmp_path / "a.npz", tmp_path / "a.ocf")
    npz.from_ocf(tmp_path / "a.ocf", tmp_path / "b.npz")
    with np.load(tmp_path / "b.npz", allow_pickle=False) as back:
        assert sorted(back.files) == sorted(arrays)
        for key, value in arrays.items():
            assert back[key].shape == value.shape, key
            assert back[key].dtype == value.dtype.newbyteorder("<"), key
            np.testing.assert_array_equal(back[key], value)


def test_npz_compressed_archive_converts(tmp_path: Path) -> None:
    np.savez_compressed(tmp_path / "a.npz", x=np.arange(1000.0))
    npz.to_ocf(tmp_path / "a.npz", tmp_path / "a.ocf")
    np.testing.assert_array_equal(ocf.load_file(tmp_path / "a.ocf")["x"], np.arange(1000.0))


def test_npz_object_array_is_refused_without_unpickling(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", ok=np.ones(2), bad=np.array([{"x": 1}], dtype=object))
    with pytest.raises(ocf.InvalidError, match="object arrays need pickle") as info:
        npz.to_ocf(tmp_path / "a.npz", tmp_path / "a.ocf")
    assert info.value.key == "bad"


def test_npz_member_whose_header_claims_more_data_than_stored_is_refused(
        tmp_path: Path) -> None:
    header = np.lib.format.header_data_from_array_1_0(np.zeros(4, np.float64))
    header["shape"] = (2**40,)  # a terabyte, backed by 32 bytes
    with zipfile.ZipFile(tmp_path / "a.npz", "w") as archive, \
            archive.open("x.npy", "w") as member:
        np.lib.format.write_array_header_1_0(member, header)
        member.write(bytes(32))
    with pytest.raises(ocf.MalformedError, match="declares"):
        npz.to_ocf(tmp_path / "a.npz", tmp_path / "a.ocf")


@pytest.mark.parametrize("text", ["{'descr': '<f4', 'fortran_order': False, 'shape': (3, }",
                                  "{'descr': '<f4', 'fortran_order': False, 'shape': " +
                                  "(" * 200 + ")" * 200 + "}",
                                  "{'descr': '<f4', 'fortran_order': False, 'shape': 1 +}"])
def test_npz_member_whose_header_does_not_parse_is_malformed_not_a_tokenizer_error(
        tmp_path: Path, text: str) -> None:
    # numpy's header parser tokenizes and literal_evals the header: an unterminated
    # tuple raises tokenize.TokenError, which once escaped from ocf convert.
    raw = text.encode("latin1")
    raw += b" " * (-(10 + len(raw) + 1) % 64) + b"\n"
    member = b"\x93NUMPY\x01\x00" + len(raw).to_bytes(2, "little") + raw + bytes(12)
    with zipfile.ZipFile(tmp_path / "a.npz", "w") as archive:
        archive.writestr("x.npy", member)
    with pytest.raises(ocf.MalformedError, match=r"a\.npz: tensor 'x': not a valid \.npy"):
        npz.to_ocf(tmp_path / "a.npz", tmp_path / "a.ocf")
    assert not (tmp_path / "a.ocf").exists()


def test_npz_that_is_not_a_zip_is_malformed(tmp_path: Path) -> None:
    (tmp_path / "a.npz").write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(ocf.MalformedError, match="ZIP"):
        npz.to_ocf(tmp_path / "a.npz", tmp_path / "a.ocf")


# -- hostile npz archives -------------------------------------------------------------


def npy(descr: str = "<f4", shape: object = (1,), data: bytes = bytes(4)) -> bytes:
    """A .npy member with the header NumPy would write for these (possibly bad) values."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": descr, "fortran_order": False,
                                               "shape": shape})
    return out.getvalue() + data


def archive(members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> bytearray:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return bytearray(out.getvalue())


def patched(raw: bytearray, *, local: dict[int, bytes] | None = None,
            central: dict[int, bytes] | None = None) -> bytearray:
    """``raw`` with bytes replaced at offsets into the first local and central headers."""
    for base, changes in ((0, local or {}), (raw.find(b"PK\x01\x02"), central or {})):
        for offset, value in changes.items():
            raw[base + offset:base + offset + len(value)] = value
    return raw


def u32(value: int) -> bytes:
    return struct.pack("<I", value)


def declaring(method: int, count: int) -> bytearray:
    """16 KiB of float32 zeros whose .npy header and ZIP sizes agree on ``count`` of them."""
    header = npy(shape=(count,), data=b"")
    declared = u32(len(header) + 4 * count)
    return patched(archive({"a.npy": header + bytes(4 * 4096)}, method),
                   local={22: declared}, central={24: declared})


def corrupt_stream(method: int) -> bytearray:
    raw = archive({"a.npy": npy(shape=(1000,), data=np.arange(1000, dtype="<f4").tobytes())},
                  method)
    for i in range(60, 90):
        raw[i] ^= 0xFF
    return raw


NPZ_HOSTILE: dict[str, tuple[Callable[[], bytearray], type[ocf.OCFError], str]] = {
    # .npy headers NumPy parses but whose values no array has
    "negative shape": (lambda: archive({"a.npy": npy(shape=(-2, -3), data=bytes(24))}),
                       ocf.MalformedError, "non-negative integers"),
    "bool in shape": (lambda: archive({"a.npy": npy(shape=(True,))}), ocf.MalformedError,
                      "non-negative integers"),
    # dtypes OCF has no equivalent for: refused by ocf.format.dtypes, named here with the file
    "datetime dtype": (lambda: archive({"a.npy": npy("<M8[s]", data=bytes(8))}),
                       ocf.InvalidError, "no OCF equivalent"),
    "void dtype": (lambda: archive({"a.npy": npy("|V4")}), ocf.InvalidError,
                   "no OCF equivalent"),
    # damaged ZIP structures
    "encrypted flag": (lambda: patched(archive({"a.npy": npy()}), local={6: b"\x01"},
                                       central={8: b"\x01"}),
                       ocf.InvalidError, "encrypted"),
    "local header offset past the end": (
        lambda: patched(archive({"a.npy": npy()}), central={42: u32(1 << 30)}),
        ocf.MalformedError, "do not lie inside"),
    "compressed size past the end": (
        lambda: patched(archive({"a.npy": npy()}), central={20: u32(1 << 30)}),
        ocf.MalformedError, "do not lie inside"),
    "name flagged UTF-8 that is not": (
        lambda: bytearray(bytes(archive({"aéb.npy": npy()})).replace(
            "aéb".encode(), b"a\xff\xfeb")),
        ocf.MalformedError, "not a readable"),
    "corrupt deflate stream": (lambda: corrupt_stream(zipfile.ZIP_DEFLATED),
                               ocf.MalformedError, "not a readable"),
    # compression ZIP cannot decode within bounds (bzip2 reaches 10^6:1), nor np.savez writes
    "bzip2 member": (lambda: corrupt_stream(zipfile.ZIP_BZIP2), ocf.InvalidError,
                     "bzip2 is not read"),
    "LZMA member": (lambda: corrupt_stream(zipfile.ZIP_LZMA), ocf.InvalidError,
                    "LZMA is not read"),
    # declared sizes the compressed bytes cannot back: refused before any allocation
    "stored member declaring more than it stores": (
        lambda: declaring(zipfile.ZIP_STORED, 1 << 28), ocf.LimitExceededError,
        "more than the 16512 bytes stored"),
    "deflated member declaring over 1032:1": (
        lambda: declaring(zipfile.ZIP_DEFLATED, 1 << 29), ocf.LimitExceededError,
        "more than 1032 times"),
    # names ocf.Writer refuses: the error names the archive too
    "empty member name": (lambda: archive({".npy": npy()}), ocf.InvalidError, "non-empty"),
}


@pytest.mark.parametrize("case", sorted(NPZ_HOSTILE))
def test_hostile_npz_is_refused_with_an_ocf_error_naming_it_in_bounded_memory(
        case: str, tmp_path: Path) -> None:
    build, error, message = NPZ_HOSTILE[case]
    src = tmp_path / "bad.npz"
    src.write_bytes(build())
    with (traced_memory() as memory,
          pytest.raises(error, match=message) as info):  # any other exception fails
        npz.to_ocf(src, tmp_path / "out.ocf")
    assert info.value.path == str(src)
    assert memory.peak < 4 << 20
    assert not (tmp_path / "out.ocf").exists()


def test_npz_deflate_bomb_takes_the_memory_of_its_one_array(tmp_path: Path) -> None:
    array_bytes = 32 << 20
    np.savez_compressed(tmp_path / "bomb.npz", a=np.zeros(array_bytes // 4, np.float32))
    assert (tmp_path / "bomb.npz").stat().st_size < array_bytes // 1000
    with traced_memory() as memory:
        npz.to_ocf(tmp_path / "bomb.npz", tmp_path / "bomb.ocf")
    # Reading the data whole, then copying it to C order, took twice this.
    assert memory.peak < array_bytes + (4 << 20)
    assert not ocf.load_file(tmp_path / "bomb.ocf")["a"].any()


def test_npz_arrays_read_in_many_pieces_keep_order_and_byte_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(npz, "PIECE_BYTES", 24)  # several pieces, and uneven ones
    rng = np.random.default_rng(5)
    arrays = {"fortran": np.asfortranarray(rng.normal(size=(7, 5, 3))),
              "big_endian_fortran": np.asfortranarray(np.arange(60, dtype=">i4").reshape(6, 10)),
              "big_endian": np.arange(33, dtype=">f2"), "bytes": np.arange(50, dtype=np.uint8),
              "scalar": np.array(3 + 4j, ">c16")}
    np.savez_compressed(tmp_path / "a.npz", **arrays)  # type: ignore[arg-type]
    npz.to_ocf(tmp_path / "a.npz", tmp_path / "a.ocf")
    loaded = ocf.load_file(tmp_path / "a.ocf")
    for key, value in arrays.items():
        assert loaded[key].dtype == value.dtype.newbyteorder("<"), key
        np.testing.assert_array_equal(loaded[key], value, err_msg=key)


def test_npz_export_refuses_bfloat16(tmp_path: Path) -> None:
    ocf.save_file({"h": np.ones(2, ml_dtypes.bfloat16)}, tmp_path / "a.ocf")
    with pytest.raises(ocf.InvalidError, match="bfloat16"):
        npz.from_ocf(tmp_path / "a.ocf", tmp_path / "a.npz")


# -- ocf convert ----------------------------------------------------------------------


def test_cli_converts_safetensors_to_ocf_and_back_bit_exactly(st_file: Path,
                                                              tmp_path: Path) -> None:
    done = run("convert", str(st_file), str(tmp_path / "model.ocf"))
    assert done.returncode == 0, done.stderr
    assert "(safetensors)" in done.stdout
    done = run("convert", str(tmp_path / "model.ocf"), str(tmp_path / "back.safetensors"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "back.safetensors").read_bytes() == st_file.read_bytes()


def test_cli_converts_npz_to_an_ocf_directory_and_to_safetensors(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", x=np.arange(4.0), y=np.eye(2, dtype=np.int32))
    done = run("convert", str(tmp_path / "a.npz"), str(tmp_path / "ckpt"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ckpt").is_file()  # no suffix: OCF, one file
    done = run("convert", str(tmp_path / "a.npz"), str(tmp_path / "out"),
                   "--to", "safetensors")
    assert done.returncode == 0, done.stderr
    back = st_numpy.load_file(str(tmp_path / "out"))
    np.testing.assert_array_equal(back["y"], np.eye(2, dtype=np.int32))


def test_cli_unknown_target_format_fails_with_a_message(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", x=np.ones(1))
    done = run("convert", str(tmp_path / "a.npz"), str(tmp_path / "b"), "--to", "onnx")
    assert done.returncode == 1
    assert "unknown checkpoint format 'onnx'" in done.stderr
    assert not (tmp_path / "b").exists()


def test_cli_undetectable_source_fails_with_a_message(tmp_path: Path) -> None:
    # (.bin, a pickle, is refused by name: test_cli.py)
    (tmp_path / "weights.dat").write_bytes(b"\0" * 16)
    done = run("convert", str(tmp_path / "weights.dat"), str(tmp_path / "b.ocf"))
    assert done.returncode == 1
    assert "cannot tell the format" in done.stderr


def test_cli_missing_source_is_not_found(tmp_path: Path) -> None:
    done = run("convert", str(tmp_path / "nothing.safetensors"), str(tmp_path / "b.ocf"))
    assert done.returncode == 1
    assert done.stderr.startswith("NOT_FOUND")


def test_cli_conversion_error_exits_non_zero_and_names_the_source(tmp_path: Path) -> None:
    forge(tmp_path / "bad.safetensors", {"t": entry("F32", [2], 0, 4)}, bytes(4))
    done = run("convert", str(tmp_path / "bad.safetensors"), str(tmp_path / "b.npz"))
    assert done.returncode == 1
    assert done.stderr.startswith("INVALID")
    assert "bad.safetensors" in done.stderr


def test_ocf_to_ocf_is_refused() -> None:
    with pytest.raises(ocf.InvalidError, match="both OCF"):
        convert("a.ocf", "b.ocf", source_format="ocf")


def test_every_registered_format_is_a_whole_format_with_one_name() -> None:
    for fmt in FORMATS:
        # A Format subclass that left a method out could not have been instantiated.
        assert isinstance(fmt, Format), fmt
        assert by_name(fmt.name) is fmt
        assert by_name(fmt.title) is fmt, "the name people read is the same name"
    assert len({fmt.name for fmt in FORMATS}) == len(FORMATS)
