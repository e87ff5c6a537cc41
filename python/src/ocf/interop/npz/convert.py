"""NumPy ``.npz`` archives to OCF checkpoints and back.

An ``.npz`` file is a ZIP archive with one ``.npy`` member per array, named
after the array (``np.savez``). Reading goes through the archive member by
member with NumPy's own header parser (never pickle: object arrays are
refused). Every size the archive declares is hostile, so before anything is
allocated:

* a member's compressed bytes must lie inside the file;
* its declared uncompressed size may exceed them by at most the densest
  ratio its compression method can reach: 1 for stored members, 1032 for
  deflate (``np.savez_compressed``; 258 bytes per 2 bits);
* the shape and dtype of its ``.npy`` header must take exactly that size.

Members compressed with bzip2 or LZMA are refused: ZIP's decoders for them
expand a read without limit (bzip2 reaches a million to one), and NumPy
never writes them; neither are encrypted members read. The data is then
decompressed in pieces of at most 1 MiB straight into the array handed to
:class:`ocf.Writer`, so converting takes the memory of one array, itself at
most 1032 times the bytes the file holds, plus a bounded piece: a hostile
archive cannot make the reader reserve memory the file does not back.
Every problem is an OCF error naming the file and member.

An npz file holds no metadata, so none is kept in either direction; OCF
metadata and an object graph are dropped with a warning on export. NumPy
has no built-in bfloat16 or float8 (np.save would keep them as untyped
bytes), and byte-string tensors need pickle; exporting them is refused.
"""

from __future__ import annotations

import os
import tokenize
import zipfile
import zlib
from typing import IO, Any

import numpy as np

from ocf.format import dtypes
from ocf.format.errors import InvalidError, LimitExceededError, MalformedError, OCFError
from ocf.format.limits import MAX_ELEMENTS, MAX_RANK, MAX_TENSORS, nonzero_product
from ocf.format.memory import allocate, out_of_memory
from ocf.format.reader import Reader
from ocf.format.storage.local import atomic_output
from ocf.format.writer import Writer
from ocf.interop.output import open_source, warn_dropped, with_path, written

MEMBER_SUFFIX = ".npy"
# The OCF dtypes NumPy has built in; .npy files name only these.
NATIVE = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                    "uint64", "float16", "float32", "float64", "complex64", "complex128"})
# The compression methods read, with the most uncompressed bytes one compressed
# byte can stand for: deflate codes at best a 258-byte match in 2 bits.
MAX_RATIO = {zipfile.ZIP_STORED: 1, zipfile.ZIP_DEFLATED: 1032}
_METHOD_NAMES = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "LZMA"}
PIECE_BYTES = 1 << 20  # decompressed per read
# What a damaged archive makes zipfile raise (UnicodeDecodeError: a name flagged
# UTF-8 that is not; NotImplementedError: a ZIP feature it lacks). Encrypted
# members (RuntimeError) are refused before zipfile opens them.
# How zlib.error reports Z_MEM_ERROR: out of memory, not a damaged archive [R-ERR-003].
_ZLIB_OUT_OF_MEMORY = "insufficient memory"
# What zlib allocates to inflate: a 32 KiB window and its state, rounded up.
_INFLATE_MEMORY = 1 << 16
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, NotImplementedError, EOFError,
               UnicodeDecodeError)


def read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, path: str
                 ) -> np.ndarray:
    key = member.filename[: -len(MEMBER_SUFFIX)]
    with archive.open(member) as f:
        dtype, shape, fortran = read_npy_header(f, path, key)
        size = int(np.prod(shape, dtype=object)) * dtype.itemsize
        data_length = member.file_size - f.tell()
        if size != data_length:
            raise MalformedError(f"the .npy header declares {size} bytes of {dtype} data of "
                                 f"shape {list(shape)}, the member holds {data_length}",
                                 path=path, key=key)
        # C-ordered little-endian, as OCF stores it; a Fortran-ordered member holds
        # the elements of the transpose in C order. The size is the member's, which
        # _check_member bounded by the bytes the file holds.
        array = allocate(shape, dtype.newbyteorder("<"), "reading this array", path=path,
                         key=key)
        target = array.T if fortran else array
        flat = target.reshape(-1) if target.flags.c_contiguous else target.flat
        step = max(1, PIECE_BYTES // dtype.itemsize)
        for begin in range(0, target.size, step):
            count = min(step, target.size - begin)
            piece = f.read(count * dtype.itemsize)
            if len(piece) != count * dtype.itemsize:
                raise MalformedError(f"member data ends after "
                                     f"{begin * dtype.itemsize + len(piece)} of {size} bytes",
                                     path=path, key=key)
            flat[begin:begin + count] = np.frombuffer(piece, dtype)
        if f.read(1):  # unreachable unless zipfile's own bound on file_size fails
            raise MalformedError("member holds more data than its header declares",
                                 path=path, key=key)
    return array


# What numpy's header parser raises on hostile bytes: its own ValueError, and what the
# tokenizer and ast.literal_eval underneath raise (an unterminated tuple, deep nesting).
_HEADER_ERRORS = (ValueError, SyntaxError, TypeError, RecursionError, tokenize.TokenError)


def read_npy_header(f: IO[bytes], path: str, key: str
                     ) -> tuple[np.dtype[Any], tuple[int, ...], bool]:
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:  # 3.0 exists only for structured dtypes with non-Latin-1 field names
            raise InvalidError(f".npy format version {version} is not supported (1.0 and "
                               "2.0 are)", path=path, key=key)
    except _HEADER_ERRORS as exc:
        if isinstance(exc, InvalidError):
            raise
        raise MalformedError(f"not a valid .npy member: {exc}", path=path, key=key) from None
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise MalformedError(f"shape {shape!r} is not a tuple of non-negative integers",
                             path=path, key=key)
    if dtype.hasobject:
        raise InvalidError("object arrays need pickle to load, which OCF never uses "
                           "(np.load(..., allow_pickle=False) refuses them too)",
                           path=path, key=key)
    if dtype.names is not None or dtype.subdtype is not None:
        raise InvalidError(f"structured dtype {dtype} has no OCF equivalent", path=path,
                           key=key, requirement="R-DTYPE-001")
    if len(shape) > MAX_RANK or nonzero_product(shape) > MAX_ELEMENTS:
        raise LimitExceededError(f"shape {list(shape)} exceeds the limits of {MAX_RANK} "
                                 f"dimensions and {MAX_ELEMENTS} elements", path=path, key=key,
                                 requirement="R-TENSOR-003")
    if dtype.kind in "US" or dtype.itemsize == 0:
        raise InvalidError(f"NumPy dtype {dtype} (fixed-width text) has no OCF equivalent",
                           path=path, key=key, requirement="R-DTYPE-001")
    try:  # refuses dtypes OCF cannot store (datetime, void, ...), naming them
        dtypes.for_array(np.empty(0, dtype))
    except OCFError as exc:
        raise with_path(exc, path, key) from None
    return dtype, shape, fortran


def checked_members(archive: zipfile.ZipFile, path: str, file_size: int
                    ) -> list[zipfile.ZipInfo]:
    members = archive.infolist()
    if len(members) > MAX_TENSORS:
        raise LimitExceededError(f"{len(members)} members exceed the limit of {MAX_TENSORS} "
                                 "tensors", path=path, requirement="R-LIMIT-001")
    seen: set[str] = set()
    for member in members:
        name = member.filename
        if not name.endswith(MEMBER_SUFFIX):
            raise InvalidError(f"archive member {name!r} is not a .npy array", path=path)
        if name in seen:
            raise MalformedError(f"archive holds member {name!r} twice", path=path)
        seen.add(name)
        _check_member(member, path, file_size)
    return members


def _check_member(member: zipfile.ZipInfo, path: str, file_size: int) -> None:
    """Refuse a member that cannot be read, or whose sizes the file does not back."""
    key = member.filename[: -len(MEMBER_SUFFIX)]
    if member.flag_bits & 0x41:
        raise InvalidError("encrypted archive members are not read", path=path, key=key)
    method = member.compress_type
    if method not in MAX_RATIO:
        name = _METHOD_NAMES.get(method, f"number {method}")
        raise InvalidError(f"ZIP compression method {name} is not read (np.savez writes "
                           "stored and deflated members only)", path=path, key=key)
    if not 0 <= member.header_offset <= file_size - member.compress_size:
        raise MalformedError(f"member's {member.compress_size} compressed bytes at offset "
                             f"{member.header_offset} do not lie inside the "
                             f"{file_size}-byte file", path=path, key=key)
    ratio = MAX_RATIO[method]
    if member.file_size > ratio * member.compress_size:
        times = "" if ratio == 1 else f"{ratio} times "
        raise LimitExceededError(f"declared uncompressed size {member.file_size} is more than "
                                 f"{times}the {member.compress_size} bytes stored", path=path,
                                 key=key)


def to_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str], **options: Any) -> None:
    """Convert the ``.npz`` archive ``src`` into the OCF checkpoint ``dst``.

    ``options`` go to :class:`ocf.Writer` (layout, compression, ...).
    """
    path = os.fspath(src)
    with open_source(path) as source:
        file_size = os.fstat(source.fileno()).st_size
        key = None
        try:
            with zipfile.ZipFile(source) as archive:
                members = checked_members(archive, path, file_size)
                with Writer(dst, **options) as writer:
                    for member in members:
                        key = member.filename[: -len(MEMBER_SUFFIX)]
                        array = read_member(archive, member, path)
                        writer.write(key, array)
                        written(array.nbytes)
                    key = None  # what commit refuses concerns no one tensor
        except OCFError as exc:  # the Writer refuses names OCF cannot hold (empty, NUL)
            raise with_path(exc, path, key) from None
        except ZIP_ERRORS as exc:
            if isinstance(exc, zlib.error) and _ZLIB_OUT_OF_MEMORY in str(exc):
                raise out_of_memory(_INFLATE_MEMORY, "inflating this member", path=path,
                                    key=key) from None
            raise MalformedError(f"not a readable .npz (ZIP) archive: {exc}", path=path,
                                 key=key) from None


def from_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
             compress: bool = False) -> None:
    """Write the tensors of the OCF checkpoint ``src`` as the ``.npz`` archive ``dst``.

    Members are stored uncompressed, as ``np.savez`` does, unless ``compress``.
    """
    with Reader(src) as reader:
        for key, info in reader.items():
            if info.dtype.name not in NATIVE:
                raise InvalidError(f"npz cannot store OCF {info.dtype.name} tensors (NumPy "
                                   "has no built-in type for them); convert to safetensors "
                                   "instead", path=reader.path, key=key)
        warn_dropped("metadata", reader.metadata, "npz")
        if reader.object_graph is not None:
            warn_dropped("an object graph", ["(object graph)"], "npz")
        method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        with atomic_output(dst) as out, \
                zipfile.ZipFile(out, "w", compression=method, allowZip64=True) as archive:
            for key in reader:
                with archive.open(key + MEMBER_SUFFIX, "w", force_zip64=True) as member:
                    array = reader.read_tensor(key)
                    np.lib.format.write_array(member, array, allow_pickle=False)
                    written(array.nbytes)
